//! A request as the fake recorded it, with readers that work for both wire formats so tests
//! (and scripting callbacks) can ask "which tool results came back?" without caring which
//! API the client spoke.

use super::Wire;
use axum::http::{HeaderMap, Method};
use serde_json::Value;
use std::time::Instant;

/// A request as the fake received it.
#[derive(Clone, Debug)]
pub struct Request {
    /// 0-based position among all requests to this server.
    pub index: usize,
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    /// The JSON body (`Value::String` with the raw text if it was not JSON).
    pub body: Value,
    pub at: Instant,
}

/// A tool result the client sent back, read from either wire format.
#[derive(Clone, Debug, PartialEq)]
pub struct SeenToolResult {
    pub tool_use_id: String,
    pub content: String,
    /// Anthropic's flag; OpenAI has none, so there it means "content starts with Error:".
    pub is_error: bool,
}

impl Request {
    pub fn wire(&self) -> Option<Wire> {
        if self.path.ends_with("/v1/messages") {
            Some(Wire::Anthropic)
        } else if self.path.ends_with("/chat/completions") {
            Some(Wire::OpenAi)
        } else {
            None
        }
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn messages(&self) -> &[Value] {
        self.body["messages"].as_array().map_or(&[], Vec::as_slice)
    }
    /// The prompt of the run under way (Anthropic wire: the newest user message with text
    /// that is not tool results) and the number of tool-result messages after it (the step
    /// the run is at).
    pub fn prompt_and_step(&self) -> (String, usize) {
        let is_results = |m: &Value| {
            m["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
        };
        let has_text = |m: &Value| {
            m["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "text"))
        };
        let messages = self.messages();
        let Some(at) = messages
            .iter()
            .rposition(|m| m["role"] == "user" && has_text(m) && !is_results(m))
        else {
            return (String::new(), 0);
        };
        let step = messages[at + 1..].iter().filter(|m| is_results(m)).count();
        (text_of(&messages[at]["content"]), step)
    }
    /// The system prompt (Anthropic `system`, or OpenAI's system message).
    pub fn system(&self) -> Option<String> {
        match self.wire() {
            Some(Wire::OpenAi) => self
                .messages()
                .iter()
                .find(|m| m["role"] == "system")
                .and_then(|m| m["content"].as_str().map(String::from)),
            _ => match &self.body["system"] {
                Value::String(s) => Some(s.clone()),
                Value::Array(blocks) => {
                    Some(blocks.iter().filter_map(|b| b["text"].as_str()).collect())
                }
                _ => None,
            },
        }
    }
    /// Names of the tools offered to the model.
    pub fn tool_names(&self) -> Vec<String> {
        let tools = self.body["tools"].as_array().cloned().unwrap_or_default();
        tools
            .iter()
            .filter_map(|t| t["name"].as_str().or(t["function"]["name"].as_str()))
            .map(String::from)
            .collect()
    }
    /// Every tool result in the conversation, in order.
    pub fn tool_results(&self) -> Vec<SeenToolResult> {
        let mut out = Vec::new();
        for m in self.messages() {
            if m["role"] == "tool" {
                let content = text_of(&m["content"]);
                out.push(SeenToolResult {
                    tool_use_id: m["tool_call_id"].as_str().unwrap_or_default().into(),
                    is_error: content.starts_with("Error:"),
                    content,
                });
            }
            for block in m["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    out.push(SeenToolResult {
                        tool_use_id: block["tool_use_id"].as_str().unwrap_or_default().into(),
                        content: text_of(&block["content"]),
                        is_error: block["is_error"].as_bool().unwrap_or(false),
                    });
                }
            }
        }
        out
    }
    /// The text of the last user message (empty if it has none).
    pub fn last_user_text(&self) -> String {
        self.messages()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| text_of(&m["content"]))
            .unwrap_or_default()
    }
}

/// String content, or the text parts of a content array, concatenated.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}
