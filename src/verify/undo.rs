//! Putting protected paths back as they were: what did not exist is removed (deepest first),
//! what did is recreated — folders, then files with their contents and modes, then links
//! (shallowest first). Every step goes through [`Dir`], beneath the root, never through a
//! link.

use super::dir::Dir;
use super::judge::Change;
use super::state::{describe_len, Snapshot, State};
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// One change undone (or not), for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undone {
    /// As the user names it: relative to its root.
    pub name: String,
    /// What the command did ("created (executable file, 31 bytes)").
    pub change: String,
    /// `Err` says why it could not be put back.
    pub result: Result<(), String>,
}

/// Undo `changes` (taken against `before`) in `roots`.
pub fn undo(
    changes: &[Change],
    before: &Snapshot,
    after: &Snapshot,
    roots: &[PathBuf],
) -> Vec<Undone> {
    let mut order: Vec<&Change> = changes.iter().collect();
    // Removals deepest first, then restorations shallowest first.
    order.sort_by_key(|c| {
        let depth = c.path.components().count() as i64;
        match c.before {
            State::Missing => (0, -depth),
            _ => (1, depth),
        }
    });
    let mut out = Vec::new();
    for change in order {
        let result = undo_one(change, before, roots);
        out.push(Undone {
            name: name(&change.path, roots),
            change: describe(change, before, after),
            result,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// `path` relative to its root, for people.
pub fn name(path: &Path, roots: &[PathBuf]) -> String {
    roots
        .iter()
        .find_map(|r| path.strip_prefix(r).ok())
        .map(|rel| rel.display().to_string())
        .unwrap_or_else(|| path.display().to_string())
}

fn undo_one(change: &Change, before: &Snapshot, roots: &[PathBuf]) -> Result<(), String> {
    let (parent, name) = open_parent(&change.path, roots, change.before != State::Missing)
        .map_err(|e| format!("cannot reach its folder: {e}"))?;
    let done = match &change.before {
        State::Missing => parent.remove(name),
        State::Dir { mode } => parent.make_dir(name, *mode),
        State::Link { target } => parent.make_link(name, target),
        State::File {
            mode,
            hash: Some(hash),
            ..
        } => match (&change.after, before.content(hash)) {
            // Only the mode changed.
            (State::File { hash: Some(h), .. }, _) if h == hash => parent.set_mode(name, *mode),
            (_, Some(bytes)) => parent.write_file(name, bytes, *mode),
            (_, None) => return Err("its earlier contents were not kept".into()),
        },
        State::File { len, .. } => {
            return Err(format!(
                "it was {} (over the {} MiB kept per file), so its contents could not be kept",
                describe_len(*len),
                super::state::MAX_FILE_BYTES / (1024 * 1024)
            ))
        }
        State::Other { .. } => {
            return Err("it was a special file (FIFO, socket or device); not recreated".into())
        }
    };
    done.map_err(|e| e.to_string())
}

/// The folder holding `path` (created, one real folder at a time, when `create`) and its name.
fn open_parent<'p>(
    path: &'p Path,
    roots: &[PathBuf],
    create: bool,
) -> std::io::Result<(Dir, &'p OsStr)> {
    let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "outside the roots");
    let root = roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .ok_or_else(invalid)?;
    let rel = path.strip_prefix(root).map_err(|_| invalid())?;
    let name = rel.file_name().ok_or_else(invalid)?;
    let mut dir = Dir::open_root(root)?;
    for comp in rel.parent().unwrap_or(Path::new("")).components() {
        let Component::Normal(part) = comp else {
            return Err(invalid());
        };
        dir = match dir.open_dir(part) {
            Ok(next) => next,
            Err(_) if create => {
                dir.make_dir(part, 0o755)?;
                dir.open_dir(part)?
            }
            Err(e) => return Err(e),
        };
    }
    Ok((dir, name))
}

/// What happened to a path, in a few words.
pub fn describe(change: &Change, before: &Snapshot, after: &Snapshot) -> String {
    let what = |state: &State| match state {
        State::File { len, .. } => format!("{}, {}", state.kind_name(), describe_len(*len)),
        State::Link { target } => format!("symlink to {}", target.display()),
        other => other.kind_name().to_string(),
    };
    match (&change.before, &change.after) {
        (State::Missing, after) => format!("created ({})", what(after)),
        (_, State::Missing) => "removed".into(),
        (
            State::File {
                mode: m1, hash: h1, ..
            },
            State::File {
                mode: m2, hash: h2, ..
            },
        ) => {
            let mut parts = Vec::new();
            if h1 != h2 || h1.is_none() {
                parts.push(line_change(h1, h2, before, after));
            }
            if m1 != m2 {
                parts.push(format!("mode {m1:o} → {m2:o}"));
            }
            format!("changed ({})", parts.join(", "))
        }
        (State::Dir { mode: m1 }, State::Dir { mode: m2 }) => format!("mode {m1:o} → {m2:o}"),
        (old, new) => format!("{} replaced by a {}", old.kind_name(), what(new)),
    }
}

fn line_change(
    old: &Option<[u8; 32]>,
    new: &Option<[u8; 32]>,
    before: &Snapshot,
    after: &Snapshot,
) -> String {
    let text = |hash: &Option<[u8; 32]>, snap: &Snapshot| {
        hash.and_then(|h| snap.content(&h).cloned())
            .and_then(|b| String::from_utf8(b.to_vec()).ok())
    };
    match (text(old, before), text(new, after)) {
        (Some(old), Some(new)) => {
            let diff = similar::TextDiff::from_lines(&old, &new);
            let (mut added, mut removed) = (0, 0);
            for change in diff.iter_all_changes() {
                match change.tag() {
                    similar::ChangeTag::Insert => added += 1,
                    similar::ChangeTag::Delete => removed += 1,
                    similar::ChangeTag::Equal => {}
                }
            }
            format!("+{added} −{removed} lines")
        }
        _ => "contents differ".into(),
    }
}
