//! How a scheduled prompt becomes a run in a chat. The runner and the heartbeat know only this
//! trait; `warden bot` implements it over the gateway, so a scheduled run waits in the same
//! per-chat queue as the user's messages and never overlaps one of them.

use super::job::JobId;
use async_trait::async_trait;
use std::sync::Arc;

/// Who asked for the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Job { id: JobId, name: String },
    Heartbeat,
}

/// Decides, from the model's answer, whether it is sent to the chat.
pub type AnswerFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

#[derive(Clone)]
pub struct Delivery {
    pub origin: Origin,
    /// Unique per delivery (`cron:<job>:<slot>`): a queue that sees it twice runs it once.
    pub key: String,
    /// The session the run happens in (its transcript and context).
    pub session: String,
    /// The session whose chat receives the answer; runs for one chat are queued one at a time.
    pub chat_session: String,
    pub prompt: String,
    /// Outside content the prompt carries (what tainted the run that created the job).
    pub untrusted: Vec<String>,
    /// `None`: always send the answer. The heartbeat uses it to drop `HEARTBEAT_OK` and repeats.
    pub send_if: Option<AnswerFilter>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("origin", &self.origin)
            .field("key", &self.key)
            .field("session", &self.session)
            .field("chat_session", &self.chat_session)
            .field("prompt", &self.prompt)
            .field("filtered", &self.send_if.is_some())
            .finish()
    }
}

/// What came of a delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// The model's final answer.
    pub answer: String,
    /// Whether it was sent to the chat (false when `send_if` said no).
    pub sent: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeliverError {
    /// The run failed (no model, no chat, …); the job counts a failure and backs off.
    #[error("{0}")]
    Failed(String),
    /// warden is shutting down with the run still queued or going. The outcome is settled at
    /// the next start (the gateway's durable queue runs or reports it), so the scheduler does
    /// not record it now — and never schedules the slot again.
    #[error("warden is shutting down")]
    Closed,
}

impl From<String> for DeliverError {
    fn from(reason: String) -> Self {
        DeliverError::Failed(reason)
    }
}

#[async_trait]
pub trait Deliver: Send + Sync {
    /// Run the prompt (queued behind the chat's other runs) and send the answer to the chat.
    async fn deliver(&self, delivery: Delivery) -> Result<Delivered, DeliverError>;
}
