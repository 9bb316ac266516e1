//! The workspace convention files — AGENTS.md, SOUL.md, USER.md, TOOLS.md, MEMORY.md,
//! HEARTBEAT.md: seeded from `templates/` on first run (never overwriting), and put into the
//! system prompt at every run, each capped. They are read through the path validator and
//! opened beneath the workspace without following symlinks, so a `SOUL.md` that links to
//! `/etc/shadow` is refused, not shown to the model.

use crate::beneath;
use crate::policy::{Access, PathPolicy};
use crate::prompt_section::PromptSection;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

/// The convention files in prompt order, with the contents a new workspace starts with.
pub const TEMPLATES: &[(&str, &str)] = &[
    ("AGENTS.md", include_str!("../../templates/AGENTS.md")),
    ("SOUL.md", include_str!("../../templates/SOUL.md")),
    ("USER.md", include_str!("../../templates/USER.md")),
    ("TOOLS.md", include_str!("../../templates/TOOLS.md")),
    ("MEMORY.md", include_str!("../../templates/MEMORY.md")),
    ("HEARTBEAT.md", include_str!("../../templates/HEARTBEAT.md")),
];

/// Where daily notes live, relative to the workspace.
pub const DAILY_DIR: &str = "memory";

/// Largest file read at all; the prompt cap applies after.
const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;

/// Create the convention files that are missing and the `memory/` directory; returns the
/// names created. Existing files (or anything else at those names) are left alone.
pub fn seed(workspace: &Path) -> io::Result<Vec<&'static str>> {
    let mut created = Vec::new();
    for (name, contents) in TEMPLATES {
        // O_CREAT|O_EXCL: fails on anything already there, a dangling symlink included.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(workspace.join(name));
        match file {
            Ok(mut file) => {
                file.write_all(contents.as_bytes())?;
                created.push(*name);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    match std::fs::create_dir(workspace.join(DAILY_DIR)) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    Ok(created)
}

/// Read the workspace file `rel`, refusing paths outside the workspace and symlinks anywhere
/// on the way. `Ok(None)` when it does not exist.
pub fn read_file(paths: &PathPolicy, rel: &str) -> io::Result<Option<String>> {
    let denied = |why: String| io::Error::new(io::ErrorKind::PermissionDenied, why);
    let checked = paths
        .check(paths.workspace(), rel, Access::Read)
        .map_err(|d| denied(d.reason))?;
    // The validator resolved symlinks: a different result means one is on the way.
    if checked != paths.workspace().join(rel) {
        return Err(denied(format!(
            "{rel} is a symlink (to {}); not read",
            checked.display()
        )));
    }
    let file = match beneath::open_read(paths, &checked) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(denied(format!("{rel} is not a regular file")));
    }
    let mut bytes = Vec::new();
    file.take(MAX_READ_BYTES).read_to_end(&mut bytes)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The convention files as a section of the system prompt.
pub struct ConventionFiles {
    paths: Arc<PathPolicy>,
    max_chars: usize,
}

impl ConventionFiles {
    pub fn new(paths: Arc<PathPolicy>, max_chars: usize) -> ConventionFiles {
        ConventionFiles {
            paths,
            max_chars: max_chars.max(100),
        }
    }
}

impl PromptSection for ConventionFiles {
    fn render(&self) -> Option<String> {
        let mut out = String::from(
            "# Workspace files\n\
             These files in your workspace carry your instructions, your persona, what you know \
             about the user and your long-term memory. They come from the user and from you: \
             follow them, and keep them current with your file tools. Daily notes go to \
             memory/YYYY-MM-DD.md; memory_search finds earlier notes and the older, compacted \
             parts of conversations.",
        );
        let mut any = false;
        for (name, _) in TEMPLATES {
            let text = match read_file(&self.paths, name) {
                Ok(Some(text)) if !text.trim().is_empty() => text,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!("workspace file {name} left out of the prompt: {e}");
                    continue;
                }
            };
            any = true;
            out.push_str(&format!(
                "\n\n## {name}\n{}",
                cap(&text, self.max_chars, name).trim_end()
            ));
        }
        any.then_some(out)
    }
}

/// Keep the head (70 %) and the tail (20 %) of an oversized file, with a marker between.
pub fn cap(text: &str, max_chars: usize, name: &str) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let head_len = max_chars * 7 / 10;
    let tail_len = max_chars * 2 / 10;
    let head: String = text.chars().take(head_len).collect();
    let tail: String = text.chars().skip(total - tail_len).collect();
    format!(
        "{head}\n[… {} characters of {name} cut here; read the file for all of it …]\n{tail}",
        total - head_len - tail_len
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(dir: &Path) -> Arc<PathPolicy> {
        Arc::new(PathPolicy::new(dir, &[], &[], Path::new("/root")).unwrap())
    }

    #[test]
    fn seeding_creates_missing_files_and_keeps_existing_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("SOUL.md"), "my own soul").unwrap();
        let created = seed(dir.path()).unwrap();
        assert_eq!(created.len(), TEMPLATES.len() - 1);
        assert!(!created.contains(&"SOUL.md"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("SOUL.md")).unwrap(),
            "my own soul"
        );
        assert!(dir.path().join("memory").is_dir());
        assert!(seed(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn a_symlinked_convention_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(dir.path().join("secret"), "root:hash").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.join("SOUL.md")).unwrap();
        // Also inside the workspace: a link is refused wherever it points.
        std::fs::write(ws.join("real.md"), "inside").unwrap();
        std::os::unix::fs::symlink(ws.join("real.md"), ws.join("USER.md")).unwrap();
        std::fs::write(ws.join("MEMORY.md"), "the cat is Biscuit").unwrap();
        let paths = policy(&ws);
        assert!(read_file(&paths, "SOUL.md").is_err());
        assert!(read_file(&paths, "USER.md").is_err());
        assert_eq!(read_file(&paths, "TOOLS.md").unwrap(), None);
        let section = ConventionFiles::new(paths, 1000).render().unwrap();
        assert!(!section.contains("root:hash"), "{section}");
        assert!(!section.contains("## SOUL.md"), "{section}");
        assert!(!section.contains("## USER.md"), "{section}");
        assert!(
            section.contains("## MEMORY.md\nthe cat is Biscuit"),
            "{section}"
        );
    }

    #[test]
    fn oversized_files_keep_head_and_tail() {
        let text: String = (0..1000).map(|i| format!("line {i:04}\n")).collect();
        let capped = cap(&text, 1000, "MEMORY.md");
        assert!(capped.starts_with("line 0000\n"));
        assert!(capped.ends_with("line 0999\n"));
        assert!(
            capped.contains("characters of MEMORY.md cut here"),
            "{capped}"
        );
        assert!(capped.chars().count() < 1100);
    }
}
