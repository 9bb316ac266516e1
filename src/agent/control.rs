//! Steering and aborting a run from outside (a channel's `/steer` and `/stop`).

use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Default)]
pub struct RunControl {
    cancel: CancellationToken,
    steer: Arc<Mutex<Vec<String>>>,
}

impl RunControl {
    pub fn new() -> RunControl {
        RunControl::default()
    }

    /// Abort: cancels the model stream and kills a running sandbox process.
    pub fn abort(&self) {
        self.cancel.cancel();
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
    }

    pub(crate) fn take_steer(&self) -> Vec<String> {
        std::mem::take(&mut *self.steer.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
