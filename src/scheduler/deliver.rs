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
    /// The session the run happens in (its transcript and context).
    pub session: String,
    /// The session whose chat receives the answer; runs for one chat are queued one at a time.
    pub chat_session: String,
    pub prompt: String,
    /// `None`: always send the answer. The heartbeat uses it to drop `HEARTBEAT_OK` and repeats.
    pub send_if: Option<AnswerFilter>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("origin", &self.origin)
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

#[async_trait]
pub trait Deliver: Send + Sync {
    /// Run the prompt (queued behind the chat's other runs) and send the answer to the chat.
    /// `Err` carries a short reason; the job counts it as a failure and backs off.
    async fn deliver(&self, delivery: Delivery) -> Result<Delivered, String>;
}
