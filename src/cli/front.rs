//! The `warden` front binary's dispatch: `warden jail` on the host backend runs in the front
//! itself; `warden bot` is handed to `warden-bot` and every other command to `warden-full`,
//! both installed beside it.
//!
//! Why several binaries: a jailed command's start-up includes warden's own, on every run. The
//! full program links the Telegram client, the LLM clients, SQLite, the Docker client and the
//! policy parser; the dynamic loader alone spends milliseconds relocating its tables before
//! `main`. The front links only the jail. Likewise the bot waits for messages most of its
//! life: `warden-bot` links only the gateway, and starts `warden-full agent-worker` for runs.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

/// File name of the full program, next to `warden`.
pub const FULL_BINARY: &str = "warden-full";
/// File name of the Telegram gateway (`warden bot`), next to `warden`.
pub const BOT_BINARY: &str = "warden-bot";

/// The subcommand in `args` (argv, program name first): the first word after the global
/// options. `None` when a global flag such as `--help` or `--version` comes first.
pub fn subcommand(args: &[OsString]) -> Option<&OsStr> {
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let bytes = arg.as_encoded_bytes();
        if bytes == b"--config" {
            rest.next();
        } else if bytes.starts_with(b"--config=") {
            continue;
        } else if bytes.starts_with(b"-") {
            return None;
        } else {
            return Some(arg);
        }
    }
    None
}

/// The config file of a plain `warden [--config FILE] bot [--config FILE]`, the only form
/// `warden-bot` runs itself: `Some(None)` without `--config`. `None` for anything else
/// (help, unknown flags), which warden-full reports.
pub fn bot_invocation(args: &[OsString]) -> Option<Option<PathBuf>> {
    let mut config = None;
    let mut seen_bot = false;
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let bytes = arg.as_encoded_bytes();
        if bytes == b"--config" {
            config = Some(PathBuf::from(rest.next()?));
        } else if let Some(path) = bytes.strip_prefix(b"--config=") {
            config = Some(PathBuf::from(OsStr::from_bytes(path)));
        } else if bytes == b"bot" && !seen_bot {
            seen_bot = true;
        } else {
            return None;
        }
    }
    seen_bot.then_some(config)
}

/// Where `warden-full` is: beside the running `warden` (symlinks to `warden` resolved).
pub fn full_binary() -> io::Result<PathBuf> {
    sibling(FULL_BINARY)
}

fn sibling(name: &str) -> io::Result<PathBuf> {
    Ok(std::env::current_exe()?.with_file_name(name))
}

/// Replace this process with `warden-full` and the same arguments, environment and PID (a
/// service manager or a test that signals the PID reaches the real program). Returns only
/// when that fails.
pub fn exec_full(args: &[OsString]) -> io::Error {
    exec_sibling(FULL_BINARY, args)
}

/// Like [`exec_full`], for the binary named `name` beside this one.
pub fn exec_sibling(name: &str, args: &[OsString]) -> io::Error {
    let path = match sibling(name) {
        Ok(path) => path,
        Err(e) => return io::Error::new(e.kind(), format!("cannot locate warden itself: {e}")),
    };
    let mut command = Command::new(&path);
    if let Some(argv0) = args.first() {
        command.arg0(argv0);
    }
    let e = command.args(args.iter().skip(1)).exec();
    io::Error::new(
        e.kind(),
        format!(
            "cannot run {}: {e} (install it beside `warden`: `cargo build` builds all three)",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_subcommand_is_the_first_word_after_global_options() {
        assert_eq!(
            subcommand(&args(&["warden", "jail", "--", "true"])),
            Some(OsStr::new("jail"))
        );
        assert_eq!(
            subcommand(&args(&["warden", "--config", "jail", "exec", "--", "ls"])),
            Some(OsStr::new("exec"))
        );
        assert_eq!(
            subcommand(&args(&["warden", "--config=c.toml", "jail"])),
            Some(OsStr::new("jail"))
        );
    }

    #[test]
    fn global_flags_and_nothing_at_all_have_no_subcommand() {
        assert_eq!(subcommand(&args(&["warden", "--version", "jail"])), None);
        assert_eq!(subcommand(&args(&["warden", "-h"])), None);
        assert_eq!(subcommand(&args(&["warden"])), None);
        assert_eq!(subcommand(&args(&["warden", "--config"])), None);
    }

    #[test]
    fn only_a_plain_bot_command_is_run_by_warden_bot() {
        assert_eq!(bot_invocation(&args(&["warden", "bot"])), Some(None));
        assert_eq!(
            bot_invocation(&args(&["warden", "--config", "c.toml", "bot"])),
            Some(Some(PathBuf::from("c.toml")))
        );
        assert_eq!(
            bot_invocation(&args(&["warden", "bot", "--config=d.toml"])),
            Some(Some(PathBuf::from("d.toml")))
        );
        for other in [
            &["warden", "bot", "--help"][..],
            &["warden", "bot", "bot"],
            &["warden", "bot", "--config"],
            &["warden", "--version"],
            &["warden", "exec", "bot"],
            &["warden"],
        ] {
            assert_eq!(bot_invocation(&args(other)), None, "{other:?}");
        }
    }

    #[test]
    fn warden_full_is_looked_up_beside_the_running_binary() {
        let full = full_binary().unwrap();
        assert_eq!(full.file_name(), Some(OsStr::new(FULL_BINARY)));
        assert_eq!(full.parent(), std::env::current_exe().unwrap().parent());
    }
}
