//! The API's endpoints. Every answer is JSON; every refusal is `{"error": "<why, in words>"}`
//! with a status that says what kind (400 bad input, 401 no/wrong token, 404 unknown, 409
//! not possible in this state, 413 too large, 429 too many, 503 shutting down).

use super::approvals::Answered;
use super::runs::{RunView, Status};
use super::threads::{check_name, Threads};
use super::Api;
use crate::gateway::{Cancelled, Origin, Submission, SubmitError};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// API messages are the owner's words (the token is the owner's); this is their user id.
pub const API_USER: i64 = 0;
/// The longest idempotency key.
const MAX_KEY: usize = 200;
/// Most runs one `GET /v1/runs` lists.
const MAX_LIST: usize = 500;

pub type Shared = State<Arc<Api>>;

pub fn error(status: StatusCode, why: impl Into<String>) -> Response {
    (status, Json(json!({ "error": why.into() }))).into_response()
}

fn internal(e: impl std::fmt::Display) -> Response {
    tracing::error!("HTTP API: {e}");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("warden failed: {e}"),
    )
}

pub async fn healthz() -> Json<Value> {
    Json(json!({ "ok": true }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    thread: String,
    text: String,
    idempotency_key: Option<String>,
}

/// A JSON body, or the JSON error that says what is wrong with it (413 when too large).
fn body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, Response> {
    // A well-formed body of the wrong shape is a bad request too (axum says 422).
    body.map(|Json(t)| t).map_err(|r| match r.status() {
        StatusCode::UNPROCESSABLE_ENTITY => error(StatusCode::BAD_REQUEST, r.body_text()),
        status => error(status, r.body_text()),
    })
}

pub async fn post_message(
    State(api): Shared,
    m: Result<Json<NewMessage>, JsonRejection>,
) -> Response {
    let m = match body(m) {
        Ok(m) => m,
        Err(r) => return r,
    };
    if let Err(why) = check_name(&m.thread) {
        return error(StatusCode::BAD_REQUEST, why);
    }
    if m.text.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "text is empty");
    }
    if let Some(key) = &m.idempotency_key {
        if key.is_empty() || key.len() > MAX_KEY {
            return error(
                StatusCode::BAD_REQUEST,
                format!("idempotency_key has 1 to {MAX_KEY} characters"),
            );
        }
    }
    let chat = match api.threads.chat_of(&m.thread) {
        Ok(chat) => chat,
        Err(e) => return internal(e),
    };
    let mut submission = Submission::text(chat, Origin::User { user_id: API_USER }, m.text);
    if let Some(key) = &m.idempotency_key {
        submission = submission.dedup_key(format!("http:{key}"));
    }
    let handle = match api.gateway.submit(submission) {
        Ok(handle) => handle,
        Err(SubmitError::Busy { queued }) => {
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                format!("{queued} messages already wait in thread {}", m.thread),
            )
        }
        Err(SubmitError::ShuttingDown) => {
            return error(StatusCode::SERVICE_UNAVAILABLE, "warden is shutting down")
        }
        Err(SubmitError::Store(e)) => return internal(e),
    };
    match api.run(handle.run_id) {
        Ok(Some(run)) => (
            StatusCode::ACCEPTED,
            Json(json!({ "run_id": run.id, "status": run.status })),
        )
            .into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "the run vanished"),
        Err(e) => internal(e),
    }
}

fn run_id(text: &str) -> Result<i64, Response> {
    text.parse()
        .map_err(|_| error(StatusCode::NOT_FOUND, format!("no run {text:?}")))
}

pub async fn get_run(State(api): Shared, Path(id): Path<String>) -> Response {
    let id = match run_id(&id) {
        Ok(id) => id,
        Err(r) => return r,
    };
    match api.run(id) {
        Ok(Some(run)) => Json(run).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no run {id}")),
        Err(e) => internal(e),
    }
}

#[derive(Deserialize)]
pub struct RunFilter {
    thread: Option<String>,
    status: Option<String>,
    limit: Option<usize>,
}

pub async fn list_runs(State(api): Shared, Query(filter): Query<RunFilter>) -> Response {
    let status = match filter.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => match Status::parse(text) {
            Some(status) => Some(status),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("status is one of {}", Status::ALL.join(", ")),
                )
            }
        },
    };
    let chat = match filter.thread.as_deref().filter(|t| !t.is_empty()) {
        None => None,
        Some(name) => match api.threads.find(name) {
            Ok(Some(chat)) => Some(chat),
            Ok(None) => return Json(json!({ "runs": [] })).into_response(),
            Err(e) => return internal(e),
        },
    };
    let limit = filter.limit.unwrap_or(100).clamp(1, MAX_LIST);
    // A status filter is applied to the newest rows, so look further back for it.
    let scan = if status.is_some() {
        MAX_LIST * 4
    } else {
        limit
    };
    let rows = match api.store.recent(chat, Threads::CHATS_BELOW, scan) {
        Ok(rows) => rows,
        Err(e) => return internal(e),
    };
    let mut runs: Vec<RunView> = Vec::new();
    for row in rows {
        let run = match api.view(&row) {
            Ok(run) => run,
            Err(e) => return internal(e),
        };
        if status.is_none_or(|s| s == run.status) {
            runs.push(run);
        }
        if runs.len() >= limit {
            break;
        }
    }
    Json(json!({ "runs": runs })).into_response()
}

pub async fn cancel_run(State(api): Shared, Path(id): Path<String>) -> Response {
    let id = match run_id(&id) {
        Ok(id) => id,
        Err(r) => return r,
    };
    match api.run(id) {
        Ok(Some(_)) => {}
        Ok(None) => return error(StatusCode::NOT_FOUND, format!("no run {id}")),
        Err(e) => return internal(e),
    }
    let outcome = match api.gateway.cancel(id).await {
        Ok(outcome) => outcome,
        Err(e) => return internal(e),
    };
    let code = match outcome {
        Cancelled::NotFound => return error(StatusCode::NOT_FOUND, format!("no run {id}")),
        Cancelled::Finished => {
            return error(StatusCode::CONFLICT, format!("run {id} has ended already"))
        }
        Cancelled::Starting => {
            return error(
                StatusCode::CONFLICT,
                format!("run {id} is starting right now: ask again in a moment"),
            )
        }
        Cancelled::Dropped => StatusCode::OK,
        // It stops at its next step (a running command is killed): poll the run.
        Cancelled::Aborting => StatusCode::ACCEPTED,
    };
    match api.run(id) {
        Ok(Some(run)) => (code, Json(run)).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no run {id}")),
        Err(e) => internal(e),
    }
}

pub async fn list_approvals(State(api): Shared) -> Response {
    Json(json!({ "approvals": api.inbox.list() })).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    decision: String,
}

pub async fn answer_approval(
    State(api): Shared,
    Path(id): Path<String>,
    decision: Result<Json<Decision>, JsonRejection>,
) -> Response {
    let decision = match body(decision) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let approve = match decision.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "decision is \"approve\" or \"deny\"",
            )
        }
    };
    match api.inbox.answer(&id, approve) {
        Answered::Done => Json(json!({ "id": id, "decision": decision.decision })).into_response(),
        Answered::NotWaiting => error(
            StatusCode::NOT_FOUND,
            format!(
                "approval {id} is not waiting (answered, timed out, its run ended, or unknown)"
            ),
        ),
    }
}

pub async fn openapi() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        super::openapi::DOCUMENT,
    )
        .into_response()
}

/// Requests that match no route.
pub async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such endpoint (see /v1/openapi.json)",
    )
}
