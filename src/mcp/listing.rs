//! A server's tool list, read within caps, and the names a model can be offered.
//!
//! `tools/list` is paginated by the server: a server that hands out a `nextCursor` on every
//! page would be listed forever, at grant time and at every start. The pages, the tools and
//! their bytes are capped (`caps.mcp_list_pages`, `caps.mcp_list_tools`, `caps.mcp_list_bytes`)
//! and a cursor given twice ends the listing. Each tool then needs a name a model accepts as
//! `SERVER__tool`, once: a request that names a tool twice is refused by the provider (a 400,
//! not retried), so one such server would break every run — it is refused at grant and at
//! start instead.

use super::grants::ToolDesc;
use crate::sizes::{caps, human};
use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::{Peer, RoleClient};
use std::collections::HashSet;

/// Models accept tool names of at most this many characters from `[a-zA-Z0-9_-]`.
pub const MAX_MODEL_NAME: usize = 64;

/// What the model calls `tool` of `server`: `SERVER__tool`.
pub fn model_name(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
}

/// Why a listing stopped.
#[derive(Debug)]
pub enum ListError {
    /// The server broke a cap or the protocol: a refusal.
    Refused(String),
    /// The request failed (the connection broke).
    Failed(String),
}

/// Every tool `peer` lists, page by page, within the caps.
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, ListError> {
    let caps = caps();
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursors = HashSet::new();
    let mut cursor: Option<String> = None;
    for page in 1.. {
        if page > caps.mcp_list_pages {
            return Err(ListError::Refused(format!(
                "its tool list goes on for more than {} pages (caps.mcp_list_pages)",
                caps.mcp_list_pages
            )));
        }
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let result = peer
            .list_tools(Some(params))
            .await
            .map_err(|e| ListError::Failed(e.to_string()))?;
        bytes += serde_json::to_vec(&result.tools).map_or(0, |b| b.len());
        if bytes > caps.mcp_list_bytes {
            return Err(ListError::Refused(format!(
                "its tool list is larger than {} (caps.mcp_list_bytes)",
                human(caps.mcp_list_bytes as u64)
            )));
        }
        tools.extend(result.tools);
        if tools.len() > caps.mcp_list_tools {
            return Err(ListError::Refused(format!(
                "it lists more than {} tools (caps.mcp_list_tools)",
                caps.mcp_list_tools
            )));
        }
        match result.next_cursor {
            None => break,
            Some(next) if !cursors.insert(next.clone()) => {
                return Err(ListError::Refused(format!(
                    "its tool list repeats the page cursor {:?}: a list that never ends",
                    next.chars().take(40).collect::<String>()
                )))
            }
            Some(next) => cursor = Some(next),
        }
    }
    Ok(tools)
}

/// Whether every tool of `server` can be offered to a model: a usable name, each only once.
pub fn check_tools(server: &str, tools: &[ToolDesc]) -> Result<(), String> {
    let mut seen = HashSet::new();
    for tool in tools {
        let name = model_name(server, &tool.name);
        let usable = !tool.name.is_empty()
            && name.len() <= MAX_MODEL_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !usable {
            return Err(format!(
                "its tool name {:?} cannot be offered to a model (as {name:?}: letters, digits, \
                 '_' and '-', at most {MAX_MODEL_NAME} characters with the server's name)",
                tool.name.chars().take(80).collect::<String>()
            ));
        }
        if !seen.insert(tool.name.as_str()) {
            return Err(format!(
                "it lists the tool {:?} more than once; a model refuses a request naming a tool \
                 twice, so the server is not used until it lists each tool once",
                tool.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> ToolDesc {
        ToolDesc {
            name: name.into(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            read_only: true,
        }
    }

    #[test]
    fn duplicate_and_unusable_names_are_refused() {
        assert!(check_tools("notes", &[tool("add"), tool("read-note_2")]).is_ok());
        let err = check_tools("notes", &[tool("add"), tool("sub"), tool("add")]).unwrap_err();
        assert!(err.contains("\"add\" more than once"), "{err}");
        for bad in ["", "a b", "add()", "ü", &"x".repeat(60)] {
            let err = check_tools("notes", &[tool(bad)]).unwrap_err();
            assert!(err.contains("cannot be offered to a model"), "{bad}: {err}");
        }
    }
}
