//! The scheduler's [`Deliver`] over the gateway, for `warden bot`: a job's prompt is submitted
//! to its chat's queue like a user's message, so it waits until the user's run has ended and
//! its answer is sent by the gateway as any other. The heartbeat's run is silent; its answer
//! is filtered (`HEARTBEAT_OK`, repeats) and only then sent.

use super::deliver::{Deliver, DeliverError, Delivered, Delivery, Origin};
use crate::gateway::{self, ChatKey, Gateway, RunStatus, Submission, SubmitError};
use async_trait::async_trait;

pub struct GatewayDeliver {
    gateway: Gateway,
    /// Where runs for sessions that are not a chat (`terminal:…`, `run:…`) answer.
    owner_chat: i64,
}

impl GatewayDeliver {
    pub fn new(gateway: Gateway, owner_chat: i64) -> GatewayDeliver {
        GatewayDeliver {
            gateway,
            owner_chat,
        }
    }

    /// The chat of a session key (`telegram:<chat>`, or `telegram:<chat>:<topic>` for a
    /// topic); the owner's chat for any other session.
    fn chat_of(&self, session: &str) -> ChatKey {
        self.gateway
            .chat_of_session(session)
            .unwrap_or_else(|| self.owner_chat.into())
    }
}

#[async_trait]
impl Deliver for GatewayDeliver {
    async fn deliver(&self, delivery: Delivery) -> Result<Delivered, DeliverError> {
        let chat = self.chat_of(&delivery.chat_session);
        let origin = gateway::Origin::Scheduled {
            job_id: match &delivery.origin {
                Origin::Job { id, .. } => id.to_string(),
                Origin::Heartbeat => "heartbeat".into(),
            },
        };
        // The scheduler's words, never the user's; tainted as the run that made the job was.
        let mut submission =
            Submission::notice(chat.chat_id, origin, delivery.prompt, delivery.untrusted)
                .in_topic(chat.topic)
                .dedup_key(delivery.key);
        if delivery.session != self.gateway.session_key(chat) {
            submission = submission.in_session(delivery.session);
        }
        if delivery.send_if.is_some() {
            submission = submission.silent();
        }
        let handle = self.gateway.submit(submission).map_err(|e| match e {
            SubmitError::ShuttingDown => DeliverError::Closed,
            other => DeliverError::Failed(other.to_string()),
        })?;
        let result = handle.wait().await.map_err(|_| DeliverError::Closed)?;
        let silent = delivery.send_if.is_some();
        match result.status {
            RunStatus::Answered | RunStatus::IterationLimit | RunStatus::Stopped => {}
            // The user's choice, not a failure to retry.
            RunStatus::Cancelled => {
                return Ok(Delivered {
                    answer: "cancelled by /stop before it started".into(),
                    sent: false,
                })
            }
            // The gateway told the chat (unless silent); the job backs off and retries.
            RunStatus::Failed => return Err(DeliverError::Failed(result.text)),
            RunStatus::Interrupted => return Err(DeliverError::Closed),
        }
        let Some(send_if) = delivery.send_if else {
            return Ok(Delivered {
                answer: result.text,
                sent: !silent,
            });
        };
        if !send_if(&result.text) {
            return Ok(Delivered {
                answer: result.text,
                sent: false,
            });
        }
        self.gateway
            .send(chat, &result.text)
            .await
            .map_err(DeliverError::Failed)?;
        Ok(Delivered {
            answer: result.text,
            sent: true,
        })
    }
}
