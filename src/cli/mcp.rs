//! `warden mcp list|tools|grant|revoke|serve`: the configured MCP servers and their grants,
//! and warden's own tools served over MCP.
//!
//! Granting starts the server once in its jail to read the tools it offers, shows what it
//! runs, what its manifest lets it do and every tool with the decision it will get, and asks;
//! with no terminal to ask on, only `--yes` grants. Exit status: 0 done; 1 refused or not
//! confirmed; 2 usage or config error.

use crate::audit::{self, AuditDecision, AuditEntry};
use crate::config::Config;
use crate::db::Database;
use crate::mcp::config::ServerConfig;
use crate::mcp::definition::{ServerDef, ServerKind};
use crate::mcp::grants::{McpGrants, ToolDesc};
use crate::mcp::overview;
use crate::mcp::servers::McpServers;
use crate::skills::describe::permission_lines;
use crate::skills::settings::SkillSettings;
use crate::skills::tree::short_hash;
use anyhow::Context;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// A request refused (not granted, not confirmed, failed to start).
pub const EXIT_REFUSED: i32 = 1;

pub enum Action {
    List {
        json: bool,
    },
    Tools {
        name: String,
    },
    Grant {
        name: String,
        yes: bool,
    },
    Revoke {
        name: String,
    },
    Serve {
        workspace: Option<PathBuf>,
        trusted: bool,
    },
}

pub fn run(config: Config, action: Action) -> anyhow::Result<i32> {
    if let Action::Serve { workspace, trusted } = action {
        return crate::mcp::serve::run(config, workspace, trusted);
    }
    let workspace = crate::app::prepare_workspace(&config.workspace)?;
    let db = crate::schema::open_in(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let settings = Arc::new(SkillSettings::prepare(&config, &workspace)?);
    let servers = McpServers::new(&config.mcp, settings.clone(), db.clone());
    match action {
        Action::List { json } => list(&servers, &db, json),
        Action::Tools { name } => tools(&servers, &db, &name),
        Action::Grant { name, yes } => grant(&servers, &db, &name, yes),
        Action::Revoke { name } => {
            let had = McpGrants::new(&db)
                .revoke(&name)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let reason = if had {
                "grant removed"
            } else {
                "there was no grant"
            };
            record(&db, &name, "revoke", AuditDecision::Allow, reason)?;
            println!("{name}: {reason}.");
            Ok(0)
        }
        Action::Serve { .. } => unreachable!("handled above"),
    }
}

fn list(servers: &McpServers, db: &Database, json: bool) -> anyhow::Result<i32> {
    let rows = overview::rows(servers, db);
    if json {
        println!(
            "{}",
            serde_json::Value::Array(rows.into_iter().map(|r| r.json).collect())
        );
    } else if rows.is_empty() {
        println!("No MCP servers configured ([mcp.servers.NAME] in the config).");
    } else {
        for row in rows {
            println!("{}  {}\n    {}", row.name, row.server, row.status);
        }
    }
    Ok(0)
}

/// The tools with their decisions: the granted ones, or — before a grant — what it offers.
fn tools(servers: &McpServers, db: &Database, name: &str) -> anyhow::Result<i32> {
    let def = match servers.load(name) {
        Ok(def) => def,
        Err(why) => {
            eprintln!("warden: {why}");
            return Ok(EXIT_REFUSED);
        }
    };
    println!("{name}: {}", overview::status(db, &def));
    let granted = McpGrants::new(db).get(name).ok().flatten();
    let tools = match granted {
        Some(grant) => grant.tools,
        None => match runtime()?.block_on(servers.probe(name)) {
            Ok((_, tools)) => {
                println!("It offers (not granted yet):");
                tools
            }
            Err(why) => {
                eprintln!("warden: {why}");
                return Ok(EXIT_REFUSED);
            }
        },
    };
    print!("{}", describe_tools(servers, name, &tools));
    Ok(0)
}

fn grant(servers: &McpServers, db: &Database, name: &str, yes: bool) -> anyhow::Result<i32> {
    let (def, tools) = match runtime()?.block_on(servers.probe(name)) {
        Ok(found) => found,
        Err(why) => {
            record(db, name, "grant", AuditDecision::Deny, &why)?;
            eprintln!("warden: {why}");
            return Ok(EXIT_REFUSED);
        }
    };
    let review = review(servers, &def, &tools);
    println!("{review}");
    let previous = McpGrants::new(db).get(name).ok().flatten();
    let question = match &previous {
        Some(g) if g.hash != def.hash => format!(
            "It changed since its grant for {}. Grant it as it is now?",
            short_hash(&g.hash)
        ),
        _ => "Grant it?".into(),
    };
    match super::confirm(&question, yes) {
        Ok(true) => {}
        Ok(false) => {
            record(
                db,
                name,
                "grant",
                AuditDecision::Rejected,
                "the user declined",
            )?;
            println!("Nothing was granted.");
            return Ok(EXIT_REFUSED);
        }
        Err(why) => {
            record(db, name, "grant", AuditDecision::Rejected, &why)?;
            eprintln!("warden: {why}");
            return Ok(EXIT_REFUSED);
        }
    }
    McpGrants::new(db)
        .grant(name, &def.hash, &tools, &review)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let reason = format!("granted {} with {} tool(s)", def.hash, tools.len());
    record(db, name, "grant", AuditDecision::Allow, &reason)?;
    println!("Granted {name} ({}).", short_hash(&def.hash));
    Ok(0)
}

/// What the user reads before granting.
fn review(servers: &McpServers, def: &ServerDef, tools: &[ToolDesc]) -> String {
    let mut out = format!(
        "MCP server \"{}\" — {}\nContent hash: {}\n",
        def.name,
        def.summary(),
        def.hash
    );
    match &def.kind {
        ServerKind::Stdio(stdio) => {
            let (files, bytes) = stdio.skill.tree.size();
            out.push_str(&format!(
                "Its files: {files} file(s), {} from {}\nIts manifest: {}\n\nIt may:\n",
                crate::skills::describe::human_bytes(bytes),
                stdio.skill.dir.display(),
                stdio.manifest_source
            ));
            let lines = permission_lines(&stdio.skill, &servers.settings().bounds);
            if lines.is_empty() {
                out.push_str("  - nothing beyond the default policy in its own folder\n");
            }
            for line in lines {
                // A server lives on: the manifest's run time bounds each call instead.
                let line = match line.split_once(", with at most ") {
                    Some((head, rest)) if head.starts_with("run for at most") => format!(
                        "use at most {rest}; each call may take at most {} s \
                         (mcp.call_timeout_secs)",
                        servers.config().call_timeout_secs
                    ),
                    _ => line,
                };
                out.push_str(&format!("  - {line}\n"));
            }
            out.push_str(
                "\nIt runs in the sandbox: a private read-only copy of its files as its working \
                 directory, a fresh scratch folder as HOME, no inherited environment (no API \
                 keys or tokens), no network beyond the domains above (through warden's egress \
                 proxy), and everything it starts is killed when it stops.\n",
            );
        }
        ServerKind::Http(http) => {
            out.push_str(&format!(
                "warden itself connects to {}; whatever the model passes to its tools goes \
                 there.\n",
                http.url
            ));
            for (header, template) in &http.headers {
                out.push_str(&format!("  - header {header}: {template}\n"));
            }
        }
    }
    out.push_str("\nIts tools (what the model will read about them, and what warden does):\n");
    out.push_str(&describe_tools(servers, &def.name, tools));
    out.push_str(
        "\nA tool that appears later, or whose description or schema changes, is not offered \
         until you grant the server again.\n",
    );
    out
}

fn describe_tools(servers: &McpServers, name: &str, tools: &[ToolDesc]) -> String {
    if tools.is_empty() {
        return "  (none)\n".into();
    }
    let unconfigured = ServerConfig::default();
    let rules = servers.config().servers.get(name).unwrap_or(&unconfigured);
    let mut out = String::new();
    for tool in tools {
        let decision = overview::tool_decision(rules, tool);
        let description: String = tool.description.chars().take(300).collect();
        out.push_str(&format!(
            "  - {}: {decision}\n      {description}\n",
            crate::tools::mcp::tool_name(name, &tool.name)
        ));
    }
    out
}

fn record(
    db: &Database,
    name: &str,
    action: &str,
    decision: AuditDecision,
    reason: &str,
) -> anyhow::Result<()> {
    audit::record(
        db,
        &AuditEntry {
            session: "cli".into(),
            tool: format!("mcp:{name}"),
            input: json!({ "event": action }).to_string(),
            decision,
            reason: reason.to_string(),
            exit_code: None,
            duration_ms: 0,
            network: None,
        },
    )
    .map_err(|e| anyhow::anyhow!("the audit log could not be written: {e}"))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(super::sandbox::runtime()?)
}
