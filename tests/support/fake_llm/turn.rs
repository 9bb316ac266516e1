//! The script language of the fake: a [`Turn`] is one response — an answer made of
//! [`Block`]s, an error status, or raw bytes — plus how to deliver it (delays, delta sizes,
//! stalls, byte splitting, a mid-stream error).

use serde_json::Value;
use std::time::Duration;

/// A piece of a scripted answer.
#[derive(Clone, Debug)]
pub enum Block {
    Text(String),
    /// `id: None` takes the next generated id.
    ToolUse {
        id: Option<String>,
        name: String,
        input: Value,
    },
}

impl Block {
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text(text.into())
    }
    pub fn tool_use(name: impl Into<String>, input: Value) -> Block {
        Block::ToolUse {
            id: None,
            name: name.into(),
            input,
        }
    }
}

/// What the server does with one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A normal answer made of these blocks.
    Answer(Vec<Block>),
    /// An error status with the API's error JSON (and optionally `retry-after`).
    Error {
        status: u16,
        message: String,
        retry_after: Option<String>,
    },
    /// Exactly this response, for anything the other variants cannot say.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
}

/// One scripted response plus how to deliver it.
#[derive(Clone, Debug)]
pub struct Turn {
    pub reply: Reply,
    /// Wait before sending the response headers.
    pub delay: Duration,
    /// Split text and tool-input JSON into deltas of at most this many characters (0: whole).
    pub chunk_chars: usize,
    /// Pause between stream events.
    pub gap: Duration,
    /// Send this many stream events, then go silent and keep the connection open until the
    /// client drops it.
    pub stall_after: Option<usize>,
    /// Cut the stream body into pieces of at most this many bytes (may split a UTF-8 char).
    pub split_bytes: Option<usize>,
    /// An error event (`type`, `message`) sent after the blocks instead of the normal end.
    pub stream_error: Option<(String, String)>,
    /// Override the wire stop reason (`end_turn`, `max_tokens`, `length`…).
    pub stop_reason: Option<String>,
    /// Reported (input, output) tokens; default estimates from the sizes.
    pub usage: Option<(u64, u64)>,
}

impl Turn {
    pub fn new(reply: Reply) -> Turn {
        Turn {
            reply,
            delay: Duration::ZERO,
            chunk_chars: 0,
            gap: Duration::ZERO,
            stall_after: None,
            split_bytes: None,
            stream_error: None,
            stop_reason: None,
            usage: None,
        }
    }
    pub fn text(text: impl Into<String>) -> Turn {
        Turn::new(Reply::Answer(vec![Block::text(text)]))
    }
    pub fn tool_use(name: impl Into<String>, input: Value) -> Turn {
        Turn::new(Reply::Answer(vec![Block::tool_use(name, input)]))
    }
    /// Several tool calls in one answer, in order.
    pub fn tool_uses(calls: Vec<(&str, Value)>) -> Turn {
        Turn::blocks(
            calls
                .into_iter()
                .map(|(name, input)| Block::tool_use(name, input))
                .collect(),
        )
    }
    pub fn blocks(blocks: Vec<Block>) -> Turn {
        Turn::new(Reply::Answer(blocks))
    }
    /// An error status with a message typical for it.
    pub fn error(status: u16) -> Turn {
        let message = match status {
            400 => "invalid request",
            401 => "invalid x-api-key",
            429 => "rate limit exceeded",
            529 => "Overloaded",
            _ => "internal server error",
        };
        Turn::error_message(status, message)
    }
    pub fn error_message(status: u16, message: impl Into<String>) -> Turn {
        Turn::new(Reply::Error {
            status,
            message: message.into(),
            retry_after: None,
        })
    }
    pub fn raw(status: u16, content_type: &str, body: impl Into<String>) -> Turn {
        Turn::new(Reply::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        })
    }
    /// Add a `retry-after` header (seconds or an HTTP date) to an error turn.
    pub fn retry_after(mut self, value: &str) -> Turn {
        if let Reply::Error { retry_after, .. } = &mut self.reply {
            *retry_after = Some(value.to_string());
        }
        self
    }
    pub fn delay(mut self, delay: Duration) -> Turn {
        self.delay = delay;
        self
    }
    pub fn chunked(mut self, chars: usize) -> Turn {
        self.chunk_chars = chars;
        self
    }
    pub fn gap(mut self, gap: Duration) -> Turn {
        self.gap = gap;
        self
    }
    pub fn stall_after(mut self, events: usize) -> Turn {
        self.stall_after = Some(events);
        self
    }
    pub fn split_bytes(mut self, bytes: usize) -> Turn {
        self.split_bytes = Some(bytes.max(1));
        self
    }
    pub fn stream_error(mut self, kind: &str, message: &str) -> Turn {
        self.stream_error = Some((kind.into(), message.into()));
        self
    }
    pub fn stop_reason(mut self, reason: &str) -> Turn {
        self.stop_reason = Some(reason.into());
        self
    }
    pub fn usage(mut self, input: u64, output: u64) -> Turn {
        self.usage = Some((input, output));
        self
    }
}
