//! The one SQLite database (rusqlite, bundled, WAL) holding all of warden's state: sessions and
//! messages, memory chunks, cron jobs, durable inbound runs, the audit log. The connection and
//! the migration runner; each store owns its schema, and `schema.rs` lists them in order.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// A named schema change, applied once: (name, SQL). The list, in order, is
/// `schema::MIGRATIONS`; this module knows none of the stores.
pub type Migration = (&'static str, &'static str);

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database migration {name}: {source}")]
    Migration {
        name: &'static str,
        source: rusqlite::Error,
    },
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("database: {0}")]
    Io(#[from] std::io::Error),
}

/// A shared connection. SQLite calls are short; callers hold the lock only for one statement
/// or one transaction.
pub struct Database {
    conn: Mutex<Connection>,
    path: Option<PathBuf>,
}

impl Database {
    /// Open (creating) `path`, private to the user: transcripts and the audit log live here.
    pub fn open(path: &Path, migrations: &[Migration]) -> Result<Arc<Database>, DbError> {
        if let Some(dir) = path.parent() {
            // The data directory holds the database, grants and logs: private to the user.
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let conn = Connection::open(path).map_err(|source| DbError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Database::init(conn, Some(path.to_path_buf()), migrations)
    }

    /// An in-memory database (tests, one-shot runs without a data dir).
    pub fn open_in_memory(migrations: &[Migration]) -> Result<Arc<Database>, DbError> {
        Database::init(Connection::open_in_memory()?, None, migrations)
    }

    fn init(
        conn: Connection,
        path: Option<PathBuf>,
        migrations: &[Migration],
    ) -> Result<Arc<Database>, DbError> {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 name TEXT PRIMARY KEY,
                 applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
             );",
        )?;
        for &(name, sql) in migrations {
            let done: bool = conn.query_row(
                "SELECT EXISTS(SELECT 1 FROM schema_migrations WHERE name = ?1)",
                [name],
                |row| row.get(0),
            )?;
            if done {
                continue;
            }
            let tx = conn.unchecked_transaction()?;
            tx.execute_batch(sql)
                .and_then(|_| {
                    tx.execute("INSERT INTO schema_migrations (name) VALUES (?1)", [name])
                })
                .and_then(|_| tx.commit())
                .map_err(|source| DbError::Migration { name, source })?;
        }
        Ok(Arc::new(Database {
            conn: Mutex::new(conn),
            path,
        }))
    }

    /// The connection, for one statement or transaction.
    pub fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (transactions roll back).
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: &[Migration] = &[("one", "CREATE TABLE one (x INTEGER);")];
    const BOTH: &[Migration] = &[
        ("one", "CREATE TABLE one (x INTEGER);"),
        ("two", "CREATE TABLE two (y INTEGER);"),
    ];

    #[test]
    fn migrations_apply_once_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/warden.db");
        let db = Database::open(&path, FIRST).unwrap();
        db.conn().execute("INSERT INTO one VALUES (1)", []).unwrap();
        drop(db);
        // Reopened with one more: the first is not applied again (its table kept its row).
        let db = Database::open(&path, BOTH).unwrap();
        let count: i64 = db
            .conn()
            .query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 2);
        let rows: i64 = db
            .conn()
            .query_row("SELECT COUNT(*) FROM one", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
        let mode: String = db
            .conn()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        use std::os::unix::fs::PermissionsExt;
        let perms = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(perms, 0o600);
    }

    #[test]
    fn a_failing_migration_names_itself_and_leaves_nothing() {
        let bad: &[Migration] = &[("broken", "CREATE TABLE t (x); NOT SQL;")];
        let err = Database::open_in_memory(bad).err().unwrap().to_string();
        assert!(err.contains("broken"), "{err}");
    }
}
