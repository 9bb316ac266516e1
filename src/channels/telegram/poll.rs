//! Long polling with a durable update log. Each batch from `getUpdates` is written to SQLite,
//! with the next offset, before any of it is processed; then the recorded-but-unhandled
//! updates are handled in order and marked. After a crash, the unhandled ones are handled at
//! the next start and polling resumes from the stored offset: no update is lost, and the
//! gateway's dedup key (`telegram:update:<id>`) keeps a re-handled one from running twice.
//!
//! An idle poll is held by the server for its whole `timeout` and then answered empty; the
//! client waits that long plus a margin (see [`Telegram::poller`]), so quiet hours cost two
//! requests a minute and no errors. A poll that fails is sent again at once — a connection
//! the network dropped while idle is no reason to make the next message wait — and only
//! failures in a row back off (1 s doubling up to 30 s).
//!
//! While the database's disk is below its reserve, or a batch cannot be written, nothing is
//! taken: Telegram keeps the updates, each waiting chat is told once, and polling goes on
//! slowly until the batch can be recorded.

use super::api::{describe, Telegram};
use super::handler::{Handled, Handler};
use super::lanes::{self, Lanes};
use super::store::UpdateLog;
use crate::gateway::Trouble;
use std::sync::Arc;
use std::time::Duration;
use teloxide::payloads::GetUpdatesSetters;
use teloxide::prelude::Requester;
use teloxide::requests::Request;
use teloxide::types::{AllowedUpdate, Update};
use teloxide::{ApiError, RequestError};
use tokio_util::sync::CancellationToken;

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Poll until `shutdown`. Returns an error only for a rejected token.
pub async fn run(
    tg: &Telegram,
    handler: Arc<Handler>,
    shutdown: &CancellationToken,
) -> Result<(), String> {
    let log = handler.log.clone();
    let lanes = Lanes::new(handler);
    handle_recorded(&log, &lanes, shutdown).await;
    let timeout_secs = u32::try_from(tg.timeouts().poll.as_secs()).unwrap_or(u32::MAX);
    let mut failures = Failures::default();
    let mut held = Held::default();
    while !shutdown.is_cancelled() {
        let offset = match log.offset() {
            Ok(offset) => offset,
            Err(e) => {
                tracing::error!("reading the update offset: {e}");
                pause(shutdown, FIRST_BACKOFF).await;
                continue;
            }
        };
        let request = tg
            .poller()
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
                match failures.next() {
                    None => tracing::warn!("getUpdates failed: {} (retrying now)", describe(&e)),
                    Some(wait) => {
                        tracing::warn!(
                            "getUpdates failed: {} (retrying in {wait:?})",
                            describe(&e)
                        );
                        pause(shutdown, wait).await;
                    }
                }
                continue;
            }
        };
        failures = Failures::default();
        if updates.is_empty() {
            continue;
        }
        // Not recorded, so not taken: the offset does not move and Telegram keeps the batch
        // (for a day) until there is room. Each waiting chat is told once.
        let trouble = if lanes.handler().gateway.has_room() {
            log.record(&encode(&updates)).err().map(|e| {
                tracing::error!("recording updates: {e}");
                Trouble::of(&e)
            })
        } else {
            Some(Trouble::DiskFull)
        };
        if let Some(trouble) = trouble {
            lanes.handler().hold(&updates, trouble).await;
            pause(shutdown, held.next()).await;
            continue;
        }
        held = Held::default();
        lanes.handler().recorded(&updates);
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

/// Failed polls in a row: the first is retried at once, the next after 1 s, doubling up to
/// [`MAX_BACKOFF`].
#[derive(Debug, Default)]
struct Failures(u32);

impl Failures {
    /// The wait before the next poll after one more failure (`None`: at once).
    fn next(&mut self) -> Option<Duration> {
        self.0 = self.0.saturating_add(1);
        let doublings = self.0.checked_sub(2)?;
        Some(
            FIRST_BACKOFF
                .saturating_mul(1 << doublings.min(16))
                .min(MAX_BACKOFF),
        )
    }
}

/// Batches in a row that could not be recorded: the next poll waits 500 ms, doubling up to 5 s
/// (Telegram answers at once while it has updates for us).
#[derive(Debug, Default)]
struct Held(u32);

impl Held {
    fn next(&mut self) -> Duration {
        self.0 = self.0.saturating_add(1);
        Duration::from_millis(500)
            .saturating_mul(1 << (self.0 - 1).min(4))
            .min(Duration::from_secs(5))
    }
}

async fn pause(shutdown: &CancellationToken, wait: Duration) {
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::sleep(wait) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_is_retried_at_once_then_waits_double_up_to_the_cap() {
        let mut failures = Failures::default();
        let waits: Vec<Option<u64>> = (0..9)
            .map(|_| failures.next().map(|d| d.as_secs()))
            .collect();
        assert_eq!(
            waits,
            [
                None,
                Some(1),
                Some(2),
                Some(4),
                Some(8),
                Some(16),
                Some(30),
                Some(30),
                Some(30)
            ]
        );
        let mut failures = Failures(u32::MAX - 1);
        assert_eq!(failures.next(), Some(MAX_BACKOFF));
        assert_eq!(failures.next(), Some(MAX_BACKOFF));
        let mut held = Held::default();
        let waits: Vec<u128> = (0..7).map(|_| held.next().as_millis()).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 5000, 5000, 5000]);
    }
}
