//! Files in Slack. In: a file a person shares with a message is downloaded (with the bot
//! token, only from Slack's file host or the configured API's own address, within
//! `max_file_bytes`) into the workspace's `attachments/`, and the agent is told where — as a
//! document sent in the chat, which taints the run like any untrusted content. Out:
//! `send_file` is checked again here (inside the workspace, no symlinks, within
//! `max_send_bytes`) and uploaded into the run's conversation.

use super::api::SlackApi;
use super::format::escape;
use super::store::Conversation;
use crate::channels::attachments::{safe_file_name, save_attachment};
use crate::policy::PathPolicy;
use crate::sizes::human as human_size;
use crate::taint::DOCUMENT_MARK;
use crate::tools::outbox::{Outbox, OutgoingFile};
use crate::tools::send_file::cap;
use async_trait::async_trait;
use serde_json::Value;
use std::io::Read;
use std::sync::Arc;

/// Files people share: where they land.
pub struct Inbound {
    pub api: SlackApi,
    pub paths: Arc<PathPolicy>,
    pub max_bytes: u64,
}

/// What became of a message's files.
#[derive(Default, Debug)]
pub struct Taken {
    /// One note per saved file, for the agent.
    pub notes: Vec<String>,
    /// Why a file was not taken, for the person.
    pub problems: Vec<String>,
}

impl Inbound {
    pub async fn take(&self, files: &[Value]) -> Taken {
        let mut taken = Taken::default();
        for file in files {
            let name = file["name"].as_str().unwrap_or("file");
            match self.take_one(file, name).await {
                Ok(note) => taken.notes.push(note),
                Err(why) => taken.problems.push(format!("{name}: {why}")),
            }
        }
        taken
    }

    async fn take_one(&self, file: &Value, name: &str) -> Result<String, String> {
        if file["size"]
            .as_u64()
            .is_some_and(|size| size > self.max_bytes)
        {
            return Err(format!("it is larger than {}", human_size(self.max_bytes)));
        }
        let url = file["url_private_download"]
            .as_str()
            .or_else(|| file["url_private"].as_str())
            .ok_or("Slack gave no address to download it from")?;
        let data = self.api.download(url, self.max_bytes).await?;
        let saved = save_attachment(&self.paths, &safe_file_name(name), &data)?;
        let kind = file["mimetype"]
            .as_str()
            .map(|m| format!(", {m}"))
            .unwrap_or_default();
        Ok(format!(
            "{DOCUMENT_MARK}, saved in the workspace as {saved} ({}{kind}).]",
            human_size(data.len() as u64)
        ))
    }
}

/// A run's outbox: its conversation.
pub struct SlackOutbox {
    pub api: SlackApi,
    pub conversation: Conversation,
    pub paths: Arc<PathPolicy>,
    pub max_bytes: u64,
}

#[async_trait]
impl Outbox for SlackOutbox {
    async fn send_file(&self, file: &OutgoingFile) -> Result<String, String> {
        let max = cap(file.photo, self.max_bytes);
        let outgoing = crate::outgoing::open(&self.paths, &file.path, max)?;
        let mut data = Vec::new();
        (&outgoing.file)
            .take(max.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| format!("reading {}: {e}", outgoing.relative))?;
        if data.len() as u64 > max {
            return Err(format!(
                "{} grew past the limit while it was read",
                outgoing.relative
            ));
        }
        let caption = file.caption.as_deref().map(escape);
        self.api
            .upload(
                &self.conversation.channel,
                self.conversation.thread_ts.as_deref(),
                &outgoing.name,
                data,
                caption.as_deref(),
            )
            .await
            .map(|()| "It arrived in the conversation.".to_string())
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::outbox_checks::{Traps, MAX_BYTES};
    use crate::secret::Secret;
    use std::time::Duration;

    /// What the worker asked for is checked again here, before any request (the API points
    /// at a closed port: a request would fail differently).
    #[tokio::test]
    async fn send_file_checks_the_file_again_before_uploading() {
        let traps = Traps::lay();
        let outbox = SlackOutbox {
            api: SlackApi::new(
                "http://127.0.0.1:9",
                Secret::default(),
                Secret::new("xoxb-1"),
                Duration::from_secs(1),
            )
            .unwrap(),
            conversation: Conversation {
                channel: "D1".into(),
                thread_ts: None,
            },
            paths: traps.paths.clone(),
            max_bytes: MAX_BYTES,
        };
        traps.assert_refused(&outbox).await;
    }
}
