//! Slack's durable state: the conversations (a DM, or one thread of a channel) and the chat
//! number the gateway knows each by; every envelope as received, recorded before it is
//! acknowledged, so a redelivery is recognised and a crash loses none; and which strangers
//! were told why they get no answer (once each).

use crate::db::{Database, DbError};
use rusqlite::{params, OptionalExtension};
use std::sync::Arc;

pub const SCHEMA: &str = "
CREATE TABLE slack_conversations (
    id          INTEGER PRIMARY KEY,
    channel     TEXT NOT NULL,
    thread_ts   TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (channel, thread_ts)
);
CREATE TABLE slack_events (
    key         TEXT PRIMARY KEY,
    body        TEXT NOT NULL,
    handled     INTEGER NOT NULL DEFAULT 0,
    received_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE slack_refusals (
    user_id  TEXT PRIMARY KEY,
    told_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
";

/// Conversation `id` is chat `BASE - id`: far below every Telegram chat and above every HTTP
/// thread (`-(1 << 60)` and less), so channels sharing a database never share a queue.
const BASE: i64 = -(1 << 59);

/// One Slack conversation: a DM (no thread) or a thread of a channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    pub channel: String,
    /// The thread's parent message; `None` for a DM.
    pub thread_ts: Option<String>,
}

/// Whether an envelope was seen before.
#[derive(Debug, PartialEq, Eq)]
pub enum Recorded {
    New,
    /// Recorded before and handled: a redelivery.
    Handled,
    /// Recorded before, not handled yet (a crash came between): handle it now.
    Pending,
}

#[derive(Clone)]
pub struct SlackStore {
    db: Arc<Database>,
}

impl SlackStore {
    pub fn new(db: Arc<Database>) -> SlackStore {
        SlackStore { db }
    }

    /// Whether `chat_id` is a Slack conversation's.
    pub fn is_slack(chat_id: i64) -> bool {
        (BASE - i64::from(i32::MAX)..BASE).contains(&chat_id)
    }

    /// The chat of a conversation, created on first use.
    pub fn chat_of(&self, conversation: &Conversation) -> Result<i64, DbError> {
        let thread = conversation.thread_ts.as_deref().unwrap_or("");
        let conn = self.db.conn();
        conn.execute(
            "INSERT INTO slack_conversations (channel, thread_ts) VALUES (?1, ?2)
             ON CONFLICT (channel, thread_ts) DO NOTHING",
            params![conversation.channel, thread],
        )?;
        let id: i64 = conn.query_row(
            "SELECT id FROM slack_conversations WHERE channel = ?1 AND thread_ts = ?2",
            params![conversation.channel, thread],
            |r| r.get(0),
        )?;
        Ok(BASE - id)
    }

    /// The chat of a conversation that exists (a thread someone started with a mention).
    pub fn find(&self, conversation: &Conversation) -> Result<Option<i64>, DbError> {
        let thread = conversation.thread_ts.as_deref().unwrap_or("");
        let id: Option<i64> = self
            .db
            .conn()
            .query_row(
                "SELECT id FROM slack_conversations WHERE channel = ?1 AND thread_ts = ?2",
                params![conversation.channel, thread],
                |r| r.get(0),
            )
            .optional()?;
        Ok(id.map(|id| BASE - id))
    }

    /// The conversation of chat `chat_id`.
    pub fn conversation(&self, chat_id: i64) -> Result<Option<Conversation>, DbError> {
        if !Self::is_slack(chat_id) {
            return Ok(None);
        }
        let row: Option<(String, String)> = self
            .db
            .conn()
            .query_row(
                "SELECT channel, thread_ts FROM slack_conversations WHERE id = ?1",
                [BASE - chat_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        Ok(row.map(|(channel, thread)| Conversation {
            channel,
            thread_ts: (!thread.is_empty()).then_some(thread),
        }))
    }

    /// Record an envelope under `key` (its event id, else its envelope id).
    pub fn record(&self, key: &str, body: &str) -> Result<Recorded, DbError> {
        let conn = self.db.conn();
        let inserted = conn.execute(
            "INSERT OR IGNORE INTO slack_events (key, body) VALUES (?1, ?2)",
            params![key, body],
        )?;
        if inserted == 1 {
            return Ok(Recorded::New);
        }
        let handled: bool = conn.query_row(
            "SELECT handled FROM slack_events WHERE key = ?1",
            [key],
            |r| r.get(0),
        )?;
        Ok(if handled {
            Recorded::Handled
        } else {
            Recorded::Pending
        })
    }

    pub fn mark_handled(&self, key: &str) -> Result<(), DbError> {
        self.db
            .conn()
            .execute("UPDATE slack_events SET handled = 1 WHERE key = ?1", [key])?;
        Ok(())
    }

    /// Envelopes recorded and never handled (the last process died between), oldest first.
    pub fn pending(&self) -> Result<Vec<(String, String)>, DbError> {
        let conn = self.db.conn();
        let mut stmt =
            conn.prepare("SELECT key, body FROM slack_events WHERE handled = 0 ORDER BY rowid")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Handled envelopes older than a week only served deduplication; Slack stops
    /// redelivering long before.
    pub fn prune(&self) -> Result<(), DbError> {
        self.db.conn().execute(
            "DELETE FROM slack_events WHERE handled = 1
             AND received_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-7 days')",
            [],
        )?;
        Ok(())
    }

    /// True the first time for `user_id`: that stranger is to be told why, once.
    pub fn first_refusal(&self, user_id: &str) -> Result<bool, DbError> {
        let inserted = self.db.conn().execute(
            "INSERT OR IGNORE INTO slack_refusals (user_id) VALUES (?1)",
            [user_id],
        )?;
        Ok(inserted == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> SlackStore {
        SlackStore::new(crate::schema::open_in_memory().unwrap())
    }

    #[test]
    fn a_conversation_keeps_its_chat_and_maps_back() {
        let store = store();
        let dm = Conversation {
            channel: "D1".into(),
            thread_ts: None,
        };
        let thread = Conversation {
            channel: "C1".into(),
            thread_ts: Some("1700000000.000100".into()),
        };
        let a = store.chat_of(&dm).unwrap();
        let b = store.chat_of(&thread).unwrap();
        assert_ne!(a, b);
        assert_eq!(store.chat_of(&dm).unwrap(), a);
        assert_eq!(store.conversation(b).unwrap(), Some(thread.clone()));
        assert_eq!(store.find(&thread).unwrap(), Some(b));
        assert!(SlackStore::is_slack(a));
        for other in [4242_i64, -1001234567890, -(1 << 60) - 1] {
            assert!(!SlackStore::is_slack(other), "{other}");
        }
        assert!(!crate::channels::http::threads::Threads::is_thread(a));
    }

    #[test]
    fn an_envelope_is_new_once_and_pending_until_handled() {
        let store = store();
        assert_eq!(store.record("Ev1", "{}").unwrap(), Recorded::New);
        assert_eq!(store.record("Ev1", "{}").unwrap(), Recorded::Pending);
        assert_eq!(store.pending().unwrap().len(), 1);
        store.mark_handled("Ev1").unwrap();
        assert_eq!(store.record("Ev1", "{}").unwrap(), Recorded::Handled);
        assert!(store.pending().unwrap().is_empty());
    }

    #[test]
    fn a_stranger_is_told_once() {
        let store = store();
        assert!(store.first_refusal("U9").unwrap());
        assert!(!store.first_refusal("U9").unwrap());
    }
}
