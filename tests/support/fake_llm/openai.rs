//! OpenAI chat completions as the fake writes them: `chat.completion.chunk` objects as
//! `data:` lines ending with `data: [DONE]`, the non-streamed `chat.completion`, error bodies.

use super::{Answer, Block};
use serde_json::{json, Value};

pub fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        401 => "invalid_api_key",
        429 => "rate_limit_exceeded",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

fn finish_reason(answer: &Answer) -> String {
    answer.turn.stop_reason.clone().unwrap_or_else(|| {
        if answer.has_tool_use() {
            "tool_calls"
        } else {
            "stop"
        }
        .to_string()
    })
}

fn usage_json(answer: &Answer) -> Value {
    let (input, output) = answer.usage;
    json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output})
}

fn text(answer: &Answer) -> String {
    answer
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            Block::ToolUse { .. } => None,
        })
        .collect()
}

pub fn completion_json(answer: &Answer) -> Value {
    let calls: Vec<Value> = answer
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some(json!({
                "id": id, "type": "function",
                "function": {"name": name, "arguments": input.to_string()},
            })),
            Block::Text(_) => None,
        })
        .collect();
    let text = text(answer);
    let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = json!(calls);
    }
    json!({
        "id": format!("chatcmpl-fake-{}", answer.index),
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": answer.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(answer)}],
        "usage": usage_json(answer),
    })
}

fn chunk(answer: &Answer, delta: Value, finish: Option<String>) -> String {
    let data = json!({
        "id": format!("chatcmpl-fake-{}", answer.index),
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": answer.model,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    format!("data: {data}\n\n")
}

/// The streamed form, one string per `data:` event. Tool calls are numbered by `index` in the
/// order they appear; the usage chunk only comes when the client asked for it.
pub fn sse_events(answer: &Answer, include_usage: bool) -> Vec<String> {
    let mut out = vec![chunk(
        answer,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    let mut call_index = 0;
    for block in &answer.blocks {
        match block {
            Block::Text(text) => {
                for piece in answer.pieces(text) {
                    out.push(chunk(answer, json!({"content": piece}), None));
                }
            }
            Block::ToolUse { id, name, input } => {
                out.push(chunk(
                    answer,
                    json!({"tool_calls": [{"index": call_index, "id": id, "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    None,
                ));
                for piece in answer.pieces(&input.to_string()) {
                    out.push(chunk(
                        answer,
                        json!({"tool_calls": [{"index": call_index, "function": {"arguments": piece}}]}),
                        None,
                    ));
                }
                call_index += 1;
            }
        }
    }
    if let Some((kind, message)) = &answer.turn.stream_error {
        let data = json!({"error": {"message": message, "type": kind}});
        out.push(format!("data: {data}\n\n"));
        return out;
    }
    out.push(chunk(answer, json!({}), Some(finish_reason(answer))));
    if include_usage {
        let data = json!({
            "id": format!("chatcmpl-fake-{}", answer.index),
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": answer.model,
            "choices": [],
            "usage": usage_json(answer),
        });
        out.push(format!("data: {data}\n\n"));
    }
    out.push("data: [DONE]\n\n".to_string());
    out
}
