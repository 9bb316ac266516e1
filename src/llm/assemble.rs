//! Building the final answer from streamed pieces, the same way for every wire format: text
//! deltas grow text blocks, tool calls collect their input JSON fragment by fragment and parse
//! it when the call ends. Every piece is also emitted as a [`StreamEvent`] for progress.

use super::{ChatResponse, ContentBlock, EventSink, LlmError, StopReason, StreamEvent, Usage};

/// A block still being streamed.
enum Partial {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
        ended: bool,
    },
}

pub(crate) struct Assembler<'a> {
    provider: &'static str,
    events: &'a dyn EventSink,
    blocks: Vec<Partial>,
    pub usage: Usage,
    pub model: String,
}

/// Identifies a tool call being streamed (its position among the blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ToolSlot(usize);

impl<'a> Assembler<'a> {
    pub fn new(provider: &'static str, events: &'a dyn EventSink) -> Assembler<'a> {
        Assembler {
            provider,
            events,
            blocks: Vec::new(),
            usage: Usage::default(),
            model: String::new(),
        }
    }

    /// Append text: to the last block when it is text, else as a new text block, so text
    /// before and after a tool call stays in order.
    pub fn text(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        match self.blocks.last_mut() {
            Some(Partial::Text(text)) => text.push_str(delta),
            _ => self.blocks.push(Partial::Text(delta.to_string())),
        }
        self.events.emit(StreamEvent::TextDelta {
            text: delta.to_string(),
        });
    }

    /// Start a new text block even if the last block is text (the wire said so).
    pub fn text_block_start(&mut self) {
        if matches!(self.blocks.last(), Some(Partial::Text(t)) if !t.is_empty()) {
            self.blocks.push(Partial::Text(String::new()));
        }
    }

    pub fn tool_start(&mut self, id: &str, name: &str) -> ToolSlot {
        self.blocks.push(Partial::Tool {
            id: id.to_string(),
            name: name.to_string(),
            json: String::new(),
            ended: false,
        });
        self.events.emit(StreamEvent::ToolUseStart {
            id: id.to_string(),
            name: name.to_string(),
        });
        ToolSlot(self.blocks.len() - 1)
    }

    pub fn tool_input(&mut self, slot: ToolSlot, fragment: &str) {
        if fragment.is_empty() {
            return;
        }
        if let Some(Partial::Tool { id, json, .. }) = self.blocks.get_mut(slot.0) {
            json.push_str(fragment);
            self.events.emit(StreamEvent::ToolInputDelta {
                id: id.clone(),
                partial_json: fragment.to_string(),
            });
        }
    }

    pub fn tool_end(&mut self, slot: ToolSlot) {
        if let Some(Partial::Tool { id, ended, .. }) = self.blocks.get_mut(slot.0) {
            if !*ended {
                *ended = true;
                self.events.emit(StreamEvent::ToolUseEnd { id: id.clone() });
            }
        }
    }

    /// End every tool call still open (formats without an explicit end of a call).
    pub fn end_open_tools(&mut self) {
        for i in 0..self.blocks.len() {
            self.tool_end(ToolSlot(i));
        }
    }

    pub fn has_tool_calls(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| matches!(b, Partial::Tool { .. }))
    }

    /// The answer. A tool call whose input is not valid JSON is an error, unless the model
    /// was cut off by its token limit: then the truncated call is dropped (it cannot run) and
    /// the `max_tokens` stop reason tells the caller what happened.
    pub fn finish(mut self, stop_reason: StopReason) -> Result<ChatResponse, LlmError> {
        self.end_open_tools();
        let mut content = Vec::with_capacity(self.blocks.len());
        for block in std::mem::take(&mut self.blocks) {
            match block {
                Partial::Text(text) if text.is_empty() => {}
                Partial::Text(text) => content.push(ContentBlock::text(text)),
                Partial::Tool { id, name, json, .. } => {
                    let input = if json.trim().is_empty() {
                        Ok(serde_json::json!({}))
                    } else {
                        serde_json::from_str::<serde_json::Value>(&json)
                    };
                    match input {
                        Ok(input) => content.push(ContentBlock::ToolUse { id, name, input }),
                        Err(_) if stop_reason == StopReason::MaxTokens => {}
                        Err(e) => {
                            return Err(LlmError::stream(
                                self.provider,
                                format!("the input of tool call `{name}` is not valid JSON: {e}"),
                            ))
                        }
                    }
                }
            }
        }
        self.events.emit(StreamEvent::Usage(self.usage));
        self.events.emit(StreamEvent::MessageStop {
            stop_reason: stop_reason.clone(),
        });
        Ok(ChatResponse {
            content,
            stop_reason,
            usage: self.usage,
            model: self.model,
            provider: self.provider.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    #[test]
    fn text_and_tools_keep_order_and_emit_events() {
        let seen = Mutex::new(Vec::new());
        let sink = |e: StreamEvent| seen.lock().unwrap().push(e);
        let mut asm = Assembler::new("test", &sink);
        asm.text("Let me ");
        asm.text("check.");
        let slot = asm.tool_start("t1", "bash");
        asm.tool_input(slot, "{\"command\":");
        asm.tool_input(slot, "\"ls\"}");
        asm.tool_end(slot);
        asm.text("after");
        let resp = asm.finish(StopReason::ToolUse).unwrap();
        assert_eq!(
            resp.content,
            vec![
                ContentBlock::text("Let me check."),
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "bash".into(),
                    input: json!({"command": "ls"})
                },
                ContentBlock::text("after"),
            ]
        );
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.len(), 9, "{seen:?}");
        assert_eq!(
            seen[seen.len() - 1],
            StreamEvent::MessageStop {
                stop_reason: StopReason::ToolUse
            }
        );
    }

    #[test]
    fn empty_tool_input_is_an_empty_object() {
        let mut asm = Assembler::new("test", &super::super::NoEvents);
        asm.tool_start("t1", "now");
        let resp = asm.finish(StopReason::ToolUse).unwrap();
        assert!(
            matches!(&resp.content[0], ContentBlock::ToolUse { input, .. } if input == &json!({}))
        );
    }

    #[test]
    fn broken_tool_json_is_an_error_unless_cut_off_by_max_tokens() {
        let build = |reason| {
            let mut asm = Assembler::new("test", &super::super::NoEvents);
            asm.text("x");
            let slot = asm.tool_start("t1", "bash");
            asm.tool_input(slot, "{\"command\": \"l");
            asm.finish(reason)
        };
        let err = build(StopReason::ToolUse).unwrap_err().to_string();
        assert!(err.contains("tool call `bash` is not valid JSON"), "{err}");
        let resp = build(StopReason::MaxTokens).unwrap();
        assert_eq!(resp.content, vec![ContentBlock::text("x")]);
    }
}
