//! A scripted model that does what the chat tells it: `run: CMD` calls `bash` with CMD, `bg:
//! CMD` starts CMD in the background, `process: ACTION [ID]` calls the `process` tool. Every
//! tool result, and every background notice warden queues, is answered `result: TEXT`.

use super::fake_llm::{Request, Turn};
use serde_json::json;

/// How warden's notice of an ended background command begins.
pub const NOTICE: &str = "[warden: background command #";

pub fn script(req: &Request) -> Turn {
    let (prompt, step) = req.prompt_and_step();
    if step > 0 {
        let result = req.tool_results().pop().expect("a tool result");
        return Turn::text(format!("result: {}", result.content));
    }
    if let Some(command) = prompt.strip_prefix("run: ") {
        return Turn::tool_use("bash", json!({ "command": command }));
    }
    if let Some(command) = prompt.strip_prefix("bg: ") {
        return Turn::tool_use("bash", json!({ "command": command, "background": true }));
    }
    if let Some(rest) = prompt.strip_prefix("process: ") {
        let mut words = rest.split_whitespace();
        let mut input = json!({ "action": words.next().unwrap_or("list") });
        if let Some(id) = words.next() {
            input["id"] = json!(id.parse::<u64>().expect("a number"));
        }
        return Turn::tool_use("process", input);
    }
    // A notice (or anything else): answered as it is.
    Turn::text(format!("result: {prompt}"))
}
