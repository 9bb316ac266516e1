//! The memory index: `MEMORY.md`, `memory/**/*.md` and the compacted parts of sessions, in
//! chunks (see [`super::chunk`]) in an FTS5 table ranked by bm25, with optional embeddings.
//!
//! Kept in step with its sources: files are compared by size and mtime, then by content hash,
//! and re-chunked only when the content changed; entries of files that are gone are removed.
//! It syncs at start-up, after each compaction, when the agent writes a memory file (the file
//! tools' write hook) and — cheaply, by `stat`, at most once a second — before a search; a
//! result whose file changed or vanished since it was indexed triggers a sync at once (see
//! [`super::search`]), so edits and deletions behind the agent's back never show stale text. Files are read through the path validator and
//! beneath the workspace, never through a symlink. Searching is in [`super::search`].

use super::chunk::{self, Chunk};
use super::embeddings::{self, Embedder};
use super::sessions::{Compaction, SessionStore};
use super::transcript;
use super::workspace::{self, DAILY_DIR};
use crate::config::MemoryConfig;
use crate::db::{Database, DbError};
use crate::policy::PathPolicy;
use rusqlite::params;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SCHEMA: &str = "
CREATE TABLE memory_sources (
    key      TEXT PRIMARY KEY,   -- file:<path> or session:<compaction id>
    kind     TEXT NOT NULL,      -- file or session
    path     TEXT NOT NULL,      -- what results show: MEMORY.md, session:terminal:default
    day      TEXT,               -- YYYY-MM-DD whose age lowers the score; NULL: no decay
    hash     TEXT NOT NULL,
    size     INTEGER NOT NULL DEFAULT 0,
    mtime_ns INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE memory_chunks (
    id              INTEGER PRIMARY KEY,
    source          TEXT NOT NULL,
    start_line      INTEGER NOT NULL,
    end_line        INTEGER NOT NULL,
    text            TEXT NOT NULL,
    embedding       BLOB,
    embedding_model TEXT
);
CREATE INDEX memory_chunks_source ON memory_chunks (source);
CREATE INDEX memory_chunks_model ON memory_chunks (embedding_model);
CREATE VIRTUAL TABLE memory_fts USING fts5(
    text, content = 'memory_chunks', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memory_chunks_insert AFTER INSERT ON memory_chunks BEGIN
    INSERT INTO memory_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memory_chunks_delete AFTER DELETE ON memory_chunks BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
";

/// How deep `memory/` is walked.
const MAX_DEPTH: usize = 4;
/// Longest message rendered into a session source, in characters.
const SESSION_MESSAGE_CHARS: usize = 20_000;

/// What a sync changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Sources (re-)chunked.
    pub indexed: usize,
    /// Sources removed.
    pub removed: usize,
    /// Chunks written.
    pub chunks: usize,
}

impl std::ops::AddAssign for SyncReport {
    fn add_assign(&mut self, other: SyncReport) {
        self.indexed += other.indexed;
        self.removed += other.removed;
        self.chunks += other.chunks;
    }
}

/// A source to (re-)index.
pub struct Source<'a> {
    pub key: &'a str,
    pub kind: &'a str,
    pub path: &'a str,
    pub day: Option<&'a str>,
    pub hash: &'a str,
    pub size: i64,
    pub mtime_ns: i64,
}

pub struct MemoryIndex {
    pub(super) db: Arc<Database>,
    pub(super) paths: Arc<PathPolicy>,
    pub(super) sessions: SessionStore,
    pub(super) embedder: Option<Embedder>,
    pub(super) half_life_days: f64,
    pub(super) vector_weight: f64,
    files_synced_at: Mutex<Option<Instant>>,
}

impl MemoryIndex {
    pub fn new(
        db: Arc<Database>,
        paths: Arc<PathPolicy>,
        config: &MemoryConfig,
    ) -> Result<MemoryIndex, embeddings::EmbedError> {
        Ok(MemoryIndex {
            sessions: SessionStore::new(db.clone()),
            db,
            paths,
            embedder: Embedder::from_config(&config.embeddings)?,
            half_life_days: config.half_life_days,
            vector_weight: config.embeddings.vector_weight,
            files_synced_at: Mutex::new(None),
        })
    }

    /// The hook for the file tools (their `WriteHook`): a write to a memory file re-syncs the
    /// files.
    pub fn write_hook(self: &Arc<Self>) -> Arc<dyn Fn(&Path) + Send + Sync> {
        let index = Arc::downgrade(self);
        Arc::new(move |path: &Path| {
            let Some(index) = index.upgrade() else { return };
            if index.is_memory_file(path) {
                if let Err(e) = index.sync_files() {
                    tracing::warn!("memory index after writing {}: {e}", path.display());
                }
            }
        })
    }

    fn is_memory_file(&self, path: &Path) -> bool {
        let Ok(rel) = path.strip_prefix(self.paths.workspace()) else {
            return false;
        };
        rel == Path::new("MEMORY.md")
            || (rel.starts_with(DAILY_DIR) && rel.extension().is_some_and(|e| e == "md"))
    }

    /// Files and sessions.
    pub fn sync(&self) -> Result<SyncReport, DbError> {
        let mut report = self.sync_files()?;
        report += self.sync_sessions()?;
        Ok(report)
    }

    /// Bring the file sources in line with `MEMORY.md` and `memory/**/*.md`.
    pub fn sync_files(&self) -> Result<SyncReport, DbError> {
        let mut report = SyncReport::default();
        // What the index has; whatever is left in here at the end is gone from disk.
        let mut stored: HashMap<String, (String, i64, i64)> = {
            let conn = self.db.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT key, hash, size, mtime_ns FROM memory_sources WHERE kind = 'file'",
            )?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))?
                .collect::<Result<HashMap<_, _>, _>>()?;
            rows
        };
        let mut gone = Vec::new();
        for rel in self.memory_files() {
            let key = format!("file:{rel}");
            let previous = stored.remove(&key);
            let Ok(meta) = std::fs::symlink_metadata(self.paths.workspace().join(&rel)) else {
                gone.extend(previous.map(|_| key));
                continue;
            };
            let size = meta.len() as i64;
            let mtime_ns = trusted_mtime(&meta);
            if previous
                .as_ref()
                .is_some_and(|(_, s, m)| *m != 0 && (*s, *m) == (size, mtime_ns))
            {
                continue;
            }
            let text = match workspace::read_file(&self.paths, &rel) {
                Ok(Some(text)) => text,
                Ok(None) => {
                    gone.extend(previous.map(|_| key));
                    continue;
                }
                Err(e) => {
                    tracing::warn!("memory index: {rel} skipped: {e}");
                    gone.extend(previous.map(|_| key));
                    continue;
                }
            };
            let hash = hex::encode(Sha256::digest(text.as_bytes()));
            if previous.as_ref().is_some_and(|(h, _, _)| *h == hash) {
                self.db.conn().execute(
                    "UPDATE memory_sources SET size = ?2, mtime_ns = ?3 WHERE key = ?1",
                    params![key, size, mtime_ns],
                )?;
                continue;
            }
            let day = daily_note_day(&rel);
            let source = Source {
                key: &key,
                kind: "file",
                path: &rel,
                day: day.as_deref(),
                hash: &hash,
                size,
                mtime_ns,
            };
            report.chunks += self.replace_source(&source, &chunk::chunk_text(&text))?;
            report.indexed += 1;
        }
        gone.extend(stored.into_keys());
        for key in &gone {
            self.remove_source(key)?;
            report.removed += 1;
        }
        *self
            .files_synced_at
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        Ok(report)
    }

    /// [`MemoryIndex::sync_files`] unless that ran less than `max_age` ago.
    pub fn sync_files_if_older(&self, max_age: Duration) -> Result<SyncReport, DbError> {
        let last = *self
            .files_synced_at
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| at.elapsed() < max_age) {
            return Ok(SyncReport::default());
        }
        self.sync_files()
    }

    /// Whether the file behind an indexed source still has the size and mtime it was indexed
    /// with (false for a missing file, or one indexed too recently to trust its mtime).
    pub fn file_unchanged(&self, rel: &str, size: i64, mtime_ns: i64) -> bool {
        let Ok(meta) = std::fs::symlink_metadata(self.paths.workspace().join(rel)) else {
            return false;
        };
        mtime_ns != 0 && meta.len() as i64 == size && trusted_mtime(&meta) == mtime_ns
    }

    /// Index the messages of compactions not indexed yet; drop sources whose compaction is gone.
    pub fn sync_sessions(&self) -> Result<SyncReport, DbError> {
        let mut report = SyncReport::default();
        let compactions = self.sessions.compactions()?;
        let mut live = HashSet::new();
        for c in &compactions {
            let key = format!("session:{}", c.id);
            live.insert(key.clone());
            let known: bool = self.db.conn().query_row(
                "SELECT EXISTS(SELECT 1 FROM memory_sources WHERE key = ?1)",
                [&key],
                |r| r.get(0),
            )?;
            if known {
                continue;
            }
            let chunks = self.session_chunks(c)?;
            let hash = hex::encode(Sha256::digest(
                chunks.iter().map(|c| c.text.as_str()).collect::<String>(),
            ));
            let path = format!("session:{}", c.session);
            let source = Source {
                key: &key,
                kind: "session",
                path: &path,
                day: c.created_at.get(..10),
                hash: &hash,
                size: 0,
                mtime_ns: 0,
            };
            report.chunks += self.replace_source(&source, &chunks)?;
            report.indexed += 1;
        }
        let stored: Vec<String> = {
            let conn = self.db.conn();
            let mut stmt = conn.prepare("SELECT key FROM memory_sources WHERE kind = 'session'")?;
            let keys = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            keys
        };
        for key in stored.iter().filter(|k| !live.contains(*k)) {
            self.remove_source(key)?;
            report.removed += 1;
        }
        Ok(report)
    }

    /// The compacted messages as chunks; labels are message ids.
    fn session_chunks(&self, c: &Compaction) -> Result<Vec<Chunk>, DbError> {
        let messages = self.sessions.compacted_messages(c)?;
        let rendered: Vec<(i64, String)> = messages
            .iter()
            .map(|m| (m.id, transcript::render(&m.message, SESSION_MESSAGE_CHARS)))
            .collect();
        let lines: Vec<(i64, &str)> = rendered
            .iter()
            .flat_map(|(id, text)| text.lines().map(move |line| (*id, line)))
            .collect();
        Ok(chunk::chunk_lines(
            &lines,
            chunk::CHUNK_CHARS,
            chunk::OVERLAP_CHARS,
        ))
    }

    /// Replace a source's chunks in one transaction; returns the number of chunks written.
    pub fn replace_source(&self, source: &Source<'_>, chunks: &[Chunk]) -> Result<usize, DbError> {
        let conn = self.db.conn();
        let tx = conn.unchecked_transaction()?;
        tx.execute("DELETE FROM memory_chunks WHERE source = ?1", [source.key])?;
        tx.execute(
            "INSERT OR REPLACE INTO memory_sources (key, kind, path, day, hash, size, mtime_ns)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                source.key,
                source.kind,
                source.path,
                source.day,
                source.hash,
                source.size,
                source.mtime_ns
            ],
        )?;
        {
            let mut insert = tx.prepare_cached(
                "INSERT INTO memory_chunks (source, start_line, end_line, text)
                 VALUES (?1, ?2, ?3, ?4)",
            )?;
            for chunk in chunks {
                insert.execute(params![source.key, chunk.start, chunk.end, chunk.text])?;
            }
        }
        tx.commit()?;
        Ok(chunks.len())
    }

    fn remove_source(&self, key: &str) -> Result<(), DbError> {
        let conn = self.db.conn();
        let tx = conn.unchecked_transaction()?;
        tx.execute("DELETE FROM memory_chunks WHERE source = ?1", [key])?;
        tx.execute("DELETE FROM memory_sources WHERE key = ?1", [key])?;
        tx.commit()?;
        Ok(())
    }

    /// Number of chunks in the index.
    pub fn chunk_count(&self) -> Result<usize, DbError> {
        let n: i64 = self
            .db
            .conn()
            .query_row("SELECT COUNT(*) FROM memory_chunks", [], |r| r.get(0))?;
        Ok(n as usize)
    }

    /// `MEMORY.md` and the markdown files under `memory/`, workspace-relative. Symlinks are
    /// skipped (the reader would refuse them anyway).
    fn memory_files(&self) -> Vec<String> {
        let ws = self.paths.workspace();
        let mut out = Vec::new();
        if std::fs::symlink_metadata(ws.join("MEMORY.md")).is_ok_and(|m| m.is_file()) {
            out.push("MEMORY.md".to_string());
        }
        walk(&ws.join(DAILY_DIR), DAILY_DIR, 0, &mut out);
        out.sort();
        out
    }
}

fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<String>) {
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let child = format!("{rel}/{name}");
        if kind.is_dir() && depth < MAX_DEPTH {
            walk(&entry.path(), &child, depth + 1, out);
        } else if kind.is_file() && name.ends_with(".md") {
            out.push(child);
        }
    }
}

/// The mtime to compare next time, or 0 when it is too recent to trust: a second write in the
/// same timestamp tick with the same size would look unchanged, so such a file is hashed again
/// (as git treats "racily clean" entries).
fn trusted_mtime(meta: &std::fs::Metadata) -> i64 {
    let recent = meta
        .modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .is_none_or(|age| age < std::time::Duration::from_secs(2));
    if recent {
        0
    } else {
        meta.mtime() * 1_000_000_000 + meta.mtime_nsec()
    }
}

/// `memory/2026-11-21.md` (or `memory/2026-11-21-trip.md`) → `2026-11-21`: daily notes
/// lose weight with age; other files do not.
pub fn daily_note_day(rel: &str) -> Option<String> {
    let name = Path::new(rel).file_stem()?.to_str()?;
    let day = name.get(..10)?;
    chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()?;
    rel.starts_with(DAILY_DIR).then(|| day.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daily_notes_have_a_day_other_files_do_not() {
        assert_eq!(
            daily_note_day("memory/2026-11-21.md").as_deref(),
            Some("2026-11-21")
        );
        assert_eq!(
            daily_note_day("memory/2026-11-21-trip.md").as_deref(),
            Some("2026-11-21")
        );
        assert_eq!(daily_note_day("MEMORY.md"), None);
        assert_eq!(daily_note_day("memory/ideas.md"), None);
        assert_eq!(daily_note_day("memory/2026-13-40.md"), None);
    }
}
