//! Long polling with a durable update log. Each batch from `getUpdates` is written to SQLite,
//! with the next offset, before any of it is processed; then the recorded-but-unhandled
//! updates are handled in order and marked. After a crash, the unhandled ones are handled at
//! the next start and polling resumes from the stored offset: no update is lost, and the
//! gateway's dedup key (`telegram:update:<id>`) keeps a re-handled one from running twice.

use super::api::{describe, Telegram};
use super::handler::{Handled, Handler};
use super::lanes::{self, Lanes};
use super::store::UpdateLog;
use std::sync::Arc;
use std::time::Duration;
use teloxide::payloads::GetUpdatesSetters;
use teloxide::prelude::Requester;
use teloxide::requests::Request;
use teloxide::types::{AllowedUpdate, Update};
use teloxide::{ApiError, RequestError};
use tokio_util::sync::CancellationToken;

const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Poll until `shutdown`. Returns an error only for a rejected token.
pub async fn run(
    tg: &Telegram,
    handler: Arc<Handler>,
    shutdown: &CancellationToken,
    timeout_secs: u32,
) -> Result<(), String> {
    let log = handler.log.clone();
    let lanes = Lanes::new(handler);
    handle_recorded(&log, &lanes, shutdown).await;
    let mut backoff = Duration::from_secs(1);
    while !shutdown.is_cancelled() {
        let offset = match log.offset() {
            Ok(offset) => offset,
            Err(e) => {
                tracing::error!("reading the update offset: {e}");
                pause(shutdown, backoff).await;
                continue;
            }
        };
        let request = tg
            .bot()
            .get_updates()
            .offset(i32::try_from(offset).unwrap_or(i32::MAX))
            .timeout(timeout_secs)
            .allowed_updates([AllowedUpdate::Message, AllowedUpdate::CallbackQuery]);
        let result = tokio::select! {
            _ = shutdown.cancelled() => break,
            result = request.send() => result,
        };
        let updates = match result {
            Ok(updates) => updates,
            Err(RequestError::Api(ApiError::InvalidToken)) => {
                return Err("Telegram rejected the bot token (TELEGRAM_BOT_TOKEN)".into());
            }
            Err(e) => {
                tracing::warn!(
                    "getUpdates failed: {} (retrying in {backoff:?})",
                    describe(&e)
                );
                pause(shutdown, backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_secs(1);
        if updates.is_empty() {
            continue;
        }
        if let Err(e) = log.record(&encode(&updates)) {
            // Not recorded, so not processed: the offset did not move and Telegram sends the
            // batch again.
            tracing::error!("recording updates: {e}");
            pause(shutdown, Duration::from_secs(1)).await;
            continue;
        }
        handle_recorded(&log, &lanes, shutdown).await;
    }
    Ok(())
}

fn encode(updates: &[Update]) -> Vec<(i64, String)> {
    updates
        .iter()
        .filter_map(|u| match serde_json::to_string(u) {
            Ok(body) => Some((i64::from(u.id.0), body)),
            Err(e) => {
                tracing::warn!(update = u.id.0, "an update that cannot be stored: {e}");
                None
            }
        })
        .collect()
}

/// Hand out the recorded, unhandled updates (in order) not handed out before.
async fn handle_recorded(log: &UpdateLog, lanes: &Lanes, shutdown: &CancellationToken) {
    let pending = match log.pending() {
        Ok(pending) => pending,
        Err(e) => {
            tracing::error!("reading recorded updates: {e}");
            return;
        }
    };
    for (id, body) in pending {
        if shutdown.is_cancelled() {
            return;
        }
        if lanes.handed_out(id) {
            continue;
        }
        match serde_json::from_str::<Update>(&body) {
            Ok(update) => {
                if lanes.dispatch(id, update).await == Handled::Later {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(update = id, "skipping an unreadable recorded update: {e}");
                lanes::mark(log, id);
            }
        }
    }
}

async fn pause(shutdown: &CancellationToken, wait: Duration) {
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::sleep(wait) => {}
    }
}
