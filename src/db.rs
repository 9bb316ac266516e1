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

impl DbError {
    /// Whether the write failed for want of disk space (then it works again once there is
    /// room, with nothing lost: SQLite rolled the statement back).
    pub fn is_disk_full(&self) -> bool {
        let full_io = |e: &std::io::Error| {
            matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        };
        match self {
            DbError::Sqlite(rusqlite::Error::SqliteFailure(e, _))
            | DbError::Open {
                source: rusqlite::Error::SqliteFailure(e, _),
                ..
            } => e.code == rusqlite::ErrorCode::DiskFull,
            DbError::Io(e) => full_io(e),
            _ => false,
        }
    }
}

/// The write-ahead log is folded into the database every this many pages (SQLite's default is
/// 1000, about 4 MB) …
const WAL_CHECKPOINT_PAGES: u32 = 256;
/// … and cut back to this size after each checkpoint (SQLite keeps it at its largest by
/// default): on a small disk the log must not hold the room the data needs.
const WAL_SIZE_LIMIT: i64 = 1024 * 1024;

/// How long opening the database waits for another process holding it.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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
        mut conn: Connection,
        path: Option<PathBuf>,
        migrations: &[Migration],
    ) -> Result<Arc<Database>, DbError> {
        // First: the pragmas below may wait for another process opening the same file.
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // SQLite answers "busy" at once, without waiting, where waiting could deadlock: a
        // connection still in rollback-journal mode that holds a read lock and wants to write
        // while another process switches the new file to WAL. Everything below is safe to do
        // again (pragmas, `IF NOT EXISTS`, migrations checked under the write lock), so such
        // an answer is retried until the same time limit.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match Database::prepare(&mut conn, migrations) {
                Err(DbError::Sqlite(rusqlite::Error::SqliteFailure(e, _)))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(e),
                Ok(()) => break,
            }
        }
        Ok(Arc::new(Database {
            conn: Mutex::new(conn),
            path,
        }))
    }

    /// The pragmas and the migrations not applied yet.
    fn prepare(conn: &mut Connection, migrations: &[Migration]) -> Result<(), DbError> {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)?;
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 name TEXT PRIMARY KEY,
                 applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
             );",
        )?;
        for &(name, sql) in migrations {
            // Checked and applied under the write lock: two processes opening a new database
            // at once (the bot's worker and a terminal run) must not both apply it.
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let done: bool = tx.query_row(
                "SELECT EXISTS(SELECT 1 FROM schema_migrations WHERE name = ?1)",
                [name],
                |row| row.get(0),
            )?;
            if done {
                continue;
            }
            tx.execute_batch(sql)
                .and_then(|_| {
                    tx.execute("INSERT INTO schema_migrations (name) VALUES (?1)", [name])
                })
                .and_then(|_| tx.commit())
                .map_err(|source| DbError::Migration { name, source })?;
        }
        Ok(())
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

    /// Bytes free for this user on the database's file system (`None`: in memory, or the
    /// file system would not say).
    pub fn free_bytes(&self) -> Option<u64> {
        let dir = self.path.as_deref()?.parent()?;
        let stat = nix::sys::statvfs::statvfs(dir).ok()?;
        Some((stat.blocks_available() as u64).saturating_mul(stat.fragment_size() as u64))
    }

    /// Fold the write-ahead log into the database and cut it to nothing, if no reader holds
    /// it (then it is left for the next time).
    pub fn checkpoint(&self) -> Result<(), DbError> {
        self.conn()
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
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
    fn processes_opening_a_new_database_at_once_apply_each_migration_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("race.db");
        let many: Vec<Migration> = (0..20)
            .map(|i| {
                let name: &'static str = Box::leak(format!("m{i}").into_boxed_str());
                let sql: &'static str =
                    Box::leak(format!("CREATE TABLE t{i} (x INTEGER);").into_boxed_str());
                (name, sql)
            })
            .collect();
        let many: &'static [Migration] = Box::leak(many.into_boxed_slice());
        let openers: Vec<_> = (0..6)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || Database::open(&path, many).map(|_| ()))
            })
            .collect();
        for opener in openers {
            opener.join().unwrap().expect("every opener succeeds");
        }
        let db = Database::open(&path, many).unwrap();
        let n: i64 = db
            .conn()
            .query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 20);
    }

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
    fn the_write_ahead_log_stays_small_and_free_space_is_known() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let db = Database::open(&path, FIRST).unwrap();
        let wal = dir.path().join("w.db-wal");
        let blob = vec![b'x'; 64 * 1024];
        let mut largest = 0;
        // 32 MB through the log, one transaction per row, as the stores write.
        for _ in 0..512 {
            db.conn()
                .execute("INSERT INTO one VALUES (?1)", [&blob])
                .unwrap();
            largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
        // The limit plus the transaction that was being written when the log was checked.
        assert!(
            largest < WAL_SIZE_LIMIT as u64 + 2 * (WAL_CHECKPOINT_PAGES as u64) * 4096,
            "the log grew to {largest} bytes"
        );
        db.checkpoint().unwrap();
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
        assert!(db.free_bytes().unwrap() > 0);
        assert_eq!(Database::open_in_memory(FIRST).unwrap().free_bytes(), None);
    }

    #[test]
    fn a_full_disk_is_told_apart_from_other_failures() {
        let full = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        );
        assert!(DbError::Sqlite(full).is_disk_full());
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        );
        assert!(!DbError::Sqlite(busy).is_disk_full());
        assert!(DbError::Io(std::io::Error::from_raw_os_error(libc::ENOSPC)).is_disk_full());
        assert!(!DbError::Io(std::io::Error::other("no")).is_disk_full());
    }

    #[test]
    fn a_failing_migration_names_itself_and_leaves_nothing() {
        let bad: &[Migration] = &[("broken", "CREATE TABLE t (x); NOT SQL;")];
        let err = Database::open_in_memory(bad).err().unwrap().to_string();
        assert!(err.contains("broken"), "{err}");
    }
}
