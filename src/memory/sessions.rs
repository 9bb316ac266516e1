//! Session transcripts: the messages of each session key (`telegram:<chat>`,
//! `terminal:default`) as JSON content blocks, appended as a run goes so a crash mid-run keeps
//! what was said. `/new` starts a new generation; older generations stay for search and audit.
//!
//! Compaction never deletes: it marks the summarized messages `compacted = 1` and records the
//! summary in `compactions`; the live history is the newest summary plus the messages not
//! compacted. Answers carry the token usage the provider reported, so the next run can tell how
//! full the context is without guessing.

use super::repair;
use crate::db::{Database, DbError};
use crate::llm::{Message, Role, Usage};
use rusqlite::{params, OptionalExtension, Row};
use std::sync::Arc;

pub const SCHEMA: &str = "
CREATE TABLE sessions (
    key        TEXT PRIMARY KEY,
    generation INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE messages (
    id         INTEGER PRIMARY KEY,
    session    TEXT NOT NULL,
    generation INTEGER NOT NULL,
    role       TEXT NOT NULL,
    content    TEXT NOT NULL,
    compacted  INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX messages_session ON messages (session, generation, id);
";

/// Token usage per answer, compaction markers and flush markers.
pub const COMPACTION_SCHEMA: &str = "
ALTER TABLE messages ADD COLUMN input_tokens INTEGER;
ALTER TABLE messages ADD COLUMN output_tokens INTEGER;
CREATE TABLE compactions (
    id         INTEGER PRIMARY KEY,
    session    TEXT NOT NULL,
    generation INTEGER NOT NULL,
    -- the messages this compaction marked compacted
    from_id    INTEGER NOT NULL,
    through_id INTEGER NOT NULL,
    -- the newest message when it ran: usage reported on answers up to here is stale
    last_id    INTEGER NOT NULL,
    summary    TEXT NOT NULL,
    -- 'model' or 'statistics' (the model could not summarize)
    method     TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX compactions_session ON compactions (session, generation, id);
CREATE TABLE memory_flushes (
    session    TEXT NOT NULL,
    generation INTEGER NOT NULL,
    -- compactions of this generation before the flush: one flush per compaction cycle
    epoch      INTEGER NOT NULL,
    outcome    TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (session, generation, epoch)
);
";

/// A message as stored, with its row id and the usage reported for it (answers only).
#[derive(Clone, Debug, PartialEq)]
pub struct StoredMessage {
    pub id: i64,
    pub message: Message,
    pub usage: Option<Usage>,
    pub created_at: String,
}

/// One compaction of a session generation.
#[derive(Clone, Debug, PartialEq)]
pub struct Compaction {
    pub id: i64,
    pub session: String,
    pub generation: i64,
    pub from_id: i64,
    pub through_id: i64,
    pub last_id: i64,
    pub summary: String,
    pub method: String,
    pub created_at: String,
}

/// The live state of a session: the newest summary and the messages after it.
#[derive(Clone, Debug)]
pub struct LiveSession {
    pub key: String,
    pub generation: i64,
    /// How many compactions this generation had.
    pub compactions: i64,
    pub summary: Option<Compaction>,
    pub messages: Vec<StoredMessage>,
}

impl LiveSession {
    /// What the model is sent: the summary as the first user message, then the live messages,
    /// repaired so the provider accepts them (see [`repair`]).
    pub fn history(&self) -> Vec<Message> {
        let mut out = Vec::with_capacity(self.messages.len() + 1);
        if let Some(summary) = &self.summary {
            out.push(summary_message(summary));
        }
        out.extend(self.messages.iter().map(|m| m.message.clone()));
        repair::repair(&mut out);
        out
    }
}

/// The user message that stands in for the compacted part of a conversation.
/// A session as `warden chat`'s `/sessions` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    pub key: String,
    /// Live (not compacted) messages of its current generation.
    pub messages: usize,
    /// When its last message was stored (or it was created).
    pub active_at: String,
}

pub fn summary_message(compaction: &Compaction) -> Message {
    // warden's words (the model summarized), never the user's.
    let text = format!(
        "[Summary of the earlier conversation, written when it was compacted on {}. The \
         original messages are kept and can be found with memory_search.]\n\n{}",
        compaction
            .created_at
            .get(..10)
            .unwrap_or(&compaction.created_at),
        compaction.summary.trim()
    );
    Message {
        role: Role::User,
        content: vec![crate::llm::ContentBlock::notice(text, Vec::new())],
    }
}

#[derive(Clone)]
pub struct SessionStore {
    db: Arc<Database>,
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// Columns: id, role, content, input_tokens, output_tokens, created_at.
fn stored(row: &Row<'_>) -> rusqlite::Result<(i64, String, String, Option<Usage>, String)> {
    let input: Option<i64> = row.get(3)?;
    let output: Option<i64> = row.get(4)?;
    let usage = input.map(|input| Usage {
        input_tokens: input as u64,
        output_tokens: output.unwrap_or(0) as u64,
    });
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, usage, row.get(5)?))
}

const MESSAGE_COLUMNS: &str = "id, role, content, input_tokens, output_tokens, created_at";

fn compaction(row: &Row<'_>) -> rusqlite::Result<Compaction> {
    Ok(Compaction {
        id: row.get(0)?,
        session: row.get(1)?,
        generation: row.get(2)?,
        from_id: row.get(3)?,
        through_id: row.get(4)?,
        last_id: row.get(5)?,
        summary: row.get(6)?,
        method: row.get(7)?,
        created_at: row.get(8)?,
    })
}

const COMPACTION_COLUMNS: &str =
    "id, session, generation, from_id, through_id, last_id, summary, method, created_at";

impl SessionStore {
    pub fn new(db: Arc<Database>) -> SessionStore {
        SessionStore { db }
    }

    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// The live generation of `key` (creating the session).
    pub fn generation(&self, key: &str) -> Result<i64, DbError> {
        let conn = self.db.conn();
        conn.execute("INSERT OR IGNORE INTO sessions (key) VALUES (?1)", [key])?;
        Ok(conn.query_row(
            "SELECT generation FROM sessions WHERE key = ?1",
            [key],
            |r| r.get(0),
        )?)
    }

    /// The live history of a session, oldest first, ready to send (summary first, repaired).
    pub fn load(&self, key: &str) -> Result<Vec<Message>, DbError> {
        Ok(self.live(key)?.history())
    }

    /// The live state with row ids and usage, for compaction.
    pub fn live(&self, key: &str) -> Result<LiveSession, DbError> {
        let generation = self.generation(key)?;
        let conn = self.db.conn();
        let (compactions, summary) = {
            let count: i64 = conn.query_row(
                "SELECT COUNT(*) FROM compactions WHERE session = ?1 AND generation = ?2",
                params![key, generation],
                |r| r.get(0),
            )?;
            let latest = conn
                .query_row(
                    &format!(
                        "SELECT {COMPACTION_COLUMNS} FROM compactions
                         WHERE session = ?1 AND generation = ?2 ORDER BY id DESC LIMIT 1"
                    ),
                    params![key, generation],
                    compaction,
                )
                .optional()?;
            (count, latest)
        };
        let mut stmt = conn.prepare(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages
             WHERE session = ?1 AND generation = ?2 AND compacted = 0 ORDER BY id"
        ))?;
        let rows = stmt.query_map(params![key, generation], stored)?;
        let messages = decode(key, rows)?;
        Ok(LiveSession {
            key: key.to_string(),
            generation,
            compactions,
            summary,
            messages,
        })
    }

    /// Append one message to the live generation; returns its row id.
    pub fn append(&self, key: &str, message: &Message) -> Result<i64, DbError> {
        self.insert(key, message, None)
    }

    /// Append a model answer with the usage the provider reported for it (0 input tokens
    /// means the provider reported none).
    pub fn append_answer(
        &self,
        key: &str,
        message: &Message,
        usage: Usage,
    ) -> Result<i64, DbError> {
        let usage = (usage.input_tokens > 0).then_some(usage);
        self.insert(key, message, usage)
    }

    fn insert(&self, key: &str, message: &Message, usage: Option<Usage>) -> Result<i64, DbError> {
        let generation = self.generation(key)?;
        let content = serde_json::to_string(&message.content)
            .map_err(|e| DbError::Io(std::io::Error::other(e)))?;
        let conn = self.db.conn();
        conn.execute(
            "INSERT INTO messages (session, generation, role, content, input_tokens, output_tokens)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                key,
                generation,
                role_name(message.role),
                content,
                usage.map(|u| u.input_tokens as i64),
                usage.map(|u| u.output_tokens as i64)
            ],
        )?;
        Ok(conn.last_insert_rowid())
    }

    /// Start a fresh conversation for `key` (`/new`); the old one stays in the database.
    pub fn reset(&self, key: &str) -> Result<(), DbError> {
        self.generation(key)?;
        self.db.conn().execute(
            "UPDATE sessions SET generation = generation + 1 WHERE key = ?1",
            [key],
        )?;
        Ok(())
    }

    /// The sessions whose key starts with `prefix`, most recently active first.
    pub fn list(&self, prefix: &str) -> Result<Vec<SessionInfo>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(
            "SELECT s.key,
                    (SELECT COUNT(*) FROM messages m
                      WHERE m.session = s.key AND m.generation = s.generation
                        AND m.compacted = 0),
                    COALESCE((SELECT MAX(m.created_at) FROM messages m
                               WHERE m.session = s.key), s.created_at) AS active
             FROM sessions s WHERE substr(s.key, 1, length(?1)) = ?1
             ORDER BY active DESC, s.key",
        )?;
        let rows = stmt
            .query_map([prefix], |r| {
                Ok(SessionInfo {
                    key: r.get(0)?,
                    messages: r.get::<_, i64>(1)? as usize,
                    active_at: r.get(2)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Number of live messages (for status displays).
    pub fn len(&self, key: &str) -> Result<usize, DbError> {
        let generation = self.generation(key)?;
        let n: Option<i64> = self
            .db
            .conn()
            .query_row(
                "SELECT COUNT(*) FROM messages WHERE session = ?1 AND generation = ?2 AND compacted = 0",
                params![key, generation],
                |r| r.get(0),
            )
            .optional()?;
        Ok(n.unwrap_or(0) as usize)
    }

    /// Replace the live messages of `generation` up to `through_id` by `summary`, in one
    /// transaction: they are marked compacted (kept for search and audit), never deleted.
    pub fn compact(
        &self,
        key: &str,
        generation: i64,
        through_id: i64,
        summary: &str,
        method: &str,
    ) -> Result<Compaction, DbError> {
        let conn = self.db.conn();
        let tx = conn.unchecked_transaction()?;
        let (from_id, last_id): (Option<i64>, Option<i64>) = tx.query_row(
            "SELECT MIN(CASE WHEN compacted = 0 AND id <= ?3 THEN id END), MAX(id)
             FROM messages WHERE session = ?1 AND generation = ?2",
            params![key, generation, through_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let Some(from_id) = from_id else {
            return Err(DbError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("session {key}: no live message up to #{through_id} to compact"),
            )));
        };
        tx.execute(
            "UPDATE messages SET compacted = 1
             WHERE session = ?1 AND generation = ?2 AND compacted = 0 AND id <= ?3",
            params![key, generation, through_id],
        )?;
        tx.execute(
            "INSERT INTO compactions (session, generation, from_id, through_id, last_id, summary, method)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                key,
                generation,
                from_id,
                through_id,
                last_id.unwrap_or(through_id),
                summary,
                method
            ],
        )?;
        let id = tx.last_insert_rowid();
        let row = tx.query_row(
            &format!("SELECT {COMPACTION_COLUMNS} FROM compactions WHERE id = ?1"),
            [id],
            compaction,
        )?;
        tx.commit()?;
        Ok(row)
    }

    /// Every compaction, oldest first (the memory index covers what they summarized).
    pub fn compactions(&self) -> Result<Vec<Compaction>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {COMPACTION_COLUMNS} FROM compactions ORDER BY id"
        ))?;
        let rows = stmt
            .query_map([], compaction)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// The original messages a compaction summarized.
    pub fn compacted_messages(&self, c: &Compaction) -> Result<Vec<StoredMessage>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages
             WHERE session = ?1 AND generation = ?2 AND compacted = 1 AND id BETWEEN ?3 AND ?4
             ORDER BY id"
        ))?;
        let rows = stmt.query_map(
            params![c.session, c.generation, c.from_id, c.through_id],
            stored,
        )?;
        decode(&c.session, rows)
    }

    /// Whether the memory flush already ran in this compaction cycle.
    pub fn flushed(&self, key: &str, generation: i64, epoch: i64) -> Result<bool, DbError> {
        Ok(self.db.conn().query_row(
            "SELECT EXISTS(SELECT 1 FROM memory_flushes
                           WHERE session = ?1 AND generation = ?2 AND epoch = ?3)",
            params![key, generation, epoch],
            |r| r.get(0),
        )?)
    }

    pub fn record_flush(
        &self,
        key: &str,
        generation: i64,
        epoch: i64,
        outcome: &str,
    ) -> Result<(), DbError> {
        self.db.conn().execute(
            "INSERT OR REPLACE INTO memory_flushes (session, generation, epoch, outcome)
             VALUES (?1, ?2, ?3, ?4)",
            params![key, generation, epoch, outcome],
        )?;
        Ok(())
    }
}

type RawRow = (i64, String, String, Option<Usage>, String);

fn decode(
    key: &str,
    rows: impl Iterator<Item = rusqlite::Result<RawRow>>,
) -> Result<Vec<StoredMessage>, DbError> {
    let mut messages = Vec::new();
    for row in rows {
        let (id, role, content, usage, created_at) = row?;
        let role = if role == "assistant" {
            Role::Assistant
        } else {
            Role::User
        };
        // A row that no longer parses (older format) is skipped rather than failing the run.
        match serde_json::from_str(&content) {
            Ok(content) => messages.push(StoredMessage {
                id,
                message: Message { role, content },
                usage,
                created_at,
            }),
            Err(e) => tracing::warn!(session = key, id, "skipping unreadable message: {e}"),
        }
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_load_and_reset() {
        let store = SessionStore::new(crate::schema::open_in_memory().unwrap());
        store.append("t:1", &Message::user("hello")).unwrap();
        store.append("t:1", &Message::assistant("hi")).unwrap();
        store.append("t:2", &Message::user("other")).unwrap();
        let history = store.load("t:1").unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[1].text(), "hi");
        store.reset("t:1").unwrap();
        assert!(store.load("t:1").unwrap().is_empty());
        assert_eq!(store.len("t:2").unwrap(), 1);
    }

    #[test]
    fn sessions_are_listed_by_prefix_newest_first_with_live_counts() {
        let store = SessionStore::new(crate::schema::open_in_memory().unwrap());
        store.append("terminal:a", &Message::user("one")).unwrap();
        store
            .append("telegram:42", &Message::user("elsewhere"))
            .unwrap();
        store.append("terminal:b", &Message::user("two")).unwrap();
        store
            .append("terminal:b", &Message::assistant("three"))
            .unwrap();
        store.reset("terminal:a").unwrap();
        let listed = store.list("terminal:").unwrap();
        let keys: Vec<&str> = listed.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys.len(), 2, "{listed:?}");
        assert!(keys.contains(&"terminal:a") && keys.contains(&"terminal:b"));
        let b = listed.iter().find(|s| s.key == "terminal:b").unwrap();
        assert_eq!(b.messages, 2);
        let a = listed.iter().find(|s| s.key == "terminal:a").unwrap();
        assert_eq!(a.messages, 0, "a reset conversation has no live messages");
        // `%` and `_` in a prefix are not wildcards.
        assert!(store.list("terminal%").unwrap().is_empty());
    }

    #[test]
    fn compaction_keeps_originals_and_puts_the_summary_first() {
        let store = SessionStore::new(crate::schema::open_in_memory().unwrap());
        let mut ids = Vec::new();
        for i in 0..3 {
            ids.push(store.append("t", &Message::user(format!("q{i}"))).unwrap());
            let usage = Usage {
                input_tokens: 100 * (i + 1),
                output_tokens: 5,
            };
            ids.push(
                store
                    .append_answer("t", &Message::assistant(format!("a{i}")), usage)
                    .unwrap(),
            );
        }
        let c = store
            .compact("t", 0, ids[3], "they talked", "model")
            .unwrap();
        assert_eq!(
            (c.from_id, c.through_id, c.last_id),
            (ids[0], ids[3], ids[5])
        );
        let live = store.live("t").unwrap();
        assert_eq!(live.compactions, 1);
        assert_eq!(live.messages.len(), 2);
        assert_eq!(live.messages[1].usage.unwrap().input_tokens, 300);
        let history = live.history();
        assert_eq!(history.len(), 3);
        assert!(history[0].text().contains("they talked"));
        assert_eq!(history[1].text(), "q2");
        let originals = store.compacted_messages(&c).unwrap();
        assert_eq!(originals.len(), 4);
        assert_eq!(originals[0].message.text(), "q0");
        // Nothing left to compact up to that point: refused rather than an empty marker.
        assert!(store.compact("t", 0, ids[3], "again", "model").is_err());
    }

    #[test]
    fn flush_markers_are_per_cycle() {
        let store = SessionStore::new(crate::schema::open_in_memory().unwrap());
        assert!(!store.flushed("t", 0, 0).unwrap());
        store.record_flush("t", 0, 0, "saved").unwrap();
        assert!(store.flushed("t", 0, 0).unwrap());
        assert!(!store.flushed("t", 0, 1).unwrap());
        assert!(!store.flushed("t", 1, 0).unwrap());
    }
}
