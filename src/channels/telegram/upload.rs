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
    pub chat: i64,
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
