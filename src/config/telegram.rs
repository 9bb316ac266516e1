//! `[telegram]`: the bot's token and allowed users, its timeouts, queue and file sizes.

use crate::secret::Secret;
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelegramConfig {
    pub token: Secret,
    /// Telegram user IDs allowed to drive the bot. Empty: `warden bot` refuses to start.
    pub allowed_users: Vec<i64>,
    /// Bot API base URL (tests point it at a local fake server).
    pub api_url: Option<String>,
    /// Seconds an approval request waits for a button press; no answer means deny.
    pub approval_timeout_secs: u64,
    /// Prompts that may wait in one chat behind the running one; more get a "busy" reply.
    pub queue_depth: usize,
    /// Largest photo or document downloaded, in bytes (the Bot API itself serves ≤ 20 MB).
    pub max_file_bytes: u64,
    /// Largest workspace file the `send_file` tool uploads, in bytes. The Bot API's own limits
    /// apply on top: 50 MB for a document, 10 MB for a photo.
    pub max_send_bytes: u64,
    /// Seconds a shutdown waits for running agents before recording them as interrupted.
    pub shutdown_grace_secs: u64,
    /// Long-polling timeout of `getUpdates`, in seconds: Telegram holds an idle poll this long
    /// (the client waits 10 s more).
    pub poll_timeout_secs: u32,
    /// Seconds any other Bot API request may take. A message whose send timed out may have
    /// arrived all the same: it is sent once more, marked as possibly repeated.
    pub request_timeout_secs: u64,
    /// Seconds the agent worker process stays up after its last run (the next run starts a
    /// new one). While it is down the bot holds only the gateway in memory.
    pub worker_idle_secs: u64,
    /// Megabytes that must stay free on the database's disk: with less, new messages wait
    /// (kept by Telegram, the chat told once) so the runs already going have room to finish.
    pub min_free_mb: u64,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            token: Secret::default(),
            allowed_users: Vec::new(),
            api_url: None,
            approval_timeout_secs: 120,
            queue_depth: 5,
            max_file_bytes: 20 * 1024 * 1024,
            max_send_bytes: 50 * 1024 * 1024,
            shutdown_grace_secs: 20,
            poll_timeout_secs: 30,
            request_timeout_secs: 60,
            worker_idle_secs: 300,
            min_free_mb: 64,
        }
    }
}

pub(super) fn parse_user_ids(list: &str) -> Result<Vec<i64>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| format!("{s:?} is not a numeric Telegram user ID"))
        })
        .collect()
}
