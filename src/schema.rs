//! Every store's tables in warden's one database, in the order they were added. A store owns
//! its schema (`SCHEMA` beside its code); this list, above all of them, is the only place that
//! knows them all, so [`crate::db`] depends on none.

use crate::db::{Database, DbError, Migration};
use std::path::Path;
use std::sync::Arc;

/// Applied once each, in this order, by name (a name never changes meaning).
pub const MIGRATIONS: &[Migration] = &[
    ("audit", crate::audit::SCHEMA),
    ("sessions", crate::memory::sessions::SCHEMA),
    (
        "sessions_compaction",
        crate::memory::sessions::COMPACTION_SCHEMA,
    ),
    ("memory_index", crate::memory::index::SCHEMA),
    ("gateway_runs", crate::gateway::store::SCHEMA),
    ("telegram", crate::channels::telegram::store::SCHEMA),
    ("scheduler", crate::scheduler::store::SCHEMA),
    ("heartbeat", crate::scheduler::heartbeat::SCHEMA),
    (
        "gateway_runs_session",
        crate::gateway::store::SESSION_COLUMN,
    ),
    ("skills", crate::skills::grants::SCHEMA),
    ("egress_grants", crate::egress::grants::SCHEMA),
    ("mcp_grants", crate::mcp::grants::SCHEMA),
    ("approval_rules", crate::tools::approval_rules::SCHEMA),
    ("gateway_runs_draft", crate::gateway::store::DRAFT_COLUMN),
    ("cron_jobs_taint", crate::scheduler::store::TAINT_COLUMN),
    ("session_taint", crate::memory::session_taint::SCHEMA),
    (
        "gateway_runs_sending",
        crate::gateway::store::SENDING_COLUMN,
    ),
    ("gateway_runs_topic", crate::gateway::store::TOPIC_COLUMN),
    (
        "approval_rules_expiry",
        crate::tools::approval_rules::EXPIRY_COLUMN,
    ),
    ("egress_grants_expiry", crate::egress::grants::EXPIRY_COLUMN),
    ("http_threads", crate::channels::http::threads::SCHEMA),
    ("slack", crate::channels::slack::store::SCHEMA),
    ("audit_network", crate::audit::NETWORK_COLUMN),
];

/// Open (creating) warden's database at `path`, with every store's tables.
pub fn open(path: &Path) -> Result<Arc<Database>, DbError> {
    Database::open(path, MIGRATIONS)
}

/// The database in `data_dir` (`warden.db`).
pub fn open_in(data_dir: &Path) -> Result<Arc<Database>, DbError> {
    open(&data_dir.join(FILE_NAME))
}

/// The database's file name in the data directory.
pub const FILE_NAME: &str = "warden.db";

/// An in-memory database with every store's tables (tests, one-shot runs).
pub fn open_in_memory() -> Result<Arc<Database>, DbError> {
    Database::open_in_memory(MIGRATIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_applies_once_under_a_unique_name() {
        let mut names: Vec<&str> = MIGRATIONS.iter().map(|(name, _)| *name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), MIGRATIONS.len());
        let dir = tempfile::tempdir().unwrap();
        drop(open_in(dir.path()).unwrap());
        let db = open_in(dir.path()).unwrap();
        let count: i64 = db
            .conn()
            .query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count as usize, MIGRATIONS.len());
    }
}
