//! The installed skills as `warden skill list` and the HTTP API show them: one row each, with
//! its source, grant and what it may do. Reads only (discovery and the grants); the bundled
//! skills' copies are written once when the settings are prepared, never here.

use super::describe::permission_lines;
use super::discovery::discover;
use super::grants::{short_time, GrantStatus, Grants};
use super::settings::SkillSettings;
use super::{Skill, Source};
use crate::db::{Database, DbError};
use serde_json::{json, Value};

/// One skill, or one skipped as invalid.
pub struct SkillRow {
    pub name: String,
    /// `bundled`, `installed from PATH`, or `workspace`.
    pub source: String,
    /// Its content hash (none when invalid).
    pub hash: Option<String>,
    /// The grant in words (`granted …`, `not granted`, `invalid: why`).
    pub grant: String,
    /// The last run in words (`never`, `TIME allow, exit 0`).
    pub last_run: String,
    /// Everything above and more (what it may do, its folder), as JSON.
    pub json: Value,
}

/// Every skill found, then every one skipped as invalid.
pub fn rows(settings: &SkillSettings, db: &Database) -> Result<Vec<SkillRow>, DbError> {
    let catalog = discover(&settings.roots(), &settings.bounds);
    let grants = Grants::new(db);
    let mut rows = Vec::new();
    for skill in &catalog.skills {
        let status = grants.status(skill)?;
        let last = grants.last_run(&skill.name)?;
        let last_run = last.as_ref().map_or_else(
            || "never".to_string(),
            |r| {
                let exit = r
                    .exit_code
                    .map(|c| format!(", exit {c}"))
                    .unwrap_or_default();
                format!("{} {}{exit}", short_time(&r.at), r.decision)
            },
        );
        let source = source_of(skill, &status);
        let (granted, grant_json) = match &status {
            GrantStatus::Bundled => (true, json!({"status": "bundled"})),
            GrantStatus::NotGranted => (false, json!({"status": "not granted"})),
            GrantStatus::Granted(g) => (
                true,
                json!({"status": "granted", "hash": g.hash,
                "granted_at": g.granted_at, "origin": g.origin}),
            ),
            GrantStatus::Changed(g) => (
                false,
                json!({"status": "changed since grant", "hash": g.hash,
                "granted_at": g.granted_at, "origin": g.origin}),
            ),
        };
        rows.push(SkillRow {
            name: skill.name.clone(),
            json: json!({
                "name": skill.name,
                "description": skill.description,
                "source": source,
                "dir": skill.dir,
                "hash": skill.hash,
                "granted": granted,
                "grant": grant_json,
                // Route headers appear as their templates: secret names, never values.
                "allows": permission_lines(skill, &settings.bounds),
                "last_run": last,
            }),
            source,
            hash: Some(skill.hash.clone()),
            grant: status.describe(),
            last_run,
        });
    }
    for skipped in &catalog.skipped {
        rows.push(SkillRow {
            name: skipped.name.clone(),
            source: skipped.source.to_string(),
            hash: None,
            grant: format!("invalid: {}", skipped.reason),
            last_run: String::new(),
            json: json!({
                "name": skipped.name,
                "source": skipped.source,
                "dir": skipped.dir,
                "granted": false,
                "invalid": skipped.reason,
            }),
        });
    }
    Ok(rows)
}

/// `bundled`, `installed from PATH`, or `workspace`.
fn source_of(skill: &Skill, status: &GrantStatus) -> String {
    match (skill.source, status) {
        (Source::Bundled, _) => "bundled".into(),
        (_, GrantStatus::Granted(g) | GrantStatus::Changed(g))
            if g.origin.starts_with("installed from") =>
        {
            g.origin.clone()
        }
        _ => "workspace".into(),
    }
}
