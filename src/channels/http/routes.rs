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
type Answer = Result<Response, ApiError>;

/// A refusal: its status and why, in words.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub why: String,
}

impl ApiError {
    pub fn new(status: StatusCode, why: impl Into<String>) -> ApiError {
        ApiError {
            status,
            why: why.into(),
        }
    }

    fn bad(why: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, why)
    }

    fn no_run(id: impl std::fmt::Display) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, format!("no run {id}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.why }))).into_response()
    }
}

/// warden's own failure (the database): logged, and said.
impl From<crate::db::DbError> for ApiError {
    fn from(e: crate::db::DbError) -> ApiError {
        tracing::error!("HTTP API: {e}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("warden failed: {e}"),
        )
    }
}

pub async fn healthz() -> Json<Value> {
    Json(json!({ "ok": true }))
}

/// A JSON body, or the refusal that says what is wrong with it (413 when too large).
pub(super) fn body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    // A well-formed body of the wrong shape is a bad request too (axum says 422).
    body.map(|Json(t)| t).map_err(|r| match r.status() {
        StatusCode::UNPROCESSABLE_ENTITY => ApiError::bad(r.body_text()),
        status => ApiError::new(status, r.body_text()),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMessage {
    thread: String,
    text: String,
    idempotency_key: Option<String>,
}

pub async fn post_message(
    State(api): Shared,
    m: Result<Json<NewMessage>, JsonRejection>,
) -> Answer {
    let m = body(m)?;
    check_name(&m.thread).map_err(ApiError::bad)?;
    if m.text.trim().is_empty() {
        return Err(ApiError::bad("text is empty"));
    }
    if m.idempotency_key
        .as_ref()
        .is_some_and(|key| key.is_empty() || key.len() > MAX_KEY)
    {
        return Err(ApiError::bad(format!(
            "idempotency_key has 1 to {MAX_KEY} characters"
        )));
    }
    let chat = api.threads.chat_of(&m.thread)?;
    let mut submission = Submission::text(chat, Origin::User { user_id: API_USER }, m.text);
    if let Some(key) = &m.idempotency_key {
        submission = submission.dedup_key(format!("http:{key}"));
    }
    let handle = api.gateway.submit(submission).map_err(|e| match e {
        SubmitError::Busy { queued } => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("{queued} messages already wait in thread {}", m.thread),
        ),
        SubmitError::ShuttingDown => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "warden is shutting down")
        }
        SubmitError::Store(e) => e.into(),
    })?;
    let run = api
        .run(handle.run_id)?
        .ok_or_else(|| ApiError::no_run(handle.run_id))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "run_id": run.id, "status": run.status })),
    )
        .into_response())
}

fn run_id(text: &str) -> Result<i64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::no_run(format!("{text:?}")))
}

/// Run `id` of an API thread, or 404.
fn known_run(api: &Api, id: i64) -> Result<RunView, ApiError> {
    api.run(id)?.ok_or_else(|| ApiError::no_run(id))
}

pub async fn get_run(State(api): Shared, Path(id): Path<String>) -> Answer {
    Ok(Json(known_run(&api, run_id(&id)?)?).into_response())
}

#[derive(Deserialize)]
pub struct RunFilter {
    thread: Option<String>,
    status: Option<String>,
    limit: Option<usize>,
}

pub async fn list_runs(State(api): Shared, Query(filter): Query<RunFilter>) -> Answer {
    let status = match filter.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => Some(Status::parse(text).ok_or_else(|| {
            ApiError::bad(format!("status is one of {}", Status::ALL.join(", ")))
        })?),
    };
    let chat = match filter.thread.as_deref().filter(|t| !t.is_empty()) {
        None => None,
        Some(name) => match api.threads.find(name)? {
            Some(chat) => Some(chat),
            None => return Ok(Json(json!({ "runs": [] })).into_response()),
        },
    };
    let limit = filter.limit.unwrap_or(100).clamp(1, MAX_LIST);
    // A status filter is applied to the newest rows, so look further back for it.
    let scan = if status.is_some() {
        MAX_LIST * 4
    } else {
        limit
    };
    let mut runs: Vec<RunView> = Vec::new();
    for row in api.store.recent(chat, Threads::CHATS_BELOW, scan)? {
        let run = api.view(&row)?;
        if status.is_none_or(|s| s == run.status) {
            runs.push(run);
        }
        if runs.len() >= limit {
            break;
        }
    }
    Ok(Json(json!({ "runs": runs })).into_response())
}

pub async fn cancel_run(State(api): Shared, Path(id): Path<String>) -> Answer {
    let id = run_id(&id)?;
    known_run(&api, id)?;
    let code = match api.gateway.cancel(id).await? {
        Cancelled::NotFound => return Err(ApiError::no_run(id)),
        Cancelled::Finished => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("run {id} has ended already"),
            ))
        }
        Cancelled::Starting => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("run {id} is starting right now: ask again in a moment"),
            ))
        }
        Cancelled::Dropped => StatusCode::OK,
        // It stops at its next step (a running command is killed): poll the run.
        Cancelled::Aborting => StatusCode::ACCEPTED,
    };
    Ok((code, Json(known_run(&api, id)?)).into_response())
}

pub async fn list_approvals(State(api): Shared) -> Json<Value> {
    Json(json!({ "approvals": api.inbox.list() }))
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
) -> Answer {
    let decision = body(decision)?.decision;
    let approve = match decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return Err(ApiError::bad("decision is \"approve\" or \"deny\"")),
    };
    match api.inbox.answer(&id, approve) {
        Answered::Done => Ok(Json(json!({ "id": id, "decision": decision })).into_response()),
        Answered::Elsewhere(who) => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("approval {id} was decided already ({who})"),
        )),
        Answered::NotWaiting => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "approval {id} is not waiting (answered, timed out, its run ended, or unknown)"
            ),
        )),
    }
}

pub async fn openapi() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        super::openapi::DOCUMENT,
    )
        .into_response()
}

#[derive(Deserialize)]
pub struct AuditFilter {
    since: Option<String>,
    session: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/audit?since=&session=&limit=`: what tools ran, were refused or asked (all
/// sessions: the token is the owner's), oldest first.
pub async fn audit(State(api): Shared, Query(filter): Query<AuditFilter>) -> Answer {
    let since = match filter.since.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => Some(
            crate::audit::since(text, chrono::Utc::now())
                .map_err(|e| ApiError::bad(format!("since: {e}")))?,
        ),
    };
    let rows = crate::audit::query(
        &api.db,
        &crate::audit::Filter {
            session: filter.session.filter(|s| !s.is_empty()),
            since,
            limit: filter.limit.unwrap_or(100).clamp(1, MAX_LIST),
        },
    )?;
    let entries: Vec<Value> = rows
        .into_iter()
        .map(|r| {
            json!({
                "id": r.id, "at": r.at, "session": r.session, "tool": r.tool,
                "input": r.input, "decision": r.decision, "reason": r.reason,
                "exit_code": r.exit_code, "duration_ms": r.duration_ms,
                "network": r.network,
            })
        })
        .collect();
    Ok(Json(json!({ "entries": entries })).into_response())
}

pub async fn metrics(State(api): Shared) -> Answer {
    let text = api.metrics.render(&api.counts()?, api.inbox.list().len());
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

/// Requests that match no route.
pub async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such endpoint (see /v1/openapi.json)",
    )
}
