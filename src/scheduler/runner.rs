//! The timer loop: one timer armed for the soonest job, re-armed when jobs change. A due job
//! is claimed in the store (recorded as running), delivered, and then rescheduled:
//! - after a success, to its next slot after *now* — so a job missed during downtime runs
//!   once, not once per missed slot; a one-shot job is deleted (`delete_after_run`) or
//!   finished;
//! - after a failure, to now + backoff (base, doubling, capped); recurring jobs keep retrying
//!   that way and return to their schedule after a success, one-shot jobs give up after
//!   `one_shot_attempts`.

use super::deliver::{Deliver, DeliverError, Delivery, Origin};
use super::job::{Job, Target};
use super::manage::JobManager;
use super::runs::{Claim, Next, RunId, RunStatus};
use super::schedule::{backoff, Schedule};
use super::store::JobStore;
use crate::clock::Clock;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The runner re-reads the store at least this often: jobs added by another process
/// (`warden cron add` beside a running bot), and a wall clock that jumped or a machine that
/// slept, are noticed within this time. Not polling for work: one cheap query.
pub const RESCAN: Duration = Duration::from_secs(30);

/// How failed runs are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// Runs a one-shot job gets (the first included) before it is given up.
    pub one_shot_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            backoff_base: Duration::from_secs(30),
            backoff_max: Duration::from_secs(3600),
            one_shot_attempts: 3,
        }
    }
}

/// How one run ended (for tests and logs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ran {
    pub job: i64,
    pub run: RunId,
    pub slot: DateTime<Utc>,
    pub status: RunStatus,
    pub next: Next,
}

pub struct Runner {
    store: JobStore,
    clock: Arc<dyn Clock>,
    wake: Arc<Notify>,
    deliver: Arc<dyn Deliver>,
    retry: RetryPolicy,
    /// For the times named in a job's prompt.
    tz: Tz,
}

impl Runner {
    pub fn new(
        jobs: &JobManager,
        deliver: Arc<dyn Deliver>,
        retry: RetryPolicy,
        tz: Tz,
    ) -> Arc<Runner> {
        Arc::new(Runner {
            store: jobs.store().clone(),
            clock: jobs.clock().clone(),
            wake: jobs.wake().clone(),
            deliver,
            retry,
            tz,
        })
    }

    /// After a restart: runs still marked running were cut off. They are recorded as
    /// interrupted and their jobs move on to the next slot — the slot is not run again.
    pub fn recover(&self) -> Result<usize, crate::db::DbError> {
        let now = self.clock.now();
        let cut_off = self.store.running()?;
        for (job, run) in &cut_off {
            let next = match job.schedule {
                Schedule::At(_) => Next::Reschedule {
                    next_run_at: None,
                    failures: job.failures,
                    enabled: false,
                },
                _ => Next::Reschedule {
                    next_run_at: job.schedule.next_after(now.max(run.slot)),
                    failures: job.failures,
                    enabled: true,
                },
            };
            tracing::warn!(job = job.id, slot = %run.slot, "run interrupted by a restart; not repeated");
            self.store.finish(
                job.id,
                run.id,
                RunStatus::Interrupted,
                "warden stopped during this run; this slot is not run again",
                next,
                now,
            )?;
        }
        Ok(cut_off.len())
    }

    /// The loop: until `shutdown`, start every due job and sleep until the next one (or a
    /// change, or [`RESCAN`]). Runs go on in their own tasks, so a run waiting behind a long
    /// conversation in one chat does not hold up jobs for other chats.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        if let Err(e) = self.recover() {
            tracing::error!("scheduler recovery failed: {e}");
        }
        loop {
            drop(self.start_due());
            let now = self.clock.now();
            let next = self.store.next_due_at().unwrap_or_else(|e| {
                tracing::error!("scheduler: reading the next job failed: {e}");
                None
            });
            let rescan = now + chrono::Duration::from_std(RESCAN).unwrap_or_default();
            // A slot still in the past here could not be started (a store error): wait a
            // moment instead of spinning on it.
            let deadline = match next {
                Some(t) if t <= now => now + chrono::Duration::seconds(1),
                Some(t) => t.min(rescan),
                None => rescan,
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.wake.notified() => {}
                _ = self.clock.sleep_until(deadline) => {}
            }
        }
    }

    /// Claim every due job and run them concurrently; return when all have finished.
    pub async fn run_due(self: &Arc<Self>) -> Vec<Ran> {
        let mut ran = Vec::new();
        for task in self.start_due() {
            if let Ok(Some(r)) = task.await {
                ran.push(r);
            }
        }
        ran
    }

    /// Claim every due job and start each in its own task.
    fn start_due(self: &Arc<Self>) -> Vec<tokio::task::JoinHandle<Option<Ran>>> {
        let now = self.clock.now();
        let due = match self.store.due(now) {
            Ok(due) => due,
            Err(e) => {
                tracing::error!("scheduler: reading due jobs failed: {e}");
                return Vec::new();
            }
        };
        let mut tasks = Vec::new();
        for job in due {
            let Some(slot) = job.next_run_at else {
                continue;
            };
            match self.store.claim(job.id, slot, now) {
                Ok(Claim::Started(run)) => {
                    let runner = self.clone();
                    tasks.push(tokio::spawn(async move {
                        let ran = runner.execute(job, run, slot).await;
                        runner.wake.notify_one();
                        ran
                    }));
                }
                Ok(Claim::AlreadyRan) => {
                    tracing::warn!(job = job.id, %slot, "slot already ran; skipping to the next");
                    let next = self.after_success(&job, slot, now);
                    if let Err(e) = self.store.reschedule(job.id, next) {
                        tracing::error!(job = job.id, "rescheduling failed: {e}");
                    }
                }
                Ok(Claim::Gone) => {}
                Err(e) => tracing::error!(job = job.id, "claiming a run failed: {e}"),
            }
        }
        tasks
    }

    async fn execute(&self, job: Job, run: RunId, slot: DateTime<Utc>) -> Option<Ran> {
        let session = match &job.target {
            Target::Session(s) => s.clone(),
            Target::Fresh { .. } => format!("cron:{}:{run}", job.id),
        };
        let delivery = Delivery {
            origin: Origin::Job {
                id: job.id,
                name: job.name.clone(),
            },
            key: format!("cron:{}:{}", job.id, slot.to_rfc3339()),
            session,
            chat_session: job.target.chat_session().to_string(),
            prompt: self.job_prompt(&job, slot),
            untrusted: job.untrusted.clone(),
            send_if: None,
        };
        tracing::info!(job = job.id, %slot, "running scheduled job");
        // A panicking deliverer must not leave the job marked running until the next restart.
        let result = AssertUnwindSafe(self.deliver.deliver(delivery))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                Err(DeliverError::Failed(
                    "the delivery failed internally (panic)".into(),
                ))
            });
        let now = self.clock.now();
        let (status, detail, next) = match result {
            Ok(delivered) => (
                RunStatus::Ok,
                delivered.answer,
                self.after_success(&job, slot, now),
            ),
            Err(DeliverError::Closed) => {
                // Left `running`: the next start records it as interrupted and moves on.
                tracing::info!(job = job.id, "shutting down during a scheduled run");
                return None;
            }
            Err(DeliverError::Failed(reason)) => {
                tracing::warn!(job = job.id, "scheduled run failed: {reason}");
                (RunStatus::Error, reason, self.after_failure(&job, now))
            }
        };
        if let Err(e) = self.store.finish(job.id, run, status, &detail, next, now) {
            tracing::error!(job = job.id, "recording a finished run failed: {e}");
            return None;
        }
        Some(Ran {
            job: job.id,
            run,
            slot,
            status,
            next,
        })
    }

    fn after_success(&self, job: &Job, slot: DateTime<Utc>, now: DateTime<Utc>) -> Next {
        match job.schedule {
            Schedule::At(_) if job.delete_after_run => Next::Delete,
            Schedule::At(_) => Next::Reschedule {
                next_run_at: None,
                failures: 0,
                enabled: false,
            },
            _ => Next::Reschedule {
                next_run_at: job.schedule.next_after(now.max(slot)),
                failures: 0,
                enabled: true,
            },
        }
    }

    fn after_failure(&self, job: &Job, now: DateTime<Utc>) -> Next {
        let failures = job.failures.saturating_add(1);
        if job.schedule.is_one_shot() && failures >= self.retry.one_shot_attempts {
            return Next::Reschedule {
                next_run_at: None,
                failures,
                enabled: false,
            };
        }
        let wait = backoff(failures, self.retry.backoff_base, self.retry.backoff_max);
        Next::Reschedule {
            next_run_at: Some(now + chrono::Duration::from_std(wait).unwrap_or_default()),
            failures,
            enabled: true,
        }
    }

    /// The prompt as the model sees it: which job, which slot, and the time now, so a late
    /// run (after downtime) knows it is late.
    fn job_prompt(&self, job: &Job, slot: DateTime<Utc>) -> String {
        let fmt = |t: DateTime<Utc>| {
            t.with_timezone(&self.tz)
                .format("%Y-%m-%d %H:%M %Z")
                .to_string()
        };
        format!(
            "[Scheduled job #{} {:?} ({}), due {}, now {}. This message comes from the \
             scheduler, not typed by the user now.]\n\n{}",
            job.id,
            job.name,
            job.schedule.describe(self.tz),
            fmt(slot),
            fmt(self.clock.now()),
            job.prompt
        )
    }
}
