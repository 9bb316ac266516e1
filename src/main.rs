//! `warden`, the front of the command line: `warden jail` on the host backend runs here, in a
//! binary that links only the jail; `warden bot` replaces this process with `warden-bot`,
//! every other command with `warden-full` (see `cli::front`).

// Outside tests a failure is a `?` with a reason, or a pattern that cannot fail: a panic in
// warden is a dead bot or a lost run. Tests may unwrap (clippy.toml); the few places that may
// otherwise carry `#[expect(clippy::..., reason = "...")]`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use warden::cli;
use warden::sandbox::steps;

#[derive(Parser)]
#[command(name = "warden", version, about = "A sandbox-first personal AI agent")]
struct Front {
    /// Config file (default ~/.warden/config.toml, or $WARDEN_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: FrontCommand,
}

#[derive(Subcommand)]
enum FrontCommand {
    /// Run a program in the sandbox without the command policy (to test the jail alone).
    Jail(cli::jail::JailArgs),
}

fn main() -> ExitCode {
    // As in warden-full: the config's secrets may be in this process.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("warden: cannot mark the process non-dumpable: {e}");
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let subcommand = cli::front::subcommand(&args);
    if subcommand.is_some_and(|c| c == "jail") {
        steps::mark("main");
        warden::redact::init_level_logging();
        steps::mark("logging");
        match Front::try_parse_from(&args) {
            Ok(Front {
                config,
                command: FrontCommand::Jail(jail),
            }) => {
                steps::mark("arguments");
                if let Some(code) = cli::jail::run_on_host(jail, config.as_deref()) {
                    eprint!("{}", steps::report());
                    return ExitCode::from(code.clamp(0, 255) as u8);
                }
                // The Docker backend: warden-full runs it.
            }
            Err(e) => {
                let code = if e.use_stderr() { cli::EXIT_USAGE } else { 0 };
                let _ = e.print();
                return ExitCode::from(code as u8);
            }
        }
    }
    let e = if subcommand.is_some_and(|c| c == "bot") {
        cli::front::exec_sibling(cli::front::BOT_BINARY, &args)
    } else {
        cli::front::exec_full(&args)
    };
    eprintln!("warden: {e}");
    ExitCode::from(cli::EXIT_USAGE as u8)
}
