//! The heartbeat: every N minutes, within active hours, the agent reads the workspace's
//! `HEARTBEAT.md` checklist and says whether anything needs the owner's attention.
//! - skipped (no model call) when the file is missing or holds only headings, blank lines and
//!   HTML comments;
//! - the prompt carries the current date and time;
//! - an answer that is just `HEARTBEAT_OK` is not sent; neither is an alert identical to one
//!   sent in the last 24 hours (a hash and a time are stored);
//! - delivered through the same [`Deliver`] as jobs, so it queues behind the owner's runs;
//! - each run uses a fresh session, so the chat's context is not filled with check-ins.
//!
//! The time of the last beat is stored: a restart keeps the rhythm, and after downtime one
//! beat happens, not one per missed interval.

use super::active_hours::ActiveHours;
use super::deliver::{Deliver, Delivery, Origin};
use super::store::{parse_ts, ts};
use crate::clock::Clock;
use crate::db::{Database, DbError};
use crate::policy::PathPolicy;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use nix::fcntl::OFlag;
use rusqlite::{params, OptionalExtension};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const SCHEMA: &str = "
CREATE TABLE heartbeat_state (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE heartbeat_alerts (
    hash    TEXT PRIMARY KEY,
    sent_at TEXT NOT NULL
);
";

/// The answer that means "nothing to report".
pub const OK_TOKEN: &str = "HEARTBEAT_OK";
/// The checklist file, at the top of the workspace.
pub const FILE_NAME: &str = "HEARTBEAT.md";
/// An identical alert is not sent again within this time.
pub const REPEAT_WINDOW: chrono::Duration = chrono::Duration::hours(24);
/// More of the checklist than this is not put into the prompt.
const MAX_FILE_BYTES: u64 = 16 * 1024;

#[derive(Clone, Debug)]
pub struct HeartbeatSettings {
    pub every: Duration,
    pub active: ActiveHours,
    pub tz: Tz,
    /// The owner's chat (`telegram:<id>`): where alerts go.
    pub chat_session: String,
}

/// What one beat did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Beat {
    /// Outside active hours: nothing asked.
    Inactive,
    /// `HEARTBEAT.md` is missing or has nothing to check: nothing asked.
    NothingToCheck,
    /// The model answered `HEARTBEAT_OK`: nothing sent.
    AllClear,
    /// The same alert went out within 24 hours: not sent again.
    Repeated,
    /// An alert was sent to the chat.
    Sent(String),
    /// The run failed; the next beat comes at the usual time.
    Failed(String),
}

pub struct Heartbeat {
    settings: HeartbeatSettings,
    paths: Arc<PathPolicy>,
    db: Arc<Database>,
    clock: Arc<dyn Clock>,
    deliver: Arc<dyn Deliver>,
}

impl Heartbeat {
    pub fn new(
        settings: HeartbeatSettings,
        paths: Arc<PathPolicy>,
        db: Arc<Database>,
        clock: Arc<dyn Clock>,
        deliver: Arc<dyn Deliver>,
    ) -> Arc<Heartbeat> {
        Arc::new(Heartbeat {
            settings,
            paths,
            db,
            clock,
            deliver,
        })
    }

    /// Until `shutdown`: sleep until the next beat, beat, record it.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            let next = match self.next_beat() {
                Ok(t) => t,
                Err(e) => {
                    tracing::error!("heartbeat: reading its state failed: {e}");
                    self.clock.now() + chrono::Duration::minutes(1)
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.clock.sleep_until(next) => {}
            }
            // The wait may have been cut short by a clock change; only beat when it is time.
            if self.clock.now() < next {
                continue;
            }
            // A beat queued behind a long run must not hold up shutdown.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                beat = self.beat() => tracing::info!(?beat, "heartbeat"),
            }
        }
    }

    /// When the next beat is due: an interval after the last one (or after the first start),
    /// moved forward into active hours. After downtime: now (one beat for all that was
    /// missed) — or, at night, when the active hours begin.
    pub fn next_beat(&self) -> Result<DateTime<Utc>, DbError> {
        let now = self.clock.now();
        let last = match self.last_beat()? {
            Some(t) => t,
            None => {
                // First start: begin the rhythm now rather than talking at once.
                self.set_last_beat(now)?;
                now
            }
        };
        let due = last + chrono::Duration::from_std(self.settings.every).unwrap_or_default();
        // Never a past instant outside active hours: the beat would be skipped, unrecorded,
        // and due again at once.
        let due = if due < now { now } else { due };
        Ok(self.settings.active.next_active(due, self.settings.tz))
    }

    /// One beat, now.
    pub async fn beat(&self) -> Beat {
        let now = self.clock.now();
        if !self.settings.active.contains(now, self.settings.tz) {
            return Beat::Inactive;
        }
        if let Err(e) = self.set_last_beat(now) {
            // Without a record the next start would beat again at once; say so, go on.
            tracing::error!("heartbeat: recording the beat failed: {e}");
        }
        let checklist = match self.read_checklist() {
            Ok(Some(text)) => text,
            Ok(None) => return Beat::NothingToCheck,
            Err(e) => return Beat::Failed(format!("reading {FILE_NAME}: {e}")),
        };
        let store = AlertStore {
            db: self.db.clone(),
        };
        let since = now - REPEAT_WINDOW;
        let filter_store = store.clone();
        let delivery = Delivery {
            origin: Origin::Heartbeat,
            key: format!("heartbeat:{}", now.to_rfc3339()),
            session: format!("heartbeat:{}", now.format("%Y%m%dT%H%M%S")),
            chat_session: self.settings.chat_session.clone(),
            prompt: self.prompt(now, &checklist),
            untrusted: Vec::new(),
            send_if: Some(Arc::new(move |answer: &str| {
                !is_all_clear(answer) && !filter_store.sent_since(answer, since).unwrap_or(false)
            })),
        };
        match self.deliver.deliver(delivery).await {
            Err(e) => Beat::Failed(e.to_string()),
            Ok(d) if d.sent => {
                if let Err(e) = store.record(&d.answer, self.clock.now()) {
                    tracing::error!("heartbeat: recording the alert failed: {e}");
                }
                Beat::Sent(d.answer)
            }
            Ok(d) if is_all_clear(&d.answer) => Beat::AllClear,
            Ok(_) => Beat::Repeated,
        }
    }

    fn prompt(&self, now: DateTime<Utc>, checklist: &str) -> String {
        let local = now.with_timezone(&self.settings.tz);
        format!(
            "[Heartbeat check, {date} ({weekday}), {tz}. This message comes from the scheduler, \
             not typed by the user.]\n\n\
             Go through the checklist below (the owner's {FILE_NAME}). If something needs the \
             owner's attention now, write the message to send them. If nothing does, answer \
             exactly {OK_TOKEN} and nothing else.\n\n\
             --- {FILE_NAME} ---\n{checklist}\n--- end of {FILE_NAME} ---",
            date = local.format("%Y-%m-%d %H:%M %Z"),
            weekday = local.format("%A"),
            tz = self.settings.tz,
        )
    }

    /// The checklist, or `None` when there is nothing to check. Opened beneath the workspace
    /// without following symlinks (the agent can write the workspace: a link planted as
    /// `HEARTBEAT.md` must not feed warden's own files into a prompt), non-blocking (a FIFO
    /// must not hang the loop), regular files only, size-capped.
    fn read_checklist(&self) -> std::io::Result<Option<String>> {
        let path = self.paths.workspace().join(FILE_NAME);
        let file = match crate::beneath::open(
            &self.paths,
            &path,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK,
            0,
        ) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::other(format!(
                "{FILE_NAME} is not a regular file"
            )));
        }
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES).read_to_end(&mut bytes)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        // What a reader of the rendered file sees: comments are notes, not checks.
        Ok((!is_effectively_empty(&text)).then(|| without_comments(&text).trim().to_string()))
    }

    fn last_beat(&self) -> Result<Option<DateTime<Utc>>, DbError> {
        let value: Option<String> = self
            .db
            .conn()
            .query_row(
                "SELECT value FROM heartbeat_state WHERE key = 'last_beat'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        Ok(value.as_deref().and_then(parse_ts))
    }

    fn set_last_beat(&self, at: DateTime<Utc>) -> Result<(), DbError> {
        self.db.conn().execute(
            "INSERT INTO heartbeat_state (key, value) VALUES ('last_beat', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [ts(at)],
        )?;
        Ok(())
    }
}

/// Sent alerts by hash, for the 24-hour repeat rule.
#[derive(Clone)]
struct AlertStore {
    db: Arc<Database>,
}

impl AlertStore {
    fn sent_since(&self, answer: &str, since: DateTime<Utc>) -> Result<bool, DbError> {
        let sent: Option<String> = self
            .db
            .conn()
            .query_row(
                "SELECT sent_at FROM heartbeat_alerts WHERE hash = ?1",
                [alert_hash(answer)],
                |r| r.get(0),
            )
            .optional()?;
        Ok(sent
            .as_deref()
            .and_then(parse_ts)
            .is_some_and(|t| t > since))
    }

    fn record(&self, answer: &str, at: DateTime<Utc>) -> Result<(), DbError> {
        let conn = self.db.conn();
        conn.execute(
            "INSERT INTO heartbeat_alerts (hash, sent_at) VALUES (?1, ?2)
             ON CONFLICT (hash) DO UPDATE SET sent_at = excluded.sent_at",
            params![alert_hash(answer), ts(at)],
        )?;
        // Older entries can no longer suppress anything.
        conn.execute(
            "DELETE FROM heartbeat_alerts WHERE sent_at < ?1",
            [ts(at - REPEAT_WINDOW)],
        )?;
        Ok(())
    }
}

/// Nothing but headings, blank lines and HTML comments (which markdown does not show: the
/// seeded template keeps its guidance in one) counts as empty.
pub fn is_effectively_empty(text: &str) -> bool {
    without_comments(text).lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#')
    })
}

/// `text` with every `<!-- … -->` removed (an unclosed one runs to the end).
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        match rest[start + 4..].find("-->") {
            Some(end) => rest = &rest[start + 4 + end + 3..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// The whole answer, trimmed (and without markdown emphasis or a final period), is the token.
pub fn is_all_clear(answer: &str) -> bool {
    answer
        .trim()
        .trim_matches(|c: char| c == '*' || c == '`' || c == '.' || c == '!' || c.is_whitespace())
        == OK_TOKEN
}

/// Alerts that differ only in whitespace are the same alert.
fn alert_hash(answer: &str) -> String {
    let normalized: Vec<&str> = answer.split_whitespace().collect();
    hex::encode(Sha256::digest(normalized.join(" ").as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_and_blank_lines_are_empty() {
        assert!(is_effectively_empty(""));
        assert!(is_effectively_empty("# Heartbeat\n\n## Checks\n   \n"));
        assert!(!is_effectively_empty("# Heartbeat\n- check the mail\n"));
        assert!(!is_effectively_empty("remind me about rent on the 1st"));
        assert!(is_effectively_empty(
            "# H\n<!-- add checks:\n- like this\n-->\n\n<!-- x -->"
        ));
        assert!(is_effectively_empty("# H\n<!-- never closed\n- item"));
        assert!(!is_effectively_empty("<!-- note --> - check the mail"));
        assert!(!is_effectively_empty(
            "<!-- a -->\n- check the mail\n<!-- b -->"
        ));
    }

    #[test]
    fn the_seeded_template_asks_nothing_until_a_check_is_added() {
        let template = crate::memory::workspace::TEMPLATES
            .iter()
            .find(|(name, _)| *name == FILE_NAME)
            .map(|(_, text)| *text)
            .unwrap();
        assert!(is_effectively_empty(template), "{template}");
        assert!(!is_effectively_empty(&format!(
            "{template}\n- Is the rent due?\n"
        )));
    }

    #[test]
    fn only_a_bare_ok_is_all_clear() {
        for ok in [
            "HEARTBEAT_OK",
            "  HEARTBEAT_OK\n",
            "**HEARTBEAT_OK**",
            "`HEARTBEAT_OK`",
            "HEARTBEAT_OK.",
        ] {
            assert!(is_all_clear(ok), "{ok:?}");
        }
        for alert in [
            "HEARTBEAT_OK, but the disk is 95% full",
            "heartbeat_ok",
            "All fine",
            "",
        ] {
            assert!(!is_all_clear(alert), "{alert:?}");
        }
    }

    #[test]
    fn whitespace_does_not_make_a_new_alert() {
        assert_eq!(
            alert_hash("Rent is due\ntomorrow"),
            alert_hash("  Rent is due tomorrow ")
        );
        assert_ne!(
            alert_hash("Rent is due tomorrow"),
            alert_hash("Rent is due today")
        );
    }
}
