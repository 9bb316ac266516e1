//! `warden mcp serve`: warden's own workspace tools — `bash`, `read`, `write`, `edit`,
//! `list_dir` — served over MCP (stdio) to another agent (Claude Desktop, Cursor, Codex…).
//! They are the very tools the agent uses, built the same way ([`crate::app::Core`]): the
//! command policy and path validator, the sandbox, the prompt-file checks, and an audit row
//! per call (session `mcp:CLIENT`).
//!
//! An `ask` is put to the user through MCP elicitation (a yes/no form the client shows) when
//! the client supports it, and refused when it does not: the client's own model cannot
//! approve anything. Standard output is the protocol; logs go to standard error.

use crate::app::Core;
use crate::config::Config;
use crate::egress::Provenance;
use crate::taint::Taint;
use crate::tools::approval::{Approval, ApprovalRequest, Approver};
use crate::tools::outbox::Nowhere;
use crate::tools::{ToolContext, ToolSet};
use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, Content, CreateElicitationRequestParams,
    ElicitationAction, ElicitationSchema, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerInfo, Tool, ToolAnnotations,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The tools served; the agent's others (web, memory, cron, skills) are not.
const SERVED: &[&str] = &["bash", "read", "write", "edit", "list_dir"];
/// Tools that change nothing (their MCP annotation says so).
const READ_ONLY: &[&str] = &["read", "list_dir"];
/// How long an elicitation may wait for the user.
const ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// Serve until the client closes standard input. `workspace` replaces the config's: a
/// project of the user's, into which warden puts nothing of its own (its convention files,
/// database and grants stay in the data directory). `trusted`: the client's requests count as
/// the user's own (by default they are untrusted: the model behind the client is trusted no
/// more than warden's own after it read a page).
pub fn run(mut config: Config, workspace: Option<PathBuf>, trusted: bool) -> anyhow::Result<i32> {
    if let Some(dir) = workspace {
        config.workspace = dir;
        config.project_workspace = true;
    }
    let core = Core::build(config)?;
    // No background commands: an MCP client has no chat to tell when one ends.
    let tools = Arc::new(core.workspace_tools(None));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let taint = Taint::new();
        if !trusted {
            // Memory files then ask (they feed warden's own agent in every later run), and so
            // do instruction files, as always.
            taint.add(
                "an MCP client's requests (`warden mcp serve`; start it with --trusted to treat \
                 the client as yourself)",
            );
        }
        let server = WardenServer {
            tools,
            taint,
            provenance: Provenance::new(),
        };
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| anyhow::anyhow!("the MCP handshake failed: {e}"))?;
        tracing::info!(workspace = %core.workspace.display(), "warden mcp serve: serving");
        let _ = service.waiting().await;
        core.sandboxes.shutdown().await;
        Ok(0)
    })
}

struct WardenServer {
    tools: Arc<ToolSet>,
    /// One connection is one conversation: what it read taints its later writes.
    taint: Taint,
    provenance: Provenance,
}

impl WardenServer {
    fn session(peer: &Peer<RoleServer>) -> String {
        let client = peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
            .unwrap_or_else(|| "client".into());
        let client: String = client
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .take(40)
            .collect();
        format!("mcp:{client}")
    }
}

impl ServerHandler for WardenServer {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("warden", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "warden's workspace tools. Every bash command is parsed and checked by warden's \
                 command policy and runs in a sandbox (Landlock + seccomp, or Docker) without \
                 network; file tools are confined to the workspace. A refusal says why: choose \
                 another way rather than retrying the same thing.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .tools
            .specs()
            .into_iter()
            .filter(|spec| SERVED.contains(&spec.name.as_str()))
            .map(|spec| {
                let schema = match spec.input_schema {
                    serde_json::Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                let read_only = READ_ONLY.contains(&spec.name.as_str());
                Tool::new(spec.name, spec.description, Arc::new(schema)).annotate(
                    ToolAnnotations::new()
                        .read_only(read_only)
                        .destructive(!read_only)
                        .open_world(false),
                )
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let name = request.name.to_string();
        if !SERVED.contains(&name.as_str()) {
            return Ok(CallToolResult::error(vec![Content::text(format!(
                "unknown tool {name:?}; warden serves: {}",
                SERVED.join(", ")
            ))]));
        }
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let ctx = ToolContext {
            session: WardenServer::session(&context.peer),
            sub_agent: None,
            // The client cancelling the request kills a running sandboxed command.
            cancel: context.ct.clone(),
            approver: Arc::new(Elicitation {
                peer: context.peer.clone(),
            }),
            progress: Arc::new(|_| {}),
            taint: self.taint.clone(),
            provenance: self.provenance.clone(),
            background: crate::tools::background::ignore_background(),
            outbox: Arc::new(Nowhere(
                "an MCP client has no chat to send files to: tell it the file's path",
            )),
        };
        let output = self.tools.call(&name, &input, &ctx).await;
        let content = vec![Content::text(output.content)];
        Ok(if output.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        })
    }
}

/// Approvals through the client: a yes/no form, or a refusal when it cannot show one.
struct Elicitation {
    peer: Peer<RoleServer>,
}

#[async_trait]
impl Approver for Elicitation {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        if !self
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            return Approval::Denied(
                "this MCP client cannot ask the user (it does not support elicitation), and \
                 only the user may approve"
                    .into(),
            );
        }
        let mut message = format!(
            "warden asks before running this ({}):\n\n{}",
            request.reason, request.command
        );
        // Never cut: the part left out could be the part that matters.
        if let Some(detail) = &request.detail {
            message.push_str(&format!("\n\n{detail}"));
        }
        let schema = match ElicitationSchema::builder()
            .required_bool_with("approve", |b| {
                b.description("Run it (true) or refuse (false)")
            })
            .build()
        {
            Ok(schema) => schema,
            Err(why) => return Approval::Denied(format!("the approval form failed: {why}")),
        };
        let params = CreateElicitationRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        };
        match self
            .peer
            .create_elicitation_with_timeout(params, Some(ASK_TIMEOUT))
            .await
        {
            Ok(result) => {
                let approved = result.action == ElicitationAction::Accept
                    && result
                        .content
                        .as_ref()
                        .and_then(|c| c.get("approve"))
                        .and_then(serde_json::Value::as_bool)
                        == Some(true);
                if approved {
                    Approval::Approved
                } else {
                    Approval::Denied("denied by the user (through the MCP client)".into())
                }
            }
            Err(e) => Approval::Denied(format!("the MCP client did not answer the approval ({e})")),
        }
    }
}
