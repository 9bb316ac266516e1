//! `process`: the background commands this chat started (`bash` with `background: true`) —
//! list them, poll one's state and the end of its output, kill one and everything it started.
//! A chat sees only its own commands.

use super::background::Background;
use super::{Tool, ToolContext, ToolOutput};
use crate::llm::ToolSpec;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;

pub struct ProcessTool {
    background: Arc<Background>,
}

impl ProcessTool {
    pub fn new(background: Arc<Background>) -> ProcessTool {
        ProcessTool { background }
    }
}

#[async_trait]
impl Tool for ProcessTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "process".into(),
            description: "The background commands of this chat (started with bash and \
                          background: true). action \"list\": each one's number, state and \
                          command; \"poll\" with id: its state and the end of its output so far; \
                          \"kill\" with id: stop it and everything it started."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["list", "poll", "kill"]},
                    "id": {"type": "integer", "minimum": 1, "description": "for poll and kill"}
                },
                "required": ["action"]
            }),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let id = input.get("id").and_then(Value::as_u64);
        let result = match (input.get("action").and_then(Value::as_str), id) {
            (Some("list"), _) => Ok(self.background.list(&ctx.session)),
            (Some("poll"), Some(id)) => self.background.poll(&ctx.session, id),
            (Some("kill"), Some(id)) => self.background.kill(&ctx.session, id).await,
            (Some("poll" | "kill"), None) => Err("this action needs the command's `id`".into()),
            _ => Err("`action` must be \"list\", \"poll\" or \"kill\"".into()),
        };
        match result {
            Ok(text) => ToolOutput::ok(text),
            Err(why) => ToolOutput::error(why),
        }
    }
}
