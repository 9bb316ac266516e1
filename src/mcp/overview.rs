//! The configured MCP servers as `warden mcp list` and the HTTP API show them: one row each,
//! with how it is reached, its grant and the tools the grant allows. Reads the config, the
//! server's files and the grants only: nothing is started. Header values are templates that
//! may name secrets; only the header names are shown.

use super::config::ServerConfig;
use super::definition::{ServerDef, ServerKind};
use super::grants::{McpGrantStatus, McpGrants, ToolDesc};
use super::servers::McpServers;
use crate::db::Database;
use crate::policy::Decision;
use crate::skills::grants::short_time;
use crate::skills::tree::short_hash;
use serde_json::{json, Value};

/// One configured server.
pub struct McpRow {
    pub name: String,
    /// How it is reached (`stdio: CMD in the host sandbox`, `streamable HTTP: URL`), or
    /// `invalid`.
    pub server: String,
    /// Its grant (and whether it is enabled) in words.
    pub status: String,
    /// Everything above and more (transport, command or URL, the tools allowed), as JSON.
    pub json: Value,
}

/// Every server of `[mcp.servers]`, by name.
pub fn rows(servers: &McpServers, db: &Database) -> Vec<McpRow> {
    let mut rows = Vec::new();
    for (name, server) in &servers.config().servers {
        let mut json = json!({"name": name, "enabled": server.enabled()});
        let (summary, state, granted) = match servers.load(name) {
            Ok(def) => {
                describe_def(&def, &mut json);
                let granted = matches!(
                    McpGrants::new(db).status(&def.name, &def.hash),
                    Ok(McpGrantStatus::Granted(_))
                );
                (def.summary(), status(db, &def), granted)
            }
            Err(why) => {
                json["invalid"] = json!(why);
                ("invalid".to_string(), why, false)
            }
        };
        let state = if server.enabled() {
            state
        } else {
            format!("disabled (enabled = false); {state}")
        };
        let grant = McpGrants::new(db).get(name).ok().flatten();
        // Whether its tools are offered: granted for what it is now, and enabled.
        json["granted"] = json!(granted && server.enabled());
        json["tools"] = match grant {
            Some(grant) => grant
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "decision": tool_decision(server, t)}))
                .collect(),
            None => json!([]),
        };
        json["server"] = json!(summary);
        json["status"] = json!(state);
        rows.push(McpRow {
            name: name.clone(),
            server: summary,
            status: state,
            json,
        });
    }
    rows
}

fn describe_def(def: &ServerDef, json: &mut Value) {
    match &def.kind {
        ServerKind::Stdio(stdio) => {
            json["transport"] = json!("stdio");
            json["command"] = json!(stdio.argv);
            json["backend"] = json!(stdio.backend.to_string());
        }
        ServerKind::Http(http) => {
            json["transport"] = json!("http");
            json["url"] = json!(http.url);
            // Values may carry `{secret:NAME}`: names of the headers only.
            json["headers"] = json!(http.headers.keys().collect::<Vec<_>>());
        }
    }
    json["hash"] = json!(def.hash);
}

/// The server's grant in words.
pub fn status(db: &Database, def: &ServerDef) -> String {
    match McpGrants::new(db).status(&def.name, &def.hash) {
        Ok(McpGrantStatus::Granted(g)) => format!(
            "granted {} ({} tool(s))",
            short_time(&g.granted_at),
            g.tools.len()
        ),
        Ok(McpGrantStatus::NotGranted) => "not granted".into(),
        Ok(McpGrantStatus::Changed(g)) => format!(
            "changed since its grant ({} for {}, now {}): not started",
            short_time(&g.granted_at),
            short_hash(&g.hash),
            short_hash(&def.hash)
        ),
        Err(e) => format!("grant unreadable: {e}"),
    }
}

/// What warden does when the model calls `tool`, in words.
pub fn tool_decision(server: &ServerConfig, tool: &ToolDesc) -> &'static str {
    match server.tool_rule(&tool.name) {
        Some(Decision::Allow) => "allowed (config)",
        Some(Decision::Ask) => "asks each time (config)",
        Some(Decision::Deny) => "never called (config)",
        None if tool.read_only => "allowed (marked read-only)",
        None => "asks each time (not marked read-only)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::manifest::Bounds;

    #[test]
    fn an_http_servers_header_values_are_never_shown() {
        let config = ServerConfig {
            url: Some("https://docs.example/mcp".into()),
            headers: [(
                "Authorization".to_string(),
                "Bearer {secret:DOCS_TOKEN}".to_string(),
            )]
            .into(),
            ..Default::default()
        };
        let bounds = Bounds {
            timeout_secs: 60,
            limits: Default::default(),
        };
        let def = ServerDef::load("docs", &config, &bounds, crate::sandbox::Backend::Host).unwrap();
        let mut json = json!({});
        describe_def(&def, &mut json);
        assert_eq!(json["transport"], "http");
        assert_eq!(json["url"], "https://docs.example/mcp");
        assert_eq!(json["headers"], json!(["Authorization"]));
        assert!(!json.to_string().contains("Bearer"), "{json}");
    }

    #[test]
    fn the_config_decides_before_the_read_only_mark() {
        let tool = |name: &str, read_only| ToolDesc {
            name: name.into(),
            description: String::new(),
            input_schema: json!({}),
            read_only,
        };
        let config = ServerConfig {
            tools: [
                ("search".to_string(), Decision::Deny),
                ("write".to_string(), Decision::Allow),
            ]
            .into(),
            ..Default::default()
        };
        assert_eq!(
            tool_decision(&config, &tool("search", true)),
            "never called (config)"
        );
        assert_eq!(
            tool_decision(&config, &tool("write", false)),
            "allowed (config)"
        );
        assert_eq!(
            tool_decision(&config, &tool("list", true)),
            "allowed (marked read-only)"
        );
        assert_eq!(
            tool_decision(&config, &tool("delete", false)),
            "asks each time (not marked read-only)"
        );
    }
}
