//! Commands a chat approved for good: the "Always in this chat" answer to a bash approval in
//! Telegram stores one rule per (session, command shape) — see [`CommandShape`]. The bash tool
//! consults them only where it would ask a person: a command the policy denies never gets
//! here, and a rule turns exactly that `ask` into an approval for that chat, nothing wider.
//! `warden approvals list|rm` and the chat's `/approvals` show and revoke them.

use crate::db::{Database, DbError};
use crate::policy::shape::CommandShape;
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
}

#[derive(Clone)]
pub struct ApprovalRules {
    db: Arc<Database>,
}

impl ApprovalRules {
    pub fn new(db: Arc<Database>) -> ApprovalRules {
        ApprovalRules { db }
    }

    /// Approve each of `shapes` from now on in `session` (one already stored keeps its first
    /// grant). `shown` is how each is described, in the same order.
    pub fn grant(
        &self,
        session: &str,
        shapes: &[(CommandShape, String)],
        granted_by: &str,
    ) -> Result<(), DbError> {
        let conn = self.db.conn();
        for (shape, shown) in shapes {
            conn.execute(
                "INSERT OR IGNORE INTO approval_rules
                     (session, shape, cwd, words, reasons, shown, granted_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    session,
                    shape.key(),
                    shape.cwd.to_string_lossy(),
                    json(&shape.words),
                    json(&shape.reasons),
                    shown,
                    granted_by
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
        let mut ids = Vec::with_capacity(shapes.len());
        for shape in shapes {
            let id: Option<i64> = conn
                .query_row(
                    "SELECT id FROM approval_rules WHERE session = ?1 AND shape = ?2",
                    params![session, shape.key()],
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

    /// The stored rules, of one session or all, by session and id.
    pub fn list(&self, session: Option<&str>) -> Result<Vec<ApprovalRule>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare(
            "SELECT id, session, cwd, words, reasons, shown, granted_by, created_at
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
    serde_json::to_string(words).expect("strings serialize")
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
                "Ann in Telegram",
            )
            .unwrap();
        rules
            .grant(
                "telegram:1",
                &[(test.clone(), "cargo test".into())],
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
        assert!(rules.list(Some("telegram:2")).unwrap().is_empty());
        assert!(!rules.remove(ids[0], Some("telegram:2")).unwrap());
        assert!(rules.remove(ids[0], Some("telegram:1")).unwrap());
        assert_eq!(rules.covering("telegram:1", &[test]).unwrap(), None);
        assert!(!rules.remove(ids[0], None).unwrap());
    }
}
