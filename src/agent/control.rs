//! Steering and aborting a run from outside (a channel's `/steer` and `/stop`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Default)]
pub struct RunControl {
    cancel: CancellationToken,
    steer: Arc<Mutex<Vec<String>>>,
    /// Rung by [`RunControl::steer`], for whoever forwards steering elsewhere (a worker).
    steered: Arc<Notify>,
    /// The abort came from warden stopping, not from the user.
    interrupted: Arc<AtomicBool>,
}

impl RunControl {
    pub fn new() -> RunControl {
        RunControl::default()
    }

    /// A control that `parent` also aborts (a sub-agent's, under its parent run's token: the
    /// parent's `/stop` stops the sub-agent too; the sub-agent's own end leaves the parent).
    pub fn under(parent: &CancellationToken) -> RunControl {
        RunControl {
            cancel: parent.child_token(),
            ..RunControl::default()
        }
    }

    /// Abort: cancels the model stream and kills a running sandbox process.
    pub fn abort(&self) {
        self.cancel.cancel();
    }

    /// Abort because warden is stopping (or the bot that asked for the run is gone): the
    /// transcript says the run was interrupted, not that the user stopped it.
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }

    pub fn is_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    pub fn is_aborted(&self) -> bool {
        self.cancel.is_cancelled()
    }

    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Inject a message: it reaches the model before the next tool call, and the rest of the
    /// current batch of tool calls is skipped.
    pub fn steer(&self, text: impl Into<String>) {
        self.steer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(text.into());
        self.steered.notify_one();
    }

    /// Resolves after the next [`RunControl::steer`] (at once if one came since the last wait).
    pub async fn steered(&self) {
        self.steered.notified().await
    }

    pub(crate) fn take_steer(&self) -> Vec<String> {
        std::mem::take(&mut *self.steer.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
