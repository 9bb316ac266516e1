//! Where git reads configuration anywhere in the roots: every `.git`, `.gitattributes` and
//! `.gitmodules`, in any directory. A program can create one under a name the policy never
//! predicted, in a folder it never named (`proj/.git/config` with an fsmonitor the user's git
//! runs once they `cd proj`), so the verifier looks at every directory, not only the ones a
//! command declared.
//!
//! Looking must stay cheap: a directory whose change time is unchanged since the last look
//! has the same names, so its listing is reused and only `lstat` is paid. Two guards keep that
//! exact: a listing is reused only when its change time is older than the look before the
//! command began minus a margin (timestamps may be coarse: a change in the same clock tick as
//! the last one can leave the time as it was), and `.git` directories themselves are never
//! descended into (their protected files are recorded one by one).

use super::dir::Kind;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Names whose presence in a directory makes git read them.
pub const GIT_NAMES: [&str; 3] = [".git", ".gitattributes", ".gitmodules"];

/// Change times this close to the start of a look are treated as "may have changed again in
/// the same tick": such a directory is listed afresh.
const RECENT_NS: i128 = 2_000_000_000;

/// Folders looked at per root, beyond which a look says it is incomplete.
pub const DEFAULT_LIMIT: usize = 20_000;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    ctime_ns: i128,
    mtime_ns: i128,
    nlink: u64,
    size: u64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            nlink: meta.nlink(),
            size: meta.size(),
        }
    }
}

#[derive(Clone, Debug)]
struct Listing {
    stamp: Stamp,
    subdirs: Vec<OsString>,
    /// The git names present, with their kinds.
    found: Vec<(OsString, Kind)>,
}

/// What one look found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Every git-named entry, by absolute path.
    pub entries: BTreeMap<PathBuf, Kind>,
    /// False when a root had more folders than the limit (the rest was not looked at).
    pub complete: bool,
    /// Folders looked at.
    pub dirs: usize,
    /// Folders listed afresh (the rest reused their last listing).
    pub listed: usize,
}

/// The folders of some roots as last seen.
#[derive(Debug, Default)]
pub struct Index {
    listings: HashMap<PathBuf, Listing>,
}

/// Nanoseconds since the epoch, now.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

impl Index {
    /// Look at every folder of `roots` (breadth first, in name order, at most `limit` per
    /// root). `began_ns` is when the look before the current command began (for that look
    /// itself: now): listings changed since shortly before it are read afresh.
    pub fn scan(&mut self, roots: &[PathBuf], limit: usize, began_ns: i128) -> Found {
        let mut found = Found {
            complete: true,
            ..Found::default()
        };
        let mut seen: HashMap<PathBuf, Listing> = HashMap::new();
        for root in roots {
            let mut queue = VecDeque::from([root.clone()]);
            let mut count = 0usize;
            while let Some(dir) = queue.pop_front() {
                if count >= limit {
                    found.complete = false;
                    break;
                }
                count += 1;
                if seen.contains_key(&dir) {
                    continue;
                }
                let Ok(meta) = std::fs::symlink_metadata(&dir) else {
                    continue;
                };
                if !meta.is_dir() {
                    continue;
                }
                let stamp = Stamp::of(&meta);
                let reusable = self
                    .listings
                    .remove(&dir)
                    .filter(|old| old.stamp == stamp && stamp.ctime_ns < began_ns - RECENT_NS);
                let listing = match reusable {
                    Some(listing) => listing,
                    None => {
                        found.listed += 1;
                        list(&dir, stamp)
                    }
                };
                for (name, kind) in &listing.found {
                    found.entries.insert(dir.join(name), *kind);
                }
                queue.extend(listing.subdirs.iter().map(|s| dir.join(s)));
                seen.insert(dir, listing);
            }
            found.dirs += count;
        }
        self.listings = seen;
        found
    }
}

fn list(dir: &Path, stamp: Stamp) -> Listing {
    let mut listing = Listing {
        stamp,
        subdirs: Vec::new(),
        found: Vec::new(),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return listing;
    };
    let mut entries: Vec<(OsString, Kind)> = entries
        .flatten()
        .filter_map(|e| {
            let kind = match e.file_type().ok()? {
                t if t.is_symlink() => Kind::Link,
                t if t.is_dir() => Kind::Dir,
                t if t.is_file() => Kind::File,
                _ => Kind::Other,
            };
            Some((e.file_name(), kind))
        })
        .collect();
    entries.sort();
    for (name, kind) in entries {
        let git_name = GIT_NAMES.iter().any(|g| name == *g);
        if git_name {
            listing.found.push((name.clone(), kind));
        }
        // Inside a `.git` the protected files are recorded one by one; the objects are not
        // walked.
        if kind == Kind::Dir && name != ".git" {
            listing.subdirs.push(name);
        }
    }
    listing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_name_anywhere_is_found_and_unchanged_folders_are_not_listed_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join("a/.gitattributes"), "* text").unwrap();
        let mut index = Index::default();
        let first = index.scan(std::slice::from_ref(&root), 100, now_ns());
        assert!(first.complete);
        assert_eq!(first.dirs, 4, "root, a, a/b, a/b/c; not inside .git");
        assert_eq!(
            first.entries.keys().cloned().collect::<Vec<_>>(),
            [root.join(".git"), root.join("a/.gitattributes")]
        );
        std::fs::create_dir(root.join("a/b/c/.git")).unwrap();
        // Right after a change every folder changed "recently" is listed again.
        let second = index.scan(std::slice::from_ref(&root), 100, now_ns());
        assert!(second.entries.contains_key(&root.join("a/b/c/.git")));
        // With the look long after the changes, unchanged folders are reused...
        let later = now_ns() + 10 * RECENT_NS;
        let third = index.scan(std::slice::from_ref(&root), 100, later);
        assert_eq!(third.listed, 0);
        assert_eq!(third.entries, second.entries);
        // ...and a changed one is not.
        std::fs::write(root.join("a/b/.gitmodules"), "").unwrap();
        let fourth = index.scan(std::slice::from_ref(&root), 100, later);
        assert!(fourth.listed >= 1);
        assert!(fourth.entries.contains_key(&root.join("a/b/.gitmodules")));
    }

    #[test]
    fn the_limit_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for i in 0..5 {
            std::fs::create_dir(root.join(format!("d{i}"))).unwrap();
        }
        let found = Index::default().scan(std::slice::from_ref(&root), 3, now_ns());
        assert!(!found.complete);
        assert_eq!(found.dirs, 3);
    }

    #[test]
    fn symlinked_folders_are_not_walked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(outside.join(".git")).unwrap();
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let root = root.canonicalize().unwrap();
        let found = Index::default().scan(std::slice::from_ref(&root), 100, now_ns());
        assert!(found.entries.is_empty(), "{:?}", found.entries);
    }
}
