//! The `/warden` slash command, delivered over Socket Mode as a `slash_commands` envelope:
//! `new` starts a fresh session, `status` shows what runs and waits, `approvals` lists what
//! was approved for good. Answers go only to the person who typed it. Slack does not say which
//! thread a command was typed in, so in a channel (where each thread is a session) they point
//! at the thread instead.

use super::format::escape;
use super::store::{Conversation, SlackStore};
use crate::egress::Grants;
use crate::gateway::Gateway;
use crate::tools::approval_rules::ApprovalRules;
use serde_json::Value;

const USAGE: &str = "`/warden new` starts a new conversation, `/warden status` shows what runs \
                     and waits, `/warden approvals` lists what was approved for good.";

pub struct Slash<'a> {
    pub gateway: &'a Gateway,
    pub store: &'a SlackStore,
    pub rules: &'a ApprovalRules,
    pub grants: &'a Grants,
}

impl Slash<'_> {
    /// The answer (mrkdwn) to `/warden …` from an allowed user.
    pub fn answer(&self, payload: &Value) -> String {
        let channel = payload["channel_id"].as_str().unwrap_or_default();
        let word = payload["text"].as_str().unwrap_or_default().trim();
        if !channel.starts_with('D') {
            return "In a channel each thread is its own conversation: mention me outside a \
                    thread to start a new one, and ask in the thread for its status. In a direct \
                    message, "
                .to_string()
                + USAGE;
        }
        let conversation = Conversation {
            channel: channel.to_string(),
            thread_ts: None,
        };
        let chat = match self.store.chat_of(&conversation) {
            Ok(chat) => chat,
            Err(e) => return format!("warden could not read its database: {e}"),
        };
        match word {
            "new" => match self.gateway.new_session(chat) {
                Ok(true) => "Started a new conversation.".into(),
                Ok(false) => "A run is in progress: `/warden new` once it ends.".into(),
                Err(e) => format!("warden could not start a new conversation: {e}"),
            },
            "status" => {
                let status = self.gateway.status(chat);
                let mut lines = Vec::new();
                match &status.running {
                    Some((preview, took)) => lines.push(format!(
                        "Running for {} s: {}",
                        took.as_secs(),
                        escape(preview)
                    )),
                    None => lines.push("Nothing is running.".into()),
                }
                for (n, preview) in status.queued.iter().enumerate() {
                    lines.push(format!("Waiting #{}: {}", n + 1, escape(preview)));
                }
                lines.join("\n")
            }
            "approvals" => self.approvals(&self.gateway.session_key(chat)),
            _ => USAGE.into(),
        }
    }

    fn approvals(&self, session: &str) -> String {
        let mut lines = Vec::new();
        match self.rules.list(Some(session)) {
            Ok(rules) => lines.extend(rules.iter().map(|rule| {
                format!(
                    "• `{}` ({}) — `warden approvals rm {}` revokes it",
                    escape(&rule.shown),
                    rule.expires_at
                        .as_deref()
                        .map(|at| format!("until {at}"))
                        .unwrap_or_else(|| "until revoked".into()),
                    rule.id
                )
            })),
            Err(e) => lines.push(format!("The approved commands could not be read: {e}")),
        }
        match self.grants.list() {
            Ok(grants) => lines.extend(grants.iter().filter(|g| g.session == session).map(|g| {
                format!(
                    "• host {} — `warden egress rm {}` revokes it",
                    escape(&g.host),
                    escape(&g.host)
                )
            })),
            Err(e) => lines.push(format!("The allowed hosts could not be read: {e}")),
        }
        if lines.is_empty() {
            return "Nothing is approved for good in this conversation.".into();
        }
        format!("Approved for good here:\n{}", lines.join("\n"))
    }
}
