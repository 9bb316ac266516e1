//! Where `warden-full`'s log lines go and how many there are: `-v`/`-q` and `--log-file`,
//! `RUST_LOG` over both. `warden chat` writes its log to `<data_dir>/logs/warden.log`, not
//! into the conversation. Every line is redacted ([`crate::redact`]).

use super::args::{Cli, Command, LogArgs};
use crate::config::{Config, ProcessEnv};
use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

impl LogArgs {
    /// The filter `-v`/`-q` ask for.
    pub fn directive(&self) -> &'static str {
        match (self.quiet, self.verbose) {
            (true, _) => "error",
            (false, 0) => "warn,warden::mcp=info",
            (false, 1) => "info",
            (false, 2) => "warn,warden=debug",
            (false, _) => "trace",
        }
    }
}

/// The file `warden chat`'s log goes to, under the data directory.
pub fn chat_log_file(data_dir: &Path) -> PathBuf {
    data_dir.join("logs").join("warden.log")
}

/// Start logging for the parsed command line.
pub fn init(cli: &Cli) {
    let mut directive = cli.log.directive().to_string();
    if matches!(cli.command, Command::Run(_)) && cli.log.verbose == 0 {
        // `warden run` prints a failed model call once, with its fix; the failover's own
        // warning would repeat it.
        directive.push_str(",warden::llm::failover=error");
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(directive));
    let path = cli.log.log_file.clone().or_else(|| match cli.command {
        // The conversation is the terminal: its log goes to a file.
        Command::Chat(_) => Config::load(cli.config.as_deref(), &ProcessEnv)
            .ok()
            .map(|c| chat_log_file(&c.data_dir)),
        _ => None,
    });
    let file = path.and_then(|path| match open_log(&path) {
        Ok(file) => Some(file),
        Err(e) => {
            eprintln!("warden: cannot write the log to {}: {e}", path.display());
            None
        }
    });
    crate::redact::init_logging_to(filter, file);
}

/// Open `path` for appending, private to the user (directories 0700, the file 0600).
fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Commands that only print: a reader that goes away (`warden doctor --json | head`) ends
/// them quietly, as it ends `cat`. Everything else keeps Rust's default (SIGPIPE ignored), so
/// a jailed child that closes its stdin never kills the agent or the bot.
pub fn end_quietly_on_closed_output(command: &Command) {
    let prints_only = matches!(
        command,
        Command::Doctor(_)
            | Command::Audit(_)
            | Command::Completions { .. }
            | Command::Man { .. }
            | Command::Egress { .. }
            | Command::Approvals { .. }
            | Command::Cron { .. }
    );
    if prints_only {
        // SAFETY: installing the default disposition of one signal; no handler runs.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_flags_choose_the_filter() {
        let args = |verbose, quiet| LogArgs {
            verbose,
            quiet,
            log_file: None,
        };
        assert_eq!(args(0, true).directive(), "error");
        assert_eq!(args(0, false).directive(), "warn,warden::mcp=info");
        assert_eq!(args(1, false).directive(), "info");
        assert_eq!(args(2, false).directive(), "warn,warden=debug");
        assert_eq!(args(5, false).directive(), "trace");
    }

    #[test]
    fn a_log_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/warden.log");
        open_log(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("logs")), 0o700);
    }
}
