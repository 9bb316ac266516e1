//! Finding the user's numeric Telegram ID without making them look it up: `warden init` shows
//! a one-time code, the user sends it to their bot, and the first message carrying it names
//! its sender. Messages without the code are ignored; the updates read are confirmed so
//! `warden bot` does not answer them later.

use crate::channels::telegram::api::Telegram;
use std::time::{Duration, Instant};
use teloxide::payloads::{GetUpdatesSetters, SendMessageSetters};
use teloxide::requests::Requester;
use teloxide::types::UpdateKind;

/// A six-digit code for one pairing.
pub fn new_code() -> String {
    format!("{:06}", rand::random_range(0..1_000_000u32))
}

/// The bot's @username (the token is checked on the way: getMe fails on a bad one).
pub async fn bot_name(telegram: &Telegram) -> Result<String, String> {
    let me = telegram.bot().get_me().await.map_err(|e| {
        format!("the bot token was refused (getMe: {e}); copy it again from @BotFather")
    })?;
    Ok(me.username().to_string())
}

/// Wait up to `timeout` for a message containing `code`; its sender's user ID.
pub async fn wait_for_code(
    telegram: &Telegram,
    code: &str,
    timeout: Duration,
) -> Result<i64, String> {
    let deadline = Instant::now() + timeout;
    let mut offset: i32 = 0;
    while Instant::now() < deadline {
        let updates = telegram
            .bot()
            .get_updates()
            .offset(offset)
            .timeout(5)
            .await
            .map_err(|e| format!("reading the bot's messages (getUpdates): {e}"))?;
        for update in updates {
            offset = offset.max(update.id.0 as i32 + 1);
            let UpdateKind::Message(message) = update.kind else {
                continue;
            };
            let (Some(text), Some(from)) = (message.text(), message.from.as_ref()) else {
                continue;
            };
            if !text.contains(code) {
                continue;
            }
            let user = from.id.0 as i64;
            // Confirm what was read, so the bot does not answer the pairing message later.
            let _ = telegram.bot().get_updates().offset(offset).timeout(0).await;
            let _ = telegram
                .bot()
                .send_message(
                    message.chat.id,
                    format!("Paired: warden will answer you (user ID {user})."),
                )
                .disable_notification(true)
                .await;
            return Ok(user);
        }
    }
    Err(format!(
        "no message with the code {code} reached the bot within {} s",
        timeout.as_secs()
    ))
}
