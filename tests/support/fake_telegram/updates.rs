//! The JSON of incoming updates, as the Bot API sends them, for scripting the fake.

use serde_json::{json, Value};

/// The fake bot's own user.
pub const BOT_ID: i64 = 777_000;
pub const BOT_USERNAME: &str = "warden_test_bot";

pub fn bot_user() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "Warden", "username": BOT_USERNAME})
}

pub fn user(id: i64) -> Value {
    json!({"id": id, "is_bot": false, "first_name": format!("User{id}"), "language_code": "en"})
}

/// A private chat has the user's id; a negative id is a supergroup.
pub fn chat(id: i64) -> Value {
    if id < 0 {
        json!({"id": id, "type": "supergroup", "title": "Test group"})
    } else {
        json!({"id": id, "type": "private", "first_name": format!("User{id}")})
    }
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A message from `from` in `chat`; `fields` adds `text`, `photo`, `document`…
pub fn message(message_id: i64, chat_id: i64, from: i64, fields: Value) -> Value {
    let mut msg = json!({
        "message_id": message_id,
        "date": now(),
        "chat": chat(chat_id),
        "from": user(from),
    });
    if let (Some(msg), Some(fields)) = (msg.as_object_mut(), fields.as_object()) {
        for (k, v) in fields {
            msg.insert(k.clone(), v.clone());
        }
    }
    msg
}

pub fn text_fields(text: &str) -> Value {
    let mut fields = json!({"text": text});
    if text.starts_with('/') {
        let len = text.split_whitespace().next().unwrap_or("").chars().count();
        fields["entities"] = json!([{"type": "bot_command", "offset": 0, "length": len}]);
    }
    fields
}

pub fn photo_fields(file_id: &str, size: usize, caption: Option<&str>) -> Value {
    let mut fields = json!({"photo": [
        {"file_id": format!("{file_id}-thumb"), "file_unique_id": "t", "width": 90, "height": 60, "file_size": 900},
        {"file_id": file_id, "file_unique_id": "p", "width": 800, "height": 600, "file_size": size},
    ]});
    if let Some(c) = caption {
        fields["caption"] = json!(c);
    }
    fields
}

pub fn document_fields(file_id: &str, name: &str, size: usize, caption: Option<&str>) -> Value {
    let mut fields = json!({"document": {
        "file_id": file_id, "file_unique_id": "d", "file_name": name,
        "mime_type": "text/plain", "file_size": size,
    }});
    if let Some(c) = caption {
        fields["caption"] = json!(c);
    }
    fields
}

/// A voice message of `seconds`, `size` bytes.
pub fn voice_fields(file_id: &str, seconds: u32, size: usize) -> Value {
    json!({"voice": {
        "file_id": file_id, "file_unique_id": "v", "duration": seconds,
        "mime_type": "audio/ogg", "file_size": size,
    }})
}

/// An audio file (Telegram's music kind) named `name`.
pub fn audio_fields(file_id: &str, name: &str, seconds: u32, size: usize) -> Value {
    json!({"audio": {
        "file_id": file_id, "file_unique_id": "a", "duration": seconds, "file_name": name,
        "mime_type": "audio/mpeg", "file_size": size,
    }})
}

/// A press of an inline button on the bot's message `message_id` in `chat_id`.
pub fn callback(id: &str, from: i64, chat_id: i64, message_id: i64, data: &str) -> Value {
    json!({
        "id": id,
        "from": user(from),
        "chat_instance": "ci",
        "data": data,
        "message": {
            "message_id": message_id,
            "date": now(),
            "chat": chat(chat_id),
            "from": bot_user(),
            "text": "approval",
        },
    })
}
