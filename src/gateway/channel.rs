//! What the gateway needs from a channel (Telegram, or a test double): a way to show a run
//! while it goes (typing, status, the answer as it streams, approvals, files) and a way to
//! deliver text to a chat.

use super::Origin;
use crate::agent::{EventFn, RunControl};
use crate::tools::approval::Approver;
use crate::tools::outbox::{Nowhere, Outbox};
use async_trait::async_trait;
use std::sync::Arc;

/// The run a channel is asked to show or answer.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub run_id: i64,
    pub chat_id: i64,
    /// The chat's topic the run belongs to: everything it shows goes there.
    pub topic: Option<i32>,
    /// The message the answer replies to, if any.
    pub reply_to: Option<i32>,
    /// A short preview of the prompt (for status and restart notices).
    pub preview: String,
    pub origin: Origin,
    /// Whether the answer goes to the chat (a silent run's answer is filtered first, so it
    /// must not stream there, nor send files).
    pub deliver: bool,
    /// The message the channel streamed the answer into while the run went (see [`DraftFn`]):
    /// the answer's first part replaces it.
    pub draft: Option<i64>,
}

/// Told the id of the message a channel streams a run's answer into (its draft) as soon as
/// it exists. The gateway stores it with the run, so the answer replaces the draft instead of
/// repeating it — also when a restart comes between the two.
pub type DraftFn = Arc<dyn Fn(i64) + Send + Sync>;

#[async_trait]
pub trait Channel: Send + Sync + 'static {
    /// Start showing `run`. The view's approver and event sink go to the agent; `control`
    /// lets the view stop waiting (e.g. for an approval) when the run is aborted; `draft`
    /// learns where the answer streams, if it does.
    fn open_run(&self, run: &RunInfo, control: &RunControl, draft: DraftFn) -> Box<dyn RunView>;

    /// The messages `text` (markdown) is sent as: split the same way every time, so a restart
    /// can go on where the last process stopped.
    fn parts(&self, text: &str) -> Vec<String>;

    /// The parts for chat `chat_id` (where channels share a gateway, each splits its own).
    fn parts_for(&self, _chat_id: i64, text: &str) -> Vec<String> {
        self.parts(text)
    }

    /// Send part `index` (from 0) of `parts(text)` to the run's chat; part 0 replies to the
    /// run's message and replaces its draft, if it has one. `again`: an earlier try of this part may have arrived (a restart
    /// or a time-out came between sending it and hearing back) — a new message says it may be
    /// a repeat; an edit of the draft is simply made again.
    async fn send_part(
        &self,
        run: &RunInfo,
        index: usize,
        part: &str,
        again: bool,
    ) -> Result<(), SendError>;

    /// Whether `chat_id` is one of this channel's chats. Start-up recovery takes up only
    /// those: another channel's runs in the same database (`warden bot` and `warden serve`
    /// share it) are that channel's to finish and deliver.
    fn serves(&self, _chat_id: i64) -> bool {
        true
    }

    /// The prefix of `chat_id`'s session key when it is not the gateway's own (an API thread
    /// is `http:<chat>` whichever process serves it).
    fn session_prefix(&self, _chat_id: i64) -> Option<&'static str> {
        None
    }
}

/// Why a part was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Sent, but no answer came (a time-out, a connection that broke): the chat may show it.
    #[error("{0} (it may have arrived)")]
    MayHaveArrived(String),
    /// Refused, or never sent.
    #[error("{0}")]
    Failed(String),
}

/// A run on screen: where agent events, approval requests and files go until it ends.
#[async_trait]
pub trait RunView: Send + Sync {
    fn approver(&self) -> Arc<dyn Approver>;
    fn events(&self) -> EventFn;
    /// Where the run's `send_file` calls go; by default nowhere.
    fn outbox(&self) -> Arc<dyn Outbox> {
        Arc::new(Nowhere("this channel cannot send files"))
    }
    /// The agent is done: stop the typing indicator, remove the status message.
    async fn finish(self: Box<Self>);
}
