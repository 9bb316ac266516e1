//! Background commands end after the run that started them: their notice becomes a new
//! prompt in the chat's queue (`Origin::Background`, a durable row like any other), in the
//! session of that run, so the agent reads the exit status and the output and can act on it.
//! With the queue full, the notice is sent to the chat as it is rather than lost.

use super::{ChatKey, Gateway, Origin, Submission, SubmitError};
use crate::tools::background::{BackgroundEvent, BackgroundFn};
use std::sync::Arc;

impl Gateway {
    /// Where the background commands of a run in `chat` (and its topic) report; `session` is
    /// the run's own session when it is not the chat's (a scheduled job's fresh one).
    pub fn background_reporter(
        &self,
        chat: impl Into<ChatKey>,
        session: Option<String>,
    ) -> BackgroundFn {
        let chat: ChatKey = chat.into();
        let chat_id = chat.chat_id;
        let gateway = self.clone();
        Arc::new(move |event| {
            let BackgroundEvent::Ended {
                job,
                notice: Some(notice),
                untrusted,
                persisted,
            } = event
            else {
                return;
            };
            let origin = Origin::Background { job };
            // What it changed for later runs is told to the person at once, as at the end of
            // a run (the agent's answer to the notice may not mention it).
            if let Some(summary) = crate::agent::persisted_summary(&persisted) {
                let gateway = gateway.clone();
                tokio::spawn(async move {
                    let text = format!("Background command #{job}: {summary}");
                    if let Err(e) = gateway.send(chat, &text).await {
                        tracing::warn!(chat = chat_id, job, "summary not sent: {e}");
                    }
                });
            }
            // warden's words, never the user's; carrying the command's output.
            let mut submission =
                Submission::notice(chat_id, origin, notice.clone(), untrusted).in_topic(chat.topic);
            if let Some(session) = &session {
                submission = submission.in_session(session.clone());
            }
            match gateway.submit(submission) {
                Ok(_) => {}
                Err(SubmitError::Busy { .. }) => {
                    let gateway = gateway.clone();
                    tokio::spawn(async move {
                        if let Err(e) = gateway.send(chat, &notice).await {
                            tracing::warn!(chat = chat_id, job, "background notice not sent: {e}");
                        }
                    });
                }
                Err(SubmitError::ShuttingDown) => {
                    tracing::debug!(chat = chat_id, job, "background notice dropped: stopping")
                }
                Err(e) => {
                    tracing::warn!(chat = chat_id, job, "background notice not queued: {e}")
                }
            }
        })
    }
}
