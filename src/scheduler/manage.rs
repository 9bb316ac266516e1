//! The operations the cron tool and `warden cron` share: validate and store a job, list,
//! remove, run now, status. Each change wakes the runner in this process so its timer is
//! re-armed; a runner in another process (`warden bot`) notices within its rescan interval.

use super::job::{validate, Job, JobError, JobId, JobRequest, Limits};
use super::runs::RunRecord;
use super::store::JobStore;
use crate::clock::Clock;
use crate::db::Database;
use std::sync::Arc;
use tokio::sync::Notify;

pub struct JobManager {
    store: JobStore,
    clock: Arc<dyn Clock>,
    limits: Limits,
    wake: Arc<Notify>,
}

impl JobManager {
    pub fn new(db: Arc<Database>, clock: Arc<dyn Clock>, limits: Limits) -> JobManager {
        JobManager {
            store: JobStore::new(db),
            clock,
            limits,
            wake: Arc::new(Notify::new()),
        }
    }

    pub fn store(&self) -> &JobStore {
        &self.store
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Notified on every change; the runner waits on it beside its timer.
    pub fn wake(&self) -> &Arc<Notify> {
        &self.wake
    }

    pub fn add(&self, request: JobRequest) -> Result<Job, JobError> {
        let now = self.clock.now();
        let job = validate(request, now, &self.limits)?;
        let stored = self.store.insert(&job, now, self.limits.max_jobs)?;
        self.wake.notify_one();
        Ok(stored)
    }

    /// Check `request` without adding it: how it would be scheduled and where it would
    /// answer (`every 1h → telegram:42`), for an approval.
    pub fn describe(&self, request: JobRequest, tz: chrono_tz::Tz) -> Result<String, JobError> {
        let job = validate(request, self.clock.now(), &self.limits)?;
        Ok(format!(
            "{:?} {} → {}",
            job.name,
            job.schedule.describe(tz),
            job.target.describe()
        ))
    }

    pub fn list(&self) -> Result<Vec<Job>, JobError> {
        self.store.list().map_err(store_error)
    }

    /// Remove a job; returns it as it was.
    pub fn remove(&self, id: JobId) -> Result<Job, JobError> {
        let job = self.get(id)?;
        self.store.remove(id).map_err(store_error)?;
        self.wake.notify_one();
        Ok(job)
    }

    /// Make the job due now; it runs as soon as the runner sees it (its own slot, recorded in
    /// the history like any other). Recurring jobs then continue with their schedule.
    pub fn run_now(&self, id: JobId) -> Result<Job, JobError> {
        let job = self.store.make_due(id, self.clock.now())?;
        self.wake.notify_one();
        Ok(job)
    }

    pub fn get(&self, id: JobId) -> Result<Job, JobError> {
        self.store
            .get(id)
            .map_err(store_error)?
            .ok_or(JobError::UnknownJob(id))
    }

    /// A job and its recent runs, newest first.
    pub fn status(&self, id: JobId, runs: usize) -> Result<(Job, Vec<RunRecord>), JobError> {
        let job = self.get(id)?;
        let history = self.store.runs(id, runs).map_err(store_error)?;
        Ok((job, history))
    }
}

fn store_error(e: crate::db::DbError) -> JobError {
    JobError::Store(e.to_string())
}
