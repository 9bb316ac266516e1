//! What an envelope becomes. An event is for warden when it is a direct message, a mention
//! (which starts a session in that thread), or a reply in a thread a mention started; a
//! message from a user who is not allowed, or in a channel that is not, gets no answer — the
//! user is told why, once. Everything else (other bots, edits, joins, chatter) is ignored.
//!
//! Each accepted message is submitted with its envelope's key as the dedup key, so a
//! redelivery — or a restart between recording an envelope and handling it — runs it once.

use super::api::SlackApi;
use super::approvals::{Pressed, SlackApprovals};
use super::envelope::Envelope;
use super::files::Inbound;
use super::format::escape;
use super::slash::Slash;
use super::store::{Conversation, Recorded, SlackStore};
use crate::egress::Grants;
use crate::gateway::{Gateway, Origin, Submission, SubmitError};
use crate::tools::approval_rules::ApprovalRules;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;

pub struct Handler {
    pub api: SlackApi,
    pub store: SlackStore,
    pub gateway: Gateway,
    /// The bot user's id (`auth.test`): its own messages and its mentions are told apart.
    pub me: String,
    pub allowed_users: HashSet<String>,
    pub allowed_channels: HashSet<String>,
    pub approvals: Arc<SlackApprovals>,
    pub files: Inbound,
    /// What `/warden approvals` lists.
    pub rules: ApprovalRules,
    pub grants: Grants,
}

/// What an event asks of warden.
#[derive(Debug, PartialEq, Eq)]
enum Addressed {
    /// A message for a session: who sent it, where, what.
    Prompt {
        user: String,
        conversation: Conversation,
        text: String,
        dm: bool,
    },
    Ignore,
}

impl Handler {
    pub fn scrub(&self, text: &str) -> String {
        self.api.scrub(text)
    }

    /// Record an envelope before it is acknowledged; whether to handle it (a redelivery of a
    /// handled one is not).
    pub fn record(&self, key: &str, envelope: &Envelope) -> bool {
        match self.store.record(key, &envelope.to_json()) {
            Ok(Recorded::Handled) => {
                tracing::debug!("slack: {key} again (a redelivery); already handled");
                false
            }
            Ok(Recorded::New | Recorded::Pending) => true,
            Err(e) => {
                // Not recorded: handle it anyway rather than lose it (the gateway's dedup key
                // still stops a second run).
                tracing::warn!("slack: recording {key}: {e}");
                true
            }
        }
    }

    /// Envelopes a previous process recorded and never handled.
    pub async fn handle_pending(&self) {
        let pending = match self.store.pending() {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!("slack: reading unhandled envelopes: {e}");
                return;
            }
        };
        for (key, body) in pending {
            match Envelope::parse(&body) {
                Some(envelope) => self.handle(&key, envelope).await,
                None => self.done(&key),
            }
        }
    }

    pub async fn handle(&self, key: &str, envelope: Envelope) {
        let finished = match envelope.kind.as_str() {
            "events_api" => self.event(key, &envelope.payload["event"]).await,
            "interactive" => {
                self.interaction(&envelope.payload).await;
                true
            }
            "slash_commands" => {
                self.slash(&envelope.payload).await;
                true
            }
            other => {
                tracing::debug!("slack: a {other} envelope (not taken by warden yet)");
                true
            }
        };
        if finished {
            self.done(key);
        }
    }

    /// `/warden …`: answered to the person who typed it only.
    async fn slash(&self, payload: &Value) {
        let user = payload["user_id"].as_str().unwrap_or_default();
        let channel = payload["channel_id"].as_str().unwrap_or_default();
        let answer = if self.allowed_users.contains(user) {
            Slash {
                gateway: &self.gateway,
                store: &self.store,
                rules: &self.rules,
                grants: &self.grants,
            }
            .answer(payload)
        } else {
            format!(
                "warden answers only the people its owner allowed, and your user ID ({}) is \
                 not one of them.",
                escape(user)
            )
        };
        if let Err(e) = self.api.tell(channel, user, None, &answer).await {
            tracing::warn!("slack: answering /warden: {e}");
        }
    }

    /// A button press (`block_actions`).
    async fn interaction(&self, payload: &Value) {
        if payload["type"].as_str() != Some("block_actions") {
            return;
        }
        match self.approvals.on_press(payload, &self.allowed_users) {
            Pressed::Answered | Pressed::NotMine => {}
            Pressed::Refused(why) => {
                let user = payload["user"]["id"].as_str().unwrap_or_default();
                let channel = payload["channel"]["id"]
                    .as_str()
                    .or_else(|| payload["container"]["channel_id"].as_str())
                    .unwrap_or_default();
                let thread = payload["container"]["thread_ts"]
                    .as_str()
                    .or_else(|| payload["message"]["thread_ts"].as_str());
                if let Err(e) = self.api.tell(channel, user, thread, &escape(&why)).await {
                    tracing::warn!("slack: telling {user} about a refused press: {e}");
                }
            }
        }
    }

    fn done(&self, key: &str) {
        if let Err(e) = self.store.mark_handled(key) {
            tracing::warn!("slack: marking {key} handled: {e}");
        }
    }

    /// Handle one event; false when it must be handled again at the next start.
    async fn event(&self, key: &str, event: &Value) -> bool {
        let Addressed::Prompt {
            user,
            conversation,
            text,
            dm,
        } = addressed(&self.me, &self.store, event)
        else {
            return true;
        };
        if !self.allowed_users.contains(&user) {
            self.refuse(
                &user,
                &conversation,
                &format!(
                "warden answers only the people its owner allowed, and your user ID ({user}) is \
                 not one of them. Ask the owner to add it to slack.allowed_users."
            ),
            )
            .await;
            return true;
        }
        if !dm && !self.allowed_channels.contains(&conversation.channel) {
            self.refuse(
                &user,
                &conversation,
                &format!(
                "warden does not answer in this channel ({}): it is not in slack.allowed_channels. \
                 Send a direct message instead, or ask the owner to allow the channel.",
                conversation.channel
            ),
            )
            .await;
            return true;
        }
        let files = event["files"].as_array().cloned().unwrap_or_default();
        let taken = self.files.take(&files).await;
        if !taken.problems.is_empty() {
            let list = taken.problems.join("; ");
            self.say(
                &conversation,
                &format!("I could not take this file: {list}"),
            )
            .await;
        }
        let mut prompt = taken.notes.join("\n");
        if !text.is_empty() {
            if !prompt.is_empty() {
                prompt.push_str("\n\n");
            }
            prompt.push_str(&text);
        }
        if prompt.is_empty() {
            return true;
        }
        let chat = match self.store.chat_of(&conversation) {
            Ok(chat) => chat,
            Err(e) => {
                tracing::warn!("slack: storing the conversation: {e}");
                return false;
            }
        };
        let preview = match taken.notes.len() {
            0 => text.clone(),
            n => format!("[{n} file(s)] {text}").trim_end().to_string(),
        };
        let user_id = user_number(&user);
        let mut submission = Submission::text(chat, Origin::User { user_id }, prompt)
            .dedup_key(format!("slack:{key}"));
        submission.preview = crate::gateway::preview(&preview);
        match self.gateway.submit(submission) {
            Ok(_) => true,
            Err(SubmitError::ShuttingDown) => false,
            Err(e @ SubmitError::Busy { .. }) => {
                self.say(
                    &conversation,
                    &format!("Not taken: {e}. Try again when the answer is in."),
                )
                .await;
                true
            }
            Err(SubmitError::Store(e)) => {
                tracing::warn!("slack: queueing a message: {e}");
                false
            }
        }
    }

    /// Tell `user` (only them) why they get no answer, the first time only.
    async fn refuse(&self, user: &str, conversation: &Conversation, why: &str) {
        tracing::info!(user, channel = %conversation.channel, "slack: refused: {why}");
        match self.store.first_refusal(user) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!("slack: recording a refusal: {e}");
                return;
            }
        }
        if let Err(e) = self
            .api
            .tell(
                &conversation.channel,
                user,
                conversation.thread_ts.as_deref(),
                why,
            )
            .await
        {
            tracing::warn!("slack: telling {user} why: {e}");
        }
    }

    async fn say(&self, conversation: &Conversation, text: &str) {
        if let Err(e) = self
            .api
            .post(
                &conversation.channel,
                conversation.thread_ts.as_deref(),
                &escape(text),
                true,
            )
            .await
        {
            tracing::warn!("slack: posting a notice: {e}");
        }
    }
}

/// Whether (and how) `event` is addressed to warden, whose user id is `me`.
fn addressed(me: &str, store: &SlackStore, event: &Value) -> Addressed {
    let text = event["text"].as_str().unwrap_or_default();
    let (Some(user), Some(channel), Some(ts)) = (
        event["user"].as_str(),
        event["channel"].as_str(),
        event["ts"].as_str(),
    ) else {
        return Addressed::Ignore;
    };
    // Bots (warden itself among them), edits, joins and the like.
    let subtype = event["subtype"].as_str();
    if event.get("bot_id").is_some_and(|b| !b.is_null())
        || user == me
        || subtype.is_some_and(|s| s != "file_share")
    {
        return Addressed::Ignore;
    }
    let thread = event["thread_ts"].as_str();
    let mention = format!("<@{}>", me);
    let prompt = |conversation: Conversation, dm: bool| Addressed::Prompt {
        user: user.to_string(),
        conversation,
        text: text.replace(&mention, "").trim().to_string(),
        dm,
    };
    match (event["type"].as_str(), event["channel_type"].as_str()) {
        (Some("message"), Some("im")) => prompt(
            Conversation {
                channel: channel.to_string(),
                thread_ts: None,
            },
            true,
        ),
        (Some("app_mention"), _) => prompt(
            Conversation {
                channel: channel.to_string(),
                thread_ts: Some(thread.unwrap_or(ts).to_string()),
            },
            false,
        ),
        // A reply in a thread a mention started continues its session; one that mentions
        // warden comes again as an `app_mention`, which takes it.
        (Some("message"), _) if !text.contains(&mention) => {
            let Some(thread) = thread else {
                return Addressed::Ignore;
            };
            let conversation = Conversation {
                channel: channel.to_string(),
                thread_ts: Some(thread.to_string()),
            };
            match store.find(&conversation) {
                Ok(Some(_)) => prompt(conversation, false),
                _ => Addressed::Ignore,
            }
        }
        _ => Addressed::Ignore,
    }
}

/// A Slack user ID (upper-case letters and digits) as the number a run's origin records: its
/// base-36 value, which maps back to the ID; 0 for one too long to fit.
fn user_number(user: &str) -> i64 {
    i64::from_str_radix(user, 36).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn user_ids_become_numbers_that_tell_them_apart() {
        assert_ne!(user_number("U0123ABCD"), user_number("U0123ABCE"));
        assert_eq!(
            user_number("U0123ABCD"),
            i64::from_str_radix("u0123abcd", 36).unwrap()
        );
    }

    #[test]
    fn what_is_addressed_to_warden() {
        let store = SlackStore::new(crate::schema::open_in_memory().unwrap());
        let addressed = |event: &Value| addressed("UBOT", &store, event);
        let dm = json!({"type":"message","channel_type":"im","channel":"D1","user":"U1","text":"hi","ts":"1.000001"});
        assert!(matches!(addressed(&dm), Addressed::Prompt { dm: true, .. }));
        let mention = json!({"type":"app_mention","channel":"C1","user":"U1","text":"<@UBOT> look","ts":"2.000001"});
        match addressed(&mention) {
            Addressed::Prompt {
                conversation, text, ..
            } => {
                assert_eq!(conversation.thread_ts.as_deref(), Some("2.000001"));
                assert_eq!(text, "look");
            }
            other => panic!("{other:?}"),
        }
        let chatter = json!({"type":"message","channel_type":"channel","channel":"C1","user":"U1","text":"lunch?","ts":"3.000001"});
        assert_eq!(addressed(&chatter), Addressed::Ignore);
        let reply = json!({"type":"message","channel_type":"channel","channel":"C1","user":"U1","text":"and?","ts":"4.000001","thread_ts":"2.000001"});
        assert_eq!(
            addressed(&reply),
            Addressed::Ignore,
            "no session in that thread yet"
        );
        store
            .chat_of(&Conversation {
                channel: "C1".into(),
                thread_ts: Some("2.000001".into()),
            })
            .unwrap();
        assert!(matches!(
            addressed(&reply),
            Addressed::Prompt { dm: false, .. }
        ));
        let own = json!({"type":"message","channel_type":"im","channel":"D1","user":"UBOT","text":"x","ts":"5.000001"});
        assert_eq!(addressed(&own), Addressed::Ignore);
        let bot = json!({"type":"message","channel_type":"im","channel":"D1","user":"U2","bot_id":"B1","text":"x","ts":"5.000002"});
        assert_eq!(addressed(&bot), Addressed::Ignore);
        let edit = json!({"type":"message","subtype":"message_changed","channel_type":"im","channel":"D1","user":"U1","text":"x","ts":"5.000003"});
        assert_eq!(addressed(&edit), Addressed::Ignore);
    }
}
