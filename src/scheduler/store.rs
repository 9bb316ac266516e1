//! Jobs in the one SQLite database: the schema (jobs and their runs, one migration), adding,
//! reading, removing, and what is due. Run history — claiming a slot, recording how it ended —
//! is in [`super::runs`].

use super::job::{Job, JobError, JobId, NewJob, Target};
use super::schedule::Schedule;
use crate::db::{Database, DbError};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use rusqlite::{params, OptionalExtension, Row, TransactionBehavior};
use std::sync::Arc;
use std::time::Duration;

pub const SCHEMA: &str = "
CREATE TABLE cron_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT NOT NULL,
    kind             TEXT NOT NULL CHECK (kind IN ('at', 'every', 'cron')),
    spec             TEXT NOT NULL,
    timezone         TEXT NOT NULL,
    anchor           TEXT NOT NULL,
    prompt           TEXT NOT NULL,
    session          TEXT NOT NULL,
    fresh_session    INTEGER NOT NULL DEFAULT 0,
    delete_after_run INTEGER NOT NULL DEFAULT 0,
    enabled          INTEGER NOT NULL DEFAULT 1,
    next_run_at      TEXT,
    failures         INTEGER NOT NULL DEFAULT 0,
    running_run      INTEGER,
    created_at       TEXT NOT NULL,
    created_by       TEXT NOT NULL
);
CREATE INDEX cron_jobs_due ON cron_jobs (next_run_at) WHERE enabled = 1;
CREATE TABLE cron_runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id      INTEGER NOT NULL,
    slot        TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    status      TEXT NOT NULL CHECK (status IN ('running', 'ok', 'error', 'interrupted')),
    detail      TEXT,
    UNIQUE (job_id, slot)
);
";

#[derive(Clone)]
pub struct JobStore {
    pub(super) db: Arc<Database>,
}

pub(super) const JOB_COLUMNS: &str =
    "id, name, kind, spec, timezone, anchor, prompt, session, fresh_session, \
     delete_after_run, enabled, next_run_at, failures, running_run, created_at, created_by, \
     untrusted";

/// What tainted the run that created a job (JSON list of sources).
pub const TAINT_COLUMN: &str = "
ALTER TABLE cron_jobs ADD COLUMN untrusted TEXT NOT NULL DEFAULT '[]';
";

impl JobStore {
    pub fn new(db: Arc<Database>) -> JobStore {
        JobStore { db }
    }

    /// Store a validated job, refusing when `max_jobs` exist already (checked in the same
    /// transaction, so two concurrent adds cannot both slip under the limit).
    pub fn insert(
        &self,
        job: &NewJob,
        now: DateTime<Utc>,
        max_jobs: usize,
    ) -> Result<Job, JobError> {
        let store_err = |e: rusqlite::Error| JobError::Store(DbError::from(e).to_string());
        let mut conn = self.db.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(store_err)?;
        let count: i64 = tx
            .query_row("SELECT COUNT(*) FROM cron_jobs", [], |r| r.get(0))
            .map_err(store_err)?;
        if count as usize >= max_jobs {
            return Err(JobError::TooManyJobs(max_jobs));
        }
        let (spec, tz, anchor) = match &job.schedule {
            Schedule::At(at) => (ts(*at), "UTC".to_string(), ts(now)),
            Schedule::Every { interval, anchor } => (
                interval.as_secs().to_string(),
                "UTC".to_string(),
                ts(*anchor),
            ),
            Schedule::Cron { expr, tz } => (expr.clone(), tz.name().to_string(), ts(now)),
        };
        let (session, fresh) = match &job.target {
            Target::Session(s) => (s.as_str(), false),
            Target::Fresh { reply_to } => (reply_to.as_str(), true),
        };
        tx.execute(
            "INSERT INTO cron_jobs (name, kind, spec, timezone, anchor, prompt, session,
                 fresh_session, delete_after_run, next_run_at, created_at, created_by, untrusted)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![
                job.name,
                job.schedule.kind(),
                spec,
                tz,
                anchor,
                job.prompt,
                session,
                fresh,
                job.delete_after_run,
                ts(job.first_run),
                ts(now),
                job.created_by,
                serde_json::to_string(&job.untrusted).unwrap_or_else(|_| "[]".into()),
            ],
        )
        .map_err(store_err)?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(store_err)?;
        drop(conn);
        self.get(id)
            .map_err(|e| JobError::Store(e.to_string()))?
            .ok_or(JobError::UnknownJob(id))
    }

    pub fn get(&self, id: JobId) -> Result<Option<Job>, DbError> {
        let conn = self.db.conn();
        let sql = format!("SELECT {JOB_COLUMNS} FROM cron_jobs WHERE id = ?1");
        Ok(conn.query_row(&sql, [id], job_from_row).optional()?)
    }

    /// Every job, by id.
    pub fn list(&self) -> Result<Vec<Job>, DbError> {
        self.query(
            &format!("SELECT {JOB_COLUMNS} FROM cron_jobs ORDER BY id"),
            [],
        )
    }

    /// Enabled, idle jobs whose slot has come, soonest first.
    pub fn due(&self, now: DateTime<Utc>) -> Result<Vec<Job>, DbError> {
        self.query(
            &format!(
                "SELECT {JOB_COLUMNS} FROM cron_jobs
                 WHERE enabled = 1 AND running_run IS NULL AND next_run_at IS NOT NULL
                   AND next_run_at <= ?1
                 ORDER BY next_run_at, id"
            ),
            [ts(now)],
        )
    }

    /// The soonest slot of an enabled, idle job: what the runner's timer is armed for.
    pub fn next_due_at(&self) -> Result<Option<DateTime<Utc>>, DbError> {
        let next: Option<String> = self.db.conn().query_row(
            "SELECT MIN(next_run_at) FROM cron_jobs WHERE enabled = 1 AND running_run IS NULL",
            [],
            |r| r.get(0),
        )?;
        Ok(next.as_deref().and_then(parse_ts))
    }

    /// Remove a job and its history; false when there was none.
    pub fn remove(&self, id: JobId) -> Result<bool, DbError> {
        let mut conn = self.db.conn();
        let tx = conn.transaction()?;
        let n = tx.execute("DELETE FROM cron_jobs WHERE id = ?1", [id])?;
        tx.execute("DELETE FROM cron_runs WHERE job_id = ?1", [id])?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// "Run now": make the job due at `now` (re-enabling a finished one-shot job).
    pub fn make_due(&self, id: JobId, now: DateTime<Utc>) -> Result<Job, JobError> {
        let job = self
            .get(id)
            .map_err(|e| JobError::Store(e.to_string()))?
            .ok_or(JobError::UnknownJob(id))?;
        if job.running {
            return Err(JobError::Running(id));
        }
        let n = self
            .db
            .conn()
            .execute(
                "UPDATE cron_jobs SET enabled = 1, next_run_at = ?2
                 WHERE id = ?1 AND running_run IS NULL",
                params![id, ts(now)],
            )
            .map_err(|e| JobError::Store(e.to_string()))?;
        if n == 0 {
            return Err(JobError::Running(id));
        }
        self.get(id)
            .map_err(|e| JobError::Store(e.to_string()))?
            .ok_or(JobError::UnknownJob(id))
    }

    pub(super) fn query<P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
    ) -> Result<Vec<Job>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map(params, job_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Instants are stored as fixed-width UTC text, so text order is time order.
pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

pub(crate) fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn bad_column(index: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        index,
        rusqlite::types::Type::Text,
        Box::new(std::io::Error::other(what)),
    )
}

pub(super) fn instant(row: &Row<'_>, index: usize) -> Result<DateTime<Utc>, rusqlite::Error> {
    let text: String = row.get(index)?;
    parse_ts(&text).ok_or_else(|| bad_column(index, format!("bad instant {text:?}")))
}

fn job_from_row(row: &Row<'_>) -> Result<Job, rusqlite::Error> {
    let kind: String = row.get(2)?;
    let spec: String = row.get(3)?;
    let tz_name: String = row.get(4)?;
    let schedule = match kind.as_str() {
        "at" => Schedule::At(instant(row, 3)?),
        "every" => Schedule::Every {
            interval: Duration::from_secs(
                spec.parse()
                    .map_err(|_| bad_column(3, format!("bad interval {spec:?}")))?,
            ),
            anchor: instant(row, 5)?,
        },
        _ => Schedule::Cron {
            expr: spec,
            tz: tz_name
                .parse::<Tz>()
                .map_err(|_| bad_column(4, format!("bad time zone {tz_name:?}")))?,
        },
    };
    let session: String = row.get(7)?;
    let fresh: bool = row.get(8)?;
    let next: Option<String> = row.get(11)?;
    let running: Option<i64> = row.get(13)?;
    Ok(Job {
        id: row.get(0)?,
        name: row.get(1)?,
        schedule,
        prompt: row.get(6)?,
        target: if fresh {
            Target::Fresh { reply_to: session }
        } else {
            Target::Session(session)
        },
        delete_after_run: row.get(9)?,
        enabled: row.get(10)?,
        next_run_at: next.as_deref().and_then(parse_ts),
        failures: row.get(12)?,
        running: running.is_some(),
        created_at: instant(row, 14)?,
        created_by: row.get(15)?,
        untrusted: {
            let text: String = row.get(16)?;
            // Unreadable: the job is treated as tainted rather than clean.
            serde_json::from_str(&text).unwrap_or_else(|_| vec![format!("job {text:?}")])
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        parse_ts(s).unwrap()
    }

    fn new_job(first: DateTime<Utc>) -> NewJob {
        NewJob {
            name: "stretch".into(),
            schedule: Schedule::Cron {
                expr: "0 9 * * *".into(),
                tz: "Europe/Berlin".parse().unwrap(),
            },
            prompt: "remind me to stretch".into(),
            target: Target::Fresh {
                reply_to: "telegram:42".into(),
            },
            delete_after_run: false,
            first_run: first,
            created_by: "test".into(),
            untrusted: Vec::new(),
        }
    }

    #[test]
    fn jobs_round_trip_and_the_limit_holds() {
        let store = JobStore::new(crate::schema::open_in_memory().unwrap());
        let now = at("2026-11-21T07:00:00Z");
        let job = store
            .insert(&new_job(at("2026-11-21T08:00:00Z")), now, 2)
            .unwrap();
        assert_eq!(job.name, "stretch");
        assert_eq!(job.next_run_at, Some(at("2026-11-21T08:00:00Z")));
        assert_eq!(
            job.target,
            Target::Fresh {
                reply_to: "telegram:42".into()
            }
        );
        assert_eq!(job.schedule, new_job(now).schedule);
        assert!(job.enabled && !job.running && job.failures == 0);
        store.insert(&new_job(now), now, 2).unwrap();
        assert_eq!(
            store.insert(&new_job(now), now, 2).unwrap_err(),
            JobError::TooManyJobs(2)
        );
        assert!(store.remove(job.id).unwrap());
        assert!(!store.remove(job.id).unwrap());
        // Ids are never reused, so an old id in a chat message cannot name a new job.
        let again = store.insert(&new_job(now), now, 2).unwrap();
        assert!(again.id > job.id + 1);
    }

    #[test]
    fn make_due_refuses_unknown_and_running_jobs() {
        let store = JobStore::new(crate::schema::open_in_memory().unwrap());
        let slot = at("2026-11-21T08:00:00Z");
        let now = at("2026-11-21T07:00:00Z");
        assert_eq!(
            store.make_due(99, now).unwrap_err(),
            JobError::UnknownJob(99)
        );
        let job = store.insert(&new_job(slot), now, 10).unwrap();
        let due = store.make_due(job.id, now).unwrap();
        assert_eq!(due.next_run_at, Some(now));
        store.claim(job.id, now, now).unwrap();
        assert_eq!(
            store.make_due(job.id, now).unwrap_err(),
            JobError::Running(job.id)
        );
    }
}
