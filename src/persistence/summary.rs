//! The end-of-run summary of what a run made persist: prompt-feeding files (+/- lines) and cron
//! jobs. Taken from snapshots at the start and the end of the run rather than from the tools'
//! own reports, so a change is shown whatever path it took (a tool, a bash line, a skill).

use super::PromptFiles;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// Files remembered per snapshot, and the largest one whose lines are counted.
const MAX_FILES: usize = 2000;
const MAX_TEXT_BYTES: u64 = 1024 * 1024;

/// A cron job as far as the summary cares: its id and a line that changes when the job's
/// definition changes (not when it runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobState {
    pub id: i64,
    pub line: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum FileState {
    Text(String),
    /// Too large or not text: compared by size and modification time only.
    Opaque {
        len: u64,
        modified: Option<std::time::SystemTime>,
    },
}

/// Prompt-feeding files and cron jobs at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    files: BTreeMap<PathBuf, FileState>,
    jobs: BTreeMap<i64, String>,
}

impl Snapshot {
    pub fn take(files: &PromptFiles, jobs: Vec<JobState>) -> Snapshot {
        let mut out = Snapshot::default();
        for rel in files.existing(MAX_FILES) {
            if let Some(state) = read_state(&files.workspace().join(&rel)) {
                out.files.insert(rel, state);
            }
        }
        out.jobs = jobs.into_iter().map(|j| (j.id, j.line)).collect();
        out
    }

    /// What changed from `self` to `after`, one line each; empty when nothing did.
    pub fn changes(&self, after: &Snapshot) -> Vec<String> {
        let mut lines = Vec::new();
        let names: std::collections::BTreeSet<&PathBuf> =
            self.files.keys().chain(after.files.keys()).collect();
        for name in names {
            let shown = name.display();
            match (self.files.get(name), after.files.get(name)) {
                (None, Some(FileState::Text(new))) => {
                    lines.push(format!("{shown}: created (+{})", new.lines().count()))
                }
                (None, Some(_)) => lines.push(format!("{shown}: created")),
                (Some(_), None) => lines.push(format!("{shown}: removed")),
                (Some(FileState::Text(old)), Some(FileState::Text(new))) if old != new => {
                    let (added, removed) = line_counts(old, new);
                    lines.push(format!("{shown}: +{added} −{removed}"));
                }
                (Some(old), Some(new)) if old != new => lines.push(format!("{shown}: changed")),
                _ => {}
            }
        }
        let ids: std::collections::BTreeSet<&i64> =
            self.jobs.keys().chain(after.jobs.keys()).collect();
        for id in ids {
            match (self.jobs.get(id), after.jobs.get(id)) {
                (None, Some(line)) => lines.push(format!("cron job added: {line}")),
                (Some(line), None) => lines.push(format!("cron job removed: {line}")),
                (Some(old), Some(new)) if old != new => {
                    lines.push(format!("cron job changed: {new}"))
                }
                _ => {}
            }
        }
        lines
    }
}

fn read_state(path: &std::path::Path) -> Option<FileState> {
    // Not following a symlink: the path validator refuses them for these files anyway.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let opaque = FileState::Opaque {
        len: meta.len(),
        modified: meta.modified().ok(),
    };
    if meta.len() > MAX_TEXT_BYTES {
        return Some(opaque);
    }
    let mut bytes = Vec::new();
    file.take(MAX_TEXT_BYTES + 1).read_to_end(&mut bytes).ok()?;
    match String::from_utf8(bytes) {
        Ok(text) => Some(FileState::Text(text)),
        Err(_) => Some(opaque),
    }
}

/// Lines added and removed between two texts.
fn line_counts(old: &str, new: &str) -> (usize, usize) {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut added = 0;
    let mut removed = 0;
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrustConfig;

    #[test]
    fn changed_created_and_removed_files_and_jobs_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::write(ws.join("AGENTS.md"), "one\ntwo\n").unwrap();
        std::fs::write(ws.join("MEMORY.md"), "kept\n").unwrap();
        std::fs::write(ws.join("USER.md"), "gone\n").unwrap();
        std::fs::create_dir(ws.join("memory")).unwrap();
        std::fs::write(ws.join("notes.md"), "not watched\n").unwrap();
        // Neither a linked file nor a linked folder is read: warden reads outside the jail.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("id_ed25519"), "key\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("id_ed25519"), ws.join("TOOLS.md")).unwrap();
        std::fs::create_dir(ws.join("memory/inner")).ok();
        std::os::unix::fs::symlink(outside.path(), ws.join("memory/inner/keys")).unwrap();
        let files = PromptFiles::new(&ws, &TrustConfig::default()).unwrap();
        let job = |id, line: &str| JobState {
            id,
            line: line.into(),
        };
        let before = Snapshot::take(&files, vec![job(1, "#1 daily"), job(2, "#2 weekly")]);
        assert!(before.changes(&before).is_empty());

        std::fs::write(ws.join("AGENTS.md"), "one\nTWO\nthree\n").unwrap();
        std::fs::remove_file(ws.join("USER.md")).unwrap();
        std::fs::write(ws.join("memory/2026-11-25.md"), "a\nb\n").unwrap();
        std::fs::write(ws.join("notes.md"), "changed\n").unwrap();
        let after = Snapshot::take(&files, vec![job(1, "#1 hourly"), job(3, "#3 new")]);
        assert_eq!(
            before.changes(&after),
            [
                "AGENTS.md: +2 −1",
                "USER.md: removed",
                "memory/2026-11-25.md: created (+2)",
                "cron job changed: #1 hourly",
                "cron job removed: #2 weekly",
                "cron job added: #3 new",
            ]
        );
    }
}
