//! Handing recorded updates to the handler without one slow update holding up the others: a
//! message whose document takes a minute to download must not delay an approval button, a
//! `/stop`, or another chat.
//!
//! - Button presses (callback queries) are handled at once, in the polling task.
//! - Messages go into one lane per chat — per topic in a chat with topics — and are handled
//!   there in order (a conversation's prompts keep their order); lanes run side by side and
//!   disappear when empty.
//! - An update is marked handled only once it was handled, so after a crash it is handled
//!   again at the next start (the gateway's dedup key keeps a run from starting twice). A
//!   message the database cannot queue (a full disk) is handled again in a while.
//! - Each update is handed out once: update ids only grow, so the lanes remember the last id
//!   handed out and skip everything up to it, however stale the caller's list of unhandled
//!   updates is (an update can be handled and marked while the caller still walks a list read
//!   before).

use super::api::chat_key;
use super::handler::{Handled, Handler};
use super::store::UpdateLog;
use crate::gateway::ChatKey;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use teloxide::types::{Update, UpdateKind};

/// A message the database could not queue is handled again after this, doubling up to
/// [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Waiting messages per chat (and topic); a lane has an entry exactly while its worker runs.
type Queues = HashMap<ChatKey, VecDeque<(i64, Update)>>;

pub struct Lanes {
    handler: Arc<Handler>,
    queues: Arc<Mutex<Queues>>,
    /// The highest update id handed out so far.
    handed_out: AtomicI64,
}

impl Lanes {
    pub fn new(handler: Arc<Handler>) -> Lanes {
        Lanes {
            handler,
            queues: Arc::default(),
            handed_out: AtomicI64::new(i64::MIN),
        }
    }

    pub fn handler(&self) -> &Handler {
        &self.handler
    }

    /// Whether update `id` was handed out already (it may still be waiting in a lane).
    pub fn handed_out(&self, id: i64) -> bool {
        id <= self.handed_out.load(Ordering::Acquire)
    }

    /// Handle `update` (recorded as `id`, above every id handed out before): a message goes to
    /// its chat's lane; anything else is handled now. Returns `Later` when shutting down left
    /// it unhandled.
    pub async fn dispatch(&self, id: i64, update: Update) -> Handled {
        self.handed_out.fetch_max(id, Ordering::AcqRel);
        let chat = match &update.kind {
            UpdateKind::Message(msg) => chat_key(msg),
            _ => {
                let handled = self.handler.handle(update).await;
                if handled == Handled::Done {
                    mark(&self.handler.log, id);
                }
                return handled;
            }
        };
        let mut queues = lock(&self.queues);
        match queues.get_mut(&chat) {
            Some(queue) => queue.push_back((id, update)),
            None => {
                queues.insert(chat, VecDeque::from([(id, update)]));
                tokio::spawn(work(self.handler.clone(), self.queues.clone(), chat));
            }
        }
        Handled::Done
    }
}

/// One chat's worker: handle its messages in order until the queue is empty.
async fn work(handler: Arc<Handler>, queues: Arc<Mutex<Queues>>, chat: ChatKey) {
    loop {
        let next = {
            let mut queues = lock(&queues);
            match queues.get_mut(&chat).and_then(VecDeque::pop_front) {
                Some(next) => next,
                None => {
                    // Empty: the lane ends under the same lock a new message would take.
                    queues.remove(&chat);
                    return;
                }
            }
        };
        let (id, update) = next;
        let mut wait = RETRY_FIRST;
        loop {
            match handler.handle(update.clone()).await {
                Handled::Done => break,
                Handled::Later => {
                    // Shutting down: this and the rest stay recorded as unhandled for the next
                    // start.
                    lock(&queues).remove(&chat);
                    return;
                }
                // The database could not queue it: the chat's later messages wait behind it.
                Handled::Retry => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(RETRY_MAX);
                }
            }
        }
        mark(&handler.log, id);
    }
}

/// Mark update `id` handled; a failure is logged (the update is then handled again at the
/// next start, which the dedup key makes harmless).
pub(super) fn mark(log: &UpdateLog, id: i64) {
    if let Err(e) = log.mark_handled(id) {
        tracing::error!(update = id, "marking an update handled: {e}");
    }
}

/// The lanes' queues; a panic elsewhere cannot leave them half-changed (every change is one
/// short block), so a poisoned lock is taken over.
fn lock(queues: &Mutex<Queues>) -> std::sync::MutexGuard<'_, Queues> {
    queues
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
