//! `warden jail`: run one program in the sandbox WITHOUT the command policy, to test the jail.
//!
//! Exit status: the program's (128 + n for a signal), 124 timeout, 125 sandbox setup failed,
//! 126 cannot execute, 127 not found, 130 interrupted.

use super::sandbox as cli_sandbox;
use super::{EXIT_SETUP, EXIT_USAGE};
use crate::policy::ir::Script;
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
    /// Wall-clock limit in seconds (default: the config's `sandbox.timeout_secs`).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Run even if the kernel has no Landlock (much weaker jail; says so loudly).
    #[arg(long)]
    pub allow_without_landlock: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
    pub argv: Vec<String>,
}

pub fn run(args: JailArgs, config_path: Option<&Path>) -> i32 {
    let config = match super::load_config(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warden: {e:#}");
            return EXIT_USAGE;
        }
    };
    let backend = cli_sandbox::backend(args.backend, &config);
    let paths = match cli_sandbox::plain_paths(&config, args.workspace, &args.read) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("warden: {e}");
            return EXIT_SETUP;
        }
    };
    let script = Script::single(args.argv, paths.workspace().to_path_buf());
    cli_sandbox::run_in_sandbox(
        &config,
        backend,
        paths,
        &script,
        args.timeout,
        args.allow_without_landlock,
        "jail",
    )
}
