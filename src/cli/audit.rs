//! `warden audit [--session S] [--since T] [--json]`: what tools ran, were refused or asked,
//! from the audit log every channel writes (oldest first, the newest `--limit`).

use crate::audit::{self, AuditRow, Filter};
use crate::config::Config;
use anyhow::Context;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Only this session: `terminal:default`, `telegram:42`, `mcp:CLIENT`, `cron:…`.
    #[arg(long)]
    pub session: Option<String>,
    /// Only calls since a time ago (`2h`, `30m`, `1day`) or a time (`2026-11-20T09:00:00Z`).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// At most this many rows (the newest).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// `--since` as the stored timestamp format (see [`crate::audit::since`]).
pub fn since(text: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String, String> {
    crate::audit::since(text, now).map_err(|e| format!("--since {e}"))
}

pub fn run(config: &Config, args: AuditArgs) -> anyhow::Result<i32> {
    let since = args
        .since
        .as_deref()
        .map(|t| since(t, chrono::Utc::now()))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let db = crate::schema::open_in(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let rows = audit::query(
        &db,
        &Filter {
            session: args.session,
            since,
            limit: args.limit,
        },
    )?;
    for row in &rows {
        if args.json {
            let input: serde_json::Value =
                serde_json::from_str(&row.input).unwrap_or_else(|_| json!(row.input));
            println!(
                "{}",
                json!({
                    "id": row.id, "at": row.at, "session": row.session, "tool": row.tool,
                    "input": input, "decision": row.decision, "reason": row.reason,
                    "exit_code": row.exit_code, "duration_ms": row.duration_ms,
                    "network": row.network,
                })
            );
        } else {
            println!("{}", line(row));
        }
    }
    if rows.is_empty() && !args.json {
        eprintln!("no tool calls recorded that match");
    }
    Ok(0)
}

/// One row for a person: time, session, tool, decision, what, and why when it was refused.
fn line(row: &AuditRow) -> String {
    let input: serde_json::Value = serde_json::from_str(&row.input).unwrap_or_default();
    let what = ["command", "path", "url", "query", "name"]
        .iter()
        .find_map(|k| input.get(k).and_then(|v| v.as_str()).map(String::from))
        .unwrap_or_else(|| row.input.clone());
    let what: String = what.chars().take(120).collect();
    let at = row.at.replace('T', " ");
    let at = at.get(..19).unwrap_or(&at);
    let mut line = format!(
        "{at}  {}  {:<9} {:<8} {}",
        row.session,
        row.tool,
        row.decision,
        crate::channels::terminal::escape_controls(&what)
    );
    if !matches!(row.decision.as_str(), "allow" | "approved") {
        line.push_str(&format!(
            "\n    why: {}",
            crate::channels::terminal::escape_controls(&row.reason)
        ));
    }
    if let Some(network) = &row.network {
        for what in network_lines(network) {
            line.push_str(&format!(
                "\n    network: {}",
                crate::channels::terminal::escape_controls(&what)
            ));
        }
    }
    line
}

/// What the jail's network did, as recorded: each proxy decision, then the bytes by host.
fn network_lines(network: &serde_json::Value) -> Vec<String> {
    let mut lines = Vec::new();
    for event in network["events"].as_array().into_iter().flatten() {
        let target = event["target"].as_str().unwrap_or("?");
        let detail = event["detail"].as_str().unwrap_or("");
        lines.push(match event["allowed"].as_bool() {
            Some(true) => format!("allowed {target} ({detail})"),
            _ => format!("refused {target}: {detail}"),
        });
    }
    for (host, bytes) in network["traffic"].as_object().into_iter().flatten() {
        lines.push(format!(
            "{host}: {} bytes sent, {} received",
            bytes["sent"], bytes["received"]
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_lines_show_each_decision_and_the_bytes_by_host() {
        let network = json!({
            "events": [
                {"target": "pkgs.test:80", "allowed": true, "detail": "127.0.0.1:8080"},
                {"target": "evil.test:443", "allowed": false, "detail": "no [network.hosts] rule names evil.test"},
            ],
            "traffic": {"pkgs.test": {"sent": 80, "received": 1200}},
        });
        assert_eq!(
            network_lines(&network),
            [
                "allowed pkgs.test:80 (127.0.0.1:8080)",
                "refused evil.test:443: no [network.hosts] rule names evil.test",
                "pkgs.test: 80 bytes sent, 1200 received",
            ]
        );
    }

    #[test]
    fn since_takes_a_time_ago_or_a_time() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-26T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(since("2h", now).unwrap(), "2026-11-26T10:00:00.000Z");
        assert_eq!(since("1day", now).unwrap(), "2026-11-25T12:00:00.000Z");
        assert_eq!(
            since("2026-11-20T09:00:00+01:00", now).unwrap(),
            "2026-11-20T08:00:00.000Z"
        );
        assert!(since("yesterday", now).unwrap_err().contains("RFC 3339"));
    }
}
