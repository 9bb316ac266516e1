//! The user's grants of MCP servers, in warden's SQLite database: each pinned to the server's
//! content hash (command, manifest, files — see [`super::definition`]) and to the tools the
//! server offered when the user reviewed it. A server whose hash changed is not started; a
//! tool that appears later, or whose description or schema changed (a server rewriting what
//! the model reads about it), is not offered until the user grants the server again.

use crate::db::{Database, DbError};
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "
CREATE TABLE mcp_grants (
    name       TEXT PRIMARY KEY,
    hash       TEXT NOT NULL,
    tools      TEXT NOT NULL,
    review     TEXT NOT NULL,
    granted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
";

/// A tool as the server described it (what the model will read about it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDesc {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: serde_json::Value,
    /// The server says it only reads (`annotations.readOnlyHint`).
    #[serde(default)]
    pub read_only: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct McpGrant {
    pub name: String,
    pub hash: String,
    pub tools: Vec<ToolDesc>,
    /// What the user was shown.
    pub review: String,
    pub granted_at: String,
}

/// Whether a server may start as it is now.
#[derive(Clone, Debug, PartialEq)]
pub enum McpGrantStatus {
    Granted(McpGrant),
    NotGranted,
    /// Granted once, for other content.
    Changed(McpGrant),
}

pub struct McpGrants<'a> {
    db: &'a Database,
}

impl<'a> McpGrants<'a> {
    pub fn new(db: &'a Database) -> McpGrants<'a> {
        McpGrants { db }
    }

    /// Record (or replace) the grant for `name`.
    pub fn grant(
        &self,
        name: &str,
        hash: &str,
        tools: &[ToolDesc],
        review: &str,
    ) -> Result<(), DbError> {
        let tools = serde_json::to_string(tools).unwrap_or_else(|_| "[]".into());
        self.db.conn().execute(
            "INSERT INTO mcp_grants (name, hash, tools, review) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (name) DO UPDATE SET hash = ?2, tools = ?3, review = ?4,
                 granted_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            params![name, hash, tools, review],
        )?;
        Ok(())
    }

    pub fn get(&self, name: &str) -> Result<Option<McpGrant>, DbError> {
        Ok(self
            .db
            .conn()
            .query_row(
                "SELECT name, hash, tools, review, granted_at FROM mcp_grants WHERE name = ?1",
                [name],
                |r| {
                    let tools: String = r.get(2)?;
                    Ok(McpGrant {
                        name: r.get(0)?,
                        hash: r.get(1)?,
                        // A list this version cannot read grants no tool.
                        tools: serde_json::from_str(&tools).unwrap_or_default(),
                        review: r.get(3)?,
                        granted_at: r.get(4)?,
                    })
                },
            )
            .optional()?)
    }

    /// Remove the grant; whether there was one.
    pub fn revoke(&self, name: &str) -> Result<bool, DbError> {
        Ok(self
            .db
            .conn()
            .execute("DELETE FROM mcp_grants WHERE name = ?1", [name])?
            > 0)
    }

    pub fn status(&self, name: &str, hash: &str) -> Result<McpGrantStatus, DbError> {
        Ok(match self.get(name)? {
            None => McpGrantStatus::NotGranted,
            Some(g) if g.hash == hash => McpGrantStatus::Granted(g),
            Some(g) => McpGrantStatus::Changed(g),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> ToolDesc {
        ToolDesc {
            name: name.into(),
            description: format!("{name} things"),
            input_schema: serde_json::json!({"type": "object"}),
            read_only: true,
        }
    }

    #[test]
    fn grants_are_pinned_to_the_hash_and_keep_their_tools() {
        let db = crate::schema::open_in_memory().unwrap();
        let grants = McpGrants::new(&db);
        assert_eq!(
            grants.status("a", "h1").unwrap(),
            McpGrantStatus::NotGranted
        );
        grants.grant("a", "h1", &[tool("x")], "review").unwrap();
        match grants.status("a", "h1").unwrap() {
            McpGrantStatus::Granted(g) => assert_eq!(g.tools, [tool("x")]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            grants.status("a", "h2").unwrap(),
            McpGrantStatus::Changed(_)
        ));
        grants.grant("a", "h2", &[tool("y")], "again").unwrap();
        assert_eq!(grants.get("a").unwrap().unwrap().tools, [tool("y")]);
        assert!(grants.revoke("a").unwrap());
        assert!(!grants.revoke("a").unwrap());
    }
}
