//! Cancelling one run by its id (the HTTP API's `POST /v1/runs/{id}/cancel`): a queued run
//! leaves its chat's queue and is recorded cancelled; a running one is aborted, as `/stop`
//! aborts it (a running sandbox process is killed), while the rest of the queue stays.

use super::store::RunState;
use super::{lock, Gateway, RunResult, RunStatus};
use crate::db::DbError;
use std::time::Duration;

/// What [`Gateway::cancel`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// It was waiting: it will not run.
    Dropped,
    /// It was running: it is being stopped (its end is recorded as stopped).
    Aborting,
    /// It had ended already.
    Finished,
    /// No such run.
    NotFound,
    /// It is starting right now and could not be caught between queue and start; asking
    /// again in a moment finds it running.
    Starting,
}

impl Gateway {
    pub async fn cancel(&self, run_id: i64) -> Result<Cancelled, DbError> {
        let inner = &self.inner;
        // An actor takes a run off the queue a moment before it marks it running: look again
        // for up to a second rather than miss it.
        for _ in 0..50 {
            let Some(row) = inner.store.get(run_id)? else {
                return Ok(Cancelled::NotFound);
            };
            if !matches!(row.state, RunState::Queued | RunState::Running) {
                return Ok(Cancelled::Finished);
            }
            let slot = lock(&inner.chats).get(&row.chat_key()).cloned();
            if let Some(slot) = slot {
                let mut state = lock(&slot.state);
                if let Some(at) = state.queue.iter().position(|q| q.run_id == run_id) {
                    state.queue.remove(at);
                    drop(state);
                    inner.store.set_cancelled(run_id)?;
                    inner.resolve(RunResult {
                        run_id,
                        status: RunStatus::Cancelled,
                        text: String::new(),
                    });
                    return Ok(Cancelled::Dropped);
                }
                if let Some(running) = state.running.as_ref().filter(|r| r.run_id == run_id) {
                    running.control.abort();
                    return Ok(Cancelled::Aborting);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Cancelled::Starting)
    }
}
