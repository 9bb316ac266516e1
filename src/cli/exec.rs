//! `warden exec`: check a command string with the policy, then run the checked IR in the
//! sandbox — never the string itself.
//!
//! Exit status: as `warden jail` when allowed (the last pipeline's status, 124 timeout, 125
//! sandbox setup failed, 127 not found); 126 when the policy denies it, or asks for an approval
//! nobody can give on the command line (the reason goes to stderr).

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
    #[arg(long, value_name = "SECS", value_parser = crate::config::parse_timeout)]
    pub timeout: Option<u64>,
    /// Run even if the kernel has no Landlock (much weaker jail; says so loudly).
    #[arg(long)]
    pub allow_without_landlock: bool,
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
    let mut checker =
        match super::policy::checker(policy.as_deref(), &workspace, &config.sandbox.read) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("warden: {e:#}");
                return EXIT_USAGE;
            }
        };
    if let Err(why) = checker
        .paths()
        .refuse_exposing(&config.own_files(policy.as_deref()))
    {
        eprintln!("warden: {why}");
        return EXIT_SETUP;
    }
    let verdict = checker.check(&args.command.join(" "));
    match verdict.decision {
        Decision::Allow => {}
        Decision::Deny => {
            eprintln!("warden: denied: {}", verdict.reason);
            return EXIT_REFUSED;
        }
        Decision::Ask => {
            eprintln!(
                "warden: denied: approval required ({}), and nobody can approve on the command line",
                verdict.reason
            );
            return EXIT_REFUSED;
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
        },
    )
}
