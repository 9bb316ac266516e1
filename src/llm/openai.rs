//! OpenAI-compatible chat completions (`POST {base}/chat/completions`, streamed): OpenAI itself
//! and the servers that copy its API (Ollama, llama.cpp, vLLM, OpenRouter…).
//!
//! Differences from warden's neutral types that this file bridges: the system prompt is a
//! `system` message; tool results are separate `role: "tool"` messages (no error flag, so an
//! error result is prefixed with "Error: "); images are `image_url` parts holding data URLs;
//! tool calls stream as fragments keyed by `index` (id and name in the first, `arguments`
//! pieces after), and there is no explicit end of a call; usage arrives in a last chunk with
//! no choices (`stream_options.include_usage`), then `data: [DONE]`.

use super::assemble::{Assembler, ToolSlot};
use super::retry::{HttpOptions, Waiting};
use super::sse::SseEvent;
use super::transport::{ProviderSettings, Transport};
use super::{
    image_placeholder, ChatRequest, ChatResponse, ContentBlock, EventSink, LlmError, Message,
    Provider, Role, StopReason,
};
use crate::config::Secret;
use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

const NAME: &str = "openai";

pub struct OpenAi {
    settings: ProviderSettings,
    transport: Transport,
    images: bool,
}

impl OpenAi {
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    pub const DEFAULT_MODEL: &'static str = "gpt-4o";
    pub const DEFAULT_MAX_TOKENS: u32 = 8192;

    /// Defaults for everything; set the key for OpenAI, or the base URL for a local server.
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

    pub fn new(settings: ProviderSettings) -> Result<OpenAi, LlmError> {
        let transport = Transport::new(NAME, &settings)?;
        Ok(OpenAi {
            settings,
            transport,
            images: true,
        })
    }

    /// Whether the model accepts images (text-only local models do not); without, image
    /// blocks become a short note.
    pub fn with_images(mut self, images: bool) -> OpenAi {
        self.images = images;
        self
    }

    async fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        let secret = self.settings.credential(NAME).await?;
        let key = secret.expose();
        if !key.is_empty() {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| LlmError::Setup {
                    provider: NAME.into(),
                    message: "the API key contains characters not allowed in an HTTP header".into(),
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Ok(headers)
    }
}

#[async_trait]
impl Provider for OpenAi {
    fn name(&self) -> &str {
        NAME
    }

    fn supports_images(&self) -> bool {
        self.images
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let body = request_body(&self.settings, req, self.images);
        let url = self.settings.url("chat/completions");
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

/// The JSON body of a chat completions request.
pub(crate) fn request_body(settings: &ProviderSettings, req: &ChatRequest, images: bool) -> Value {
    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for msg in &req.messages {
        push_message(&mut messages, msg, images);
    }
    let mut body = json!({
        "model": req.model.as_deref().unwrap_or(&settings.model),
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    // OpenAI's newer models refuse `max_tokens`; compatible servers mostly know only it.
    let limit_field = if is_openai_itself(&settings.base_url) {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body[limit_field] = json!(req.max_tokens.unwrap_or(settings.max_tokens));
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                }})
            })
            .collect();
    }
    body
}

fn is_openai_itself(base_url: &str) -> bool {
    reqwest::Url::parse(base_url)
        .ok()
        .and_then(|u| {
            u.host_str()
                .map(|h| h.eq_ignore_ascii_case("api.openai.com"))
        })
        .unwrap_or(false)
}

/// One neutral message becomes one or more wire messages: tool results first (they must
/// follow the assistant's calls directly), then the rest.
fn push_message(out: &mut Vec<Value>, msg: &Message, images: bool) {
    for block in &msg.content {
        if let ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } = block
        {
            let content = if *is_error {
                format!("Error: {content}")
            } else {
                content.clone()
            };
            out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
        }
    }
    match msg.role {
        Role::Assistant => {
            let text = msg.text();
            let calls: Vec<Value> = msg
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse { id, name, input } => Some(json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": input.to_string()},
                    })),
                    _ => None,
                })
                .collect();
            if calls.is_empty() {
                if !text.is_empty() {
                    out.push(json!({"role": "assistant", "content": text}));
                }
            } else {
                let content = if text.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                };
                out.push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
            }
        }
        Role::User => {
            let has_image = msg
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::Image { .. }));
            if has_image && images {
                let parts: Vec<Value> = msg
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text { text, .. } => {
                            Some(json!({"type": "text", "text": text}))
                        }
                        ContentBlock::Image {
                            media_type,
                            data_base64,
                        } => Some(json!({"type": "image_url", "image_url": {
                            "url": format!("data:{media_type};base64,{data_base64}"),
                        }})),
                        _ => None,
                    })
                    .collect();
                out.push(json!({"role": "user", "content": parts}));
                return;
            }
            // Plain string content: the form every compatible server understands.
            let pieces: Vec<String> = msg
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text, .. } if !text.is_empty() => Some(text.clone()),
                    ContentBlock::Image { media_type, .. } => Some(image_placeholder(media_type)),
                    _ => None,
                })
                .collect();
            if !pieces.is_empty() {
                out.push(json!({"role": "user", "content": pieces.join("\n")}));
            }
        }
    }
}

/// A tool call being streamed, keyed by its wire `index`.
#[derive(Default)]
struct PendingCall {
    id: String,
    name: String,
    /// Argument fragments that came before the name (then the call cannot be announced yet).
    early_args: String,
    slot: Option<ToolSlot>,
}

/// The state of one streamed answer on this wire.
pub(crate) struct Answer<'a> {
    asm: Assembler<'a>,
    calls: BTreeMap<u64, PendingCall>,
    finish_reason: Option<String>,
    done: bool,
}

impl<'a> Answer<'a> {
    pub fn new(events: &'a dyn EventSink) -> Answer<'a> {
        Answer {
            asm: Assembler::new(NAME, events),
            calls: BTreeMap::new(),
            finish_reason: None,
            done: false,
        }
    }

    /// Handle one chunk; `true` at `data: [DONE]`.
    pub fn on_event(&mut self, event: &SseEvent) -> Result<bool, LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::stream(NAME, format!("a chunk is not JSON: {e}")))?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = error["message"]
                .as_str()
                .map_or_else(|| error.to_string(), String::from);
            return Err(LlmError::stream(
                NAME,
                format!("the server reported an error: {message}"),
            ));
        }
        if let Some(model) = chunk["model"].as_str().filter(|m| !m.is_empty()) {
            self.asm.model = model.to_string();
        }
        if let Some(usage) = chunk["usage"].as_object() {
            let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.asm.usage.input_tokens = count("prompt_tokens");
            self.asm.usage.output_tokens = count("completion_tokens");
        }
        // warden never asks for several choices (`n`); only the first matters.
        let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) else {
            return Ok(false);
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str() {
            self.asm.text(text);
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for (position, call) in calls.iter().enumerate() {
                self.on_tool_call(position as u64, call);
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_string());
            self.asm.end_open_tools();
        }
        Ok(false)
    }

    fn on_tool_call(&mut self, position: u64, call: &Value) {
        let index = call["index"].as_u64().unwrap_or(position);
        let pending = self.calls.entry(index).or_default();
        if pending.id.is_empty() {
            pending.id = call["id"].as_str().unwrap_or_default().to_string();
        }
        let function = &call["function"];
        if pending.name.is_empty() {
            pending.name = function["name"].as_str().unwrap_or_default().to_string();
        }
        let fragment = function["arguments"].as_str().unwrap_or_default();
        match pending.slot {
            Some(slot) => self.asm.tool_input(slot, fragment),
            None if pending.name.is_empty() => pending.early_args.push_str(fragment),
            None => {
                if pending.id.is_empty() {
                    // Some servers omit ids; the agent needs one to pair the result.
                    pending.id = format!("call_{:016x}", rand::random::<u64>());
                }
                let slot = self.asm.tool_start(&pending.id, &pending.name);
                pending.slot = Some(slot);
                let early = std::mem::take(&mut pending.early_args);
                self.asm.tool_input(slot, &early);
                self.asm.tool_input(slot, fragment);
            }
        }
    }

    pub fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(LlmError::stream(
                NAME,
                "the stream ended before a finish_reason or [DONE]",
            ));
        }
        if self.calls.values().any(|c| c.slot.is_none()) {
            return Err(LlmError::stream(NAME, "a tool call came without a name"));
        }
        let has_calls = self.asm.has_tool_calls();
        let reason = match self.finish_reason.as_deref() {
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            // Some compatible servers say "stop" after tool calls.
            Some("stop") | None if has_calls => StopReason::ToolUse,
            Some("stop") | None => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
        };
        self.asm.finish(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::NoEvents;

    fn run(chunks: &[&str]) -> Result<ChatResponse, LlmError> {
        let mut answer = Answer::new(&NoEvents);
        for data in chunks {
            let event = SseEvent {
                event: "message".into(),
                data: data.to_string(),
            };
            if answer.on_event(&event)? {
                break;
            }
        }
        answer.finish()
    }

    #[test]
    fn parallel_tool_calls_assemble_by_index() {
        let resp = run(&[
            r#"{"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#,
            "[DONE]",
        ])
        .unwrap();
        let calls: Vec<_> = resp.tool_uses().collect();
        assert_eq!(
            calls,
            vec![
                ("call_a", "read", &json!({"path": "a.txt"})),
                ("call_b", "bash", &json!({"command": "ls"})),
            ]
        );
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
        assert_eq!((resp.usage.input_tokens, resp.usage.output_tokens), (12, 7));
        assert_eq!(resp.model, "gpt-x");
    }

    #[test]
    fn missing_ids_are_generated_and_stop_after_calls_means_tool_use() {
        let resp = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"now","arguments":"{}"}}]},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ])
        .unwrap();
        let (id, name, _) = resp.tool_uses().next().unwrap();
        assert!(id.starts_with("call_"), "{id}");
        assert_eq!(name, "now");
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
    }

    #[test]
    fn errors_truncation_and_finish_reasons() {
        let err = run(&[r#"{"error":{"message":"model overloaded"}}"#]).unwrap_err();
        assert!(err.to_string().contains("model overloaded"), "{err}");
        let err = run(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#]).unwrap_err();
        assert!(err.to_string().contains("ended before"), "{err}");
        let resp =
            run(&[r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"length"}]}"#]).unwrap();
        assert_eq!(resp.stop_reason, StopReason::MaxTokens);
        assert_eq!(resp.text(), "hi");
    }

    #[test]
    fn request_body_maps_roles_tools_and_images() {
        let settings = OpenAi::default_settings().with_base_url("http://127.0.0.1:8080/v1");
        let req = ChatRequest {
            system: "sys".into(),
            messages: vec![
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::text("look"),
                        ContentBlock::Image {
                            media_type: "image/jpeg".into(),
                            data_base64: "/9j/".into(),
                        },
                    ],
                },
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::text("running"),
                        ContentBlock::ToolUse {
                            id: "c1".into(),
                            name: "bash".into(),
                            input: json!({"command": "ls"}),
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::tool_result("c1", "denied by policy", true),
                        ContentBlock::text("also this"),
                    ],
                },
            ],
            tools: vec![crate::llm::ToolSpec {
                name: "bash".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_tokens: None,
            model: Some("llama3".into()),
            patience: None,
        };
        let body = request_body(&settings, &req, true);
        assert_eq!(body["model"], "llama3");
        assert_eq!(body["max_tokens"], OpenAi::DEFAULT_MAX_TOKENS);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            json!({"type": "object"})
        );
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m[0], json!({"role": "system", "content": "sys"}));
        assert_eq!(
            m[1]["content"][1],
            json!({"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}})
        );
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            "{\"command\":\"ls\"}"
        );
        assert_eq!(
            m[3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "Error: denied by policy"})
        );
        assert_eq!(m[4], json!({"role": "user", "content": "also this"}));
        assert_eq!(m.len(), 5);

        let text_only = request_body(&settings, &req, false);
        let content = text_only["messages"][1]["content"].as_str().unwrap();
        assert!(
            content.starts_with("look\n[an image (image/jpeg)"),
            "{content}"
        );

        let official = request_body(&OpenAi::default_settings(), &req, true);
        assert!(official.get("max_tokens").is_none());
        assert_eq!(
            official["max_completion_tokens"],
            OpenAi::DEFAULT_MAX_TOKENS
        );
    }
}
