//! Telegram's durable state: every update as received (recorded before it is processed), the
//! long-polling offset (so polling resumes where it stopped after a restart), and when each
//! stranger was last refused (so a stranger gets at most one refusal per interval).

use crate::db::{Database, DbError};
use rusqlite::{params, OptionalExtension};
use std::sync::Arc;

pub const SCHEMA: &str = "
CREATE TABLE telegram_updates (
    update_id   INTEGER PRIMARY KEY,
    body        TEXT NOT NULL,
    handled     INTEGER NOT NULL DEFAULT 0,
    received_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX telegram_updates_pending ON telegram_updates (handled, update_id);
CREATE TABLE telegram_state (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE telegram_refusals (
    user_id INTEGER PRIMARY KEY,
    last_at INTEGER NOT NULL
);
";

/// Handled updates older than this are deleted at start-up (they only serve deduplication,
/// and Telegram never re-sends an update below the confirmed offset).
const KEEP_HANDLED_DAYS: i64 = 7;

#[derive(Clone)]
pub struct UpdateLog {
    db: Arc<Database>,
}

impl UpdateLog {
    pub fn new(db: Arc<Database>) -> UpdateLog {
        UpdateLog { db }
    }

    /// The offset for the next `getUpdates` (0 before the first update).
    pub fn offset(&self) -> Result<i64, DbError> {
        let value = self
            .db
            .conn()
            .query_row(
                "SELECT value FROM telegram_state WHERE key = 'offset'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        Ok(value.unwrap_or(0))
    }

    /// Record a batch of updates `(id, JSON)` and move the offset past them, in one
    /// transaction: once the offset moves (and Telegram forgets them), they are on disk.
    /// Updates seen before (a batch re-sent after a crash) are kept as they were.
    pub fn record(&self, updates: &[(i64, String)]) -> Result<(), DbError> {
        let Some(max) = updates.iter().map(|(id, _)| *id).max() else {
            return Ok(());
        };
        let mut conn = self.db.conn();
        let tx = conn.transaction()?;
        for (id, body) in updates {
            tx.execute(
                "INSERT OR IGNORE INTO telegram_updates (update_id, body) VALUES (?1, ?2)",
                params![id, body],
            )?;
        }
        tx.execute(
            "INSERT INTO telegram_state (key, value) VALUES ('offset', ?1)
             ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
            [max + 1],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Recorded updates not yet handled, oldest first.
    pub fn pending(&self) -> Result<Vec<(i64, String)>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(
            "SELECT update_id, body FROM telegram_updates WHERE handled = 0 ORDER BY update_id",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn mark_handled(&self, update_id: i64) -> Result<(), DbError> {
        self.db.conn().execute(
            "UPDATE telegram_updates SET handled = 1 WHERE update_id = ?1",
            [update_id],
        )?;
        Ok(())
    }

    pub fn prune(&self) -> Result<usize, DbError> {
        Ok(self.db.conn().execute(
            "DELETE FROM telegram_updates WHERE handled = 1
             AND received_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)",
            [format!("-{KEEP_HANDLED_DAYS} days")],
        )?)
    }

    /// Whether `user_id` may be sent a refusal now (at most once per `interval_secs`);
    /// records it when so.
    pub fn take_refusal(
        &self,
        user_id: i64,
        now: i64,
        interval_secs: i64,
    ) -> Result<bool, DbError> {
        let changed = self.db.conn().execute(
            "INSERT INTO telegram_refusals (user_id, last_at) VALUES (?1, ?2)
             ON CONFLICT (user_id) DO UPDATE SET last_at = excluded.last_at
             WHERE telegram_refusals.last_at <= excluded.last_at - ?3",
            params![user_id, now, interval_secs],
        )?;
        Ok(changed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_moves_with_recorded_batches_and_never_back() {
        let log = UpdateLog::new(crate::schema::open_in_memory().unwrap());
        assert_eq!(log.offset().unwrap(), 0);
        log.record(&[(10, "{}".into()), (11, "{}".into())]).unwrap();
        assert_eq!(log.offset().unwrap(), 12);
        // A batch re-sent after a crash changes nothing.
        log.record(&[(10, "{\"x\":1}".into())]).unwrap();
        assert_eq!(log.offset().unwrap(), 12);
        assert_eq!(log.pending().unwrap()[0], (10, "{}".to_string()));
        log.mark_handled(10).unwrap();
        let pending: Vec<i64> = log.pending().unwrap().iter().map(|p| p.0).collect();
        assert_eq!(pending, [11]);
        assert_eq!(log.prune().unwrap(), 0, "recent updates are kept");
    }

    #[test]
    fn a_stranger_is_refused_at_most_once_per_interval() {
        let log = UpdateLog::new(crate::schema::open_in_memory().unwrap());
        assert!(log.take_refusal(99, 1000, 3600).unwrap());
        assert!(!log.take_refusal(99, 1001, 3600).unwrap());
        assert!(!log.take_refusal(99, 4599, 3600).unwrap());
        assert!(log.take_refusal(99, 4600, 3600).unwrap());
        assert!(log.take_refusal(7, 1001, 3600).unwrap());
    }
}
