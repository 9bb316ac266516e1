//! The Anthropic Messages API as the fake writes it: the SSE event sequence of a streamed
//! message, the same message as one JSON object, and error bodies.

use super::{Answer, Block};
use serde_json::{json, Value};

/// Anthropic's error `type` for a status.
fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

pub fn error_body(status: u16, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

fn stop_reason(answer: &Answer) -> String {
    answer.turn.stop_reason.clone().unwrap_or_else(|| {
        if answer.has_tool_use() {
            "tool_use"
        } else {
            "end_turn"
        }
        .to_string()
    })
}

fn content_json(block: &Block) -> Value {
    match block {
        Block::Text(text) => json!({"type": "text", "text": text}),
        Block::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
    }
}

pub fn message_json(answer: &Answer) -> Value {
    json!({
        "id": format!("msg_fake_{}", answer.index),
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": answer.blocks.iter().map(content_json).collect::<Vec<_>>(),
        "stop_reason": stop_reason(answer),
        "stop_sequence": null,
        "usage": {"input_tokens": answer.usage.0, "output_tokens": answer.usage.1},
    })
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The streamed form, one string per SSE event, in the order the real API sends them.
pub fn sse_events(answer: &Answer) -> Vec<String> {
    let mut out = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_fake_{}", answer.index),
            "type": "message",
            "role": "assistant",
            "model": answer.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": answer.usage.0, "output_tokens": 1},
        }}),
    )];
    for (index, block) in answer.blocks.iter().enumerate() {
        let (start, deltas) = match block {
            Block::Text(text) => (
                json!({"type": "text", "text": ""}),
                answer
                    .pieces(text)
                    .into_iter()
                    .map(|t| json!({"type": "text_delta", "text": t}))
                    .collect::<Vec<_>>(),
            ),
            Block::ToolUse { id, name, input } => {
                // The real API opens with an empty fragment, then the JSON in pieces.
                let mut deltas = vec![json!({"type": "input_json_delta", "partial_json": ""})];
                deltas.extend(
                    answer
                        .pieces(&input.to_string())
                        .into_iter()
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p})),
                );
                (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    deltas,
                )
            }
        };
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        if index == 0 {
            out.push(event("ping", json!({"type": "ping"})));
        }
        for delta in deltas {
            out.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        out.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    if let Some((kind, message)) = &answer.turn.stream_error {
        out.push(event(
            "error",
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        ));
        return out;
    }
    out.push(event(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": stop_reason(answer), "stop_sequence": null},
               "usage": {"output_tokens": answer.usage.1}}),
    ));
    out.push(event("message_stop", json!({"type": "message_stop"})));
    out
}
