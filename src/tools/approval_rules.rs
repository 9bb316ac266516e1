//! Commands a chat approved for a while or for good: the "Always in this chat" answer to a
//! bash approval stores one rule per (session, command shape) — see [`CommandShape`] — with
//! its expiry ([`Lasting`]: an hour, today, until revoked). The bash tool consults them only
//! where it would ask a person: a command the policy denies never gets here, and a rule turns
//! exactly that `ask` into an approval for that chat, nothing wider. An expired rule approves
//! nothing and is dropped the next time the rules are read. `warden approvals list|rm` and the
//! chat's `/approvals` show and revoke them.

use crate::db::{Database, DbError};
use crate::lasting::{self, GrantClock, Lasting};
use crate::policy::shape::CommandShape;
use crate::scheduler::Clock;
use chrono_tz::Tz;
use rusqlite::{params, OptionalExtension};
use std::path::PathBuf;
use std::sync::Arc;

pub const SCHEMA: &str = "
CREATE TABLE approval_rules (
    id         INTEGER PRIMARY KEY,
    session    TEXT NOT NULL,
    shape      TEXT NOT NULL,
    cwd        TEXT NOT NULL,
    words      TEXT NOT NULL,
    reasons    TEXT NOT NULL,
    shown      TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    UNIQUE (session, shape)
);
";

/// Rules that end by themselves: `NULL` lasts until revoked.
pub const EXPIRY_COLUMN: &str = "ALTER TABLE approval_rules ADD COLUMN expires_at TEXT;";

/// One stored rule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ApprovalRule {
    pub id: i64,
    /// The chat's session (`telegram:42`).
    pub session: String,
    pub cwd: PathBuf,
    pub words: Vec<String>,
    pub reasons: Vec<String>,
    /// The shape as it was shown when it was granted (`cargo test`, `python3 a.py (in sub/)`).
    pub shown: String,
    /// Who pressed the button, where.
    pub granted_by: String,
    pub created_at: String,
    /// When it stops approving (UTC, `2026-11-26T19:04:00Z`); `None`: until revoked.
    pub expires_at: Option<String>,
}

impl ApprovalRule {
    /// What it approves, for people: the shape, where, and for how long.
    pub fn scope(&self) -> String {
        format!(
            "`{}` run in {}, asked for the same reasons; {}",
            self.shown,
            self.cwd.display(),
            lasting::describe(self.expires_at.as_deref())
        )
    }
}

#[derive(Clone)]
pub struct ApprovalRules {
    db: Arc<Database>,
    /// When grants end.
    clock: GrantClock,
}

impl ApprovalRules {
    /// The rules on the system clock, "today" ending at midnight UTC.
    pub fn new(db: Arc<Database>) -> ApprovalRules {
        ApprovalRules {
            db,
            clock: GrantClock::system(),
        }
    }

    /// Expiry read from `clock`, "today" ending at midnight in `tz` (the user's zone).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>, tz: Tz) -> ApprovalRules {
        self.clock = GrantClock::new(clock, tz);
        self
    }

    fn now(&self) -> String {
        self.clock.now()
    }

    /// Forget the rules whose time is up.
    fn drop_expired(&self, conn: &rusqlite::Connection) -> Result<(), DbError> {
        conn.execute(
            "DELETE FROM approval_rules WHERE expires_at IS NOT NULL AND expires_at <= ?1",
            [self.now()],
        )?;
        Ok(())
    }

    /// Approve each of `shapes` in `session` for as long as `lasting` says. `shown` is how
    /// each is described, in the same order. One already stored keeps its first grant unless
    /// this one lasts longer: then its expiry and who granted it are this one's.
    pub fn grant(
        &self,
        session: &str,
        shapes: &[(CommandShape, String)],
        lasting: Lasting,
        granted_by: &str,
    ) -> Result<(), DbError> {
        let expires_at = self.clock.expires_at(lasting);
        let conn = self.db.conn();
        self.drop_expired(&conn)?;
        for (shape, shown) in shapes {
            conn.execute(
                "INSERT INTO approval_rules
                     (session, shape, cwd, words, reasons, shown, granted_by, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (session, shape) DO UPDATE SET
                     granted_by = excluded.granted_by,
                     expires_at = excluded.expires_at
                 WHERE approval_rules.expires_at IS NOT NULL
                   AND (excluded.expires_at IS NULL
                        OR excluded.expires_at > approval_rules.expires_at)",
                params![
                    session,
                    shape.key(),
                    shape.cwd.to_string_lossy(),
                    json(&shape.words),
                    json(&shape.reasons),
                    shown,
                    granted_by,
                    self.now(),
                    expires_at,
                ],
            )?;
        }
        Ok(())
    }

    /// The rules that cover every one of `shapes` in `session`, or `None` when any is not
    /// covered (a line with several asking commands is approved only if each one is).
    pub fn covering(
        &self,
        session: &str,
        shapes: &[CommandShape],
    ) -> Result<Option<Vec<i64>>, DbError> {
        if shapes.is_empty() {
            return Ok(None);
        }
        let conn = self.db.conn();
        let now = self.now();
        let mut ids = Vec::with_capacity(shapes.len());
        for shape in shapes {
            let id: Option<i64> = conn
                .query_row(
                    "SELECT id FROM approval_rules WHERE session = ?1 AND shape = ?2
                       AND (expires_at IS NULL OR expires_at > ?3)",
                    params![session, shape.key(), now],
                    |r| r.get(0),
                )
                .optional()?;
            match id {
                Some(id) => ids.push(id),
                None => return Ok(None),
            }
        }
        Ok(Some(ids))
    }

    /// The rules in force, of one session or all, by session and id (expired ones are
    /// dropped first).
    pub fn list(&self, session: Option<&str>) -> Result<Vec<ApprovalRule>, DbError> {
        let conn = self.db.conn();
        self.drop_expired(&conn)?;
        let mut stmt = conn.prepare(
            "SELECT id, session, cwd, words, reasons, shown, granted_by, created_at, expires_at
             FROM approval_rules WHERE ?1 IS NULL OR session = ?1 ORDER BY session, id",
        )?;
        let rows = stmt
            .query_map([session], |r| {
                Ok(ApprovalRule {
                    id: r.get(0)?,
                    session: r.get(1)?,
                    cwd: PathBuf::from(r.get::<_, String>(2)?),
                    words: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or_default(),
                    reasons: serde_json::from_str(&r.get::<_, String>(4)?).unwrap_or_default(),
                    shown: r.get(5)?,
                    granted_by: r.get(6)?,
                    created_at: r.get(7)?,
                    expires_at: r.get(8)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Revoke rule `id` (only if it belongs to `session`, when given); whether one went.
    pub fn remove(&self, id: i64, session: Option<&str>) -> Result<bool, DbError> {
        let removed = self.db.conn().execute(
            "DELETE FROM approval_rules WHERE id = ?1 AND (?2 IS NULL OR session = ?2)",
            params![id, session],
        )?;
        Ok(removed > 0)
    }
}

fn json(words: &[String]) -> String {
    serde_json::Value::from(words.to_vec()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(words: &[&str]) -> CommandShape {
        CommandShape {
            cwd: PathBuf::from("/ws"),
            words: words.iter().map(|w| w.to_string()).collect(),
            reasons: vec!["needs approval".into()],
        }
    }

    #[test]
    fn rules_cover_exact_shapes_per_session_until_revoked() {
        let rules = ApprovalRules::new(crate::schema::open_in_memory().unwrap());
        let test = shape(&["cargo", "test"]);
        let build = shape(&["cargo", "build"]);
        rules
            .grant(
                "telegram:1",
                &[(test.clone(), "cargo test".into())],
                Lasting::UntilRevoked,
                "Ann in Telegram",
            )
            .unwrap();
        rules
            .grant(
                "telegram:1",
                &[(test.clone(), "cargo test".into())],
                Lasting::Hour,
                "Bob in Telegram",
            )
            .unwrap();
        let ids = rules
            .covering("telegram:1", std::slice::from_ref(&test))
            .unwrap()
            .unwrap();
        assert_eq!(ids.len(), 1);
        assert_eq!(
            rules
                .covering("telegram:2", std::slice::from_ref(&test))
                .unwrap(),
            None
        );
        assert_eq!(
            rules
                .covering("telegram:1", &[test.clone(), build.clone()])
                .unwrap(),
            None,
            "every shape must be covered"
        );
        assert_eq!(rules.covering("telegram:1", &[]).unwrap(), None);
        let mut reason = test.clone();
        reason.reasons.push("cargo test -Z: unstable".into());
        assert_eq!(rules.covering("telegram:1", &[reason]).unwrap(), None);

        let listed = rules.list(None).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            listed[0].granted_by, "Ann in Telegram",
            "the first grant stays"
        );
        assert_eq!(listed[0].words, ["cargo", "test"]);
        assert_eq!(
            listed[0].expires_at, None,
            "a shorter grant does not shorten it"
        );
        assert!(rules.list(Some("telegram:2")).unwrap().is_empty());
        assert!(!rules.remove(ids[0], Some("telegram:2")).unwrap());
        assert!(rules.remove(ids[0], Some("telegram:1")).unwrap());
        assert_eq!(rules.covering("telegram:1", &[test]).unwrap(), None);
        assert!(!rules.remove(ids[0], None).unwrap());
    }

    #[test]
    fn a_rule_for_an_hour_approves_for_an_hour_and_is_then_dropped() {
        use crate::scheduler::TestClock;
        let start = chrono::DateTime::parse_from_rfc3339("2026-11-26T10:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let clock = Arc::new(TestClock::new(start));
        let rules = ApprovalRules::new(crate::schema::open_in_memory().unwrap())
            .with_clock(clock.clone(), Tz::UTC);
        let test = shape(&["cargo", "test"]);
        let build = shape(&["cargo", "build"]);
        let grant = |s: &CommandShape, lasting| {
            rules
                .grant("telegram:1", &[(s.clone(), "x".into())], lasting, "Ann")
                .unwrap()
        };
        grant(&test, Lasting::Hour);
        grant(&build, Lasting::Today);
        let listed = rules.list(None).unwrap();
        assert_eq!(
            listed[0].expires_at.as_deref(),
            Some("2026-11-26T11:00:00Z")
        );
        assert_eq!(
            listed[1].expires_at.as_deref(),
            Some("2026-11-27T00:00:00Z")
        );
        assert!(listed[0].scope().ends_with("until 2026-11-26 11:00:00 UTC"));
        clock.advance(chrono::Duration::minutes(59));
        assert!(rules
            .covering("telegram:1", std::slice::from_ref(&test))
            .unwrap()
            .is_some());
        clock.advance(chrono::Duration::minutes(1));
        assert_eq!(
            rules
                .covering("telegram:1", std::slice::from_ref(&test))
                .unwrap(),
            None,
            "expired at the hour"
        );
        assert!(rules
            .covering("telegram:1", std::slice::from_ref(&build))
            .unwrap()
            .is_some());
        let listed = rules.list(None).unwrap();
        assert_eq!(listed.len(), 1, "the expired rule is dropped");
        assert_eq!(listed[0].words, ["cargo", "build"]);
        // A longer grant of a stored shape extends it; a new grant of an expired one starts over.
        grant(&build, Lasting::UntilRevoked);
        assert_eq!(rules.list(None).unwrap()[0].expires_at, None);
        grant(&test, Lasting::Hour);
        assert_eq!(
            rules.list(None).unwrap()[1].expires_at.as_deref(),
            Some("2026-11-26T12:00:00Z")
        );
        clock.advance(chrono::Duration::days(2));
        assert_eq!(rules.list(None).unwrap().len(), 1);
    }
}
