//! Where a conversation lives: a chat, and — in a chat with topics (a private chat with topics,
//! a forum supergroup) — one topic of it. Each has its own queue, actor and session, so one
//! bot keeps several conversations of one chat apart: `telegram:<chat>` for a chat without
//! topics, `telegram:<chat>:<topic>` for a topic.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChatKey {
    pub chat_id: i64,
    /// The topic (Telegram's `message_thread_id`); `None`: the chat itself.
    pub topic: Option<i32>,
}

impl ChatKey {
    pub fn new(chat_id: i64, topic: Option<i32>) -> ChatKey {
        ChatKey { chat_id, topic }
    }

    /// The session key under `prefix` (`telegram`).
    pub fn session_key(&self, prefix: &str) -> String {
        match self.topic {
            None => format!("{prefix}:{}", self.chat_id),
            Some(topic) => format!("{prefix}:{}:{topic}", self.chat_id),
        }
    }

    /// The chat (and topic) a session key under `prefix` names; `None` for any other session
    /// (`terminal:…`, `cron:…`) or a key that does not read back to itself.
    pub fn from_session_key(prefix: &str, key: &str) -> Option<ChatKey> {
        let rest = key.strip_prefix(prefix)?.strip_prefix(':')?;
        let parsed = match rest.split_once(':') {
            None => ChatKey::new(rest.parse().ok()?, None),
            Some((chat, topic)) => ChatKey::new(chat.parse().ok()?, Some(topic.parse().ok()?)),
        };
        // `telegram:+5` or `telegram:05` parse, but are not the key warden would write.
        (parsed.session_key(prefix) == key).then_some(parsed)
    }
}

impl From<i64> for ChatKey {
    fn from(chat_id: i64) -> ChatKey {
        ChatKey::new(chat_id, None)
    }
}

impl fmt::Display for ChatKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.topic {
            None => write!(f, "{}", self.chat_id),
            Some(topic) => write!(f, "{} topic {topic}", self.chat_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_keys_name_the_chat_and_the_topic() {
        assert_eq!(ChatKey::from(42).session_key("telegram"), "telegram:42");
        let topic = ChatKey::new(-100123, Some(7));
        assert_eq!(topic.session_key("telegram"), "telegram:-100123:7");
        assert_eq!(
            ChatKey::from_session_key("telegram", "telegram:-100123:7"),
            Some(topic)
        );
        assert_eq!(
            ChatKey::from_session_key("telegram", "telegram:42"),
            Some(ChatKey::from(42))
        );
    }

    #[test]
    fn other_sessions_are_no_chat() {
        for key in [
            "terminal:default",
            "cron:3:17",
            "telegram:",
            "telegram:x",
            "telegram:42:",
            "telegram:42:7:1",
            "telegram:+42",
            "telegram:42:07",
            "telegramx:42",
        ] {
            assert_eq!(ChatKey::from_session_key("telegram", key), None, "{key}");
        }
    }
}
