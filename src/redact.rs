//! Keeping secrets out of logs. Secrets the process holds (the bot token, API keys) are
//! registered once they are known; every log line goes through [`LogWriter`], which replaces
//! them with `<redacted>`. This is the backstop behind careful error handling: a library error
//! that prints a URL with the bot token in it (`/bot<token>/getUpdates`) still never reaches
//! the log.

use std::io::{self, Write};
use std::sync::RwLock;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Secrets shorter than this are not registered: replacing every `abc` in the log would hide
/// more than it protects (and such a value is no real secret).
const MIN_LEN: usize = 6;

/// Remember `secret` so it is removed from every log line and every [`redact`] result.
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_LEN {
        return;
    }
    let mut secrets = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if !secrets.iter().any(|s| s == secret) {
        secrets.push(secret.to_string());
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// Send every log line to stderr through [`LogWriter`] (colours only on a terminal), keeping
/// what `filter` lets through. Every binary logs this way; only their filters differ.
pub fn init_logging<F>(filter: F)
where
    F: tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    init_logging_to(filter, None);
}

/// [`init_logging`], appending to `file` instead of stderr when one is given (`warden chat`
/// keeps its log lines out of the conversation).
pub fn init_logging_to<F>(filter: F, file: Option<std::fs::File>)
where
    F: tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let ansi = file.is_none() && io::IsTerminal::is_terminal(&io::stderr());
    let writer = LogWriter {
        file: file.map(|f| std::sync::Arc::new(std::sync::Mutex::new(f))),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(ansi),
        )
        .init();
}

/// [`init_logging`] filtered by RUST_LOG's `target=level` directives (default: warnings),
/// for the small binaries (the front, the bot's gateway): warden-full accepts the full filter
/// syntax, whose parser (regular expressions) these do not link.
pub fn init_level_logging() {
    use std::str::FromStr;
    use tracing_subscriber::filter::{LevelFilter, Targets};
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| Targets::from_str(&v).ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::WARN));
    init_logging(filter);
}

/// `text` with every registered secret replaced.
pub fn redact(text: &str) -> String {
    let secrets = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    let mut out = text.to_string();
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), "<redacted>");
        }
    }
    out
}

type SharedFile = std::sync::Arc<std::sync::Mutex<std::fs::File>>;

/// A `tracing_subscriber` writer to stderr (or a log file) that redacts each formatted event.
#[derive(Clone, Default)]
pub struct LogWriter {
    file: Option<SharedFile>,
}

/// Collects one event and writes it, redacted, when dropped (the subscriber formats an event
/// into one writer and drops it).
pub struct EventBuffer {
    line: Vec<u8>,
    file: Option<SharedFile>,
}

impl Write for EventBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for EventBuffer {
    fn drop(&mut self) {
        let line = redact(&String::from_utf8_lossy(&self.line));
        match &self.file {
            Some(file) => {
                let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
                let _ = file.write_all(line.as_bytes());
            }
            None => {
                let _ = io::stderr().lock().write_all(line.as_bytes());
            }
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = EventBuffer;
    fn make_writer(&'a self) -> EventBuffer {
        EventBuffer {
            line: Vec::with_capacity(256),
            file: self.file.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_are_replaced_and_short_values_ignored() {
        register("fake-bot-token-ABCdefGHI-secret");
        register("abc");
        let line = "POST http://x/botfake-bot-token-ABCdefGHI-secret/GetMe failed; abc";
        assert_eq!(
            redact(line),
            "POST http://x/bot<redacted>/GetMe failed; abc"
        );
    }
}
