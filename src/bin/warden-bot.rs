//! `warden bot` (the front hands it here): the Telegram and Slack gateway, in a binary that
//! links none of the agent. Runs are done by `warden-full agent-worker` processes it starts (see
//! `warden::gateway::worker`). Anything but a plain `warden [--config FILE] bot` — `--help`, a
//! typo — goes to `warden-full`, which owns the command line's help and errors.

// Outside tests a failure is a `?` with a reason, or a pattern that cannot fail: a panic in
// warden is a dead bot or a lost run. Tests may unwrap (clippy.toml); the few places that may
// otherwise carry `#[expect(clippy::..., reason = "...")]`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::process::ExitCode;
use warden::cli;

fn main() -> ExitCode {
    // The bot tokens are in this process: no core dumps, /proc entries readable by root only.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("warden: cannot mark the process non-dumpable: {e}");
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some(config) = cli::front::bot_invocation(&args) else {
        let e = cli::front::exec_full(&args);
        eprintln!("warden: {e}");
        return ExitCode::from(cli::EXIT_USAGE as u8);
    };
    warden::redact::init_level_logging();
    match warden::bot::run(config.as_deref()) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("warden: {e:#}");
            ExitCode::from(cli::EXIT_USAGE as u8)
        }
    }
}
