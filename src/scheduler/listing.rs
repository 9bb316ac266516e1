//! A job as JSON, the one shape `warden cron list --json` prints and `GET /v1/jobs` answers.

use super::job::{Job, Target};
use super::schedule::{format_duration, Schedule};
use serde_json::{json, Value};

pub fn job_json(job: &Job) -> Value {
    let (spec, timezone) = match &job.schedule {
        Schedule::At(at) => (at.to_rfc3339(), None),
        Schedule::Every { interval, .. } => (format_duration(*interval), None),
        Schedule::Cron { expr, tz } => (expr.clone(), Some(tz.name())),
    };
    json!({
        "id": job.id,
        "name": job.name,
        "kind": job.schedule.kind(),
        "spec": spec,
        "timezone": timezone,
        "prompt": job.prompt,
        "session": job.target.chat_session(),
        "fresh_session": matches!(job.target, Target::Fresh { .. }),
        "delete_after_run": job.delete_after_run,
        "enabled": job.enabled,
        "next_run_at": job.next_run_at.map(|t| t.to_rfc3339()),
        "failures": job.failures,
        "running": job.running,
    })
}
