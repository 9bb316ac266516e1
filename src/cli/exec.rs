//! `warden exec`: check a command string with the policy, then run the checked IR in the
//! sandbox — never the string itself.
//!
//! An `ask` is put to the person on a terminal (y/N on stderr, the checked commands shown);
//! `--yes` accepts the policy's asks for scripts (never its denials).
//!
//! Exit status: as `warden jail` when allowed (the last pipeline's status, 124 timeout, 125
//! sandbox setup failed, 127 not found); 126 when the policy denies it, or asks and nobody
//! approved (the reason goes to stderr).

use super::sandbox as cli_sandbox;
use super::{EXIT_SETUP, EXIT_USAGE};
use crate::persistence::PromptFiles;
use crate::policy::Decision;
use crate::sandbox::Backend;
use std::path::{Path, PathBuf};

/// Exit status when the policy refuses the command.
pub const EXIT_REFUSED: i32 = 126;

#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// Sandbox backend (default: the config's `sandbox.backend`).
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
    /// Policy file extending (or replacing) the embedded default (default: the config's).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Workspace directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Wall-clock limit in seconds, 1 to 30 days (default: the config's `sandbox.timeout_secs`).
    #[arg(long, value_name = "SECS", value_parser = crate::durations::parse_timeout)]
    pub timeout: Option<u64>,
    /// Run even if the kernel has no Landlock (much weaker jail; says so loudly).
    #[arg(long)]
    pub allow_without_landlock: bool,
    /// Approve what the policy asks about without asking (for scripts; denials stay denials).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The command string (one shell command line).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(args: ExecArgs, config_path: Option<&Path>) -> i32 {
    let config = match super::load_config(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warden: {e:#}");
            return EXIT_USAGE;
        }
    };
    let backend = cli_sandbox::backend(args.backend, &config);
    let workspace = match super::workspace_or_cwd(args.workspace) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("warden: {e:#}");
            return EXIT_USAGE;
        }
    };
    let policy = args.policy.or_else(|| config.policy.clone());
    let loaded = match crate::policy::Policy::load_with_network(policy.as_deref(), &config.network)
    {
        Ok(p) => std::sync::Arc::new(p),
        Err(e) => {
            eprintln!("warden: {e:#}");
            return EXIT_USAGE;
        }
    };
    // The config's `[network]` over the policy file's.
    let network = config.network.over(loaded.network());
    let mut checker = match loaded.checker(&workspace, &config.sandbox.read, &workspace) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warden: {e:#}");
            return EXIT_USAGE;
        }
    };
    // `$NAME` of a `[network.secrets]` binding expands to the placeholder the jail holds.
    checker.set_jail_variables(network.jail_variables());
    if let Err(why) = checker
        .paths()
        .refuse_exposing(&config.own_files(policy.as_deref()))
    {
        eprintln!("warden: {why}");
        return EXIT_SETUP;
    }
    let command = args.command.join(" ");
    let verdict = checker.check(&command);
    match verdict.decision {
        Decision::Allow => {}
        Decision::Deny => {
            eprintln!("warden: denied: {}", verdict.reason);
            return EXIT_REFUSED;
        }
        Decision::Ask => {
            if !approved(&verdict, args.yes) {
                return EXIT_REFUSED;
            }
        }
    }
    tracing::debug!(reason = %verdict.reason, "policy allowed the command");

    // git's files and the workspace's instruction files are verified after the command.
    let protection = match PromptFiles::new(checker.paths().workspace(), &config.trust) {
        Ok(files) => files.protection(checker.paths(), false),
        Err(e) => {
            eprintln!("warden: {e}");
            return EXIT_USAGE;
        }
    };
    // The jail's roots are the checker's roots: what was checked is what the jail allows.
    cli_sandbox::run_in_sandbox(
        &config,
        cli_sandbox::SandboxRun {
            backend,
            paths: checker.paths().clone(),
            script: &verdict.script,
            timeout_flag: args.timeout,
            allow_without_landlock: args.allow_without_landlock,
            session: "exec",
            protection: Some(protection),
            network: Some(cli_sandbox::NetworkRun {
                config: network,
                secrets: config.skills.secrets.clone(),
                yes: args.yes,
            }),
            audit: Some(cli_sandbox::ExecAudit {
                command: command.clone(),
                workspace: checker.paths().workspace().to_path_buf(),
                decision: match verdict.decision {
                    Decision::Ask => crate::audit::AuditDecision::Approved,
                    _ => crate::audit::AuditDecision::Allow,
                },
                reason: verdict.reason.clone(),
            }),
        },
    )
}

/// An `ask`: `--yes`, or y/N on the terminal; refused (with the reason on stderr) otherwise.
fn approved(verdict: &crate::policy::Verdict, yes: bool) -> bool {
    use std::io::{BufRead, IsTerminal, Write};
    let commands: Vec<String> = verdict
        .script
        .commands()
        .map(|c| shell_words::join(&c.argv))
        .collect();
    if yes {
        eprintln!("warden: approved with --yes: {}", verdict.reason);
        return true;
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        eprintln!(
            "warden: denied: approval required ({}), and there is no terminal to ask: pass --yes \
             to approve the policy's asks from a script",
            verdict.reason
        );
        return false;
    }
    eprintln!(
        "warden: approval needed: {}",
        crate::channels::terminal::escape_controls(&verdict.reason)
    );
    for command in &commands {
        eprintln!(
            "    {}",
            crate::channels::terminal::escape_controls(command)
        );
    }
    eprint!("Run it? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if stdin.lock().read_line(&mut answer).is_err() {
        return false;
    }
    let yes = matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes");
    if !yes {
        eprintln!("warden: denied at the terminal");
    }
    yes
}
