//! Talking to the Bot API: teloxide's client plus what every outgoing message needs —
//! flood-control waits and a few retries, the plain-text fallback when Telegram refuses a
//! message's HTML, splitting long answers, and error texts with the token taken out.

use super::format::{html_to_plain, markdown_to_html};
use super::split::{split_html, MESSAGE_LIMIT};
use crate::redact::redact;
use std::future::Future;
use std::time::Duration;
use teloxide::payloads::{EditMessageTextSetters, SendMessageSetters};
use teloxide::prelude::Requester;
use teloxide::types::{
    ChatAction, ChatId, InlineKeyboardMarkup, LinkPreviewOptions, Message, MessageId, ParseMode,
    ReplyParameters,
};
use teloxide::{ApiError, Bot, RequestError};

/// Attempts per request for network errors and flood control.
const ATTEMPTS: u32 = 4;
/// Longest flood-control wait honored before giving up on a message.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct Telegram {
    bot: Bot,
}

/// An error's text without the bot token (teloxide errors can carry the request URL).
pub fn describe(error: &RequestError) -> String {
    redact(&error.to_string())
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
    pub fn new(token: &str, api_url: Option<&str>) -> Result<Telegram, String> {
        crate::redact::register(token);
        let mut bot = Bot::new(token);
        if let Some(url) = api_url.map(str::trim).filter(|u| !u.is_empty()) {
            // teloxide joins paths onto the URL: a trailing slash would give `//bot…`.
            let url = url.trim_end_matches('/');
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| format!("TELEGRAM_API_URL / telegram.api_url {url:?}: {e}"))?;
            bot = bot.set_api_url(parsed);
        }
        Ok(Telegram { bot })
    }

    pub fn bot(&self) -> &Bot {
        &self.bot
    }

    /// Run `request` again after flood control (`retry_after`) and network errors.
    pub async fn retrying<T, F, Fut>(&self, what: &str, request: F) -> Result<T, RequestError>
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
                RequestError::Network(_) | RequestError::Io(_) => {
                    Duration::from_millis(500 * u64::from(attempt))
                }
                _ => return Err(error),
            };
            if attempt >= ATTEMPTS {
                return Err(error);
            }
            tracing::debug!("{what}: {} (retrying in {wait:?})", describe(&error));
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// Send one message of Telegram HTML; if Telegram refuses the HTML, send its plain text.
    pub async fn send_html(
        &self,
        chat: i64,
        reply_to: Option<i32>,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<Message, String> {
        let send = |text: String, html_mode: bool| {
            let keyboard = keyboard.clone();
            async move {
                let mut req = self
                    .bot
                    .send_message(ChatId(chat), text)
                    .link_preview_options(no_preview());
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
            .retrying("sendMessage", || send(html.to_string(), true))
            .await;
        match first {
            Ok(message) => Ok(message),
            Err(RequestError::Api(ApiError::CantParseEntities(why))) => {
                tracing::warn!(
                    chat,
                    "Telegram refused the HTML ({why}); sending plain text"
                );
                let plain = html_to_plain(html);
                self.retrying("sendMessage", || send(plain.clone(), false))
                    .await
                    .map_err(|e| describe(&e))
            }
            Err(e) => Err(describe(&e)),
        }
    }

    /// Replace a message's text (and drop its buttons), with the same plain-text fallback.
    /// "Not modified" counts as success.
    pub async fn edit_html(&self, chat: i64, message_id: i32, html: &str) -> Result<(), String> {
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
            .retrying("editMessageText", || edit(html.to_string(), true))
            .await
        {
            Err(RequestError::Api(ApiError::CantParseEntities(_))) => {
                let plain = html_to_plain(html);
                self.retrying("editMessageText", || edit(plain.clone(), false))
                    .await
            }
            other => other,
        };
        match result {
            Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(()),
            Err(e) => Err(describe(&e)),
        }
    }

    /// Send markdown as one or more HTML messages (the first replies to `reply_to`), skipping
    /// the first `skip` parts; `sent(n)` after part `n` (from 1) was accepted.
    pub async fn send_markdown(
        &self,
        chat: i64,
        reply_to: Option<i32>,
        markdown: &str,
        skip: usize,
        sent: &(dyn Fn(usize) + Send + Sync),
    ) -> Result<(), String> {
        let parts = split_html(&markdown_to_html(markdown), MESSAGE_LIMIT);
        for (i, part) in parts.iter().enumerate().skip(skip) {
            let reply = if i == 0 { reply_to } else { None };
            self.send_html(chat, reply, part, None).await?;
            sent(i + 1);
        }
        Ok(())
    }

    /// Best effort: "typing…" for about five seconds.
    pub async fn typing(&self, chat: i64) {
        if let Err(e) = self
            .bot
            .send_chat_action(ChatId(chat), ChatAction::Typing)
            .await
        {
            tracing::debug!(chat, "sendChatAction: {}", describe(&e));
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
