//! Directory copies: what `cp -r` and `mv` create beneath their destination.
//!
//! The destination on the command line is checked like any write, but a copied directory
//! brings its whole tree: `cp -r dir .config` creates `.config/git/config` when `dir` holds
//! `git/config`, and that file is git's global config inside the jail. So every entry of every
//! source tree is mapped to each place the copy may put it and checked as a write there.

use super::paths::{Access, PathPolicy};
use super::rules::Analysis;
use super::Denial;
use std::path::{Path, PathBuf};

/// Source trees with more entries than this are refused rather than half-checked.
const MAX_ENTRIES: usize = 20_000;

/// Check every path the copy would create. `analysis` is the generic analysis of the command
/// (its positionals, and the value of a write-path flag such as `-t DIR`).
/// With `backup_suffix`, each created path replaces what is there after copying it to the
/// path plus the suffix: that name is checked too. Returns the places where the copy makes
/// symbolic links (a link copied or moved as a link), absolute.
pub fn check(
    program: &str,
    args: &[String],
    analysis: &Analysis,
    cwd: &Path,
    paths: &PathPolicy,
    backup_suffix: Option<&str>,
) -> Result<Vec<PathBuf>, Denial> {
    let target_flag = analysis
        .path_flags
        .iter()
        .find(|(flag, _)| matches!(flag.as_str(), "-t" | "--target-directory"));
    let (sources, dest): (&[String], &str) = match (target_flag, analysis.positionals.as_slice()) {
        (Some((_, dir)), all) => (all, dir.as_str()),
        (None, [sources @ .., last]) if !sources.is_empty() => (sources, last.as_str()),
        _ => return Ok(Vec::new()),
    };
    // `cp --parents a/b DEST` creates DEST/a/b (any unambiguous abbreviation counts).
    let parents = args
        .iter()
        .take_while(|a| a.as_str() != "--")
        .any(|a| a.len() >= 4 && "--parents".starts_with(a.as_str()));
    let dest = paths.check(cwd, dest, Access::Write)?;
    // A file there now (`cp a b` onto an existing b): the copy replaces it. An earlier command
    // of the line could still make it a directory, so what would land beneath is checked by
    // name, as the path cannot be resolved through a file.
    let dest_is_file = std::fs::symlink_metadata(&dest).is_ok_and(|m| !m.is_dir());
    let mut links = Vec::new();
    for source in sources {
        if source == "-" || source.is_empty() {
            continue;
        }
        let Ok(resolved) = paths.check(cwd, source, Access::Read) else {
            // The generic checks already refused or will refuse it with the reason.
            continue;
        };
        let name = Path::new(source.as_str())
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_default();
        // `mv lnk d` moves the link itself, and `cp -r`, `-a`, `-d`, `-P` copy it as one.
        let source_is_link =
            std::fs::symlink_metadata(cwd.join(source)).is_ok_and(|m| m.file_type().is_symlink());
        for rel in tree(&resolved).map_err(|why| {
            Denial::new(format!(
                "{program}: cannot check what copying {source} creates: {why}"
            ))
        })? {
            // `cp -r SRC DEST` creates DEST/SRC/… when DEST is a directory, DEST/… when it is
            // not (or no longer is, when an earlier command removed it): check both.
            let beneath = if rel.as_os_str().is_empty() {
                name.clone()
            } else {
                name.join(&rel)
            };
            let mut places = vec![beneath, rel.clone()];
            if parents {
                let written: PathBuf = Path::new(source.as_str())
                    .components()
                    .filter(|c| !matches!(c, std::path::Component::RootDir))
                    .collect();
                places.push(written.join(&rel));
            }
            if let Some(suffix) = backup_suffix {
                let backups: Vec<PathBuf> = places
                    .iter()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(|p| PathBuf::from(format!("{}{suffix}", p.display())))
                    .collect();
                places.extend(backups);
            }
            let is_link = if rel.as_os_str().is_empty() {
                source_is_link
            } else {
                std::fs::symlink_metadata(resolved.join(&rel))
                    .is_ok_and(|m| m.file_type().is_symlink())
            };
            if is_link {
                links.extend(
                    places
                        .iter()
                        .map(|p| super::paths::lexically_normal(&dest.join(p))),
                );
            }
            for created in places {
                let text = created.to_string_lossy();
                if text.is_empty() {
                    continue;
                }
                let checked = if dest_is_file && !created.as_os_str().is_empty() {
                    paths.check_new_beneath(&dest, &created).map(drop)
                } else {
                    paths.check(&dest, &text, Access::Write).map(drop)
                };
                checked.map_err(|d| {
                    Denial::new(format!(
                        "{program}: copying {source} would create {}: {}",
                        dest.join(&created).display(),
                        d.reason
                    ))
                })?;
            }
        }
    }
    Ok(links)
}

/// Every entry beneath `root` (relative; the root itself is the empty path), not following
/// symlinks inside the tree (cp -r and mv copy them as links).
pub(super) fn tree(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = vec![PathBuf::new()];
    let meta = std::fs::symlink_metadata(root).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Ok(out);
    }
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let child = rel.join(entry.file_name());
            if out.len() >= MAX_ENTRIES {
                return Err(format!(
                    "it holds more than {MAX_ENTRIES} files, too many to check one by one"
                ));
            }
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            out.push(child.clone());
            if is_dir {
                stack.push(child);
            }
        }
    }
    Ok(out)
}
