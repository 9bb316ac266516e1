//! Handing recorded updates to the handler without one slow update holding up the others: a
//! message whose document takes a minute to download must not delay an approval button, a
//! `/stop`, or another chat.
//!
//! - Button presses (callback queries) are handled at once, in the polling task.
//! - Messages go into one lane per chat and are handled there in order (a chat's prompts keep
//!   their order); lanes run side by side and disappear when empty.
//! - An update is marked handled only once it was handled, so after a crash it is handled
//!   again at the next start (the gateway's dedup key keeps a run from starting twice); while
//!   it waits in a lane it is "in flight" and not handed out again.

use super::handler::{Handled, Handler};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use teloxide::types::{Update, UpdateKind};

pub struct Lanes {
    handler: Arc<Handler>,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Waiting messages per chat; a chat has an entry exactly while its worker runs.
    queues: HashMap<i64, VecDeque<(i64, Update)>>,
    /// Update ids queued or being handled.
    in_flight: HashSet<i64>,
}

impl Lanes {
    pub fn new(handler: Arc<Handler>) -> Lanes {
        Lanes {
            handler,
            state: Arc::default(),
        }
    }

    /// Whether update `id` is already queued or being handled.
    pub fn in_flight(&self, id: i64) -> bool {
        lock(&self.state).in_flight.contains(&id)
    }

    /// Handle `update` (recorded as `id`): a message goes to its chat's lane; anything else is
    /// handled now. Returns `Later` when shutting down left it unhandled.
    pub async fn dispatch(&self, id: i64, update: Update) -> Handled {
        let chat = match &update.kind {
            UpdateKind::Message(msg) => msg.chat.id.0,
            _ => {
                let handled = self.handler.handle(update).await;
                if handled == Handled::Done {
                    mark(&self.handler, id);
                }
                return handled;
            }
        };
        let mut state = lock(&self.state);
        state.in_flight.insert(id);
        match state.queues.get_mut(&chat) {
            Some(queue) => queue.push_back((id, update)),
            None => {
                state.queues.insert(chat, VecDeque::from([(id, update)]));
                tokio::spawn(work(self.handler.clone(), self.state.clone(), chat));
            }
        }
        Handled::Done
    }
}

/// One chat's worker: handle its messages in order until the queue is empty.
async fn work(handler: Arc<Handler>, state: Arc<Mutex<State>>, chat: i64) {
    loop {
        let next = {
            let mut state = lock(&state);
            match state.queues.get_mut(&chat).and_then(VecDeque::pop_front) {
                Some(next) => next,
                None => {
                    // Empty: the lane ends under the same lock a new message would take.
                    state.queues.remove(&chat);
                    return;
                }
            }
        };
        let (id, update) = next;
        let handled = handler.handle(update).await;
        let mut state = lock(&state);
        if handled == Handled::Later {
            // Shutting down: this and the rest stay recorded as unhandled for the next start.
            if let Some(rest) = state.queues.remove(&chat) {
                for (queued, _) in rest {
                    state.in_flight.remove(&queued);
                }
            }
            state.in_flight.remove(&id);
            return;
        }
        // Marked before it leaves the in-flight set, so it is never handed out twice.
        mark(&handler, id);
        state.in_flight.remove(&id);
    }
}

fn mark(handler: &Handler, id: i64) {
    if let Err(e) = handler.log.mark_handled(id) {
        tracing::error!(update = id, "marking an update handled: {e}");
    }
}

/// The lanes' state; a panic elsewhere cannot leave it half-changed (every change is one
/// short block), so a poisoned lock is taken over.
fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
