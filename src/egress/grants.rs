//! Hosts a chat allowed for good: the "Always for this host" answer to an egress approval in
//! Telegram stores one row per (session, host). For that chat's runs the host then counts as
//! `allow` — below every `[egress.hosts]` rule, which always wins (a configured `deny` or `ask`
//! is not overridden from a chat). `warden egress list|rm` shows and revokes them.

use super::rules::normalize_host;
use crate::db::{Database, DbError};
use rusqlite::params;
use std::sync::Arc;

pub const SCHEMA: &str = "
CREATE TABLE egress_grants (
    session    TEXT NOT NULL,
    host       TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    PRIMARY KEY (session, host)
);
";

/// One stored rule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    /// The chat's session (`telegram:42`).
    pub session: String,
    pub host: String,
    /// Who pressed the button, where.
    pub granted_by: String,
    pub created_at: String,
}

#[derive(Clone)]
pub struct Grants {
    db: Arc<Database>,
}

impl Grants {
    pub fn new(db: Arc<Database>) -> Grants {
        Grants { db }
    }

    /// Allow `host` from now on in `session` (again: keeps the first grant).
    pub fn allow(&self, session: &str, host: &str, granted_by: &str) -> Result<(), DbError> {
        self.db.conn().execute(
            "INSERT OR IGNORE INTO egress_grants (session, host, granted_by) VALUES (?1, ?2, ?3)",
            params![session, normalize_host(host), granted_by],
        )?;
        Ok(())
    }

    pub fn allows(&self, session: &str, host: &str) -> Result<bool, DbError> {
        let count: i64 = self.db.conn().query_row(
            "SELECT COUNT(*) FROM egress_grants WHERE session = ?1 AND host = ?2",
            params![session, normalize_host(host)],
            |r| r.get(0),
        )?;
        Ok(count > 0)
    }

    /// Every stored rule, by session and host.
    pub fn list(&self) -> Result<Vec<Grant>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(
            "SELECT session, host, granted_by, created_at FROM egress_grants
             ORDER BY session, host",
        )?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Grant {
                    session: r.get(0)?,
                    host: r.get(1)?,
                    granted_by: r.get(2)?,
                    created_at: r.get(3)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Revoke `host` in `session`, or in every session; returns how many rules went.
    pub fn remove(&self, host: &str, session: Option<&str>) -> Result<usize, DbError> {
        let host = normalize_host(host);
        let removed = match session {
            Some(session) => self.db.conn().execute(
                "DELETE FROM egress_grants WHERE host = ?1 AND session = ?2",
                params![host, session],
            )?,
            None => self
                .db
                .conn()
                .execute("DELETE FROM egress_grants WHERE host = ?1", params![host])?,
        };
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_per_session_and_revocable() {
        let grants = Grants::new(crate::schema::open_in_memory().unwrap());
        grants
            .allow("telegram:1", "Docs.Example.", "Ann in Telegram")
            .unwrap();
        grants
            .allow("telegram:1", "docs.example", "Bob in Telegram")
            .unwrap();
        grants
            .allow("telegram:2", "docs.example", "Ann in Telegram")
            .unwrap();
        assert!(grants.allows("telegram:1", "docs.example").unwrap());
        assert!(!grants.allows("telegram:3", "docs.example").unwrap());
        assert!(!grants.allows("telegram:1", "x.docs.example").unwrap());
        let list = grants.list().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(
            list[0].granted_by, "Ann in Telegram",
            "the first grant stays"
        );
        assert_eq!(
            grants.remove("docs.example", Some("telegram:2")).unwrap(),
            1
        );
        assert_eq!(grants.remove("DOCS.example", None).unwrap(), 1);
        assert!(grants.list().unwrap().is_empty());
        assert_eq!(grants.remove("docs.example", None).unwrap(), 0);
    }
}
