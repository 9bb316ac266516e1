//! Jobs and their run history in the one SQLite database.
//!
//! A run is recorded as `running` — and the job marked busy — in one transaction *before* the
//! prompt is delivered, and each (job, slot) pair can be recorded once (a UNIQUE key). So a
//! crash between delivering and recording never makes a slot run twice: at the next start
//! the run is found `running`, marked `interrupted`, and the job moves on to its next slot.

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

/// Runs kept per job; older ones are pruned when a run finishes.
const RUNS_KEPT: i64 = 20;
/// Longest answer or error kept in the history (characters).
const DETAIL_CHARS: usize = 2000;

pub type RunId = i64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Ok,
    Error,
    /// warden stopped while the run was in progress; the slot is not repeated.
    Interrupted,
}

impl RunStatus {
    fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Interrupted => "interrupted",
        }
    }

    fn parse(s: &str) -> RunStatus {
        match s {
            "running" => RunStatus::Running,
            "ok" => RunStatus::Ok,
            "error" => RunStatus::Error,
            _ => RunStatus::Interrupted,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub id: RunId,
    pub job_id: JobId,
    /// The scheduled instant this run was for.
    pub slot: DateTime<Utc>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub status: RunStatus,
    /// The answer (ok) or the error.
    pub detail: Option<String>,
}

/// The result of trying to start a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    Started(RunId),
    /// This slot was recorded before: it is never run again.
    AlreadyRan,
    /// The job was removed, disabled, rescheduled or is running.
    Gone,
}

/// What happens to a job after a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Reschedule {
        next_run_at: Option<DateTime<Utc>>,
        failures: u32,
        enabled: bool,
    },
    Delete,
}

#[derive(Clone)]
pub struct JobStore {
    db: Arc<Database>,
}

const JOB_COLUMNS: &str =
    "id, name, kind, spec, timezone, anchor, prompt, session, fresh_session, \
     delete_after_run, enabled, next_run_at, failures, running_run, created_at, created_by";

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
                 fresh_session, delete_after_run, next_run_at, created_at, created_by)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
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

    /// Jobs marked running: after a restart, their runs were interrupted.
    pub fn running(&self) -> Result<Vec<(Job, RunRecord)>, DbError> {
        let jobs = self.query(
            &format!(
                "SELECT {JOB_COLUMNS} FROM cron_jobs WHERE running_run IS NOT NULL ORDER BY id"
            ),
            [],
        )?;
        let mut out = Vec::new();
        for job in jobs {
            let conn = self.db.conn();
            let run = conn
                .query_row(
                    "SELECT r.id, r.job_id, r.slot, r.started_at, r.finished_at, r.status, r.detail
                     FROM cron_runs r JOIN cron_jobs j ON j.running_run = r.id WHERE j.id = ?1",
                    [job.id],
                    run_from_row,
                )
                .optional()?;
            drop(conn);
            if let Some(run) = run {
                out.push((job, run));
            }
        }
        Ok(out)
    }

    pub fn count(&self) -> Result<usize, DbError> {
        let n: i64 = self
            .db
            .conn()
            .query_row("SELECT COUNT(*) FROM cron_jobs", [], |r| r.get(0))?;
        Ok(n as usize)
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

    /// Record that `slot` of job `id` starts now — before anything is delivered.
    pub fn claim(
        &self,
        id: JobId,
        slot: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Claim, DbError> {
        let mut conn = self.db.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let state: Option<(bool, Option<i64>, Option<String>)> = tx
            .query_row(
                "SELECT enabled, running_run, next_run_at FROM cron_jobs WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        match state {
            Some((true, None, Some(next))) if next == ts(slot) => {}
            _ => return Ok(Claim::Gone),
        }
        let inserted = tx.execute(
            "INSERT INTO cron_runs (job_id, slot, started_at, status) VALUES (?1, ?2, ?3, 'running')",
            params![id, ts(slot), ts(now)],
        );
        match inserted {
            Ok(_) => {}
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                return Ok(Claim::AlreadyRan)
            }
            Err(e) => return Err(e.into()),
        }
        let run = tx.last_insert_rowid();
        tx.execute(
            "UPDATE cron_jobs SET running_run = ?2 WHERE id = ?1",
            params![id, run],
        )?;
        tx.commit()?;
        Ok(Claim::Started(run))
    }

    /// Record how run `run` of job `id` ended and what the job does next.
    pub fn finish(
        &self,
        id: JobId,
        run: RunId,
        status: RunStatus,
        detail: &str,
        next: Next,
        now: DateTime<Utc>,
    ) -> Result<(), DbError> {
        let detail: String = detail.chars().take(DETAIL_CHARS).collect();
        let mut conn = self.db.conn();
        let tx = conn.transaction()?;
        tx.execute(
            "UPDATE cron_runs SET status = ?2, detail = ?3, finished_at = ?4 WHERE id = ?1",
            params![run, status.as_str(), detail, ts(now)],
        )?;
        apply_next(&tx, id, next)?;
        tx.execute(
            "DELETE FROM cron_runs WHERE job_id = ?1 AND id NOT IN
                 (SELECT id FROM cron_runs WHERE job_id = ?1 ORDER BY id DESC LIMIT ?2)",
            params![id, RUNS_KEPT],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Move a job on without a run (a slot that was already recorded).
    pub fn reschedule(&self, id: JobId, next: Next) -> Result<(), DbError> {
        let mut conn = self.db.conn();
        let tx = conn.transaction()?;
        apply_next(&tx, id, next)?;
        tx.commit()?;
        Ok(())
    }

    /// Recent runs of a job, newest first.
    pub fn runs(&self, id: JobId, limit: usize) -> Result<Vec<RunRecord>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(
            "SELECT id, job_id, slot, started_at, finished_at, status, detail FROM cron_runs
             WHERE job_id = ?1 ORDER BY id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![id, limit as i64], run_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn query<P: rusqlite::Params>(&self, sql: &str, params: P) -> Result<Vec<Job>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map(params, job_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

fn apply_next(
    tx: &rusqlite::Transaction<'_>,
    id: JobId,
    next: Next,
) -> Result<(), rusqlite::Error> {
    match next {
        Next::Delete => {
            tx.execute("DELETE FROM cron_jobs WHERE id = ?1", [id])?;
            tx.execute("DELETE FROM cron_runs WHERE job_id = ?1", [id])?;
        }
        Next::Reschedule {
            next_run_at,
            failures,
            enabled,
        } => {
            tx.execute(
                "UPDATE cron_jobs SET running_run = NULL, next_run_at = ?2, failures = ?3,
                     enabled = ?4 WHERE id = ?1",
                params![id, next_run_at.map(ts), failures, enabled],
            )?;
        }
    }
    Ok(())
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

fn instant(row: &Row<'_>, index: usize) -> Result<DateTime<Utc>, rusqlite::Error> {
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
    })
}

fn run_from_row(row: &Row<'_>) -> Result<RunRecord, rusqlite::Error> {
    let finished: Option<String> = row.get(4)?;
    let status: String = row.get(5)?;
    Ok(RunRecord {
        id: row.get(0)?,
        job_id: row.get(1)?,
        slot: instant(row, 2)?,
        started_at: instant(row, 3)?,
        finished_at: finished.as_deref().and_then(parse_ts),
        status: RunStatus::parse(&status),
        detail: row.get(6)?,
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
        }
    }

    #[test]
    fn jobs_round_trip_and_the_limit_holds() {
        let store = JobStore::new(Database::open_in_memory().unwrap());
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
    fn a_slot_is_claimed_once_and_a_busy_job_is_not_due() {
        let store = JobStore::new(Database::open_in_memory().unwrap());
        let slot = at("2026-11-21T08:00:00Z");
        let job = store
            .insert(&new_job(slot), at("2026-11-21T07:00:00Z"), 10)
            .unwrap();
        assert!(store.due(at("2026-11-21T07:59:59Z")).unwrap().is_empty());
        assert_eq!(store.due(slot).unwrap().len(), 1);
        let Claim::Started(run) = store.claim(job.id, slot, slot).unwrap() else {
            panic!("not started");
        };
        assert_eq!(store.claim(job.id, slot, slot).unwrap(), Claim::Gone);
        assert!(store.due(slot).unwrap().is_empty());
        assert_eq!(store.next_due_at().unwrap(), None);
        assert_eq!(store.running().unwrap().len(), 1);
        // Even if the job were put back on the same slot, the history refuses it.
        store
            .reschedule(
                job.id,
                Next::Reschedule {
                    next_run_at: Some(slot),
                    failures: 0,
                    enabled: true,
                },
            )
            .unwrap();
        assert_eq!(store.claim(job.id, slot, slot).unwrap(), Claim::AlreadyRan);
        let next = at("2026-11-22T08:00:00Z");
        store
            .finish(
                job.id,
                run,
                RunStatus::Ok,
                "done",
                Next::Reschedule {
                    next_run_at: Some(next),
                    failures: 0,
                    enabled: true,
                },
                slot,
            )
            .unwrap();
        let runs = store.runs(job.id, 10).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].status, RunStatus::Ok);
        assert_eq!(runs[0].detail.as_deref(), Some("done"));
        assert_eq!(store.next_due_at().unwrap(), Some(next));
    }

    #[test]
    fn history_is_pruned_and_delete_removes_it() {
        let store = JobStore::new(Database::open_in_memory().unwrap());
        let mut slot = at("2026-11-21T08:00:00Z");
        let job = store.insert(&new_job(slot), slot, 10).unwrap();
        for _ in 0..(RUNS_KEPT + 5) {
            let Claim::Started(run) = store.claim(job.id, slot, slot).unwrap() else {
                panic!("not started");
            };
            let next = slot + chrono::Duration::days(1);
            store
                .finish(
                    job.id,
                    run,
                    RunStatus::Error,
                    "boom",
                    Next::Reschedule {
                        next_run_at: Some(next),
                        failures: 1,
                        enabled: true,
                    },
                    slot,
                )
                .unwrap();
            slot = next;
        }
        assert_eq!(store.runs(job.id, 100).unwrap().len(), RUNS_KEPT as usize);
        let Claim::Started(run) = store.claim(job.id, slot, slot).unwrap() else {
            panic!("not started");
        };
        store
            .finish(job.id, run, RunStatus::Ok, "", Next::Delete, slot)
            .unwrap();
        assert_eq!(store.get(job.id).unwrap(), None);
        assert!(store.runs(job.id, 100).unwrap().is_empty());
    }

    #[test]
    fn make_due_refuses_unknown_and_running_jobs() {
        let store = JobStore::new(Database::open_in_memory().unwrap());
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
