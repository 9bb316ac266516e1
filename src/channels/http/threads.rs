//! The API's threads: a name a script chooses (`"home"`, `"ci-nightly"`) is one conversation,
//! queued and run like a chat. The gateway knows chats by number, so each name gets one,
//! stored: the same name is the same chat (and session) after a restart.
//!
//! The numbers lie far below any Telegram chat id, so an HTTP thread never shares a queue or
//! a session with a Telegram chat when both channels serve one gateway.

use crate::db::{Database, DbError};
use rusqlite::{params, OptionalExtension};
use std::sync::Arc;

pub const SCHEMA: &str = "
CREATE TABLE http_threads (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
";

/// Thread `id` is chat `BASE - id`.
const BASE: i64 = -(1 << 60);

/// The thread where `warden serve` answers the heartbeat and jobs made for no API thread
/// (`warden cron add` without Telegram, a Telegram chat's job when no bot runs).
pub const SCHEDULED: &str = "scheduled";

/// The longest thread name.
pub const MAX_NAME: usize = 64;

/// Why a name is not a thread's.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("a thread name has 1 to {MAX_NAME} characters"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
    {
        return Err("a thread name uses only letters, digits and - _ . :".into());
    }
    Ok(())
}

#[derive(Clone)]
pub struct Threads {
    db: Arc<Database>,
}

impl Threads {
    /// Every thread's chat id is below this (see [`Threads::is_thread`]).
    pub const CHATS_BELOW: i64 = BASE;

    pub fn new(db: Arc<Database>) -> Threads {
        Threads { db }
    }

    /// The chat of thread `name`, created on first use.
    pub fn chat_of(&self, name: &str) -> Result<i64, DbError> {
        let conn = self.db.conn();
        conn.execute(
            "INSERT INTO http_threads (name) VALUES (?1) ON CONFLICT (name) DO NOTHING",
            [name],
        )?;
        let id: i64 =
            conn.query_row("SELECT id FROM http_threads WHERE name = ?1", [name], |r| {
                r.get(0)
            })?;
        Ok(BASE - id)
    }

    /// The chat of thread `name`, if it exists.
    pub fn find(&self, name: &str) -> Result<Option<i64>, DbError> {
        let id: Option<i64> = self
            .db
            .conn()
            .query_row("SELECT id FROM http_threads WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()?;
        Ok(id.map(|id| BASE - id))
    }

    /// The name of the thread whose chat is `chat_id`; `None` for any other chat.
    pub fn name_of(&self, chat_id: i64) -> Result<Option<String>, DbError> {
        if chat_id > BASE {
            return Ok(None);
        }
        Ok(self
            .db
            .conn()
            .query_row(
                "SELECT name FROM http_threads WHERE id = ?1",
                params![BASE - chat_id],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Whether `chat_id` is one of the API's threads (ids below every other channel's).
    pub fn is_thread(chat_id: i64) -> bool {
        chat_id < BASE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_its_chat_and_chats_map_back() {
        let threads = Threads::new(crate::schema::open_in_memory().unwrap());
        let home = threads.chat_of("home").unwrap();
        let ci = threads.chat_of("ci").unwrap();
        assert_ne!(home, ci);
        assert_eq!(threads.chat_of("home").unwrap(), home);
        assert_eq!(threads.find("ci").unwrap(), Some(ci));
        assert_eq!(threads.find("nope").unwrap(), None);
        assert_eq!(threads.name_of(home).unwrap().as_deref(), Some("home"));
        assert!(Threads::is_thread(home));
        // A Telegram supergroup and a user are never threads.
        for chat in [-1001234567890_i64, 4242] {
            assert!(!Threads::is_thread(chat));
            assert_eq!(threads.name_of(chat).unwrap(), None);
        }
    }

    #[test]
    fn names_are_short_and_plain() {
        assert!(check_name("ci-nightly_2.x:a").is_ok());
        for bad in ["", "a b", "a/b", "ü", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
