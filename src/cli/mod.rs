//! The command-line layer's logic, one module per subcommand; `main.rs` only parses arguments
//! and calls into these, so tests can drive the library and the binary alike.

pub mod agent;
pub mod agent_worker;
pub mod approvals;
pub mod args;
pub mod audit;
pub mod cron;
pub mod daemon;
pub mod dispatch;
pub mod doctor;
pub mod egress;
pub mod exec;
pub mod front;
pub mod hook;
pub mod image;
pub mod init;
pub mod jail;
pub mod logging;
pub mod login;
pub mod manual;
pub mod mcp;
pub mod policy;
pub mod policy_batch;
pub mod replay;
pub mod sandbox;
pub mod service;
pub mod session;
pub mod skill;
pub mod suggest;
pub mod why;

use crate::config::{Config, ProcessEnv};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Exit code for usage and configuration errors (the CLI contract).
pub const EXIT_USAGE: i32 = 2;
/// Exit code when the sandbox could not be set up (`jail`, `exec`).
pub const EXIT_SETUP: i32 = 125;

/// Load the config for a subcommand; errors are reported and mapped to exit 2 by callers.
pub fn load_config(explicit: Option<&Path>) -> anyhow::Result<Config> {
    let config = Config::load(explicit, &ProcessEnv)?;
    // Whatever logs a secret by accident (an error carrying a URL, a debug line), the log
    // writer redacts it.
    for secret in config.secrets() {
        crate::redact::register(secret.expose());
    }
    Ok(config)
}

/// `--workspace` for `policy`/`exec`/`jail`: the given directory or the current one.
pub fn workspace_or_cwd(workspace: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match workspace {
        Some(dir) => Ok(dir),
        None => Ok(std::env::current_dir()?),
    }
}

/// `--yes`, or a y/N answer on a terminal; no terminal and no `--yes` is a refusal.
pub fn confirm(question: &str, yes: bool) -> Result<bool, String> {
    if yes {
        println!("{question} yes (--yes)");
        return Ok(true);
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(
            "not granted: there is no terminal to ask on; read the permissions above and pass \
             --yes to grant them from a script"
                .into(),
        );
    }
    print!("{question} [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .map_err(|e| format!("reading the answer failed: {e}"))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
