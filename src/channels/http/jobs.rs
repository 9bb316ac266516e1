//! `GET|POST /v1/jobs`, `GET|DELETE /v1/jobs/{id}` (and `DELETE /v1/jobs?id=ID`): the scheduled jobs, as `warden cron`
//! lists, adds and removes them — the same [`JobManager`], so the same checks (schedule,
//! minimum interval, prompt length, job limit) refuse the same things in the same words.
//! A job added here runs on an API thread: its answers are that thread's runs.

use super::routes::{body, ApiError, Shared};
use super::threads::check_name;
use crate::scheduler::listing::job_json;
use crate::scheduler::{JobError, JobRequest, Target};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

/// Who made a job added over the API (its `created_by`).
pub const CREATED_BY: &str = "http";

type Answer = Result<Response, ApiError>;

/// A job's refusal: bad input 400, unknown 404, not now 409.
fn refused(e: JobError) -> ApiError {
    let status = match &e {
        JobError::UnknownJob(_) => StatusCode::NOT_FOUND,
        JobError::Running(_) | JobError::TooManyJobs(_) => StatusCode::CONFLICT,
        JobError::Store(why) => {
            tracing::error!("HTTP API: jobs: {why}");
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::BAD_REQUEST,
    };
    ApiError::new(status, e.to_string())
}

fn job_id(text: &str) -> Result<i64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, format!("no job {text:?}")))
}

pub async fn list(State(api): Shared) -> Answer {
    let jobs = api.jobs.list().map_err(refused)?;
    let jobs: Vec<_> = jobs.iter().map(job_json).collect();
    Ok(Json(json!({ "jobs": jobs })).into_response())
}

pub async fn get(State(api): Shared, Path(id): Path<String>) -> Answer {
    let job = api.jobs.get(job_id(&id)?).map_err(refused)?;
    Ok(Json(job_json(&job)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewJob {
    /// The API thread the job runs on (created on first use).
    thread: String,
    prompt: String,
    name: Option<String>,
    at: Option<String>,
    every: Option<String>,
    cron: Option<String>,
    timezone: Option<String>,
    /// A fresh session for every run; its answer is still a run of `thread`.
    #[serde(default)]
    fresh_session: bool,
    /// Keep a one-shot job after it ran.
    #[serde(default)]
    keep: bool,
}

pub async fn add(State(api): Shared, job: Result<Json<NewJob>, JsonRejection>) -> Answer {
    let job = body(job)?;
    check_name(&job.thread).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
    let chat = api.threads.chat_of(&job.thread)?;
    let session = api.gateway.session_key(chat);
    let target = if job.fresh_session {
        Target::Fresh { reply_to: session }
    } else {
        Target::Session(session)
    };
    let added = api
        .jobs
        .add(JobRequest {
            name: job.name,
            at: job.at,
            every: job.every,
            cron: job.cron,
            timezone: job.timezone,
            prompt: job.prompt,
            target: Some(target),
            delete_after_run: job.keep.then_some(false),
            created_by: CREATED_BY.into(),
            // The token is the owner's: the prompt is the owner's words.
            untrusted: Vec::new(),
        })
        .map_err(refused)?;
    Ok((StatusCode::CREATED, Json(job_json(&added))).into_response())
}

pub async fn remove(State(api): Shared, Path(id): Path<String>) -> Answer {
    let job = api.jobs.remove(job_id(&id)?).map_err(refused)?;
    Ok(Json(job_json(&job)).into_response())
}

#[derive(Deserialize)]
pub struct JobQuery {
    id: Option<String>,
}

/// `DELETE /v1/jobs?id=ID`: the same as `DELETE /v1/jobs/{id}`.
pub async fn remove_by_query(State(api): Shared, Query(query): Query<JobQuery>) -> Answer {
    let Some(id) = query.id.filter(|id| !id.is_empty()) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "say which job: DELETE /v1/jobs?id=ID (or /v1/jobs/ID)",
        ));
    };
    let job = api.jobs.remove(job_id(&id)?).map_err(refused)?;
    Ok(Json(job_json(&job)).into_response())
}
