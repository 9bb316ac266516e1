//! Requests that upload a file (`sendDocument`, `sendPhoto`): `multipart/form-data` with the
//! other parameters as text parts and the file either as a part of its own referenced by
//! `attach://<name>` (what teloxide sends) or directly under the parameter's name.

use axum::extract::{FromRequest, Multipart, Request};
use serde_json::{json, Value};
use std::collections::HashMap;

/// A file the bot uploaded.
#[derive(Clone, Debug)]
pub struct Upload {
    /// `senddocument` or `sendphoto`.
    pub method: String,
    pub chat_id: i64,
    pub message_id: i64,
    pub file_name: String,
    pub bytes: Vec<u8>,
    /// As sent (HTML when `parse_mode` is HTML).
    pub caption: Option<String>,
    pub parse_mode: Option<String>,
}

/// The request's text parameters (numbers as numbers, like the JSON requests) and its file
/// parts by part name: (file name, bytes).
pub struct Form {
    pub params: Value,
    pub files: HashMap<String, (String, Vec<u8>)>,
}

pub fn is_multipart(request: &Request) -> bool {
    request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"))
}

pub async fn read(request: Request) -> Result<Form, String> {
    let mut multipart = Multipart::from_request(request, &())
        .await
        .map_err(|e| e.to_string())?;
    let mut params = serde_json::Map::new();
    let mut files = HashMap::new();
    while let Some(field) = multipart.next_field().await.map_err(|e| e.to_string())? {
        let name = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        let bytes = field.bytes().await.map_err(|e| e.to_string())?.to_vec();
        match file_name {
            Some(file_name) => {
                files.insert(name, (file_name, bytes));
            }
            None => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let value = match text.parse::<i64>() {
                    Ok(n) => json!(n),
                    Err(_) => json!(text),
                };
                params.insert(name, value);
            }
        }
    }
    Ok(Form {
        params: Value::Object(params),
        files,
    })
}

impl Form {
    /// The file given for parameter `param` (`document`, `photo`).
    pub fn file(&self, param: &str) -> Option<&(String, Vec<u8>)> {
        match self.params[param].as_str() {
            Some(value) => self
                .files
                .get(value.strip_prefix("attach://").unwrap_or(value)),
            None => self.files.get(param),
        }
    }
}

/// The `Message` Telegram answers an upload with.
pub fn message_json(upload: &Upload, chat: Value, from: Value, date: i64) -> Value {
    let id = format!("up-{}", upload.message_id);
    let mut message = json!({
        "message_id": upload.message_id,
        "date": date,
        "chat": chat,
        "from": from,
    });
    if upload.method == "sendphoto" {
        message["photo"] = json!([{
            "file_id": id, "file_unique_id": format!("u{id}"),
            "width": 1, "height": 1, "file_size": upload.bytes.len(),
        }]);
    } else {
        message["document"] = json!({
            "file_id": id, "file_unique_id": format!("u{id}"),
            "file_name": upload.file_name, "file_size": upload.bytes.len(),
        });
    }
    if let Some(caption) = &upload.caption {
        message["caption"] = json!(caption);
    }
    message
}
