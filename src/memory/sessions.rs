//! Session transcripts: the messages of each session key (`telegram:<chat>`,
//! `terminal:default`) as JSON content blocks, appended as a run goes so a crash mid-run keeps
//! what was said. `/new` starts a new generation; older generations stay for search and audit.

use crate::db::{Database, DbError};
use crate::llm::{Message, Role};
use rusqlite::{params, OptionalExtension};
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

#[derive(Clone)]
pub struct SessionStore {
    db: Arc<Database>,
}

impl SessionStore {
    pub fn new(db: Arc<Database>) -> SessionStore {
        SessionStore { db }
    }

    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    fn generation(&self, key: &str) -> Result<i64, DbError> {
        let conn = self.db.conn();
        conn.execute("INSERT OR IGNORE INTO sessions (key) VALUES (?1)", [key])?;
        Ok(conn.query_row(
            "SELECT generation FROM sessions WHERE key = ?1",
            [key],
            |r| r.get(0),
        )?)
    }

    /// The live history of a session, oldest first.
    pub fn load(&self, key: &str) -> Result<Vec<Message>, DbError> {
        let generation = self.generation(key)?;
        let conn = self.db.conn();
        let mut stmt = conn.prepare(
            "SELECT role, content FROM messages
             WHERE session = ?1 AND generation = ?2 AND compacted = 0 ORDER BY id",
        )?;
        let rows = stmt.query_map(params![key, generation], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut messages = Vec::new();
        for row in rows {
            let (role, content) = row?;
            let role = if role == "assistant" {
                Role::Assistant
            } else {
                Role::User
            };
            // A row that no longer parses (older format) is skipped rather than failing the run.
            match serde_json::from_str(&content) {
                Ok(content) => messages.push(Message { role, content }),
                Err(e) => tracing::warn!(session = key, "skipping unreadable message: {e}"),
            }
        }
        Ok(messages)
    }

    /// Append one message to the live generation; returns its row id.
    pub fn append(&self, key: &str, message: &Message) -> Result<i64, DbError> {
        let generation = self.generation(key)?;
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let content = serde_json::to_string(&message.content)
            .map_err(|e| DbError::Io(std::io::Error::other(e)))?;
        let conn = self.db.conn();
        conn.execute(
            "INSERT INTO messages (session, generation, role, content) VALUES (?1, ?2, ?3, ?4)",
            params![key, generation, role, content],
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_load_and_reset() {
        let store = SessionStore::new(Database::open_in_memory().unwrap());
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
}
