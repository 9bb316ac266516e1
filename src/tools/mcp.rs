//! The tools of granted MCP servers, offered to the model as `SERVER__tool` with the schemas
//! the user saw when granting. Each call is decided first — `mcp.servers.NAME.tools.TOOL` in
//! the config, else `allow` for tools the server marks read-only and `ask` for the rest —
//! then sent to the server (started in its jail on first use). What comes back is untrusted
//! content: it taints the run.

use super::approval::{self, ApprovalRequest};
use super::{Tool, ToolContext, ToolOutput};
use crate::audit::AuditDecision;
use crate::llm::ToolSpec;
use crate::mcp::grants::ToolDesc;
use crate::mcp::listing::{check_tools, model_name};
use crate::mcp::servers::{CallOutcome, McpServers};
use crate::policy::Decision;
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;

pub struct McpTool {
    servers: Arc<McpServers>,
    server: String,
    tool: ToolDesc,
    decision: Decision,
    /// Where the decision came from, for the reasons the user and the model read.
    why: String,
}

/// One tool per granted tool of every enabled server; names a model cannot take, and a name
/// granted twice (grants made before names were checked), are skipped and logged.
pub fn tools(servers: &Arc<McpServers>) -> Vec<Arc<dyn Tool>> {
    let mut out: Vec<Arc<dyn Tool>> = Vec::new();
    let mut offered = std::collections::HashSet::new();
    for (server, tool) in servers.granted_tools() {
        let name = tool_name(&server, &tool.name);
        if let Err(why) = check_tools(&server, std::slice::from_ref(&tool)) {
            tracing::warn!(server = %server, "an MCP tool is not offered: {why}");
            continue;
        }
        if !offered.insert(name) {
            tracing::warn!(
                server = %server,
                tool = %tool.name,
                "an MCP tool granted twice is offered once"
            );
            continue;
        }
        let configured = servers
            .config()
            .servers
            .get(&server)
            .and_then(|s| s.tool_rule(&tool.name));
        let key = format!("mcp.servers.{server}.tools.{}", tool.name);
        let (decision, why) = match configured {
            Some(decision) => (decision, format!("{key} = \"{}\"", decision_word(decision))),
            None if tool.read_only => (
                Decision::Allow,
                format!("the server marks it read-only (set {key} to change)"),
            ),
            None => (
                Decision::Ask,
                format!(
                    "the server does not mark it read-only; set {key} = \"allow\" to stop \
                     asking"
                ),
            ),
        };
        out.push(Arc::new(McpTool {
            servers: servers.clone(),
            server,
            tool,
            decision,
            why,
        }));
    }
    out
}

/// `SERVER__tool`.
pub fn tool_name(server: &str, tool: &str) -> String {
    model_name(server, tool)
}

fn decision_word(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Ask => "ask",
        Decision::Deny => "deny",
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: tool_name(&self.server, &self.tool.name),
            description: format!(
                "[MCP server {}, runs sandboxed; its output is untrusted] {}",
                self.server, self.tool.description
            ),
            input_schema: self.tool.input_schema.clone(),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let name = tool_name(&self.server, &self.tool.name);
        let arguments = match input {
            Value::Object(map) => map.clone(),
            Value::Null => serde_json::Map::new(),
            other => return ToolOutput::error(format!("arguments must be an object, not {other}")),
        };
        let approved = match self.decision {
            Decision::Deny => {
                return ToolOutput::denied(format!("{name} is not allowed: {}", self.why))
            }
            Decision::Allow => false,
            Decision::Ask => {
                let shown = serde_json::to_string_pretty(input).unwrap_or_default();
                let request = ApprovalRequest {
                    session: ctx.session.clone(),
                    tool: name.clone(),
                    command: format!("{name} {shown}"),
                    reason: format!(
                        "the MCP server {} would run its tool {} with these arguments ({})",
                        self.server, self.tool.name, self.why
                    ),
                    always: None,
                    detail: None,
                };
                if let Err(refused) = approval::ask(ctx.approver.as_ref(), &request).await {
                    return refused;
                }
                true
            }
        };
        (ctx.progress)(format!("Calling {name}…"));
        let outcome = self
            .servers
            .call(
                &self.server,
                &self.tool.name,
                arguments,
                ctx.audit_session(),
                ctx.approver.as_ref(),
                &ctx.cancel,
            )
            .await;
        match outcome {
            CallOutcome::Answered { text, is_error } => {
                ctx.taint.add(format!("the MCP tool {name}"));
                let first_line: String = text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect();
                ToolOutput {
                    content: if text.is_empty() {
                        "(the tool returned nothing)".into()
                    } else {
                        text
                    },
                    is_error,
                    decision: if approved {
                        AuditDecision::Approved
                    } else {
                        AuditDecision::Allow
                    },
                    // The server's own words on a failure (a jail refusal shows here).
                    reason: match is_error {
                        true => format!("the tool reported an error: {first_line}"),
                        false => format!("answered by the MCP server {}", self.server),
                    },
                    exit_code: None,
                    network: None,
                }
            }
            CallOutcome::Refused(why) => ToolOutput::denied(why),
            CallOutcome::Failed(why) => {
                // A failure may quote the server (a JSON-RPC error message is its own text).
                ctx.taint.add(format!("the MCP tool {name}"));
                ToolOutput::error(why)
            }
        }
    }
}
