//! `send_file` in a Telegram chat: the gateway, which alone holds the bot token, takes the
//! file the agent worker asked to send — checked again here, inside the workspace, opened
//! beneath it without following symlinks, within the caps — and uploads it as a document or
//! a photo, its caption HTML-escaped.

use super::api::{Telegram, Upload};
use super::format::escape;
use crate::policy::PathPolicy;
use crate::tools::outbox::{Outbox, OutgoingFile};
use crate::tools::send_file::cap;
use async_trait::async_trait;
use std::sync::Arc;

/// A run's outbox: its chat.
pub struct ChatOutbox {
    pub tg: Telegram,
    /// The chat, and the run's topic in it.
    pub chat: crate::gateway::ChatKey,
    /// The workspace.
    pub paths: Arc<PathPolicy>,
    /// `telegram.max_send_bytes`.
    pub max_bytes: u64,
}

#[async_trait]
impl Outbox for ChatOutbox {
    async fn send_file(&self, file: &OutgoingFile) -> Result<String, String> {
        let max = cap(file.photo, self.max_bytes);
        let outgoing = crate::outgoing::open(&self.paths, &file.path, max)?;
        let caption = file.caption.as_deref().map(escape);
        let upload = Upload {
            file: &outgoing.file,
            name: &outgoing.name,
            max,
            photo: file.photo,
        };
        self.tg
            .send_file(self.chat, &upload, caption.as_deref())
            .await
            .map(|_| "It arrived in the chat.".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::outbox_checks::{Traps, MAX_BYTES};

    /// What the worker asked for is checked again here, before any request to Telegram (the
    /// client points at a closed port: a request would fail differently).
    #[tokio::test]
    async fn the_gateway_checks_the_file_again_before_uploading() {
        let traps = Traps::lay();
        let outbox = ChatOutbox {
            tg: Telegram::new(
                "test-token",
                Some("http://127.0.0.1:9"),
                super::super::api::Timeouts {
                    poll: std::time::Duration::from_secs(1),
                    request: std::time::Duration::from_secs(5),
                },
            )
            .unwrap(),
            chat: 1.into(),
            paths: traps.paths.clone(),
            max_bytes: MAX_BYTES,
        };
        traps.assert_refused(&outbox).await;
    }
}
