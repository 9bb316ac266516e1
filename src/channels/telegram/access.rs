//! Who may drive the bot. Only the configured user IDs start runs or press approval buttons.
//! In a private chat every message is for the bot; in a group only messages that mention it,
//! reply to it, or are commands for it. A stranger who addresses the bot is refused (the
//! caller rate-limits the refusal); everything else is ignored.

use super::commands;
use std::collections::HashSet;
use teloxide::types::Message;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// An allowed user addressed the bot.
    Accept { user_id: i64 },
    /// A user who is not allowed addressed the bot.
    Refuse { user_id: i64 },
    /// Not for the bot (group chatter, channels, other bots, anonymous senders).
    Ignore,
}

pub struct Access {
    allowed: HashSet<i64>,
    bot_id: i64,
    bot_username: String,
}

impl Access {
    pub fn new(allowed: &[i64], bot_id: i64, bot_username: &str) -> Access {
        Access {
            allowed: allowed.iter().copied().collect(),
            bot_id,
            bot_username: bot_username.to_string(),
        }
    }

    pub fn bot_username(&self) -> &str {
        &self.bot_username
    }

    pub fn is_allowed(&self, user_id: i64) -> bool {
        self.allowed.contains(&user_id)
    }

    pub fn check(&self, msg: &Message) -> Verdict {
        let Some(from) = msg.from.as_ref() else {
            return Verdict::Ignore;
        };
        if from.is_bot || msg.chat.is_channel() {
            return Verdict::Ignore;
        }
        let user_id = from.id.0 as i64;
        let addressed = msg.chat.is_private() || self.addressed_in_group(msg);
        match (addressed, self.is_allowed(user_id)) {
            (false, _) => Verdict::Ignore,
            (true, true) => Verdict::Accept { user_id },
            (true, false) => Verdict::Refuse { user_id },
        }
    }

    fn addressed_in_group(&self, msg: &Message) -> bool {
        let text = msg.text().or_else(|| msg.caption()).unwrap_or("");
        if text.starts_with('/') {
            return commands::addressee(text).is_none_or(|bot| self.is_me(bot));
        }
        let replies_to_me = msg
            .reply_to_message()
            .and_then(|m| m.from.as_ref())
            .is_some_and(|u| u.id.0 as i64 == self.bot_id);
        replies_to_me || self.mentions_me(text)
    }

    fn is_me(&self, username: &str) -> bool {
        username.eq_ignore_ascii_case(&self.bot_username)
    }

    fn mentions_me(&self, text: &str) -> bool {
        !self.bot_username.is_empty()
            && text
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '@'))
                .any(|word| word.strip_prefix('@').is_some_and(|name| self.is_me(name)))
    }

    /// `text` without mentions of the bot (`@warden_bot what now?` → `what now?`).
    pub fn strip_mention(&self, text: &str) -> String {
        if self.bot_username.is_empty() {
            return text.trim().to_string();
        }
        let mention = format!("@{}", self.bot_username.to_ascii_lowercase());
        let lower = text.to_ascii_lowercase();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while let Some(found) = lower[i..].find(&mention) {
            let start = i + found;
            let end = start + mention.len();
            let whole_word = !text[end..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            out.push_str(&text[i..start]);
            if !whole_word {
                out.push_str(&text[start..end]);
            }
            i = end;
        }
        out.push_str(&text[i..]);
        out.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BOT: i64 = 1000;

    fn access() -> Access {
        Access::new(&[42], BOT, "warden_bot")
    }

    fn message(chat: serde_json::Value, from: i64, text: &str) -> Message {
        serde_json::from_value(json!({
            "message_id": 5, "date": 0, "chat": chat, "text": text,
            "from": {"id": from, "is_bot": false, "first_name": "U"},
        }))
        .unwrap()
    }

    fn private(from: i64, text: &str) -> Message {
        message(
            json!({"id": from, "type": "private", "first_name": "U"}),
            from,
            text,
        )
    }

    fn group(from: i64, text: &str) -> Message {
        message(
            json!({"id": -77, "type": "supergroup", "title": "G"}),
            from,
            text,
        )
    }

    #[test]
    fn private_chats_accept_the_owner_and_refuse_strangers() {
        assert_eq!(
            access().check(&private(42, "hi")),
            Verdict::Accept { user_id: 42 }
        );
        assert_eq!(
            access().check(&private(99, "hi")),
            Verdict::Refuse { user_id: 99 }
        );
    }

    #[test]
    fn groups_need_a_mention_a_reply_or_a_command() {
        let a = access();
        assert_eq!(a.check(&group(42, "chatting")), Verdict::Ignore);
        assert_eq!(a.check(&group(99, "chatting")), Verdict::Ignore);
        assert_eq!(
            a.check(&group(42, "@Warden_Bot list files")),
            Verdict::Accept { user_id: 42 }
        );
        assert_eq!(a.check(&group(42, "@warden_bot2 hi")), Verdict::Ignore);
        assert_eq!(
            a.check(&group(99, "@warden_bot hi")),
            Verdict::Refuse { user_id: 99 }
        );
        assert_eq!(
            a.check(&group(42, "/status")),
            Verdict::Accept { user_id: 42 }
        );
        assert_eq!(a.check(&group(42, "/status@other_bot")), Verdict::Ignore);
        let reply: Message = serde_json::from_value(json!({
            "message_id": 6, "date": 0, "text": "and now?",
            "chat": {"id": -77, "type": "supergroup", "title": "G"},
            "from": {"id": 42, "is_bot": false, "first_name": "U"},
            "reply_to_message": {
                "message_id": 4, "date": 0, "text": "earlier answer",
                "chat": {"id": -77, "type": "supergroup", "title": "G"},
                "from": {"id": BOT, "is_bot": true, "first_name": "W", "username": "warden_bot"},
            },
        }))
        .unwrap();
        assert_eq!(a.check(&reply), Verdict::Accept { user_id: 42 });
    }

    #[test]
    fn bots_are_ignored() {
        let mut msg = private(42, "hi");
        msg.from.as_mut().unwrap().is_bot = true;
        assert_eq!(access().check(&msg), Verdict::Ignore);
    }

    #[test]
    fn mentions_are_stripped() {
        let a = access();
        assert_eq!(a.strip_mention("@warden_bot  list files"), "list files");
        assert_eq!(a.strip_mention("hey @WARDEN_BOT, go"), "hey , go");
        assert_eq!(a.strip_mention("@warden_bot2 stays"), "@warden_bot2 stays");
    }
}
