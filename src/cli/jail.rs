//! `warden jail`: run one program in the sandbox WITHOUT the command policy, to test the jail.
//!
//! Exit status: the program's (128 + n for a signal), 124 timeout, 125 sandbox setup failed,
//! 126 cannot execute, 127 not found, 130 interrupted.

use super::sandbox as cli_sandbox;
use super::{EXIT_SETUP, EXIT_USAGE};
use crate::config::Config;
use crate::policy::ir::Script;
use crate::policy::PathPolicy;
use crate::sandbox::Backend;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct JailArgs {
    /// Sandbox backend (default: the config's `sandbox.backend`).
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
    /// Workspace: readable and writable inside the jail, and the working directory
    /// (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// An extra readable (and executable) path; repeatable.
    #[arg(long = "read", value_name = "PATH")]
    pub read: Vec<PathBuf>,
    /// Wall-clock limit in seconds, 1 to 30 days (default: the config's `sandbox.timeout_secs`).
    #[arg(long, value_name = "SECS", value_parser = crate::durations::parse_timeout)]
    pub timeout: Option<u64>,
    /// Run even if the kernel has no Landlock (much weaker jail; says so loudly).
    #[arg(long)]
    pub allow_without_landlock: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
    pub argv: Vec<String>,
}

pub fn run(args: JailArgs, config_path: Option<&Path>) -> i32 {
    match Prepared::new(args, config_path) {
        Ok(p) => cli_sandbox::run_in_sandbox(
            &p.config,
            cli_sandbox::SandboxRun {
                network: None,
                audit: None,
                backend: p.backend,
                paths: p.paths,
                script: &p.script,
                timeout_flag: p.timeout,
                allow_without_landlock: p.allow_without_landlock,
                session: "jail",
                // No policy, so no IR to hold the program's writes to.
                protection: None,
            },
        ),
        Err(code) => code,
    }
}

/// `warden jail` in the front binary: runs on the host backend and returns the exit code, or
/// `None` when the backend is Docker (only `warden-full` links the Docker client).
pub fn run_on_host(args: JailArgs, config_path: Option<&Path>) -> Option<i32> {
    match Prepared::new(args, config_path) {
        Ok(p) if p.backend == Backend::Docker => None,
        Ok(p) => Some(cli_sandbox::run_on_host(
            &p.config,
            p.paths,
            &p.script,
            p.timeout,
            p.allow_without_landlock,
        )),
        Err(code) => Some(code),
    }
}

/// The config, backend, roots and script of a `warden jail`, or the exit code of the error
/// (reported on stderr).
struct Prepared {
    config: Config,
    backend: Backend,
    paths: PathPolicy,
    script: Script,
    timeout: Option<u64>,
    allow_without_landlock: bool,
}

impl Prepared {
    fn new(args: JailArgs, config_path: Option<&Path>) -> Result<Prepared, i32> {
        let config = super::load_config(config_path).map_err(|e| {
            eprintln!("warden: {e:#}");
            EXIT_USAGE
        })?;
        crate::sandbox::steps::mark("config");
        let backend = cli_sandbox::backend(args.backend, &config);
        let paths = cli_sandbox::plain_paths(&config, args.workspace, &args.read).map_err(|e| {
            eprintln!("warden: {e}");
            EXIT_SETUP
        })?;
        let script = Script::single(args.argv, paths.workspace().to_path_buf());
        crate::sandbox::steps::mark("workspace and roots");
        Ok(Prepared {
            config,
            backend,
            paths,
            script,
            timeout: args.timeout,
            allow_without_landlock: args.allow_without_landlock,
        })
    }
}
