//! Run history: each run of a job, from the slot it was for to how it ended.
//!
//! A run is recorded as `running` — and its job marked busy — in one transaction *before* the
//! prompt is delivered, and each (job, slot) pair can be recorded once (a UNIQUE key). So a
//! crash between delivering and recording never makes a slot run twice: at the next start the
//! run is found `running`, marked `interrupted`, and the job moves on to its next slot.

use super::job::{Job, JobId};
use super::store::{instant, parse_ts, ts, JobStore, JOB_COLUMNS};
use crate::db::DbError;
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension, Row, TransactionBehavior};

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

impl JobStore {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::scheduler::job::{NewJob, Target};
    use crate::scheduler::schedule::Schedule;

    fn at(s: &str) -> DateTime<Utc> {
        parse_ts(s).unwrap()
    }

    fn new_job(first: DateTime<Utc>) -> NewJob {
        NewJob {
            name: "stretch".into(),
            schedule: Schedule::Cron {
                expr: "0 9 * * *".into(),
                tz: chrono_tz::Europe::Berlin,
            },
            prompt: "remind me to stretch".into(),
            target: Target::Session("telegram:42".into()),
            delete_after_run: false,
            first_run: first,
            created_by: "test".into(),
            untrusted: Vec::new(),
        }
    }

    #[test]
    fn a_slot_is_claimed_once_and_a_busy_job_is_not_due() {
        let store = JobStore::new(crate::schema::open_in_memory().unwrap());
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
        let store = JobStore::new(crate::schema::open_in_memory().unwrap());
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
}
