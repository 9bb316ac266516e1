//! Talking to the Bot API: teloxide's client plus what every outgoing message needs —
//! flood-control waits and a few retries (or, for the live message, one attempt whose
//! `retry_after` the caller honors), the plain-text fallback when Telegram refuses a message's
//! HTML, splitting long answers (the first part replacing the streamed draft), file uploads,
//! and error texts with the token taken out.

use super::format::{html_to_plain, markdown_to_html};
use super::split::{split_html, MESSAGE_LIMIT};
use crate::gateway::{ChatKey, SendError};
use crate::redact::redact;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use teloxide::payloads::{
    EditMessageTextSetters, SendChatActionSetters, SendDocumentSetters, SendMessageSetters,
    SendPhotoSetters,
};
use teloxide::prelude::Requester;
use teloxide::types::{
    ChatAction, ChatId, InlineKeyboardMarkup, InputFile, LinkPreviewOptions, Message, MessageId,
    ParseMode, ReplyParameters, ThreadId,
};
use teloxide::{ApiError, Bot, RequestError};

/// Attempts per request for network errors and flood control.
const ATTEMPTS: u32 = 4;
/// Longest flood-control wait honored before giving up on a message.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How long the long poll's HTTP request may outlast the poll itself: the server answers an
/// idle poll when its `timeout` ends, so the client must wait at least that long plus the
/// round trip, or every idle poll fails.
const POLL_MARGIN: Duration = Duration::from_secs(10);
/// Establishing a connection to the Bot API.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Time limits for the Bot API's HTTP requests.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// `getUpdates`' long-poll timeout (the server holds an idle poll this long).
    pub poll: Duration,
    /// Any other request, from sending it to the end of the answer.
    pub request: Duration,
}

impl Timeouts {
    /// `telegram.poll_timeout_secs` and `telegram.request_timeout_secs`.
    pub fn of(config: &crate::config::TelegramConfig) -> Timeouts {
        Timeouts {
            poll: Duration::from_secs(config.poll_timeout_secs.into()),
            request: Duration::from_secs(config.request_timeout_secs.max(1)),
        }
    }
}

#[derive(Clone)]
pub struct Telegram {
    /// Every request but the long poll.
    bot: Bot,
    /// The long poll, on a client that waits out the server's hold.
    poller: Bot,
    timeouts: Timeouts,
}

/// A message the answer streamed into, and the HTML it shows if this process knows it.
#[derive(Clone, Debug)]
pub struct Draft {
    pub message_id: i32,
    pub shown: Option<String>,
}

/// A file to upload, opened by the caller.
pub struct Upload<'a> {
    pub file: &'a std::fs::File,
    pub name: &'a str,
    /// At most this many bytes are sent (the file may grow after its size was checked).
    pub max: u64,
    pub photo: bool,
}

impl Upload<'_> {
    /// The file from its start, as teloxide streams it.
    fn input(&self) -> std::io::Result<InputFile> {
        use std::io::{Seek, SeekFrom};
        use tokio::io::AsyncReadExt;
        let mut file = self.file.try_clone()?;
        file.seek(SeekFrom::Start(0))?;
        let reader = tokio::fs::File::from_std(file).take(self.max);
        Ok(InputFile::read(reader).file_name(self.name.to_string()))
    }
}

/// An error's text without the bot token (teloxide errors can carry the request URL).
pub fn describe(error: &RequestError) -> String {
    redact(&error.to_string())
}

/// Which failed requests are sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repeat {
    /// A second copy does no harm: reads, edits (the same text again), deletes.
    Harmless,
    /// A second copy would show twice (new messages, uploads): only a request that surely did
    /// not arrive is sent again — flood control, or no connection at all.
    IfNotArrived,
}

/// Whether a failed request may have been carried out by Telegram all the same: it was sent
/// and no answer came (a time-out, a connection that broke mid-request), or the answer came
/// and could not be read.
fn may_have_arrived(error: &RequestError) -> bool {
    match error {
        RequestError::Network(e) => !e.is_connect(),
        RequestError::Io(_) | RequestError::InvalidJson { .. } => true,
        _ => false,
    }
}

/// Heads a message sent again because an earlier try may have arrived (see
/// [`Telegram::send_part`]).
const SENT_AGAIN: &str =
    "↻ <i>Sent again: warden could not confirm that this arrived, so it may be a repeat.</i>";

/// A failed send, as the gateway sees it. Telegram answered what it could not read: the
/// message arrived.
fn sent_or(error: &RequestError) -> Result<(), SendError> {
    match error {
        RequestError::InvalidJson { .. } => {
            tracing::warn!("an unreadable answer from Telegram: {}", describe(error));
            Ok(())
        }
        e if may_have_arrived(e) => Err(SendError::MayHaveArrived(describe(e))),
        e => Err(SendError::Failed(describe(e))),
    }
}

/// A topic as the Bot API names it (`message_thread_id`).
fn thread(topic: i32) -> ThreadId {
    ThreadId(MessageId(topic))
}

/// Where `msg` was posted: its chat, and its topic when it is a topic message (a forum's or a
/// private chat's with topics). Replies in a plain group's thread carry a thread id too; they
/// are not a topic and stay in the chat's conversation.
pub fn chat_key(msg: &Message) -> ChatKey {
    let topic = msg
        .thread_id
        .filter(|_| msg.is_topic_message)
        .map(|thread| thread.0 .0);
    ChatKey::new(msg.chat.id.0, topic)
}

fn no_preview() -> LinkPreviewOptions {
    LinkPreviewOptions {
        is_disabled: true,
        url: None,
        prefer_small_media: false,
        prefer_large_media: false,
        show_above_text: false,
    }
}

impl Telegram {
    /// A client for `token` at `api_url` (default: the real Bot API). The token is registered
    /// with the log redactor before anything can log it.
    pub fn new(token: &str, api_url: Option<&str>, timeouts: Timeouts) -> Result<Telegram, String> {
        crate::redact::register(token);
        let url = match api_url.map(str::trim).filter(|u| !u.is_empty()) {
            // teloxide joins paths onto the URL: a trailing slash would give `//bot…`.
            Some(url) => Some(
                reqwest::Url::parse(url.trim_end_matches('/'))
                    .map_err(|e| format!("TELEGRAM_API_URL / telegram.api_url {url:?}: {e}"))?,
            ),
            None => None,
        };
        let bot = |timeout: Duration| -> Result<Bot, String> {
            let mut builder = reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(timeout)
                .tcp_nodelay(true);
            // The proxy teloxide's own client would use.
            if let Ok(proxy) = std::env::var("TELOXIDE_PROXY") {
                let proxy = reqwest::Proxy::all(&proxy)
                    .map_err(|e| format!("TELOXIDE_PROXY {proxy:?}: {e}"))?;
                builder = builder.proxy(proxy);
            }
            let client = builder
                .build()
                .map_err(|e| format!("setting up the Bot API client: {e}"))?;
            let bot = Bot::with_client(token, client);
            Ok(match &url {
                Some(url) => bot.set_api_url(url.clone()),
                None => bot,
            })
        };
        Ok(Telegram {
            bot: bot(timeouts.request)?,
            poller: bot(timeouts.poll + POLL_MARGIN)?,
            timeouts,
        })
    }

    pub fn bot(&self) -> &Bot {
        &self.bot
    }

    /// The client for `getUpdates`: its requests may take the poll's timeout and a margin.
    pub fn poller(&self) -> &Bot {
        &self.poller
    }

    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Run `request` again after flood control (`retry_after`) and network errors: for requests
    /// that do no harm when they arrive twice (reads, edits, deletes).
    pub async fn retrying<T, F, Fut>(&self, what: &str, request: F) -> Result<T, RequestError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, RequestError>>,
    {
        self.attempts(ATTEMPTS, Repeat::Harmless, what, request)
            .await
    }

    /// Run `request` up to `attempts` times (see [`Repeat`] for which failures are retried).
    async fn attempts<T, F, Fut>(
        &self,
        attempts: u32,
        repeat: Repeat,
        what: &str,
        request: F,
    ) -> Result<T, RequestError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, RequestError>>,
    {
        let mut attempt = 1;
        loop {
            let error = match request().await {
                Ok(value) => return Ok(value),
                Err(e) => e,
            };
            let wait = match &error {
                RequestError::RetryAfter(secs) if secs.duration() <= MAX_RETRY_AFTER => {
                    secs.duration()
                }
                RequestError::Network(_) | RequestError::Io(_)
                    if repeat == Repeat::Harmless || !may_have_arrived(&error) =>
                {
                    Duration::from_millis(500 * u64::from(attempt))
                }
                _ => return Err(error),
            };
            if attempt >= attempts {
                return Err(error);
            }
            tracing::debug!("{what}: {} (retrying in {wait:?})", describe(&error));
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// Send one message of Telegram HTML; if Telegram refuses the HTML, send its plain text.
    /// `chat` is a chat, or a topic of one (see [`ChatKey`]): the message goes there.
    pub async fn send_html(
        &self,
        chat: impl Into<ChatKey>,
        reply_to: Option<i32>,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<Message, String> {
        self.send_html_tries(ATTEMPTS, chat.into(), reply_to, html, keyboard)
            .await
            .map_err(|e| describe(&e))
    }

    /// [`Telegram::send_html`] in one attempt: flood control comes back to the caller.
    pub async fn send_html_once(
        &self,
        chat: impl Into<ChatKey>,
        reply_to: Option<i32>,
        html: &str,
    ) -> Result<Message, RequestError> {
        self.send_html_tries(1, chat.into(), reply_to, html, None)
            .await
    }

    async fn send_html_tries(
        &self,
        attempts: u32,
        chat: ChatKey,
        reply_to: Option<i32>,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<Message, RequestError> {
        let send = |text: String, html_mode: bool| {
            let keyboard = keyboard.clone();
            async move {
                let mut req = self
                    .bot
                    .send_message(ChatId(chat.chat_id), text)
                    .link_preview_options(no_preview());
                if let Some(topic) = chat.topic {
                    req = req.message_thread_id(thread(topic));
                }
                if html_mode {
                    req = req.parse_mode(ParseMode::Html);
                }
                if let Some(id) = reply_to {
                    req = req.reply_parameters(
                        ReplyParameters::new(MessageId(id)).allow_sending_without_reply(),
                    );
                }
                if let Some(k) = keyboard {
                    req = req.reply_markup(k);
                }
                req.await
            }
        };
        let first = self
            .attempts(attempts, Repeat::IfNotArrived, "sendMessage", || {
                send(html.to_string(), true)
            })
            .await;
        match first {
            Err(RequestError::Api(ApiError::CantParseEntities(why))) => {
                tracing::warn!(
                    chat = chat.chat_id,
                    "Telegram refused the HTML ({why}); sending plain text"
                );
                let plain = html_to_plain(html);
                self.attempts(attempts, Repeat::IfNotArrived, "sendMessage", || {
                    send(plain.clone(), false)
                })
                .await
            }
            other => other,
        }
    }

    /// Replace a message's text (and drop its buttons), with the same plain-text fallback.
    /// "Not modified" counts as success.
    pub async fn edit_html(&self, chat: i64, message_id: i32, html: &str) -> Result<(), String> {
        self.edit_html_tries(ATTEMPTS, chat, message_id, html)
            .await
            .map_err(|e| describe(&e))
    }

    /// [`Telegram::edit_html`] in one attempt: flood control comes back to the caller.
    pub async fn edit_html_once(
        &self,
        chat: i64,
        message_id: i32,
        html: &str,
    ) -> Result<(), RequestError> {
        self.edit_html_tries(1, chat, message_id, html).await
    }

    async fn edit_html_tries(
        &self,
        attempts: u32,
        chat: i64,
        message_id: i32,
        html: &str,
    ) -> Result<(), RequestError> {
        let edit = |text: String, html_mode: bool| async move {
            let mut req = self
                .bot
                .edit_message_text(ChatId(chat), MessageId(message_id), text)
                .link_preview_options(no_preview());
            if html_mode {
                req = req.parse_mode(ParseMode::Html);
            }
            req.await
        };
        let result = match self
            .attempts(attempts, Repeat::Harmless, "editMessageText", || {
                edit(html.to_string(), true)
            })
            .await
        {
            Err(RequestError::Api(ApiError::CantParseEntities(_))) => {
                let plain = html_to_plain(html);
                self.attempts(attempts, Repeat::Harmless, "editMessageText", || {
                    edit(plain.clone(), false)
                })
                .await
            }
            other => other,
        };
        match result {
            Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The messages `markdown` is sent as: Telegram HTML, split at the message limit.
    pub fn parts(markdown: &str) -> Vec<String> {
        split_html(&markdown_to_html(markdown), MESSAGE_LIMIT)
    }

    /// Send one part of an answer as a new message. `again`: an earlier try may have arrived,
    /// so the message says it may be a repeat. A time-out is not retried (the message may
    /// have arrived): it is [`SendError::MayHaveArrived`], for the caller to decide.
    pub async fn send_part(
        &self,
        chat: ChatKey,
        reply_to: Option<i32>,
        html: &str,
        again: bool,
    ) -> Result<(), SendError> {
        let marked = format!("{SENT_AGAIN}\n\n{html}");
        let html = match again {
            false => html,
            true if marked.encode_utf16().count() <= MESSAGE_LIMIT => &marked,
            // No room for the mark in the part: it goes first, on its own.
            true => {
                self.send_html_tries(1, chat, reply_to, SENT_AGAIN, None)
                    .await
                    .map_err(|e| SendError::Failed(describe(&e)))?;
                html
            }
        };
        match self
            .send_html_tries(ATTEMPTS, chat, reply_to, html, None)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => sent_or(&e),
        }
    }

    /// Turn the draft into `html`: unchanged text is not sent again; a draft that is gone or
    /// cannot be edited gives way to a new message. (Any other failure is the answer's: sending
    /// it anew could show it twice.) Editing is the same the second time, so `again` matters
    /// only for a new message.
    pub async fn replace_draft(
        &self,
        chat: ChatKey,
        reply_to: Option<i32>,
        draft: &Draft,
        html: &str,
        again: bool,
    ) -> Result<(), SendError> {
        if draft.shown.as_deref() == Some(html) {
            return Ok(());
        }
        match self
            .edit_html_tries(ATTEMPTS, chat.chat_id, draft.message_id, html)
            .await
        {
            Ok(()) => Ok(()),
            Err(RequestError::Api(
                e @ (ApiError::MessageToEditNotFound
                | ApiError::MessageCantBeEdited
                | ApiError::MessageIdInvalid),
            )) => {
                tracing::info!(
                    chat = chat.chat_id,
                    "the streamed message is gone ({e}); sending anew"
                );
                self.send_part(chat, reply_to, html, again).await?;
                self.delete(chat.chat_id, draft.message_id).await;
                Ok(())
            }
            Err(e) => sent_or(&e),
        }
    }

    /// Upload `file` (opened by the caller, at most `max` bytes are read) as a document or a
    /// photo named `name`, with an HTML `caption`.
    pub async fn send_file(
        &self,
        chat: impl Into<ChatKey>,
        upload: &Upload<'_>,
        caption: Option<&str>,
    ) -> Result<Message, String> {
        let chat: ChatKey = chat.into();
        let (id, topic) = (ChatId(chat.chat_id), chat.topic.map(thread));
        let what = if upload.photo {
            "sendPhoto"
        } else {
            "sendDocument"
        };
        let send = || async move {
            // Every attempt reads the file from its start again.
            let input = upload.input().map_err(|e| RequestError::Io(Arc::new(e)))?;
            if upload.photo {
                let mut req = self.bot.send_photo(id, input);
                if let Some(topic) = topic {
                    req = req.message_thread_id(topic);
                }
                if let Some(caption) = caption {
                    req = req.caption(caption).parse_mode(ParseMode::Html);
                }
                req.await
            } else {
                let mut req = self.bot.send_document(id, input);
                if let Some(topic) = topic {
                    req = req.message_thread_id(topic);
                }
                if let Some(caption) = caption {
                    req = req.caption(caption).parse_mode(ParseMode::Html);
                }
                req.await
            }
        };
        self.attempts(ATTEMPTS, Repeat::IfNotArrived, what, send)
            .await
            .map_err(|e| describe(&e))
    }

    /// Best effort: "typing…" for about five seconds.
    pub async fn typing(&self, chat: ChatKey) {
        let mut req = self
            .bot
            .send_chat_action(ChatId(chat.chat_id), ChatAction::Typing);
        if let Some(topic) = chat.topic {
            req = req.message_thread_id(thread(topic));
        }
        if let Err(e) = req.await {
            tracing::debug!(chat = chat.chat_id, "sendChatAction: {}", describe(&e));
        }
    }

    /// Best effort.
    pub async fn delete(&self, chat: i64, message_id: i32) {
        if let Err(e) = self
            .bot
            .delete_message(ChatId(chat), MessageId(message_id))
            .await
        {
            tracing::debug!(chat, "deleteMessage: {}", describe(&e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default request timeout is the 60 s README names, so a Bot API that takes 20 s to
    /// answer is waited out (the Telegram suite checks that end to end).
    #[test]
    fn the_default_request_timeout_outlasts_a_20_s_stall() {
        let timeouts = Timeouts::of(&crate::config::TelegramConfig::default());
        assert!(timeouts.request > Duration::from_secs(20), "{timeouts:?}");
        assert_eq!(
            timeouts.request,
            Duration::from_secs(60),
            "README names 60 s"
        );
    }
}
