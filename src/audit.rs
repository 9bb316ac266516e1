//! The audit log: one row per tool call (tool, input, decision, reason, exit code, duration),
//! and per skill run. Written before the result reaches the model, so a crash cannot hide
//! what ran.

use crate::db::{Database, DbError};
use rusqlite::params;

pub const SCHEMA: &str = "
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY,
    at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    session     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    input       TEXT NOT NULL,
    decision    TEXT NOT NULL,
    reason      TEXT NOT NULL,
    exit_code   INTEGER,
    duration_ms INTEGER NOT NULL
);
CREATE INDEX audit_session ON audit (session, id);
";

/// What a command's network did: every decision of warden's egress proxy and the bytes by host
/// (JSON: `{"events":[{"target","allowed","detail"}…],"traffic":{"host":{"sent","received"}}}`).
pub const NETWORK_COLUMN: &str = "ALTER TABLE audit ADD COLUMN network TEXT;";

/// What happened to a tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AuditDecision {
    /// Allowed by policy (or needed no policy) and run.
    Allow,
    /// Refused by the policy, the path validator or the tool's own checks.
    Deny,
    /// `ask`, approved by the user, and run.
    Approved,
    /// `ask`, refused by the user, nobody to ask, or no answer in time.
    Rejected,
    /// The tool failed for another reason (bad input, I/O, sandbox setup).
    Error,
}

impl AuditDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditDecision::Allow => "allow",
            AuditDecision::Deny => "deny",
            AuditDecision::Approved => "approved",
            AuditDecision::Rejected => "rejected",
            AuditDecision::Error => "error",
        }
    }
}

#[derive(Clone, Debug)]
pub struct AuditEntry {
    pub session: String,
    pub tool: String,
    pub input: String,
    pub decision: AuditDecision,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// What the jail's network did during the call, when it had any ([`NETWORK_COLUMN`]).
    pub network: Option<serde_json::Value>,
}

/// One row read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRow {
    pub id: i64,
    pub at: String,
    pub session: String,
    pub tool: String,
    pub input: String,
    pub decision: String,
    pub reason: String,
    pub exit_code: Option<i32>,
    pub duration_ms: i64,
    /// As recorded ([`AuditEntry::network`]).
    pub network: Option<serde_json::Value>,
}

pub fn record(db: &Database, entry: &AuditEntry) -> Result<(), DbError> {
    db.conn().execute(
        "INSERT INTO audit (session, tool, input, decision, reason, exit_code, duration_ms,
                            network)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            entry.session,
            entry.tool,
            entry.input,
            entry.decision.as_str(),
            entry.reason,
            entry.exit_code,
            entry.duration_ms as i64,
            entry.network.as_ref().map(|n| n.to_string())
        ],
    )?;
    Ok(())
}

/// The newest `limit` rows, oldest first.
pub fn recent(db: &Database, limit: usize) -> Result<Vec<AuditRow>, DbError> {
    let conn = db.conn();
    let mut stmt = conn.prepare(
        "SELECT id, at, session, tool, input, decision, reason, exit_code, duration_ms, network
         FROM (SELECT * FROM audit ORDER BY id DESC LIMIT ?1) ORDER BY id",
    )?;
    let rows = stmt
        .query_map([limit as i64], |r| {
            Ok(AuditRow {
                id: r.get(0)?,
                at: r.get(1)?,
                session: r.get(2)?,
                tool: r.get(3)?,
                input: r.get(4)?,
                decision: r.get(5)?,
                reason: r.get(6)?,
                exit_code: r.get(7)?,
                duration_ms: r.get(8)?,
                network: network_of(r.get(9)?),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The stored network column, parsed (an unreadable one is kept as a string, not dropped).
fn network_of(text: Option<String>) -> Option<serde_json::Value> {
    text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
}

/// A time ago (`2h`, `30m`, `1day`) or an RFC 3339 time, as the stored timestamp format (UTC,
/// `…Z`), for [`Filter::since`].
pub fn since(text: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String, String> {
    let at = match humantime::parse_duration(text) {
        Ok(ago) => now - chrono::Duration::from_std(ago).map_err(|e| format!("{text}: {e}"))?,
        Err(_) => chrono::DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&chrono::Utc))
            .map_err(|_| {
                format!("{text:?}: give a time ago (2h, 30m, 1day) or an RFC 3339 time")
            })?,
    };
    Ok(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}

/// Which rows [`query`] returns.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only this session (`terminal:default`, `telegram:42`, `mcp:client`).
    pub session: Option<String>,
    /// Only rows at or after this time (`YYYY-MM-DDTHH:MM:SS.sssZ`, as stored).
    pub since: Option<String>,
    /// At most this many, the newest.
    pub limit: usize,
}

/// The newest rows matching `filter`, oldest first.
pub fn query(db: &Database, filter: &Filter) -> Result<Vec<AuditRow>, DbError> {
    let conn = db.conn();
    let mut stmt = conn.prepare(
        "SELECT id, at, session, tool, input, decision, reason, exit_code, duration_ms, network
         FROM (SELECT * FROM audit
               WHERE (?1 IS NULL OR session = ?1) AND (?2 IS NULL OR at >= ?2)
               ORDER BY id DESC LIMIT ?3)
         ORDER BY id",
    )?;
    let rows = stmt
        .query_map(
            params![filter.session, filter.since, filter.limit as i64],
            |r| {
                Ok(AuditRow {
                    id: r.get(0)?,
                    at: r.get(1)?,
                    session: r.get(2)?,
                    tool: r.get(3)?,
                    input: r.get(4)?,
                    decision: r.get(5)?,
                    reason: r.get(6)?,
                    exit_code: r.get(7)?,
                    duration_ms: r.get(8)?,
                    network: network_of(r.get(9)?),
                })
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// One `bash` call read back: the command string as the model sent it, and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRow {
    pub at: String,
    pub session: String,
    pub command: String,
    /// As stored: `allow`, `deny`, `approved`, `rejected`, `error`.
    pub decision: String,
    pub reason: String,
}

/// Every `bash` call at or after `since` (all of them without), oldest first; a row whose
/// input names no command is skipped.
pub fn bash_commands(db: &Database, since: Option<&str>) -> Result<Vec<CommandRow>, DbError> {
    let conn = db.conn();
    let mut stmt = conn.prepare(
        "SELECT at, session, input, decision, reason FROM audit
         WHERE tool = 'bash' AND (?1 IS NULL OR at >= ?1) ORDER BY id",
    )?;
    let rows = stmt
        .query_map([since], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows
        .into_iter()
        .filter_map(|(at, session, input, decision, reason)| {
            let input: serde_json::Value = serde_json::from_str(&input).ok()?;
            let command = input.get("command")?.as_str()?.to_string();
            Some(CommandRow {
                at,
                session,
                command,
                decision,
                reason,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip() {
        let db = crate::schema::open_in_memory().unwrap();
        record(
            &db,
            &AuditEntry {
                session: "terminal:default".into(),
                tool: "bash".into(),
                input: r#"{"command":"cat /etc/shadow"}"#.into(),
                decision: AuditDecision::Deny,
                reason: "outside the workspace".into(),
                exit_code: None,
                duration_ms: 3,
                network: None,
            },
        )
        .unwrap();
        let rows = recent(&db, 10).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].decision, "deny");
        assert_eq!(rows[0].exit_code, None);
        assert!(rows[0].at.ends_with('Z'));
    }

    #[test]
    fn queries_filter_by_session_and_time() {
        let db = crate::schema::open_in_memory().unwrap();
        for session in ["terminal:default", "telegram:42", "terminal:default"] {
            record(
                &db,
                &AuditEntry {
                    session: session.into(),
                    tool: "bash".into(),
                    input: "{}".into(),
                    decision: AuditDecision::Allow,
                    reason: "ok".into(),
                    exit_code: Some(0),
                    duration_ms: 1,
                    network: None,
                },
            )
            .unwrap();
        }
        let all = |session: Option<&str>, since: Option<&str>, limit| {
            query(
                &db,
                &Filter {
                    session: session.map(String::from),
                    since: since.map(String::from),
                    limit,
                },
            )
            .unwrap()
        };
        assert_eq!(all(None, None, 10).len(), 3);
        assert_eq!(all(Some("telegram:42"), None, 10).len(), 1);
        let newest = all(Some("terminal:default"), None, 1);
        assert_eq!(newest.len(), 1);
        assert_eq!(newest[0].id, 3);
        assert!(all(None, Some("2999-01-01T00:00:00Z"), 10).is_empty());
        assert_eq!(all(None, Some("2000-01-01T00:00:00Z"), 10).len(), 3);
    }
}
