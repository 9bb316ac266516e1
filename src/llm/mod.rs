//! The LLM client layer: provider-neutral conversation types, the [`Provider`] trait, and the
//! two wire protocols warden speaks (Anthropic Messages, OpenAI-compatible chat completions).
//!
//! A provider streams [`StreamEvent`]s while the answer arrives (for progress display) and
//! returns the assembled [`ChatResponse`]. The agent loop feeds tool results back as a user
//! [`Message`] of [`ContentBlock::ToolResult`]s, in the order the tool calls came. Every type here
//! is serde-serializable with a stable, tagged shape so sessions can be stored as JSON.
//!
//! Keys stay in the provider structs: they are sent as HTTP headers and nowhere else; errors
//! carry the status and the server's own message, never request headers.

mod anthropic;
mod assemble;
mod configure;
mod error;
mod failover;
mod hint;
mod openai;
mod retry;
mod sse;
mod transport;

pub use anthropic::Anthropic;
pub use configure::{chosen, from_config, kind_name, provider_config, token_store, Chosen};
pub use error::LlmError;
pub use failover::Failover;
pub use hint::advice;
pub use openai::OpenAi;
pub use retry::HttpOptions;
pub use retry::RetryPolicy;
pub use transport::ProviderSettings;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Who wrote a message. System prompts are not messages: see [`ChatRequest::system`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One turn of the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// An assistant message with one text block (e.g. a canned earlier answer).
    pub fn assistant(text: impl Into<String>) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// The user message that answers an assistant's tool calls; keep the calls' order.
    pub fn tool_results(results: Vec<ContentBlock>) -> Message {
        Message {
            role: Role::User,
            content: results,
        }
    }

    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        text_of(&self.content)
    }
}

/// A piece of a message. Serialized with a `type` tag (`text`, `image`, `tool_use`,
/// `tool_result`) so stored sessions stay readable and stable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
        /// Who wrote it. Provenance belongs to content: only what a person typed is the user's
        /// words (its URLs may be fetched unasked); a notice, a summary or a scheduled prompt in
        /// a user-role message is warden's.
        #[serde(default, skip_serializing_if = "Author::is_person")]
        author: Author,
        /// What outside content it carries (the output of a background command, a summary of a
        /// conversation that read a web page): each taints the run it reaches.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        untrusted: Vec<String>,
    },
    /// An image the user sent, e.g. a Telegram photo. `media_type` is `image/png`, `image/jpeg`…
    Image {
        media_type: String,
        data_base64: String,
    },
    /// The model asks to run a tool. `id` links the matching [`ContentBlock::ToolResult`].
    ToolUse {
        id: String,
        name: String,
        input: serde_json::Value,
    },
    /// What a tool returned; a policy denial is a normal result with `is_error: true`.
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
}

/// Who wrote a text block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Author {
    /// The person in the chat (or the model, in an assistant message).
    #[default]
    Person,
    /// warden: a notice (a background command ended), a compaction summary, a scheduled job's
    /// prompt, the heartbeat's check. Never the user's words.
    Warden,
}

impl Author {
    pub fn is_person(&self) -> bool {
        *self == Author::Person
    }
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text {
            text: text.into(),
            author: Author::Person,
            untrusted: Vec::new(),
        }
    }

    /// Text warden wrote into a user-role message, carrying `untrusted` outside content.
    pub fn notice(text: impl Into<String>, untrusted: Vec<String>) -> ContentBlock {
        ContentBlock::Text {
            text: text.into(),
            author: Author::Warden,
            untrusted,
        }
    }

    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> ContentBlock {
        ContentBlock::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error,
        }
    }
}

/// A tool the model may call; `input_schema` is a JSON Schema object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// One request to a model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The system prompt; empty means none.
    #[serde(default)]
    pub system: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Output token limit; `None` uses the provider's configured default.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Use this model instead of the provider's configured one (applies to whichever provider
    /// answers, so only set it when the provider is known).
    #[serde(default)]
    pub model: Option<String>,
    /// How long a busy or unreachable model is retried for this request, instead of the
    /// provider's `retry_budget` (a scheduled job can wait longer than a person).
    #[serde(skip)]
    pub patience: Option<std::time::Duration>,
}

/// Progress while an answer streams in. Tool calls arrive as Start, zero or more input
/// fragments (raw partial JSON), End; the parsed input is in the final [`ChatResponse`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    TextDelta {
        text: String,
    },
    ToolUseStart {
        id: String,
        name: String,
    },
    ToolInputDelta {
        id: String,
        partial_json: String,
    },
    ToolUseEnd {
        id: String,
    },
    /// Token counts for the whole answer, sent once just before `MessageStop`.
    Usage(Usage),
    /// The server failed in a way worth waiting out (busy, rate-limited, unreachable): the
    /// request is tried again for up to `budget_secs` from its first try. Sent once per
    /// request, at its first retry.
    Retrying {
        provider: String,
        /// The HTTP status, when the server answered with one (529: overloaded).
        status: Option<u16>,
        budget_secs: u64,
    },
    MessageStop {
        stop_reason: StopReason,
    },
}

impl StreamEvent {
    /// Whether this event shows model output to the user (failover stops once it has).
    pub fn is_output(&self) -> bool {
        matches!(
            self,
            StreamEvent::TextDelta { .. }
                | StreamEvent::ToolUseStart { .. }
                | StreamEvent::ToolInputDelta { .. }
        )
    }
}

/// Where streamed events go: an unbounded channel, a closure, or [`NoEvents`].
pub trait EventSink: Send + Sync {
    fn emit(&self, event: StreamEvent);
}

impl EventSink for mpsc::UnboundedSender<StreamEvent> {
    fn emit(&self, event: StreamEvent) {
        // A receiver that went away only means nobody watches progress; the answer still counts.
        let _ = self.send(event);
    }
}

impl<F: Fn(StreamEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: StreamEvent) {
        self(event)
    }
}

/// Discards events, for callers that only want the final answer.
pub struct NoEvents;

impl EventSink for NoEvents {
    fn emit(&self, _event: StreamEvent) {}
}

/// Why the model stopped. Serialized as the Anthropic spelling (`end_turn`, `tool_use`,
/// `max_tokens`, `stop_sequence`) or the raw reason for anything else.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    Other(String),
}

impl From<String> for StopReason {
    fn from(s: String) -> StopReason {
        match s.as_str() {
            "end_turn" => StopReason::EndTurn,
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            "stop_sequence" => StopReason::StopSequence,
            _ => StopReason::Other(s),
        }
    }
}

impl From<StopReason> for String {
    fn from(r: StopReason) -> String {
        match r {
            StopReason::EndTurn => "end_turn".into(),
            StopReason::ToolUse => "tool_use".into(),
            StopReason::MaxTokens => "max_tokens".into(),
            StopReason::StopSequence => "stop_sequence".into(),
            StopReason::Other(s) => s,
        }
    }
}

/// Token counts as the provider reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The assembled answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// Text and tool calls in the order the model produced them.
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub usage: Usage,
    /// The model that answered, as the server named it.
    #[serde(default)]
    pub model: String,
    /// The provider that answered (`anthropic`, `openai`), useful behind [`Failover`].
    #[serde(default)]
    pub provider: String,
}

impl ChatResponse {
    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        text_of(&self.content)
    }

    /// The tool calls as `(id, name, input)`, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &serde_json::Value)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    /// The assistant message to append to the conversation.
    pub fn to_message(&self) -> Message {
        Message {
            role: Role::Assistant,
            content: self.content.clone(),
        }
    }
}

fn text_of(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A model endpoint. Implementations stream progress into `events`, honor `cancel` at once
/// (returning [`LlmError::Cancelled`]) and return the whole answer.
#[async_trait]
pub trait Provider: Send + Sync {
    /// Short name for logs and errors (`anthropic`, `openai`).
    fn name(&self) -> &str;

    /// Whether image blocks reach the model; otherwise they become a short text note.
    fn supports_images(&self) -> bool;

    async fn chat(
        &self,
        req: &ChatRequest,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError>;
}

/// What an image becomes for a provider that cannot see it, so the model knows one was sent.
pub(crate) fn image_placeholder(media_type: &str) -> String {
    format!("[an image ({media_type}) was attached, but this model cannot view images]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_round_trip_through_json_with_stable_tags() {
        let msg = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text("let me look"),
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "bash".into(),
                    input: json!({"command": "ls"}),
                },
            ],
        };
        let value = serde_json::to_value(&msg).unwrap();
        assert_eq!(
            value,
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}},
            ]})
        );
        let back: Message = serde_json::from_value(value).unwrap();
        assert_eq!(back, msg);
    }

    #[test]
    fn stop_reason_keeps_unknown_values() {
        let r: StopReason = serde_json::from_value(json!("refusal")).unwrap();
        assert_eq!(r, StopReason::Other("refusal".into()));
        assert_eq!(serde_json::to_value(&r).unwrap(), json!("refusal"));
        let r: StopReason = serde_json::from_value(json!("tool_use")).unwrap();
        assert_eq!(r, StopReason::ToolUse);
    }

    #[test]
    fn response_helpers_keep_tool_call_order() {
        let resp = ChatResponse {
            content: vec![
                ContentBlock::text("a"),
                ContentBlock::ToolUse {
                    id: "1".into(),
                    name: "read".into(),
                    input: json!({}),
                },
                ContentBlock::text("b"),
                ContentBlock::ToolUse {
                    id: "2".into(),
                    name: "bash".into(),
                    input: json!({}),
                },
            ],
            stop_reason: StopReason::ToolUse,
            usage: Usage::default(),
            model: String::new(),
            provider: String::new(),
        };
        assert_eq!(resp.text(), "ab");
        let ids: Vec<_> = resp.tool_uses().map(|(id, _, _)| id).collect();
        assert_eq!(ids, ["1", "2"]);
        assert_eq!(resp.to_message().role, Role::Assistant);
    }

    #[test]
    fn closures_and_channels_are_event_sinks() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tx.emit(StreamEvent::TextDelta { text: "x".into() });
        assert!(matches!(rx.try_recv(), Ok(StreamEvent::TextDelta { .. })));
        let seen = std::sync::Mutex::new(0);
        let sink = |_e: StreamEvent| *seen.lock().unwrap() += 1;
        sink.emit(StreamEvent::ToolUseEnd { id: "1".into() });
        assert_eq!(*seen.lock().unwrap(), 1);
    }
}
