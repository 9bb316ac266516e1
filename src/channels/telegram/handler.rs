//! What one update means: access control first (a stranger never reaches the gateway), then
//! a command, an approval button, or a prompt for the chat's queue.

use super::access::{Access, Verdict};
use super::api::{chat_key, Telegram};
use super::approvals::Approvals;
use super::commands::{self, Command};
use super::format::escape;
use super::inputs::{Inputs, Prepared};
use super::standing::{self, Standing};
use super::store::UpdateLog;
use crate::gateway::{ChatKey, Gateway, Origin, Submission, SubmitError, Trouble};
use std::sync::Arc;
use teloxide::types::{Message, Update, UpdateKind};

/// A stranger gets at most one refusal per this many seconds.
const REFUSAL_INTERVAL_SECS: i64 = 3600;
/// How much of a stranger's message the log shows.
const LOG_PREVIEW_CHARS: usize = 20;

const REFUSAL: &str = "Sorry, this is a private assistant.";

/// Whether an update is done with.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    Done,
    /// Shutting down: keep it recorded as unhandled; it is handled at the next start.
    Later,
    /// The database could not take it (a full disk): handle it again in a while. The chat
    /// was told.
    Retry,
}

pub struct Handler {
    pub tg: Telegram,
    pub gateway: Gateway,
    pub access: Access,
    pub log: UpdateLog,
    pub approvals: Arc<Approvals>,
    pub standing: Standing,
    pub inputs: Inputs,
}

impl Handler {
    pub async fn handle(&self, update: Update) -> Handled {
        let update_id = i64::from(update.id.0);
        match update.kind {
            UpdateKind::Message(msg) => self.on_message(update_id, &msg).await,
            UpdateKind::CallbackQuery(query) if standing::is_revoke(&query) => {
                let gateway = &self.gateway;
                self.standing
                    .on_callback(
                        &self.tg,
                        &self.access,
                        |chat| gateway.session_key(chat),
                        query,
                    )
                    .await;
                Handled::Done
            }
            UpdateKind::CallbackQuery(query) => {
                self.approvals
                    .on_callback(&self.tg, &self.access, query)
                    .await;
                Handled::Done
            }
            // Edits, channel posts, reactions…: nothing to do.
            _ => Handled::Done,
        }
    }

    async fn on_message(&self, update_id: i64, msg: &Message) -> Handled {
        // A topic is a conversation of its own: its queue, its session, its answers.
        let chat = chat_key(msg);
        let user_id = match self.access.check(msg) {
            Verdict::Ignore => return Handled::Done,
            Verdict::Refuse { user_id } => {
                self.refuse(user_id, msg).await;
                return Handled::Done;
            }
            Verdict::Accept { user_id } => user_id,
        };
        let raw = msg.text().or_else(|| msg.caption()).unwrap_or("");
        let text = self.access.strip_mention(raw);
        if msg.text().is_some() {
            if let Some(command) = commands::parse(&text, self.access.bot_username()) {
                return self.on_command(chat, user_id, msg.id.0, command).await;
            }
        }
        let (input, preview) = match self.inputs.prepare(msg, &text).await {
            Prepared::Run { input, preview } => (input, preview),
            Prepared::Reply(reply) => {
                self.reply(chat, msg.id.0, &escape(&reply)).await;
                return Handled::Done;
            }
        };
        let submission =
            Submission::blocks(chat.chat_id, Origin::User { user_id }, input, &preview)
                .in_topic(chat.topic)
                .reply_to(msg.id.0)
                // A re-delivered or re-processed update finds its run instead of starting another.
                .dedup_key(format!("telegram:update:{update_id}"));
        self.submit(chat, msg.id.0, submission).await
    }

    async fn submit(&self, chat: ChatKey, message_id: i32, submission: Submission) -> Handled {
        match self.gateway.submit(submission) {
            // The gateway delivers the answer; nobody here waits for it.
            Ok(_handle) => Handled::Done,
            Err(SubmitError::Busy { queued }) => {
                self.reply(chat, message_id, &escape(&commands::busy_reply(queued)))
                    .await;
                Handled::Done
            }
            Err(SubmitError::ShuttingDown) => Handled::Later,
            Err(SubmitError::Store(e)) => {
                tracing::error!(chat = %chat, "queueing a prompt: {e}");
                self.gateway
                    .tell_waiting(chat, Some(message_id), Trouble::of(&e))
                    .await;
                Handled::Retry
            }
        }
    }

    /// Updates that cannot be recorded now (`trouble`): they stay with Telegram, and each chat
    /// of an allowed user that sent one is told once that its message waits.
    pub async fn hold(&self, updates: &[Update], trouble: Trouble) {
        for update in updates {
            if let UpdateKind::Message(msg) = &update.kind {
                if let Verdict::Accept { .. } = self.access.check(msg) {
                    self.gateway
                        .tell_waiting(super::api::chat_key(msg), Some(msg.id.0), trouble)
                        .await;
                }
            }
        }
    }

    /// Updates were recorded: their chats are told again if a later outage holds them.
    pub fn recorded(&self, updates: &[Update]) {
        for update in updates {
            if let Some(chat) = update.chat() {
                self.gateway.writes_work(chat.id.0);
            }
        }
    }

    async fn on_command(
        &self,
        chat: ChatKey,
        user_id: i64,
        message_id: i32,
        cmd: Command,
    ) -> Handled {
        let reply = match cmd {
            Command::Help => Some(commands::HELP.to_string()),
            Command::Stop => commands::stop_reply(self.gateway.stop(chat)),
            Command::Steer(text) if text.is_empty() => {
                Some("Usage: /steer <i>what to tell the running task</i>".into())
            }
            Command::Steer(text) => {
                if self.gateway.steer(chat, &text) {
                    Some("↪️ I will pass that on before the next step.".into())
                } else {
                    // Nothing is running: it is simply the next prompt.
                    let submission = Submission::text(chat.chat_id, Origin::User { user_id }, text)
                        .in_topic(chat.topic)
                        .reply_to(message_id);
                    return self.submit(chat, message_id, submission).await;
                }
            }
            Command::New => match self.gateway.new_session(chat) {
                Ok(true) => Some("Started a new conversation.".into()),
                Ok(false) => Some(
                    "A run is in progress: /stop it or wait for it, then send /new again.".into(),
                ),
                Err(e) => {
                    tracing::error!(chat = %chat, "starting a new session: {e}");
                    Some("Sorry, I could not start a new conversation (a database error).".into())
                }
            },
            Command::Status => Some(commands::status_reply(&self.gateway.status(chat))),
            Command::Trust => match self.gateway.trust_session(chat) {
                Ok(Some(cleared)) => Some(commands::trust_reply(&cleared)),
                Ok(None) => Some(
                    "A run is in progress: /stop it or wait for it, then send /trust again.".into(),
                ),
                Err(e) => {
                    tracing::error!(chat = %chat, "trusting the session: {e}");
                    Some("Sorry, I could not change that (a database error).".into())
                }
            },
            Command::Retry => match self.gateway.retry(chat, user_id) {
                Ok(queued) => commands::retry_reply(queued),
                Err(SubmitError::Busy { queued }) => Some(escape(&commands::busy_reply(queued))),
                Err(SubmitError::ShuttingDown) => return Handled::Later,
                Err(SubmitError::Store(e)) => {
                    tracing::error!(chat = %chat, "retrying: {e}");
                    self.gateway
                        .tell_waiting(chat, Some(message_id), Trouble::of(&e))
                        .await;
                    return Handled::Retry;
                }
            },
            Command::Approvals(args) => {
                let session = self.gateway.session_key(chat);
                let words: Vec<&str> = args.split_whitespace().collect();
                match words.as_slice() {
                    [] => {
                        let (html, keyboard) = self.standing.list(&session);
                        if let Err(e) = self
                            .tg
                            .send_html(chat, Some(message_id), &html, keyboard)
                            .await
                        {
                            tracing::warn!(chat = %chat, "reply not sent: {e}");
                        }
                        None
                    }
                    ["rm", id] => Some(match id.trim_start_matches('#').parse::<i64>() {
                        Ok(id) => escape(&self.standing.revoke(&session, id)),
                        Err(_) => {
                            "Usage: /approvals rm <i>N</i> (the number /approvals shows)".into()
                        }
                    }),
                    _ => Some(
                        "Usage: /approvals lists them, /approvals rm <i>N</i> revokes one".into(),
                    ),
                }
            }
            Command::Unknown(name) => Some(format!(
                "Unknown command /{}. /help lists the commands.",
                escape(&name)
            )),
        };
        if let Some(reply) = reply {
            self.reply(chat, message_id, &reply).await;
        }
        Handled::Done
    }

    /// Log a stranger (id and a short preview, never the whole message) and refuse at most
    /// once per interval.
    async fn refuse(&self, user_id: i64, msg: &Message) {
        let text = msg.text().or_else(|| msg.caption()).unwrap_or("");
        let preview: String = text.chars().take(LOG_PREVIEW_CHARS).collect();
        tracing::warn!(
            user_id,
            chat = msg.chat.id.0,
            preview = %preview,
            "message from a user who is not allowed; not run"
        );
        let now = chrono::Utc::now().timestamp();
        match self.log.take_refusal(user_id, now, REFUSAL_INTERVAL_SECS) {
            Ok(true) => self.reply(chat_key(msg), msg.id.0, REFUSAL).await,
            Ok(false) => {}
            Err(e) => tracing::error!("recording a refusal: {e}"),
        }
    }

    /// Best effort: a failed reply is logged.
    async fn reply(&self, chat: ChatKey, message_id: i32, html: &str) {
        if let Err(e) = self.tg.send_html(chat, Some(message_id), html, None).await {
            tracing::warn!(chat = %chat, "reply not sent: {e}");
        }
    }
}
