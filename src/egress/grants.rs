//! Hosts a chat allowed for a while or for good: the "Always for this host" answer to an egress
//! approval in Telegram stores one row per (session, host), with its expiry (an hour, today,
//! until revoked). For that chat's runs the host then counts as `allow` — exactly that host,
//! not its parent domain or siblings, and below every `[egress.hosts]` rule, which always wins
//! (a configured `deny` or `ask` is not overridden from a chat). An expired grant allows
//! nothing and is dropped when the grants are next listed. `warden egress list|rm` shows and
//! revokes them.

use super::rules::normalize_host;
use crate::clock::Clock;
use crate::db::{Database, DbError};
use crate::lasting::{GrantClock, Lasting};
use chrono_tz::Tz;
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

/// Grants that end by themselves: `NULL` lasts until revoked.
pub const EXPIRY_COLUMN: &str = "ALTER TABLE egress_grants ADD COLUMN expires_at TEXT;";

/// One stored rule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    /// The chat's session (`telegram:42`).
    pub session: String,
    pub host: String,
    /// Who pressed the button, where.
    pub granted_by: String,
    pub created_at: String,
    /// When it stops allowing (UTC); `None`: until revoked.
    pub expires_at: Option<String>,
}

#[derive(Clone)]
pub struct Grants {
    db: Arc<Database>,
    /// When grants end.
    clock: GrantClock,
}

impl Grants {
    /// The grants on the system clock, "today" ending at midnight UTC.
    pub fn new(db: Arc<Database>) -> Grants {
        Grants {
            db,
            clock: GrantClock::system(),
        }
    }

    /// Expiry read from `clock`, "today" ending at midnight in `tz` (the user's zone).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>, tz: Tz) -> Grants {
        self.clock = GrantClock::new(clock, tz);
        self
    }

    fn now(&self) -> String {
        self.clock.now()
    }

    /// Allow `host` in `session` for as long as `lasting` says (again: keeps the first grant
    /// unless this one lasts longer).
    pub fn allow(
        &self,
        session: &str,
        host: &str,
        lasting: Lasting,
        granted_by: &str,
    ) -> Result<(), DbError> {
        let expires_at = self.clock.expires_at(lasting);
        let conn = self.db.conn();
        conn.execute(
            "DELETE FROM egress_grants WHERE expires_at IS NOT NULL AND expires_at <= ?1",
            [self.now()],
        )?;
        conn.execute(
            "INSERT INTO egress_grants (session, host, granted_by, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (session, host) DO UPDATE SET
                 granted_by = excluded.granted_by,
                 expires_at = excluded.expires_at
             WHERE egress_grants.expires_at IS NOT NULL
               AND (excluded.expires_at IS NULL OR excluded.expires_at > egress_grants.expires_at)",
            params![
                session,
                normalize_host(host),
                granted_by,
                self.now(),
                expires_at
            ],
        )?;
        Ok(())
    }

    pub fn allows(&self, session: &str, host: &str) -> Result<bool, DbError> {
        let count: i64 = self.db.conn().query_row(
            "SELECT COUNT(*) FROM egress_grants WHERE session = ?1 AND host = ?2
               AND (expires_at IS NULL OR expires_at > ?3)",
            params![session, normalize_host(host), self.now()],
            |r| r.get(0),
        )?;
        Ok(count > 0)
    }

    /// Every grant in force, by session and host (expired ones are dropped first).
    pub fn list(&self) -> Result<Vec<Grant>, DbError> {
        let conn = self.db.conn();
        conn.execute(
            "DELETE FROM egress_grants WHERE expires_at IS NOT NULL AND expires_at <= ?1",
            [self.now()],
        )?;
        let mut stmt = conn.prepare(
            "SELECT session, host, granted_by, created_at, expires_at FROM egress_grants
             ORDER BY session, host",
        )?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Grant {
                    session: r.get(0)?,
                    host: r.get(1)?,
                    granted_by: r.get(2)?,
                    created_at: r.get(3)?,
                    expires_at: r.get(4)?,
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
            .allow(
                "telegram:1",
                "Docs.Example.",
                Lasting::UntilRevoked,
                "Ann in Telegram",
            )
            .unwrap();
        grants
            .allow(
                "telegram:1",
                "docs.example",
                Lasting::Hour,
                "Bob in Telegram",
            )
            .unwrap();
        grants
            .allow(
                "telegram:2",
                "docs.example",
                Lasting::UntilRevoked,
                "Ann in Telegram",
            )
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

    #[test]
    fn a_grant_for_today_ends_at_midnight_in_the_users_zone() {
        use crate::clock::TestClock;
        let start = chrono::DateTime::parse_from_rfc3339("2026-11-26T20:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let clock = Arc::new(TestClock::new(start));
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        let grants =
            Grants::new(crate::schema::open_in_memory().unwrap()).with_clock(clock.clone(), berlin);
        grants
            .allow("telegram:1", "docs.example", Lasting::Today, "Ann")
            .unwrap();
        assert_eq!(
            grants.list().unwrap()[0].expires_at.as_deref(),
            Some("2026-11-26T23:00:00Z")
        );
        assert!(!grants.allows("telegram:1", "api.docs.example").unwrap());
        clock.advance(chrono::Duration::minutes(179));
        assert!(grants.allows("telegram:1", "docs.example").unwrap());
        clock.advance(chrono::Duration::minutes(1));
        assert!(!grants.allows("telegram:1", "docs.example").unwrap());
        assert!(grants.list().unwrap().is_empty());
    }
}
