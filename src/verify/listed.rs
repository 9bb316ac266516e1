//! Workspace files named in the config (`[trust]`): a plain relative path, or `dir/**` for a
//! whole folder. The persistence guard asks before a command writes them; the write verifier
//! checks afterwards that nothing else did. Both read the lists through this one type.

use std::path::{Component, Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Listed {
    File(PathBuf),
    /// `dir/**`: everything beneath `dir`.
    Tree(PathBuf),
}

impl Listed {
    /// Parse one entry of the config list `key`.
    pub fn parse(key: &str, text: &str) -> Result<Listed, String> {
        let bad = |why: &str| Err(format!("[trust] {key}: {text:?} {why}"));
        let (path, tree) = match text.strip_suffix("/**") {
            Some(dir) => (dir, true),
            None => (text, false),
        };
        if path.is_empty() {
            return bad("is empty");
        }
        if path.contains('*') || path.contains('?') || path.contains('[') {
            return bad("may use a pattern only as a trailing /** (a whole folder)");
        }
        let path = Path::new(path);
        if !path.components().all(|c| matches!(c, Component::Normal(_))) {
            return bad("must be a plain path relative to the workspace (no /, . or ..)");
        }
        Ok(if tree {
            Listed::Tree(path.to_path_buf())
        } else {
            Listed::File(path.to_path_buf())
        })
    }

    /// Parse a whole config list.
    pub fn parse_all(key: &str, list: &[String]) -> Result<Vec<Listed>, String> {
        list.iter().map(|t| Listed::parse(key, t)).collect()
    }

    /// The file, or the folder of a tree.
    pub fn path(&self) -> &Path {
        match self {
            Listed::File(p) | Listed::Tree(p) => p,
        }
    }

    /// What writing `rel` (relative to the workspace; empty for the workspace itself) may
    /// change of this entry.
    pub fn touched_by(&self, rel: &Path) -> Option<String> {
        match self {
            Listed::File(file) => file.starts_with(rel).then(|| file.display().to_string()),
            Listed::Tree(dir) if rel.starts_with(dir) && rel != dir => {
                Some(rel.display().to_string())
            }
            Listed::Tree(dir) => dir
                .starts_with(rel)
                .then(|| format!("{}/**", dir.display())),
        }
    }

    /// The files of this entry that exist under `workspace`, relative to it.
    /// Symlinks are not followed anywhere on the way (a `memory` that links to `~/.ssh` is not
    /// walked): warden reads these files itself, outside the jail.
    pub fn existing(&self, workspace: &Path, limit: usize, out: &mut Vec<PathBuf>) {
        let real = |rel: &Path, want_dir: bool| {
            let mut at = workspace.to_path_buf();
            rel.components().all(|c| {
                at.push(c);
                std::fs::symlink_metadata(&at).is_ok_and(|m| !m.file_type().is_symlink())
            }) && std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir() == want_dir)
        };
        match self {
            Listed::File(file) => {
                if real(file, false) {
                    out.push(file.clone());
                }
            }
            Listed::Tree(dir) if !real(dir, true) => {}
            Listed::Tree(dir) => {
                let mut stack = vec![dir.clone()];
                while let Some(rel) = stack.pop() {
                    let Ok(entries) = std::fs::read_dir(workspace.join(&rel)) else {
                        continue;
                    };
                    for entry in entries.flatten() {
                        if out.len() >= limit {
                            return;
                        }
                        let child = rel.join(entry.file_name());
                        match entry.file_type() {
                            Ok(t) if t.is_dir() => stack.push(child),
                            Ok(t) if t.is_file() => out.push(child),
                            _ => {}
                        }
                    }
                }
            }
        }
    }
}
