//! The Anthropic Messages API (`POST {base}/v1/messages`, streamed as server-sent events).
//!
//! Stream grammar: `message_start` (input usage), then per content block `content_block_start`
//! (text or tool_use), `content_block_delta`s (`text_delta`, or `input_json_delta` fragments of
//! the tool input), `content_block_stop`; then `message_delta` (stop reason, output usage) and
//! `message_stop`. `ping` may come anywhere; `error` reports a failure mid-stream. Unknown event
//! and block types are skipped, as the API's versioning policy asks.

use super::assemble::{Assembler, ToolSlot};
use super::retry::{HttpOptions, Waiting};
use super::sse::SseEvent;
use super::transport::{ProviderSettings, Transport};
use super::{
    ChatRequest, ChatResponse, ContentBlock, EventSink, LlmError, Message, Provider, Role,
    StopReason,
};
use crate::config::Secret;
use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};
use std::collections::HashMap;
use tokio_util::sync::CancellationToken;

const NAME: &str = "anthropic";
const API_VERSION: &str = "2023-06-01";

pub struct Anthropic {
    settings: ProviderSettings,
    transport: Transport,
}

impl Anthropic {
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    pub const DEFAULT_MODEL: &'static str = "claude-sonnet-4-5";
    pub const DEFAULT_MAX_TOKENS: u32 = 8192;

    /// Defaults for everything; set at least the key.
    pub fn default_settings() -> ProviderSettings {
        ProviderSettings {
            api_key: Secret::default(),
            base_url: Self::DEFAULT_BASE_URL.into(),
            model: Self::DEFAULT_MODEL.into(),
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            http: HttpOptions::default(),
            oauth: None,
        }
    }

    pub fn new(settings: ProviderSettings) -> Result<Anthropic, LlmError> {
        let transport = Transport::new(NAME, &settings)?;
        Ok(Anthropic {
            settings,
            transport,
        })
    }

    async fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        let secret = self.settings.credential(NAME).await?;
        let key = secret.expose();
        if !key.is_empty() {
            // An OAuth token is a bearer token; a key goes in Anthropic's own header.
            let (name, text) = match self.settings.oauth {
                Some(_) => (AUTHORIZATION, format!("Bearer {key}")),
                None => (HeaderName::from_static("x-api-key"), key.to_string()),
            };
            let mut value = HeaderValue::from_str(&text).map_err(|_| LlmError::Setup {
                provider: NAME.into(),
                message: "the API key contains characters not allowed in an HTTP header".into(),
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        Ok(headers)
    }
}

#[async_trait]
impl Provider for Anthropic {
    fn name(&self) -> &str {
        NAME
    }

    fn supports_images(&self) -> bool {
        true
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let body = request_body(&self.settings, req);
        let url = self.settings.url("v1/messages");
        let mut stream = self
            .transport
            .post_sse(
                &url,
                self.headers().await?,
                &body,
                Waiting {
                    patience: req.patience,
                    events,
                },
                cancel,
            )
            .await?;
        let mut answer = Answer::new(events);
        while let Some(event) = stream.next(cancel).await? {
            if answer.on_event(&event)? {
                break;
            }
        }
        answer.finish()
    }
}

/// The JSON body of a Messages API request.
pub(crate) fn request_body(settings: &ProviderSettings, req: &ChatRequest) -> Value {
    let mut body = json!({
        "model": req.model.as_deref().unwrap_or(&settings.model),
        "max_tokens": req.max_tokens.unwrap_or(settings.max_tokens),
        "stream": true,
        "messages": req.messages.iter().filter_map(message).collect::<Vec<_>>(),
    });
    if !req.system.is_empty() {
        body["system"] = json!(req.system);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                })
            })
            .collect();
    }
    body
}

/// A message on the wire, or `None` when nothing of it is left: the API rejects empty
/// messages (an empty answer stored in a session would break every later request), while
/// two user messages in a row are fine (it merges them).
fn message(msg: &Message) -> Option<Value> {
    let role = match msg.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    // Tool results must come first in their message, before any text.
    let results = msg
        .content
        .iter()
        .filter(|b| matches!(b, ContentBlock::ToolResult { .. }));
    let others = msg
        .content
        .iter()
        .filter(|b| !matches!(b, ContentBlock::ToolResult { .. }));
    let content: Vec<Value> = results
        .chain(others)
        .filter_map(|block| match block {
            // The API rejects empty text blocks.
            ContentBlock::Text { text, .. } if text.is_empty() => None,
            ContentBlock::Text { text, .. } => Some(json!({"type": "text", "text": text})),
            ContentBlock::Image {
                media_type,
                data_base64,
            } => Some(json!({
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data_base64},
            })),
            ContentBlock::ToolUse { id, name, input } => Some(json!({
                "type": "tool_use", "id": id, "name": name, "input": input,
            })),
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => Some(json!({
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "content": content,
                "is_error": is_error,
            })),
        })
        .collect();
    (!content.is_empty()).then(|| json!({"role": role, "content": content}))
}

/// The state of one streamed answer on this wire.
pub(crate) struct Answer<'a> {
    asm: Assembler<'a>,
    /// Stream block index → the tool call it carries (text and unknown blocks carry none).
    tools: HashMap<u64, ToolSlot>,
    stop_reason: Option<StopReason>,
    stopped: bool,
}

impl<'a> Answer<'a> {
    pub fn new(events: &'a dyn EventSink) -> Answer<'a> {
        Answer {
            asm: Assembler::new(NAME, events),
            tools: HashMap::new(),
            stop_reason: None,
            stopped: false,
        }
    }

    /// Handle one event; `true` once `message_stop` arrived.
    pub fn on_event(&mut self, event: &SseEvent) -> Result<bool, LlmError> {
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            LlmError::stream(NAME, format!("event `{}` is not JSON: {e}", event.event))
        })?;
        let kind = data["type"].as_str().unwrap_or(&event.event);
        match kind {
            "message_start" => {
                let message = &data["message"];
                self.asm.model = message["model"].as_str().unwrap_or_default().to_string();
                self.usage(&message["usage"]);
            }
            "content_block_start" => {
                let index = data["index"].as_u64().unwrap_or(0);
                let block = &data["content_block"];
                match block["type"].as_str() {
                    Some("text") => {
                        self.asm.text_block_start();
                        self.asm.text(block["text"].as_str().unwrap_or_default());
                    }
                    Some("tool_use") => {
                        let id = block["id"].as_str().unwrap_or_default();
                        let name = block["name"].as_str().unwrap_or_default();
                        let slot = self.asm.tool_start(id, name);
                        // Streaming sends `{}` here and the input as deltas; anything else is
                        // a complete input given up front.
                        if let Some(input) = block["input"].as_object().filter(|o| !o.is_empty()) {
                            self.asm
                                .tool_input(slot, &Value::Object(input.clone()).to_string());
                        }
                        self.tools.insert(index, slot);
                    }
                    _ => {} // thinking, server tools…: not requested, not kept
                }
            }
            "content_block_delta" => {
                let index = data["index"].as_u64().unwrap_or(0);
                let delta = &data["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => self.asm.text(delta["text"].as_str().unwrap_or_default()),
                    Some("input_json_delta") => {
                        if let Some(&slot) = self.tools.get(&index) {
                            let fragment = delta["partial_json"].as_str().unwrap_or_default();
                            self.asm.tool_input(slot, fragment);
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = data["index"].as_u64().unwrap_or(0);
                if let Some(&slot) = self.tools.get(&index) {
                    self.asm.tool_end(slot);
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(StopReason::from(reason.to_string()));
                }
                self.usage(&data["usage"]);
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let error = &data["error"];
                let message = match (error["type"].as_str(), error["message"].as_str()) {
                    (Some(kind), Some(message)) => format!("{kind}: {message}"),
                    (_, Some(message)) => message.to_string(),
                    _ => data.to_string(),
                };
                return Err(LlmError::stream(
                    NAME,
                    format!("the server reported an error: {message}"),
                ));
            }
            _ => {} // ping and event types added after this was written
        }
        Ok(self.stopped)
    }

    /// Counts from `message_start` or `message_delta`; later ones are cumulative. Cached
    /// prompt tokens count as input: the total is what fills the context window.
    fn usage(&mut self, usage: &Value) {
        let field = |name: &str| usage[name].as_u64();
        let input = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ]
        .iter()
        .filter_map(|name| field(name))
        .reduce(|a, b| a + b);
        if let Some(input) = input {
            self.asm.usage.input_tokens = input;
        }
        if let Some(output) = field("output_tokens") {
            self.asm.usage.output_tokens = output;
        }
    }

    pub fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.stopped {
            return Err(LlmError::stream(
                NAME,
                "the stream ended before `message_stop`",
            ));
        }
        let reason = self
            .stop_reason
            .unwrap_or_else(|| StopReason::Other("unknown".into()));
        self.asm.finish(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{NoEvents, StreamEvent, ToolSpec};

    fn ev(data: Value) -> SseEvent {
        SseEvent {
            event: data["type"].as_str().unwrap().to_string(),
            data: data.to_string(),
        }
    }

    fn run(events: &[Value]) -> Result<ChatResponse, LlmError> {
        let mut answer = Answer::new(&NoEvents);
        for e in events {
            if answer.on_event(&ev(e.clone()))? {
                break;
            }
        }
        answer.finish()
    }

    fn start() -> Value {
        json!({"type": "message_start", "message": {"model": "claude-x", "usage":
            {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}})
    }

    #[test]
    fn tool_input_fragments_are_joined_and_parsed_at_block_stop() {
        let resp = run(&[
            start(),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"comm"}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "and\": \"ls\"}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
            json!({"type": "message_stop"}),
        ])
        .unwrap();
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
        assert_eq!(resp.usage.input_tokens, 15);
        assert_eq!(resp.usage.output_tokens, 42);
        assert_eq!(resp.model, "claude-x");
        assert_eq!(resp.text(), "ok");
        let calls: Vec<_> = resp.tool_uses().collect();
        assert_eq!(calls, vec![("toolu_1", "bash", &json!({"command": "ls"}))]);
    }

    #[test]
    fn unknown_blocks_and_events_are_skipped() {
        let resp = run(&[
            start(),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "brand_new_event"}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
            json!({"type": "message_stop"}),
        ])
        .unwrap();
        assert!(resp.content.is_empty());
        assert_eq!(resp.stop_reason, StopReason::EndTurn);
    }

    #[test]
    fn error_events_and_early_ends_are_errors() {
        let err = run(&[
            start(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "anthropic: bad or interrupted answer: the server reported an error: \
             overloaded_error: Overloaded"
        );
        let err = run(&[start()]).unwrap_err().to_string();
        assert!(err.contains("ended before `message_stop`"), "{err}");
    }

    #[test]
    fn events_stream_in_order() {
        let seen = std::sync::Mutex::new(Vec::new());
        let sink = |e: StreamEvent| seen.lock().unwrap().push(e);
        let mut answer = Answer::new(&sink);
        for e in [
            start(),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "read", "input": {}}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
            json!({"type": "message_stop"}),
        ] {
            answer.on_event(&ev(e)).unwrap();
        }
        answer.finish().unwrap();
        let kinds: Vec<String> = seen
            .into_inner()
            .unwrap()
            .iter()
            .map(|e| {
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "tool_use_start",
                "tool_input_delta",
                "tool_use_end",
                "usage",
                "message_stop"
            ]
        );
    }

    #[test]
    fn request_body_has_system_tools_and_blocks() {
        let settings = Anthropic::default_settings();
        let req = ChatRequest {
            system: "be brief".into(),
            messages: vec![
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::text("what is this?"),
                        ContentBlock::Image {
                            media_type: "image/png".into(),
                            data_base64: "iVBORw0KGgo=".into(),
                        },
                        ContentBlock::text(""),
                    ],
                },
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolUse {
                        id: "t1".into(),
                        name: "bash".into(),
                        input: json!({"command": "rm -rf /"}),
                    }],
                },
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::text("")],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::text("note: the user is away"),
                        ContentBlock::tool_result("t1", "denied: rm", true),
                    ],
                },
            ],
            tools: vec![ToolSpec {
                name: "bash".into(),
                description: "run a command".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_tokens: Some(100),
            model: None,
            patience: None,
        };
        let body = request_body(&settings, &req);
        assert_eq!(body["model"], Anthropic::DEFAULT_MODEL);
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(body["stream"], true);
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        assert_eq!(body["messages"][0]["content"].as_array().unwrap().len(), 2);
        assert_eq!(
            body["messages"][0]["content"][1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
        );
        // The empty assistant message is left out; the tool result moves before the text.
        assert_eq!(body["messages"].as_array().unwrap().len(), 3);
        assert_eq!(
            body["messages"][2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "t1", "content": "denied: rm", "is_error": true})
        );
        assert_eq!(body["messages"][2]["content"][1]["type"], "text");
    }
}
