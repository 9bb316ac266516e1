//! warden as an MCP client (rmcp): one connection to one server, over a jailed process's pipes
//! or streamable HTTP. The client declares no capabilities — no sampling (a server cannot make
//! warden's model say things), no roots (it learns no paths), no elicitation (it cannot
//! question the user) — and offers the model only the tools the user granted, exactly as they
//! were described then.

use super::config::message_cap;
use super::definition::HttpServer;
use super::grants::ToolDesc;
use super::listing::{self, ListError};
use super::stdio::{JailedServer, StartError, Stopped};
use crate::sizes::read::{LineCapped, Tripped};
use crate::skills::settings::SkillSettings;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientInfo, Implementation, RawContent,
    ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient, ServiceExt};
use tokio::net::unix::pipe;

/// A live MCP session and the tools it may be asked for.
pub struct Connection {
    service: RunningService<RoleClient, ClientInfo>,
    /// Every tool the server lists now.
    live: Vec<ToolDesc>,
    /// The granted ones that are unchanged.
    offered: Vec<String>,
    /// Granted but described differently now, or listed but never granted.
    changed: Vec<String>,
    new: Vec<String>,
    /// The cap that cut the connection, if one did.
    tripped: Tripped,
}

/// `failure`, or the cap that caused it when one tripped.
fn explain(tripped: &Tripped, failure: String) -> String {
    match tripped.get() {
        Some(exceeded) => cut_by(&exceeded),
        None => failure,
    }
}

fn cut_by(exceeded: &crate::sizes::Exceeded) -> String {
    format!("{exceeded}; the connection was closed")
}

impl Connection {
    /// Speak MCP over a jailed server's stdout (read) and stdin (write); no line it writes may
    /// exceed `caps.mcp_message_bytes`.
    pub async fn over_pipes(
        read: pipe::Receiver,
        write: pipe::Sender,
        granted: &[ToolDesc],
        server: &str,
    ) -> Result<Connection, StartError> {
        let tripped = Tripped::default();
        let what = format!("a line from the MCP server {server}");
        let read = LineCapped::new(read, message_cap(), what, tripped.clone());
        let service = tokio::select! {
            served = client_info().serve((read, write)) => served.map_err(|e| {
                StartError::Failed(explain(&tripped, format!("the MCP handshake failed: {e}")))
            })?,
            exceeded = tripped.wait() => return Err(StartError::Failed(cut_by(&exceeded))),
        };
        Connection::ready(service, granted, server, tripped).await
    }

    /// Reach a streamable-HTTP server.
    pub async fn over_http(
        http: &HttpServer,
        settings: &SkillSettings,
        granted: &[ToolDesc],
        server: &str,
    ) -> Result<Connection, StartError> {
        let tripped = Tripped::default();
        let transport = super::http::transport(http, settings, server, tripped.clone())
            .map_err(StartError::Failed)?;
        let service = tokio::select! {
            served = client_info().serve(transport) => served.map_err(|e| {
                StartError::Failed(explain(
                    &tripped,
                    format!("the MCP handshake with {} failed: {e}", http.url),
                ))
            })?,
            exceeded = tripped.wait() => return Err(StartError::Failed(cut_by(&exceeded))),
        };
        Connection::ready(service, granted, server, tripped).await
    }

    async fn ready(
        service: RunningService<RoleClient, ClientInfo>,
        granted: &[ToolDesc],
        server: &str,
        tripped: Tripped,
    ) -> Result<Connection, StartError> {
        // A cap that cuts the connection ends the wait (an HTTP transport would go on waiting).
        let listed = tokio::select! {
            listed = listing::list_tools(service.peer()) => listed,
            exceeded = tripped.wait() => Err(ListError::Failed(cut_by(&exceeded))),
        };
        let live: Vec<ToolDesc> = listed
            .map_err(|e| match e {
                ListError::Refused(why) => StartError::Refused(why),
                ListError::Failed(why) => StartError::Failed(explain(
                    &tripped,
                    format!("listing its tools failed: {why}"),
                )),
            })?
            .iter()
            .map(desc_of)
            .collect();
        listing::check_tools(server, &live).map_err(StartError::Refused)?;
        let mut offered = Vec::new();
        let mut changed = Vec::new();
        for tool in granted {
            match live.iter().find(|l| l.name == tool.name) {
                Some(now) if now == tool => offered.push(tool.name.clone()),
                Some(_) => changed.push(tool.name.clone()),
                None => {}
            }
        }
        let new = live
            .iter()
            .filter(|l| !granted.iter().any(|g| g.name == l.name))
            .map(|l| l.name.clone())
            .collect();
        Ok(Connection {
            service,
            live,
            offered,
            changed,
            new,
            tripped,
        })
    }

    /// Until a cap cuts the connection (a call then fails at once, rather than wait for an
    /// answer that cannot come).
    pub fn tripped(&self) -> Tripped {
        self.tripped.clone()
    }

    /// Why the connection was cut by a cap, when it was: the words for a failed call.
    pub fn cut(&self) -> Option<String> {
        self.tripped.get().map(|exceeded| cut_by(&exceeded))
    }

    /// Every tool the server lists now (what a grant would pin).
    pub fn live_tools(&self) -> &[ToolDesc] {
        &self.live
    }

    pub fn offers(&self, tool: &str) -> bool {
        self.offered.iter().any(|t| t == tool)
    }

    pub fn tool_names(&self) -> Vec<String> {
        self.offered.clone()
    }

    /// What the audit row of its start says about tools that differ from the grant.
    pub fn withheld_note(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.changed.is_empty() {
            parts.push(format!(
                "tools described differently than when granted, withheld: {}",
                self.changed.join(", ")
            ));
        }
        if !self.new.is_empty() {
            parts.push(format!(
                "tools it offers that were never granted, withheld: {}",
                self.new.join(", ")
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    pub fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// End the session (a stdio server sees its stdin close) and stop the process.
    pub async fn close_and_stop(
        self,
        process: Option<JailedServer>,
        graceful: bool,
    ) -> Option<Stopped> {
        // Cancelling drops the transport: the server's stdin closes.
        let _ =
            tokio::time::timeout(std::time::Duration::from_secs(2), self.service.cancel()).await;
        match process {
            Some(process) => Some(process.stop(graceful).await),
            None => None,
        }
    }
}

fn client_info() -> ClientInfo {
    ClientInfo::new(
        ClientCapabilities::default(),
        Implementation::new("warden", env!("CARGO_PKG_VERSION")),
    )
}

/// What the model will read about a tool, as the server describes it.
pub fn desc_of(tool: &rmcp::model::Tool) -> ToolDesc {
    ToolDesc {
        name: tool.name.to_string(),
        description: tool.description.as_deref().unwrap_or("").to_string(),
        input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
        read_only: tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false),
    }
}

/// Call a tool; the result as text (cut at `max_chars`) and whether the tool said it failed.
/// `Err`: the connection failed (the server died, or answered with a protocol error).
pub async fn call_tool(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: serde_json::Map<String, serde_json::Value>,
    max_chars: usize,
) -> Result<(String, bool), String> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    let result = peer.call_tool(params).await.map_err(|e| e.to_string())?;
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|content| match &content.raw {
            RawContent::Text(text) => text.text.clone(),
            RawContent::Image(image) => format!("[an image ({}) was left out]", image.mime_type),
            RawContent::Audio(audio) => format!("[audio ({}) was left out]", audio.mime_type),
            RawContent::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[resource {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents { uri, .. } => {
                    format!("[binary resource {uri} was left out]")
                }
            },
            RawContent::ResourceLink(link) => format!("[resource link {}]", link.uri),
        })
        .collect();
    if let Some(structured) = &result.structured_content {
        if parts.is_empty() {
            parts.push(structured.to_string());
        }
    }
    let text = parts.join("\n");
    Ok((cap(&text, max_chars), result.is_error.unwrap_or(false)))
}

fn cap(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some((cut, _)) => format!(
            "{}\n[… cut: the result was longer than {max_chars} characters (mcp.max_result_chars)]",
            &text[..cut]
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_on_a_character() {
        assert_eq!(cap("héllo", 10), "héllo");
        let cut = cap("ééééé", 3);
        assert!(cut.starts_with("ééé\n[… cut"), "{cut}");
    }
}
