//! Several channels on one gateway (`warden bot` with `[http] listen`: the API's threads and
//! the Telegram chats share one queue per chat, one store and one agent). Each chat belongs to
//! the first channel that [`serves`](Channel::serves) it; that channel shows its runs, sends
//! its answers and names its session.

use super::channel::{Channel, DraftFn, RunInfo, RunView, SendError};
use crate::agent::RunControl;
use async_trait::async_trait;
use std::sync::Arc;

pub struct Channels {
    /// In order of precedence; the last one should serve every chat the others do not.
    channels: Vec<Arc<dyn Channel>>,
}

impl Channels {
    /// `channels` in order of precedence (the narrowest first).
    pub fn new(channels: Vec<Arc<dyn Channel>>) -> Channels {
        assert!(!channels.is_empty(), "a gateway needs a channel");
        Channels { channels }
    }

    /// The channel of `chat_id`: the first that serves it, else the last.
    fn of(&self, chat_id: i64) -> &Arc<dyn Channel> {
        self.channels
            .iter()
            .find(|c| c.serves(chat_id))
            .unwrap_or_else(|| &self.channels[self.channels.len() - 1])
    }
}

#[async_trait]
impl Channel for Channels {
    fn open_run(&self, run: &RunInfo, control: &RunControl, draft: DraftFn) -> Box<dyn RunView> {
        self.of(run.chat_id).open_run(run, control, draft)
    }

    /// The catch-all channel's parts; the gateway asks [`Channel::parts_for`].
    fn parts(&self, text: &str) -> Vec<String> {
        self.channels[self.channels.len() - 1].parts(text)
    }

    fn parts_for(&self, chat_id: i64, text: &str) -> Vec<String> {
        self.of(chat_id).parts_for(chat_id, text)
    }

    async fn send_part(
        &self,
        run: &RunInfo,
        index: usize,
        part: &str,
        again: bool,
    ) -> Result<(), SendError> {
        self.of(run.chat_id)
            .send_part(run, index, part, again)
            .await
    }

    fn serves(&self, chat_id: i64) -> bool {
        self.channels.iter().any(|c| c.serves(chat_id))
    }

    fn session_prefix(&self, chat_id: i64) -> Option<&'static str> {
        self.of(chat_id).session_prefix(chat_id)
    }
}
