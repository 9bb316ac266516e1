//! `skill`: run a skill's command in its own sandbox (see `crate::skills::runner`): only a
//! granted, unchanged skill, with the policy its grant allows. A refusal comes back with its
//! reason; every run is also audited as `skill:NAME`.

use super::{Tool, ToolContext, ToolOutput};
use crate::llm::ToolSpec;
use crate::skills::runner::{Invocation, SkillRequest, SkillRunner};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub struct SkillTool {
    runner: Arc<SkillRunner>,
}

impl SkillTool {
    pub fn new(runner: Arc<SkillRunner>) -> SkillTool {
        SkillTool { runner }
    }
}

fn invocation(input: &Value) -> Result<Invocation, String> {
    match (input.get("args"), input.get("command")) {
        (Some(_), Some(_)) => Err("give either `args` or `command`, not both".into()),
        (None, Some(command)) => command
            .as_str()
            .filter(|c| !c.trim().is_empty())
            .map(|c| Invocation::Command(c.to_string()))
            .ok_or_else(|| "`command` must be a non-empty string".into()),
        (args, None) => {
            let list = match args {
                None => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| a.as_str().map(str::to_string))
                    .collect::<Option<Vec<String>>>()
                    .ok_or("`args` must be a list of strings")?,
                Some(_) => return Err("`args` must be a list of strings".into()),
            };
            Ok(Invocation::Args(list))
        }
    }
}

#[async_trait]
impl Tool for SkillTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill".into(),
            description: "Run a skill listed in the system prompt, in its own sandbox, with \
                          only the permissions the user granted it. Read its SKILL.md first. \
                          `args` are appended to the skill's own command; or give a `command` \
                          line to run in the skill's folder (its scripts only through the \
                          interpreters it declares). A refused run comes back with the reason."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "the skill's name"},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "command": {"type": "string"},
                    "timeout_secs": {"type": "integer", "minimum": 1, "description": "at most the skill's limit"}
                },
                "required": ["name"]
            }),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let Some(name) = input.get("name").and_then(Value::as_str) else {
            return ToolOutput::error("missing string argument `name`");
        };
        let invocation = match invocation(input) {
            Ok(i) => i,
            Err(why) => return ToolOutput::error(why),
        };
        (ctx.progress)(format!("Running the skill {name}…"));
        let report = self
            .runner
            .run(SkillRequest {
                name: name.to_string(),
                invocation,
                // Its audit row and run record name the sub-agent, when one ran it.
                session: ctx.audit_session().to_string(),
                cancel: ctx.cancel.clone(),
                approver: ctx.approver.clone(),
                timeout: input
                    .get("timeout_secs")
                    .and_then(Value::as_u64)
                    .map(Duration::from_secs),
            })
            .await;
        let output = report.output.as_ref();
        // A skill's output, and its errors, are whatever the program (and the sites it
        // reached) produced; only a refusal before it started carries nothing in.
        if output.is_some() || report.decision != crate::audit::AuditDecision::Deny {
            ctx.taint.add(format!("the skill {name}"));
        }
        ToolOutput {
            content: report.render(),
            is_error: output.is_none_or(|o| o.timed_out || o.cancelled),
            decision: report.decision,
            reason: report.reason.clone(),
            exit_code: report.exit_code(),
            network: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_forms() {
        assert!(matches!(
            invocation(&json!({"name": "a", "args": ["x"]})),
            Ok(Invocation::Args(a)) if a == ["x"]
        ));
        assert!(matches!(
            invocation(&json!({"name": "a"})),
            Ok(Invocation::Args(a)) if a.is_empty()
        ));
        assert!(matches!(
            invocation(&json!({"name": "a", "command": "ls"})),
            Ok(Invocation::Command(c)) if c == "ls"
        ));
        assert!(invocation(&json!({"args": ["x"], "command": "ls"})).is_err());
        assert!(invocation(&json!({"args": [1]})).is_err());
        assert!(invocation(&json!({"command": " "})).is_err());
    }
}
