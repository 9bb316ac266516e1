//! The `warden` command line: parses arguments and calls into the library.

// Outside tests a failure is a `?` with a reason, or a pattern that cannot fail: a panic in
// warden is a dead bot or a lost run. Tests may unwrap (clippy.toml); the few places that may
// otherwise carry `#[expect(clippy::..., reason = "...")]`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use clap::Parser;
use std::process::ExitCode;
use warden::cli;
use warden::cli::args::Cli;

fn main() -> ExitCode {
    // Secrets (API keys, the bot token) live in this process: no core dumps of it, and its
    // /proc entries (environ, mem) readable by root only. Jailed programs regain their own
    // dumpable state at execve.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("warden: cannot mark the process non-dumpable: {e}");
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            warden::redact::init_logging(tracing_subscriber::EnvFilter::new("warn"));
            let code = if e.use_stderr() { cli::EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code as u8);
        }
    };
    cli::logging::init(&cli);
    cli::logging::end_quietly_on_closed_output(&cli.command);
    match cli::dispatch::run(cli) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("warden: {e:#}");
            ExitCode::from(cli::EXIT_USAGE as u8)
        }
    }
}
