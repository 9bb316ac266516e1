//! `GET /v1/skills` and `GET /v1/mcp`: the installed skills and the configured MCP servers
//! with their grants, read-only, as `warden skill list --json` and `warden mcp list --json`
//! show them (the same rows). Nothing is written or started per request: the bundled skills'
//! copies were written once at start-up, when the settings were prepared.

use super::routes::{ApiError, Shared};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

pub async fn skills(State(api): Shared) -> Result<Response, ApiError> {
    let rows = crate::skills::listing::rows(api.mcp.settings(), &api.db)?;
    let skills: Vec<_> = rows.into_iter().map(|r| r.json).collect();
    Ok(Json(json!({ "skills": skills })).into_response())
}

pub async fn mcp(State(api): Shared) -> Response {
    let rows = crate::mcp::overview::rows(&api.mcp, &api.db);
    let servers: Vec<_> = rows.into_iter().map(|r| r.json).collect();
    Json(json!({ "servers": servers })).into_response()
}
