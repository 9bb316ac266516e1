//! `warden jail`: run one program in the sandbox WITHOUT the command policy, to test the jail.
//!
//! Exit status: the program's (128 + n for a signal), 124 timeout, 125 sandbox setup failed,
//! 126 cannot execute, 127 not found, 130 interrupted.

use super::sandbox as cli_sandbox;
use super::{EXIT_SETUP, EXIT_USAGE};
use crate::exec::{run_script, ExecOptions};
use crate::policy::ir::Script;
use crate::sandbox::pool::SandboxPool;
use crate::sandbox::Backend;
use crate::sandbox::JailSpec;
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
    let runtime = match cli_sandbox::runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warden: cannot start the async runtime: {e}");
            return EXIT_SETUP;
        }
    };
    runtime.block_on(async {
        let cancel = tokio_util::sync::CancellationToken::new();
        cli_sandbox::cancel_on_signals(cancel.clone());
        let paths = match cli_sandbox::plain_paths(&config, args.workspace, &args.read) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("warden: {e}");
                return EXIT_SETUP;
            }
        };
        let spec = JailSpec::for_paths(&paths, &config.sandbox);
        let pool = SandboxPool::new(backend, &config.sandbox, spec, args.allow_without_landlock);
        let sandbox = match pool.get("jail").await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("warden: {e}");
                return EXIT_SETUP;
            }
        };
        let script = Script::single(args.argv, paths.workspace().to_path_buf());
        let mut options = ExecOptions::inherit(paths, cli_sandbox::timeout(args.timeout, &config));
        options.cancel = cancel;
        let status = match run_script(sandbox.as_ref(), &script, &options).await {
            Ok(out) => out.status,
            Err(e) => {
                eprintln!("warden: {e}");
                e.exit_code()
            }
        };
        drop(sandbox);
        pool.shutdown().await;
        status
    })
}
