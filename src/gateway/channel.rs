//! What the gateway needs from a channel (Telegram, or a test double): a way to show a run
//! while it goes (typing, status, approvals) and a way to deliver text to a chat.

use super::Origin;
use crate::agent::{EventFn, RunControl};
use crate::tools::approval::Approver;
use async_trait::async_trait;
use std::sync::Arc;

/// The run a channel is asked to show or answer.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub run_id: i64,
    pub chat_id: i64,
    /// The message the answer replies to, if any.
    pub reply_to: Option<i32>,
    /// A short preview of the prompt (for status and restart notices).
    pub preview: String,
    pub origin: Origin,
}

#[async_trait]
pub trait Channel: Send + Sync + 'static {
    /// Start showing `run`. The view's approver and event sink go to the agent; `control`
    /// lets the view stop waiting (e.g. for an approval) when the run is aborted.
    fn open_run(&self, run: &RunInfo, control: &RunControl) -> Box<dyn RunView>;

    /// Send `text` (markdown) to the run's chat, split into parts the same way every time.
    /// `already_sent` parts were delivered before a restart and are skipped; `sent(n)` is
    /// called after part `n` (counting from 1) was accepted, so progress can be stored.
    async fn deliver(
        &self,
        run: &RunInfo,
        text: &str,
        already_sent: usize,
        sent: &(dyn Fn(usize) + Send + Sync),
    ) -> Result<(), String>;
}

/// A run on screen: where agent events and approval requests go until it ends.
#[async_trait]
pub trait RunView: Send + Sync {
    fn approver(&self) -> Arc<dyn Approver>;
    fn events(&self) -> EventFn;
    /// The agent is done: stop the typing indicator, remove the status message.
    async fn finish(self: Box<Self>);
}
