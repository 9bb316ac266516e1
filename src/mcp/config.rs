//! `[mcp]` in the config: the MCP servers warden connects, each either a program it starts in
//! the sandbox (`command`, `args`, optionally a folder `dir` of its files) or a streamable-HTTP
//! endpoint (`url`), and what the model may do with each tool (`allow`, `ask`, `deny`).
//!
//! ```toml
//! [mcp.servers.notes]
//! command = "python3"
//! args = ["server.py"]
//! dir = "~/mcp/notes"                  # copied privately per start; its mcp.toml is the manifest
//! [mcp.servers.notes.permissions]      # or here, when the folder has no mcp.toml
//! interpreters = ["python3"]
//! paths.read = ["notes"]
//! [mcp.servers.notes.tools]
//! search = "allow"
//! delete = "deny"
//!
//! [mcp.servers.docs]
//! url = "https://mcp.example.com/mcp"
//! headers = { Authorization = "Bearer {secret:DOCS_TOKEN}" }
//! ```

use crate::durations::MAX_SECONDS;
use crate::policy::Decision;
use crate::sandbox::Backend;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    pub servers: BTreeMap<String, ServerConfig>,
    /// A server without calls for this long is stopped (started again on the next call).
    pub idle_secs: u64,
    /// The longest one call (and a server's start) may take; a server that hangs is killed
    /// with every process it started.
    pub call_timeout_secs: u64,
    /// Results longer than this (characters) are cut.
    pub max_result_chars: usize,
    /// How often a server that keeps dying is started again within one process before it is
    /// given up on (each start waits longer: 1 s, 2 s, 4 s…).
    pub max_restarts: u32,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            servers: BTreeMap::new(),
            idle_secs: 300,
            call_timeout_secs: 120,
            max_result_chars: 20_000,
            max_restarts: 3,
        }
    }
}

/// One `[mcp.servers.NAME]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The program of a stdio server, run in the sandbox (a name on the jail's PATH, or a path
    /// relative to `dir`).
    pub command: Option<String>,
    pub args: Vec<String>,
    /// The server's own files: hashed for the grant, copied read-only into each start's run
    /// folder (its working directory). `mcp.toml` there, if any, is its manifest.
    pub dir: Option<PathBuf>,
    /// The manifest, when `dir` has no `mcp.toml`: `skill.toml`'s `[permissions]` keys.
    pub permissions: Option<toml::Table>,
    /// Where it runs: `host` or `docker` (default: `[sandbox] backend`).
    pub backend: Option<Backend>,
    /// A streamable-HTTP server, reached by warden itself.
    pub url: Option<String>,
    /// Headers for `url`; `{secret:NAME}` is filled from `[skills.secrets]` or
    /// `WARDEN_SECRET_NAME`.
    pub headers: BTreeMap<String, String>,
    /// Per-tool decisions: `allow`, `ask` or `deny`. Unlisted tools: `allow` when the server
    /// marks them read-only, else `ask`.
    pub tools: BTreeMap<String, Decision>,
    /// Off: configured but not offered.
    pub enabled: Option<bool>,
}

impl ServerConfig {
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// The decision configured for `tool`, if any.
    pub fn tool_rule(&self, tool: &str) -> Option<Decision> {
        self.tools.get(tool).copied()
    }
}

/// A server name: it prefixes its tools' names (`NAME__tool`), so it is short and plain.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && !name.contains("__")
        && !name.starts_with(['-', '_']);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "mcp.servers.{name:?}: a server name is 1 to 32 lowercase letters, digits, '-' or \
             '_' (no '__', not first), since it prefixes its tools' names"
        ))
    }
}

/// Check the section; errors name the key.
pub fn check(config: &McpConfig) -> Result<(), String> {
    for (key, value) in [
        ("mcp.idle_secs", config.idle_secs),
        ("mcp.call_timeout_secs", config.call_timeout_secs),
    ] {
        if value == 0 || value > MAX_SECONDS {
            return Err(format!(
                "{key} = {value} is not between 1 and {MAX_SECONDS} seconds"
            ));
        }
    }
    if config.max_result_chars < 100 {
        return Err("mcp.max_result_chars must be at least 100".into());
    }
    for (name, server) in &config.servers {
        check_name(name)?;
        let key = format!("mcp.servers.{name}");
        match (&server.command, &server.url) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{key}: give either command (stdio) or url (HTTP), not both"
                ))
            }
            (None, None) => {
                return Err(format!(
                    "{key}: needs command (a stdio server run in the sandbox) or url (a \
                     streamable-HTTP server)"
                ))
            }
            (Some(command), None) => {
                if command.is_empty() {
                    return Err(format!("{key}.command is empty"));
                }
                if !server.headers.is_empty() {
                    return Err(format!(
                        "{key}.headers: only an HTTP server (url) takes headers"
                    ));
                }
            }
            (None, Some(url)) => {
                let parsed = url::Url::parse(url).map_err(|e| format!("{key}.url: {e}"))?;
                if !matches!(parsed.scheme(), "https" | "http") || parsed.host_str().is_none() {
                    return Err(format!("{key}.url must be an http(s) URL with a host"));
                }
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    return Err(format!(
                        "{key}.url carries credentials; put them in headers with {{secret:NAME}}"
                    ));
                }
                for (header, value) in &server.headers {
                    crate::secret::secret_names(value)
                        .map_err(|why| format!("{key}.headers.{header}: {why}"))?;
                }
                if !server.args.is_empty()
                    || server.dir.is_some()
                    || server.permissions.is_some()
                    || server.backend.is_some()
                {
                    return Err(format!(
                        "{key}: args, dir, permissions and backend are for stdio servers (command)"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The cap on one message from an MCP server (a stdio line, an HTTP body, an SSE event).
pub fn message_cap() -> crate::sizes::Cap {
    crate::sizes::Cap::new(crate::sizes::caps().mcp_message_bytes, "mcp_message_bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpConfig, String> {
        let config: McpConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        check(&config).map(|()| config)
    }

    #[test]
    fn both_kinds_parse_and_tool_rules_are_read() {
        let config = parse(
            r#"
            [servers.notes]
            command = "python3"
            args = ["server.py"]
            dir = "/srv/notes"
            permissions = { interpreters = ["python3"] }
            tools = { search = "allow", delete = "deny" }
            [servers.docs]
            url = "https://mcp.example.com/mcp"
            headers = { Authorization = "Bearer {secret:DOCS}" }
            "#,
        )
        .unwrap();
        let notes = &config.servers["notes"];
        assert_eq!(notes.tool_rule("search"), Some(Decision::Allow));
        assert_eq!(notes.tool_rule("delete"), Some(Decision::Deny));
        assert_eq!(notes.tool_rule("other"), None);
        assert!(config.servers["docs"].url.is_some());
    }

    #[test]
    fn mistakes_name_their_key() {
        for (text, expected) in [
            ("[servers.a]\n", "needs command"),
            (
                "[servers.a]\ncommand = \"x\"\nurl = \"https://h\"\n",
                "not both",
            ),
            ("[servers.\"A b\"]\ncommand = \"x\"\n", "server name"),
            ("[servers.a__b]\ncommand = \"x\"\n", "server name"),
            (
                "[servers.a]\ncommand = \"x\"\ntools = { t = \"maybe\" }\n",
                "unknown variant",
            ),
            ("[servers.a]\nurl = \"ftp://h/\"\n", "mcp.servers.a.url"),
            ("[servers.a]\nurl = \"https://u:p@h/\"\n", "credentials"),
            (
                "[servers.a]\nurl = \"https://h/\"\nargs = [\"x\"]\n",
                "stdio servers",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nheaders = { A = \"b\" }\n",
                "headers",
            ),
            ("idle_secs = 0\n", "mcp.idle_secs"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
