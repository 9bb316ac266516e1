//! Durable runs: every prompt the gateway accepts is a row before it is queued, and its state
//! moves `queued → running → replying → answered` (or `cancelled`). The answer is stored before
//! it is sent; each message part is marked `sending` before the request and counted in
//! `parts_sent` once the channel accepted it, so after a crash a run is not lost, and a part is
//! sent again only when it may not have arrived — marked as such. A run cut off by a shutdown
//! or a crash gets the notice that says so as its answer (outcome `interrupted`).

use super::{ChatKey, Origin};
use crate::db::{Database, DbError};
use crate::llm::ContentBlock;
use rusqlite::{params, OptionalExtension, Row};
use std::sync::Arc;

pub const SCHEMA: &str = "
CREATE TABLE gateway_runs (
    id          INTEGER PRIMARY KEY,
    chat_id     INTEGER NOT NULL,
    origin      TEXT NOT NULL,
    dedup_key   TEXT UNIQUE,
    input       TEXT NOT NULL,
    preview     TEXT NOT NULL,
    reply_to    INTEGER,
    deliver     INTEGER NOT NULL DEFAULT 1,
    state       TEXT NOT NULL DEFAULT 'queued',
    outcome     TEXT,
    answer      TEXT,
    parts_sent  INTEGER NOT NULL DEFAULT 0,
    notified    INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX gateway_runs_state ON gateway_runs (state, id);
";

/// A later migration: the session a run uses when it is not the chat's own (scheduled jobs
/// with a fresh session each run, the heartbeat). NULL: the chat's session.
pub const SESSION_COLUMN: &str = "ALTER TABLE gateway_runs ADD COLUMN session TEXT;";

/// A later migration: the message a channel streamed the run's answer into while it ran (its
/// draft; a Telegram message id), so the answer replaces it — also after a restart — instead
/// of repeating it. NULL: nothing was streamed.
pub const DRAFT_COLUMN: &str = "ALTER TABLE gateway_runs ADD COLUMN draft INTEGER;";

/// A later migration: the message part (from 1) whose sending began. Greater than
/// `parts_sent`: that part may or may not have reached the chat.
pub const SENDING_COLUMN: &str =
    "ALTER TABLE gateway_runs ADD COLUMN sending INTEGER NOT NULL DEFAULT 0;";
/// A later migration: the topic of the chat the run belongs to (Telegram's
/// `message_thread_id`): its queue, its session, where its answer goes. NULL: the chat itself.
pub const TOPIC_COLUMN: &str = "ALTER TABLE gateway_runs ADD COLUMN topic INTEGER;";

/// Where a run is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Queued,
    Running,
    /// The answer is stored; message parts are being delivered.
    Replying,
    Answered,
    /// Dropped by `/stop` before it started.
    Cancelled,
    /// The process stopped while the agent was working on it, and the user was not told yet
    /// (rows of earlier versions; a run cut off now is `Replying` with its notice).
    Interrupted,
}

impl RunState {
    fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Replying => "replying",
            RunState::Answered => "answered",
            RunState::Cancelled => "cancelled",
            RunState::Interrupted => "interrupted",
        }
    }

    fn parse(s: &str) -> RunState {
        match s {
            "queued" => RunState::Queued,
            "running" => RunState::Running,
            "replying" => RunState::Replying,
            "answered" => RunState::Answered,
            "cancelled" => RunState::Cancelled,
            // Unknown states are treated as the safest: not to be run again.
            _ => RunState::Interrupted,
        }
    }
}

/// A run as stored.
#[derive(Clone, Debug)]
pub struct RunRow {
    pub id: i64,
    pub chat_id: i64,
    pub topic: Option<i32>,
    pub origin: Origin,
    pub input: Vec<ContentBlock>,
    pub preview: String,
    pub reply_to: Option<i32>,
    pub deliver: bool,
    pub state: RunState,
    /// How the agent ended (`answered`, `iteration_limit`, `stopped`, `failed`…).
    pub outcome: Option<String>,
    pub answer: Option<String>,
    pub parts_sent: usize,
    /// The part whose sending began last (from 1); above `parts_sent`, it may have arrived.
    pub sending: usize,
    /// For interrupted runs: whether the user was told.
    pub notified: bool,
    /// The session to run in, when not the chat's own.
    pub session: Option<String>,
    /// The message the answer streamed into, if any.
    pub draft: Option<i64>,
    /// When it was accepted, and when its state last changed (UTC, RFC 3339).
    pub created_at: String,
    pub updated_at: String,
}

/// A run to insert.
pub struct NewRun<'a> {
    pub chat_id: i64,
    pub topic: Option<i32>,
    pub origin: &'a Origin,
    pub dedup_key: Option<&'a str>,
    pub input: &'a [ContentBlock],
    pub preview: &'a str,
    pub reply_to: Option<i32>,
    pub deliver: bool,
    pub session: Option<&'a str>,
}

pub enum Inserted {
    New(i64),
    /// A run with the same dedup key exists already.
    Existing(Box<RunRow>),
}

#[derive(Clone)]
pub struct RunStore {
    db: Arc<Database>,
}

const COLUMNS: &str = "id, chat_id, origin, input, preview, reply_to, deliver, state, outcome, \
                       answer, parts_sent, notified, session, draft, sending, topic, created_at, \
                       updated_at";

fn row_to_run(row: &Row<'_>) -> rusqlite::Result<RunRow> {
    let origin: String = row.get(2)?;
    let input: String = row.get(3)?;
    let state: String = row.get(7)?;
    Ok(RunRow {
        id: row.get(0)?,
        chat_id: row.get(1)?,
        // A row that no longer parses keeps its id: it is reported, not silently dropped.
        origin: serde_json::from_str(&origin).unwrap_or(Origin::Unknown),
        input: serde_json::from_str(&input).unwrap_or_default(),
        preview: row.get(4)?,
        reply_to: row.get(5)?,
        deliver: row.get(6)?,
        state: RunState::parse(&state),
        outcome: row.get(8)?,
        answer: row.get(9)?,
        parts_sent: row.get::<_, i64>(10)?.max(0) as usize,
        notified: row.get(11)?,
        session: row.get(12)?,
        draft: row.get(13)?,
        sending: row.get::<_, i64>(14)?.max(0) as usize,
        topic: row.get(15)?,
        created_at: row.get(16)?,
        updated_at: row.get(17)?,
    })
}

fn json_err(e: serde_json::Error) -> DbError {
    DbError::Io(std::io::Error::other(e))
}

impl RunRow {
    /// The chat (and topic) the run belongs to.
    pub fn chat_key(&self) -> super::ChatKey {
        super::ChatKey::new(self.chat_id, self.topic)
    }
}

impl RunStore {
    pub fn new(db: Arc<Database>) -> RunStore {
        RunStore { db }
    }

    /// Bytes free on the database's disk (see [`Database::free_bytes`]).
    pub fn free_bytes(&self) -> Option<u64> {
        self.db.free_bytes()
    }

    /// See [`Database::checkpoint`].
    pub fn checkpoint(&self) -> Result<(), DbError> {
        self.db.checkpoint()
    }

    /// Insert a queued run, or return the existing one with the same dedup key.
    pub fn insert(&self, run: &NewRun<'_>) -> Result<Inserted, DbError> {
        let origin = serde_json::to_string(run.origin).map_err(json_err)?;
        let input = serde_json::to_string(run.input).map_err(json_err)?;
        let changed = self.db.conn().execute(
            "INSERT INTO gateway_runs (chat_id, origin, dedup_key, input, preview, reply_to, deliver,
                 session, topic)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (dedup_key) DO NOTHING",
            params![
                run.chat_id,
                origin,
                run.dedup_key,
                input,
                run.preview,
                run.reply_to,
                run.deliver,
                run.session,
                run.topic
            ],
        )?;
        if changed == 1 {
            return Ok(Inserted::New(self.db.conn().last_insert_rowid()));
        }
        let key = run.dedup_key.unwrap_or_default();
        let existing = self.by_key(key)?.ok_or_else(|| {
            DbError::Io(std::io::Error::other(format!(
                "run with key {key:?} neither inserted nor found"
            )))
        })?;
        Ok(Inserted::Existing(Box::new(existing)))
    }

    pub fn get(&self, id: i64) -> Result<Option<RunRow>, DbError> {
        let sql = format!("SELECT {COLUMNS} FROM gateway_runs WHERE id = ?1");
        Ok(self
            .db
            .conn()
            .query_row(&sql, [id], row_to_run)
            .optional()?)
    }

    pub fn by_key(&self, key: &str) -> Result<Option<RunRow>, DbError> {
        let sql = format!("SELECT {COLUMNS} FROM gateway_runs WHERE dedup_key = ?1");
        Ok(self
            .db
            .conn()
            .query_row(&sql, [key], row_to_run)
            .optional()?)
    }

    /// Runs that need attention at start-up, oldest first: queued, running (interrupted by a
    /// crash), replying, and interrupted ones whose user was not told yet.
    pub fn unfinished(&self) -> Result<Vec<RunRow>, DbError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM gateway_runs
             WHERE state IN ('queued', 'running', 'replying')
                OR (state = 'interrupted' AND notified = 0)
             ORDER BY id"
        );
        let conn = self.db.conn();
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], row_to_run)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The chat's runs that got no answer since its last answered one — failed, or cut off by
    /// a restart — and were not retried yet, oldest first (a retry's dedup key is
    /// `retry:<id>`). A run counts from the moment its outcome is stored (`replying`), not
    /// only once its message is recorded as delivered: the user may read the failure and tap
    /// /retry in between.
    pub fn unanswered(&self, chat: ChatKey) -> Result<Vec<RunRow>, DbError> {
        // `IS` matches a NULL topic (the chat itself) too.
        let sql = format!(
            "SELECT {COLUMNS} FROM gateway_runs AS g
             WHERE chat_id = ?1 AND topic IS ?2 AND deliver = 1
               AND state IN ('replying', 'answered')
               AND outcome IN ('failed', 'interrupted')
               AND id > (SELECT coalesce(max(id), 0) FROM gateway_runs
                         WHERE chat_id = ?1 AND topic IS ?2
                           AND state IN ('replying', 'answered')
                           AND outcome IN ('answered', 'iteration_limit', 'stopped'))
               AND NOT EXISTS (SELECT 1 FROM gateway_runs
                               WHERE dedup_key = 'retry:' || g.id)
             ORDER BY id"
        );
        let conn = self.db.conn();
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(params![chat.chat_id, chat.topic], row_to_run)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The newest runs (at most `limit`), newest first: those of chat `chat`, or of every chat
    /// below `chats_below` (a channel's own range of chat ids, see the HTTP API's threads).
    pub fn recent(
        &self,
        chat: Option<i64>,
        chats_below: i64,
        limit: usize,
    ) -> Result<Vec<RunRow>, DbError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM gateway_runs
             WHERE (?1 IS NULL OR chat_id = ?1) AND chat_id < ?2
             ORDER BY id DESC LIMIT ?3"
        );
        let conn = self.db.conn();
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(params![chat, chats_below, limit as i64], row_to_run)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How many runs of the chats below `chats_below` are in each state and outcome.
    pub fn counts(
        &self,
        chats_below: i64,
    ) -> Result<Vec<(RunState, Option<String>, u64)>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(
            "SELECT state, outcome, count(*) FROM gateway_runs WHERE chat_id < ?1
             GROUP BY state, outcome",
        )?;
        let rows = stmt.query_map([chats_below], |r| {
            let state: String = r.get(0)?;
            Ok((
                RunState::parse(&state),
                r.get(1)?,
                r.get::<_, i64>(2)?.max(0) as u64,
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn set_state(&self, id: i64, state: RunState) -> Result<(), DbError> {
        self.db.conn().execute(
            "UPDATE gateway_runs SET state = ?2,
                 updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
            params![id, state.as_str()],
        )?;
        Ok(())
    }

    pub fn set_running(&self, id: i64) -> Result<(), DbError> {
        self.set_state(id, RunState::Running)
    }

    /// The agent is done: keep its answer before any part of it is sent.
    pub fn set_replying(&self, id: i64, outcome: &str, answer: &str) -> Result<(), DbError> {
        self.db.conn().execute(
            "UPDATE gateway_runs SET state = 'replying', outcome = ?2, answer = ?3,
                 updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
            params![id, outcome, answer],
        )?;
        Ok(())
    }

    /// The channel shows the run's answer, as it streams, in message `draft`.
    pub fn set_draft(&self, id: i64, draft: i64) -> Result<(), DbError> {
        self.db.conn().execute(
            "UPDATE gateway_runs SET draft = ?2 WHERE id = ?1",
            params![id, draft],
        )?;
        Ok(())
    }

    /// Part `part` (from 1) is about to be sent.
    pub fn set_sending(&self, id: i64, part: usize) -> Result<(), DbError> {
        self.db.conn().execute(
            "UPDATE gateway_runs SET sending = max(sending, ?2) WHERE id = ?1",
            params![id, part as i64],
        )?;
        Ok(())
    }

    pub fn set_parts_sent(&self, id: i64, parts: usize) -> Result<(), DbError> {
        self.db.conn().execute(
            "UPDATE gateway_runs SET parts_sent = ?2 WHERE id = ?1",
            params![id, parts as i64],
        )?;
        Ok(())
    }

    pub fn set_answered(&self, id: i64) -> Result<(), DbError> {
        self.set_state(id, RunState::Answered)
    }

    pub fn set_cancelled(&self, id: i64) -> Result<(), DbError> {
        self.db.conn().execute(
            "UPDATE gateway_runs SET state = 'cancelled', outcome = 'cancelled',
                 updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
            [id],
        )?;
        Ok(())
    }

    /// Runs cut short by a shutdown or a crash, each with the notice that tells its chat, all
    /// at once: their notice becomes their answer, delivered like any answer.
    pub fn set_interrupted(&self, runs: &[(i64, String)]) -> Result<(), DbError> {
        let mut conn = self.db.conn();
        let tx = conn.transaction()?;
        for (id, notice) in runs {
            tx.execute(
                "UPDATE gateway_runs SET state = 'replying', outcome = 'interrupted', answer = ?2,
                     parts_sent = 0, sending = 0, notified = 1,
                     updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
                params![id, notice],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
impl RunStore {
    /// The owner's "hi", queued in `chat_id` (for tests of what reads runs).
    pub(crate) fn queue_hi(&self, chat_id: i64) -> i64 {
        let input = vec![ContentBlock::text("hi")];
        let run = NewRun {
            chat_id,
            topic: None,
            origin: &Origin::User { user_id: 1 },
            dedup_key: None,
            input: &input,
            preview: "hi",
            reply_to: None,
            deliver: true,
            session: None,
        };
        match self.insert(&run).unwrap() {
            Inserted::New(id) => id,
            Inserted::Existing(_) => unreachable!("a run without a key is new"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_run<'a>(
        origin: &'a Origin,
        key: Option<&'a str>,
        input: &'a [ContentBlock],
    ) -> NewRun<'a> {
        NewRun {
            chat_id: 7,
            topic: None,
            origin,
            dedup_key: key,
            input,
            preview: "hi",
            reply_to: Some(3),
            deliver: true,
            session: None,
        }
    }

    #[test]
    fn dedup_key_returns_the_existing_run() {
        let store = RunStore::new(crate::schema::open_in_memory().unwrap());
        let origin = Origin::Scheduled {
            job_id: "j1".into(),
        };
        let input = vec![ContentBlock::text("hi")];
        let Inserted::New(id) = store.insert(&new_run(&origin, Some("k"), &input)).unwrap() else {
            panic!("first insert is new")
        };
        let Inserted::Existing(row) = store.insert(&new_run(&origin, Some("k"), &input)).unwrap()
        else {
            panic!("second insert finds the first")
        };
        assert_eq!(row.id, id);
        assert_eq!(row.origin, origin);
        assert!(matches!(
            store.insert(&new_run(&origin, None, &input)).unwrap(),
            Inserted::New(_)
        ));
    }

    #[test]
    fn a_failure_is_retryable_while_its_notice_is_still_being_delivered() {
        let store = RunStore::new(crate::schema::open_in_memory().unwrap());
        let chat = ChatKey {
            chat_id: 7,
            topic: None,
        };
        let origin = Origin::Unknown;
        let input = vec![ContentBlock::text("x")];
        let run = || match store.insert(&new_run(&origin, None, &input)).unwrap() {
            Inserted::New(id) => id,
            Inserted::Existing(_) => unreachable!(),
        };
        let failed = run();
        store.set_replying(failed, "failed", "Tap /retry").unwrap();
        let ids = |rows: Vec<RunRow>| rows.iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(store.unanswered(chat).unwrap()), [failed]);
        store.set_answered(failed).unwrap();
        assert_eq!(ids(store.unanswered(chat).unwrap()), [failed]);
        // A later answer, from the moment it is stored, means everything before was answered.
        let later = run();
        store.set_replying(later, "answered", "done").unwrap();
        assert!(store.unanswered(chat).unwrap().is_empty());
    }

    #[test]
    fn unfinished_lists_what_a_restart_must_handle() {
        let store = RunStore::new(crate::schema::open_in_memory().unwrap());
        let origin = Origin::Unknown;
        let input = vec![ContentBlock::text("x")];
        let ids: Vec<i64> = (0..5)
            .map(
                |_| match store.insert(&new_run(&origin, None, &input)).unwrap() {
                    Inserted::New(id) => id,
                    Inserted::Existing(_) => unreachable!(),
                },
            )
            .collect();
        store.set_running(ids[1]).unwrap();
        store
            .set_replying(ids[2], "answered", "the answer")
            .unwrap();
        store.set_parts_sent(ids[2], 1).unwrap();
        store.set_draft(ids[2], 77).unwrap();
        store.set_sending(ids[2], 2).unwrap();
        store.set_sending(ids[2], 1).unwrap();
        store.set_answered(ids[3]).unwrap();
        store
            .set_interrupted(&[(ids[4], "I was restarted".into())])
            .unwrap();
        let rows = store.unfinished().unwrap();
        let states: Vec<RunState> = rows.iter().map(|r| r.state).collect();
        assert_eq!(
            states,
            [
                RunState::Queued,
                RunState::Running,
                RunState::Replying,
                RunState::Replying
            ]
        );
        assert_eq!(rows[2].answer.as_deref(), Some("the answer"));
        assert_eq!(rows[2].parts_sent, 1);
        assert_eq!(rows[2].sending, 2, "sending only moves forward");
        assert_eq!(rows[2].draft, Some(77));
        assert_eq!(rows[1].draft, None);
        assert_eq!(rows[3].outcome.as_deref(), Some("interrupted"));
        assert_eq!(rows[3].answer.as_deref(), Some("I was restarted"));
        store.set_answered(ids[4]).unwrap();
        assert_eq!(store.unfinished().unwrap().len(), 3);
        // A row an earlier version left interrupted and untold is still found.
        store
            .db
            .conn()
            .execute(
                "UPDATE gateway_runs SET state = 'interrupted', notified = 0 WHERE id = ?1",
                [ids[4]],
            )
            .unwrap();
        assert_eq!(store.unfinished().unwrap()[3].state, RunState::Interrupted);
    }
}
