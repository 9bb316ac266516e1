//! The chat commands: `/stop`, `/steer TEXT`, `/new`, `/status`, `/retry`, `/approvals [rm N]`,
//! `/help` (and `/start`), their
//! parsing — including `/cmd@botname` in groups — and the texts they answer with.

use super::format::escape;
use crate::gateway::{ChatStatus, StopReport};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Help,
    Stop,
    Steer(String),
    New,
    Status,
    /// `/retry`: run the messages that got no answer (a failure, a restart) again.
    Retry,
    /// `/approvals`: list what the chat approved for good; `/approvals rm N`: revoke rule N.
    Approvals(String),
    /// `/trust`: say what tainted the conversation, and trust it again.
    Trust,
    Unknown(String),
}

/// The bot a command names after `@`, if any (`/stop@warden_bot` → `warden_bot`).
pub fn addressee(text: &str) -> Option<&str> {
    let word = text.strip_prefix('/')?.split_whitespace().next()?;
    word.split_once('@').map(|(_, bot)| bot)
}

/// Parse a command for this bot. `None`: not a command, or one for another bot.
pub fn parse(text: &str, bot_username: &str) -> Option<Command> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (word, args) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    let name = match word.split_once('@') {
        Some((name, bot)) if bot.eq_ignore_ascii_case(bot_username) => name,
        Some(_) => return None,
        None => word,
    };
    if name.is_empty() {
        return None;
    }
    Some(match name.to_ascii_lowercase().as_str() {
        "help" | "start" => Command::Help,
        "stop" => Command::Stop,
        "steer" => Command::Steer(args.to_string()),
        "new" | "reset" => Command::New,
        "status" => Command::Status,
        "retry" => Command::Retry,
        "approvals" => Command::Approvals(args.to_string()),
        "trust" => Command::Trust,
        other => Command::Unknown(other.to_string()),
    })
}

/// Shown by `/help` and `/start` (HTML).
pub const HELP: &str = "I am warden, your sandboxed assistant. Send me a message, a photo or a \
document and I will work on it; commands I run are checked by a policy, and some need your \
approval (buttons).\n\n\
/status — what I am working on and what is waiting\n\
/stop — stop the current run and drop waiting messages\n\
/steer <i>text</i> — tell the running task something before its next step\n\
/new — start a fresh conversation\n\
/retry — run the messages that got no answer again\n\
/approvals — what you approved “Always in this chat”, to revoke\n\
/trust — what made this conversation untrusted (a web page, a file…), and trust it again\n\
/help — this text";

/// The command list registered with Telegram (`setMyCommands`).
pub const MENU: &[(&str, &str)] = &[
    ("status", "What I am working on"),
    ("stop", "Stop the current run"),
    ("steer", "Tell the running task something"),
    ("new", "Start a fresh conversation"),
    ("retry", "Run unanswered messages again"),
    ("approvals", "What is approved for good"),
    ("trust", "Trust this conversation again"),
    ("help", "How to use me"),
];

/// `/trust`'s reply (HTML): what it cleared, and what that means.
pub fn trust_reply(cleared: &[String]) -> String {
    if cleared.is_empty() {
        return "This conversation has read nothing untrusted: nothing to clear.".into();
    }
    let list: Vec<String> = cleared.iter().map(|s| format!("• {}", escape(s))).collect();
    format!(
        "This conversation had read untrusted content from:\n{}\n\nIt is trusted again: \
         memory writes, new cron jobs and links the model composes ask only as in a clean \
         conversation. Anything that reads untrusted content later taints it again.",
        list.join("\n")
    )
}

/// `/stop`'s reply; `None` when the stopped run's own "Stopped." answer says it all.
pub fn stop_reply(report: StopReport) -> Option<String> {
    match (report.aborted, report.dropped) {
        (false, 0) => Some("Nothing is running.".into()),
        (_, 0) => None,
        (_, 1) => Some("Dropped 1 waiting message.".into()),
        (_, n) => Some(format!("Dropped {n} waiting messages.")),
    }
}

/// `/status`'s reply (HTML).
pub fn status_reply(status: &ChatStatus) -> String {
    let mut out = match &status.running {
        Some((preview, elapsed)) => format!(
            "Working for {} s on: “{}”",
            elapsed.as_secs(),
            escape(preview)
        ),
        None => "Idle.".to_string(),
    };
    if !status.queued.is_empty() {
        out.push_str(&format!("\nWaiting ({}):", status.queued.len()));
        for (i, preview) in status.queued.iter().enumerate() {
            out.push_str(&format!("\n{}. {}", i + 1, escape(preview)));
        }
    }
    out
}

/// `/retry`'s reply when nothing was run again; `None` when the runs speak for themselves.
pub fn retry_reply(queued: usize) -> Option<String> {
    match queued {
        0 => Some("Nothing to retry: every message since the last answer was answered.".into()),
        _ => None,
    }
}

/// The reply to a prompt that did not fit into the chat's queue.
pub fn busy_reply(queued: usize) -> String {
    format!(
        "I'm busy: {queued} messages are already waiting. Send /status to see them, or /stop to \
         cancel, then send this again."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn parses_commands_for_this_bot_only() {
        assert_eq!(parse("/stop", "wb"), Some(Command::Stop));
        assert_eq!(parse("/STOP@WB", "wb"), Some(Command::Stop));
        assert_eq!(parse("/stop@other_bot", "wb"), None);
        assert_eq!(
            parse("/steer  use the other file ", "wb"),
            Some(Command::Steer("use the other file".into()))
        );
        assert_eq!(parse("/start", "wb"), Some(Command::Help));
        assert_eq!(parse("/retry", "wb"), Some(Command::Retry));
        assert_eq!(
            parse("/approvals rm 3", "wb"),
            Some(Command::Approvals("rm 3".into()))
        );
        assert_eq!(
            parse("/frob x", "wb"),
            Some(Command::Unknown("frob".into()))
        );
        assert_eq!(parse("hello /stop", "wb"), None);
        assert_eq!(parse("/", "wb"), None);
        assert_eq!(addressee("/stop@other_bot now"), Some("other_bot"));
        assert_eq!(addressee("/stop"), None);
    }

    #[test]
    fn replies_escape_user_text() {
        let status = ChatStatus {
            running: Some(("a <b>".into(), Duration::from_secs(3))),
            queued: vec!["x & y".into()],
        };
        assert_eq!(
            status_reply(&status),
            "Working for 3 s on: “a &lt;b&gt;”\nWaiting (1):\n1. x &amp; y"
        );
        assert_eq!(status_reply(&ChatStatus::default()), "Idle.");
        assert_eq!(
            stop_reply(StopReport {
                aborted: true,
                dropped: 0
            }),
            None
        );
        assert_eq!(
            stop_reply(StopReport::default()).as_deref(),
            Some("Nothing is running.")
        );
    }
}
