//! `/approvals`: what a chat approved for good. The commands it approved "Always in this
//! chat" are listed with a Revoke button each (or `/approvals rm N`); the hosts it allowed
//! "Always for this host" are listed with the command that revokes them. Only an allowed
//! user's press counts, and only for a rule of the chat the list was posted in.

use super::access::Access;
use super::api::{chat_key, describe, Telegram};
use super::format::escape;
use crate::egress::Grants;
use crate::gateway::ChatKey;
use crate::lasting;
use crate::tools::approval_rules::ApprovalRules;
use teloxide::payloads::AnswerCallbackQuerySetters;
use teloxide::prelude::Requester;
use teloxide::types::{CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup};

/// Callback data of a Revoke button: `rv:<rule id>`.
const PREFIX: &str = "rv:";

/// Buttons offered in one list (Telegram allows 100; a long list is revoked with `rm`).
const MAX_BUTTONS: usize = 20;
/// How much of a rule a button shows (the list above it shows all).
const BUTTON_CHARS: usize = 40;

pub struct Standing {
    pub rules: ApprovalRules,
    pub grants: Grants,
}

/// Whether a button press is a Revoke button's.
pub fn is_revoke(query: &CallbackQuery) -> bool {
    query.data.as_deref().is_some_and(|d| d.starts_with(PREFIX))
}

impl Standing {
    /// The list for `session`, as HTML, with a Revoke button per command rule.
    pub fn list(&self, session: &str) -> (String, Option<InlineKeyboardMarkup>) {
        let rules = match self.rules.list(Some(session)) {
            Ok(rules) => rules,
            Err(e) => {
                tracing::error!("listing approval rules: {e}");
                return ("Sorry, I could not read the stored approvals.".into(), None);
            }
        };
        let hosts: Vec<(String, Option<String>)> = match self.grants.list() {
            Ok(grants) => grants
                .into_iter()
                .filter(|g| g.session == session)
                .map(|g| (g.host, g.expires_at))
                .collect(),
            Err(e) => {
                tracing::error!("listing egress grants: {e}");
                Vec::new()
            }
        };
        if rules.is_empty() && hosts.is_empty() {
            return (
                "Nothing is approved for good in this chat: every command that needs approval \
                 asks."
                    .into(),
                None,
            );
        }
        let mut html = String::new();
        if !rules.is_empty() {
            html.push_str("♾ <b>Commands approved “Always in this chat”</b>");
            for rule in &rules {
                html.push_str(&format!(
                    "\n#{} <code>{}</code> — {}; by {}, {}",
                    rule.id,
                    escape(&rule.shown),
                    escape(&lasting::describe(rule.expires_at.as_deref())),
                    escape(&rule.granted_by),
                    escape(&rule.created_at)
                ));
            }
            html.push_str("\nRevoke with a button or <code>/approvals rm N</code>.");
        }
        if !hosts.is_empty() {
            if !html.is_empty() {
                html.push_str("\n\n");
            }
            html.push_str("♾ <b>Hosts allowed “Always for this host”</b>");
            for (host, expires_at) in &hosts {
                html.push_str(&format!(
                    "\n{} — {} (<code>warden egress rm {}</code>)",
                    escape(host),
                    escape(&lasting::describe(expires_at.as_deref())),
                    escape(host)
                ));
            }
        }
        let buttons: Vec<Vec<InlineKeyboardButton>> = rules
            .iter()
            .take(MAX_BUTTONS)
            .map(|rule| {
                let shown: String = rule.shown.chars().take(BUTTON_CHARS).collect();
                let cut = if shown.len() < rule.shown.len() {
                    "…"
                } else {
                    ""
                };
                vec![InlineKeyboardButton::callback(
                    format!("🗑 Revoke #{} {shown}{cut}", rule.id),
                    format!("{PREFIX}{}", rule.id),
                )]
            })
            .collect();
        let keyboard = (!buttons.is_empty()).then(|| InlineKeyboardMarkup::new(buttons));
        (html, keyboard)
    }

    /// `/approvals rm N` in `session`: the reply.
    pub fn revoke(&self, session: &str, id: i64) -> String {
        match self.rules.remove(id, Some(session)) {
            Ok(true) => format!("Revoked #{id}: that command asks again."),
            Ok(false) => {
                format!("There is no approval #{id} in this chat (/approvals lists them).")
            }
            Err(e) => {
                tracing::error!("revoking approval rule #{id}: {e}");
                "Sorry, I could not revoke it (a database error).".into()
            }
        }
    }

    /// A Revoke button: from an allowed user, for a rule of the chat the list is in.
    pub async fn on_callback(
        &self,
        tg: &Telegram,
        access: &Access,
        session_of: impl Fn(ChatKey) -> String,
        query: CallbackQuery,
    ) {
        let user_id = query.from.id.0 as i64;
        let id = query
            .data
            .as_deref()
            .and_then(|d| d.strip_prefix(PREFIX))
            .and_then(|id| id.parse::<i64>().ok());
        // The list was posted in a chat, or in a topic of it: that conversation's rules.
        let message = query.message.as_ref().map(|m| {
            let chat = match m.regular_message() {
                Some(msg) => chat_key(msg),
                None => ChatKey::from(m.chat().id.0),
            };
            (chat, m.id().0)
        });
        let reply = match (id, message) {
            (Some(_), _) if !access.is_allowed(user_id) => {
                tracing::warn!(
                    user_id,
                    "revoke button pressed by a user who is not allowed"
                );
                "You are not allowed to change approvals here.".to_string()
            }
            (Some(id), Some((chat, message_id))) => {
                let reply = self.revoke(&session_of(chat), id);
                if let Err(e) = tg
                    .edit_html(chat.chat_id, message_id, &escape(&reply))
                    .await
                {
                    tracing::debug!(chat = chat.chat_id, "editing the approvals list: {e}");
                }
                reply
            }
            _ => "This button is not mine.".to_string(),
        };
        let answer = tg.bot().answer_callback_query(query.id.clone()).text(reply);
        if let Err(e) = answer.await {
            tracing::debug!("answerCallbackQuery: {}", describe(&e));
        }
    }
}
