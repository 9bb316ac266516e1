//! The user's grants and the skills' run history, in warden's SQLite database.
//!
//! A grant is pinned to the content hash of the whole skill folder the user reviewed: a skill
//! whose files or manifest changed since has no valid grant until the user grants it again.

use super::{Skill, Source};
use crate::db::{Database, DbError};
use rusqlite::{params, OptionalExtension};

pub const SCHEMA: &str = "
CREATE TABLE skill_grants (
    name        TEXT PRIMARY KEY,
    hash        TEXT NOT NULL,
    origin      TEXT NOT NULL,
    permissions TEXT NOT NULL,
    granted_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE skill_runs (
    id        INTEGER PRIMARY KEY,
    name      TEXT NOT NULL,
    hash      TEXT NOT NULL,
    session   TEXT NOT NULL,
    at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    decision  TEXT NOT NULL,
    exit_code INTEGER,
    reason    TEXT NOT NULL
);
CREATE INDEX skill_runs_name ON skill_runs (name, id);
";

/// What the user granted.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    pub name: String,
    /// The content hash the grant is pinned to.
    pub hash: String,
    /// Where the skill came from (`installed from /path`, `found in the workspace`).
    pub origin: String,
    /// The permissions in plain words, as the user saw them.
    pub permissions: String,
    pub granted_at: String,
}

/// One past run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RunRecord {
    pub at: String,
    pub hash: String,
    pub session: String,
    pub decision: String,
    pub exit_code: Option<i32>,
    pub reason: String,
}

/// Whether a skill may run as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantStatus {
    /// Built into warden.
    Bundled,
    /// Granted for exactly this content.
    Granted(Grant),
    NotGranted,
    /// Granted once, for other content.
    Changed(Grant),
}

impl GrantStatus {
    pub fn runnable(&self) -> bool {
        matches!(self, GrantStatus::Bundled | GrantStatus::Granted(_))
    }

    /// For tables: `granted 2026-11-21 09:30 (sha256:…)`, `not granted`, …
    pub fn describe(&self) -> String {
        match self {
            GrantStatus::Bundled => "bundled with warden (no grant needed)".into(),
            GrantStatus::Granted(g) => format!("granted {}", short_time(&g.granted_at)),
            GrantStatus::NotGranted => "not granted".into(),
            GrantStatus::Changed(g) => format!(
                "changed since grant (granted {} for {})",
                short_time(&g.granted_at),
                super::tree::short_hash(&g.hash)
            ),
        }
    }
}

/// `2026-11-21T09:30:12.345Z` → `2026-11-21 09:30 UTC`.
pub fn short_time(at: &str) -> String {
    match (at.get(..10), at.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => at.to_string(),
    }
}

pub struct Grants<'a> {
    db: &'a Database,
}

impl<'a> Grants<'a> {
    pub fn new(db: &'a Database) -> Grants<'a> {
        Grants { db }
    }

    /// Record (or replace) the grant for `name`.
    pub fn grant(
        &self,
        name: &str,
        hash: &str,
        origin: &str,
        permissions: &str,
    ) -> Result<(), DbError> {
        self.db.conn().execute(
            "INSERT INTO skill_grants (name, hash, origin, permissions) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (name) DO UPDATE SET hash = ?2, origin = ?3, permissions = ?4,
                 granted_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            params![name, hash, origin, permissions],
        )?;
        Ok(())
    }

    pub fn get(&self, name: &str) -> Result<Option<Grant>, DbError> {
        Ok(self
            .db
            .conn()
            .query_row(
                "SELECT name, hash, origin, permissions, granted_at FROM skill_grants WHERE name = ?1",
                [name],
                |r| {
                    Ok(Grant {
                        name: r.get(0)?,
                        hash: r.get(1)?,
                        origin: r.get(2)?,
                        permissions: r.get(3)?,
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
            .execute("DELETE FROM skill_grants WHERE name = ?1", [name])?
            > 0)
    }

    /// The status of `skill` as it is now.
    pub fn status(&self, skill: &Skill) -> Result<GrantStatus, DbError> {
        if skill.source == Source::Bundled {
            return Ok(GrantStatus::Bundled);
        }
        Ok(match self.get(&skill.name)? {
            None => GrantStatus::NotGranted,
            Some(g) if g.hash == skill.hash => GrantStatus::Granted(g),
            Some(g) => GrantStatus::Changed(g),
        })
    }

    pub fn record_run(
        &self,
        name: &str,
        hash: &str,
        session: &str,
        decision: &str,
        exit_code: Option<i32>,
        reason: &str,
    ) -> Result<(), DbError> {
        self.db.conn().execute(
            "INSERT INTO skill_runs (name, hash, session, decision, exit_code, reason)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![name, hash, session, decision, exit_code, reason],
        )?;
        Ok(())
    }

    pub fn last_run(&self, name: &str) -> Result<Option<RunRecord>, DbError> {
        Ok(self
            .db
            .conn()
            .query_row(
                "SELECT at, hash, session, decision, exit_code, reason FROM skill_runs
                 WHERE name = ?1 ORDER BY id DESC LIMIT 1",
                [name],
                |r| {
                    Ok(RunRecord {
                        at: r.get(0)?,
                        hash: r.get(1)?,
                        session: r.get(2)?,
                        decision: r.get(3)?,
                        exit_code: r.get(4)?,
                        reason: r.get(5)?,
                    })
                },
            )
            .optional()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_pinned_and_runs_remembered() {
        let db = crate::schema::open_in_memory().unwrap();
        let grants = Grants::new(&db);
        assert_eq!(grants.get("a").unwrap(), None);
        grants
            .grant("a", "sha256:1", "installed from /x", "nothing")
            .unwrap();
        grants
            .grant("a", "sha256:2", "installed from /y", "more")
            .unwrap();
        let g = grants.get("a").unwrap().unwrap();
        assert_eq!(
            (g.hash.as_str(), g.origin.as_str()),
            ("sha256:2", "installed from /y")
        );
        assert!(short_time(&g.granted_at).ends_with(" UTC"));
        assert!(grants.revoke("a").unwrap());
        assert!(!grants.revoke("a").unwrap());

        assert_eq!(grants.last_run("a").unwrap(), None);
        grants
            .record_run("a", "sha256:2", "cli", "deny", None, "first")
            .unwrap();
        grants
            .record_run("a", "sha256:2", "cli", "allow", Some(0), "second")
            .unwrap();
        let last = grants.last_run("a").unwrap().unwrap();
        assert_eq!((last.reason.as_str(), last.exit_code), ("second", Some(0)));
    }
}
