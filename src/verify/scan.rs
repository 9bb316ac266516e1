//! Where git reads configuration anywhere in the roots: every `.git`, `.gitattributes` and
//! `.gitmodules`, in any directory. A program can create one under a name the policy never
//! predicted, in a folder it never named (`proj/.git/config` with an fsmonitor the user's git
//! runs once they `cd proj`), so the verifier looks at every directory, not only the ones a
//! command declared.
//!
//! Looking must stay cheap, so what was seen is reused when it provably has not changed:
//!
//! - **Watched folders.** Each folder gets an inotify watch *before* it is listed. A folder
//!   whose watch has reported nothing since has the same names, and so do the folders it
//!   lists (replacing one is an event in the parent): when no watch reported anything, the
//!   last look is the answer without a single system call beyond reading the (empty) queue.
//!   Events are queued by the kernel inside the system call that makes the change, so once a
//!   command's processes are gone, everything they did is in the queue. A full queue, or a
//!   folder that could not be watched, falls back to the next rule.
//! - **Change times.** A folder whose change time is unchanged since the last look has the
//!   same names: its listing is reused and only `lstat` is paid. It is reused only when its
//!   change time is older than the look before the command began minus a margin (timestamps
//!   may be coarse: a change in the same clock tick as the last one can leave the time as it
//!   was).
//!
//! `.git` directories themselves are never descended into (their protected files are recorded
//! one by one).

use super::dir::Kind;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Names whose presence in a directory makes git read them.
pub const GIT_NAMES: [&str; 3] = [".git", ".gitattributes", ".gitmodules"];

/// Change times this close to the start of a look are treated as "may have changed again in
/// the same tick": such a directory is listed afresh (and such a file read afresh).
pub const RECENT_NS: i128 = 2_000_000_000;

/// Folders looked at per root, beyond which a look says it is incomplete.
pub const DEFAULT_LIMIT: usize = 20_000;

/// Watches one index places at most. Watches are a per-user budget the user's editor and
/// build tools draw on too; a workspace with more folders than this is looked at by change
/// times beyond it.
const MAX_WATCHES: usize = 8192;

/// What a watch reports: anything that changes a folder's names or the folder itself.
fn watch_mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

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
    /// The watch placed on the folder before it was listed.
    watch: Option<WatchDescriptor>,
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
    watches: Watches,
    /// The last look, for a look that finds no watch reporting anything.
    last: Option<LastLook>,
}

#[derive(Debug)]
struct LastLook {
    roots: Vec<PathBuf>,
    limit: usize,
    found: Found,
    /// Every folder it looked at was watched.
    all_watched: bool,
}

/// The inotify instance of an index, made at its first look (`None` after that when inotify
/// is not available: change times alone are used).
#[derive(Debug, Default)]
struct Watches {
    tried: bool,
    inotify: Option<Inotify>,
    /// The folder each watch is on (the latest path, when a watched folder moved).
    paths: HashMap<WatchDescriptor, PathBuf>,
}

/// What the watches reported since the last look.
enum Reported {
    /// These folders changed (nothing else did).
    Folders(HashSet<PathBuf>),
    /// Events were lost, or there are no watches: nothing is known.
    Unknown,
}

impl Watches {
    fn inotify(&mut self) -> Option<&Inotify> {
        if !self.tried {
            self.tried = true;
            self.inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
                .map_err(|e| tracing::debug!("the write verifier works without inotify: {e}"))
                .ok();
        }
        self.inotify.as_ref()
    }

    fn drain(&mut self) -> Reported {
        self.inotify();
        let Some(inotify) = &self.inotify else {
            return Reported::Unknown;
        };
        let mut changed = HashSet::new();
        let mut lost = false;
        loop {
            match inotify.read_events() {
                Ok(events) if !events.is_empty() => {
                    for event in events {
                        if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                            lost = true;
                            continue;
                        }
                        let path = if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                            self.paths.remove(&event.wd)
                        } else {
                            self.paths.get(&event.wd).cloned()
                        };
                        changed.extend(path);
                    }
                }
                Ok(_) | Err(nix::errno::Errno::EAGAIN) => break,
                Err(e) => {
                    tracing::debug!("reading the write verifier's inotify queue: {e}");
                    lost = true;
                    break;
                }
            }
        }
        if lost {
            Reported::Unknown
        } else {
            Reported::Folders(changed)
        }
    }

    /// Watch `dir` (before it is listed); `None` when it cannot be watched, or when this
    /// index holds [`MAX_WATCHES`] already.
    fn watch(&mut self, dir: &Path) -> Option<WatchDescriptor> {
        if self.paths.len() >= MAX_WATCHES {
            return None;
        }
        let wd = self.inotify()?.add_watch(dir, watch_mask()).ok()?;
        self.paths.insert(wd, dir.to_path_buf());
        Some(wd)
    }

    /// `listing` of `dir` is exact: watched since before it was listed, and quiet since.
    fn vouches(&self, dir: &Path, listing: &Listing, reported: &Reported) -> bool {
        let Reported::Folders(changed) = reported else {
            return false;
        };
        listing
            .watch
            .is_some_and(|wd| self.paths.get(&wd).is_some_and(|p| p == dir))
            && !changed.contains(dir)
    }

    /// Stop watching the folders of dropped listings (unless the watch moved on to another
    /// path: a moved folder keeps its watch).
    fn forget(&mut self, dropped: impl Iterator<Item = (PathBuf, Listing)>) {
        for (dir, listing) in dropped {
            let Some(wd) = listing.watch else { continue };
            if self.paths.get(&wd).is_some_and(|p| *p == dir) {
                self.paths.remove(&wd);
                if let Some(inotify) = &self.inotify {
                    let _ = inotify.rm_watch(wd);
                }
            }
        }
    }
}

/// Nanoseconds since the epoch, now.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// How far a folder reached in a walk is known.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reached {
    /// Through a listing its watch vouched for: the folder there is the one listed before.
    Vouched,
    /// Otherwise: its identity is checked with `lstat`.
    Unsure,
}

impl Index {
    /// Look at every folder of `roots` (breadth first, in name order, at most `limit` per
    /// root). `began_ns` is when the look before the current command began (for that look
    /// itself: now): listings changed since shortly before it are read afresh.
    pub fn scan(&mut self, roots: &[PathBuf], limit: usize, began_ns: i128) -> Found {
        let reported = self.watches.drain();
        if let (Some(last), Reported::Folders(changed)) = (&self.last, &reported) {
            if changed.is_empty() && last.all_watched && last.roots == roots && last.limit == limit
            {
                return Found {
                    listed: 0,
                    ..last.found.clone()
                };
            }
        }
        let mut found = Found {
            complete: true,
            ..Found::default()
        };
        let mut seen: HashMap<PathBuf, Listing> = HashMap::new();
        for root in roots {
            let mut queue = VecDeque::from([(root.clone(), Reached::Unsure)]);
            let mut count = 0usize;
            while let Some((dir, reached)) = queue.pop_front() {
                if count >= limit {
                    found.complete = false;
                    break;
                }
                count += 1;
                if seen.contains_key(&dir) {
                    continue;
                }
                let cached = self.listings.remove(&dir);
                let vouched = cached
                    .as_ref()
                    .is_some_and(|l| self.watches.vouches(&dir, l, &reported));
                let (listing, children) = match cached {
                    Some(listing) if vouched && reached == Reached::Vouched => {
                        (listing, Reached::Vouched)
                    }
                    cached => {
                        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
                            continue;
                        };
                        if !meta.is_dir() {
                            continue;
                        }
                        let stamp = Stamp::of(&meta);
                        let same_folder = |old: &Listing| {
                            old.stamp.dev == stamp.dev && old.stamp.ino == stamp.ino
                        };
                        match cached {
                            Some(old) if vouched && same_folder(&old) => (old, Reached::Vouched),
                            Some(old)
                                if old.stamp == stamp && stamp.ctime_ns < began_ns - RECENT_NS =>
                            {
                                (old, Reached::Unsure)
                            }
                            _ => {
                                found.listed += 1;
                                let watch = self.watches.watch(&dir);
                                (list(&dir, stamp, watch), Reached::Unsure)
                            }
                        }
                    }
                };
                for (name, kind) in &listing.found {
                    found.entries.insert(dir.join(name), *kind);
                }
                queue.extend(listing.subdirs.iter().map(|s| (dir.join(s), children)));
                seen.insert(dir, listing);
            }
            found.dirs += count;
        }
        let dropped = std::mem::replace(&mut self.listings, seen);
        self.watches.forget(dropped.into_iter());
        self.last = Some(LastLook {
            roots: roots.to_vec(),
            limit,
            found: found.clone(),
            // A root that was not there has no watch to say when it appears.
            all_watched: roots.iter().all(|r| self.listings.contains_key(r))
                && self.listings.values().all(|l| l.watch.is_some()),
        });
        found
    }
}

fn list(dir: &Path, stamp: Stamp, watch: Option<WatchDescriptor>) -> Listing {
    let mut listing = Listing {
        stamp,
        subdirs: Vec::new(),
        found: Vec::new(),
        watch,
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

    /// Without inotify only change times vouch, and a folder changed a moment ago is listed
    /// again; with it, a quiet folder is never listed twice, and whatever a program does to
    /// the names is seen — a `.git` made deep inside, or a folder swapped for another.
    #[test]
    fn watched_folders_are_not_listed_again_and_every_change_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::create_dir_all(root.join("x/y")).unwrap();
        let mut index = Index::default();
        let roots = std::slice::from_ref(&root);
        let first = index.scan(roots, 100, now_ns());
        if index.watches.inotify.is_none() {
            eprintln!("skipped: inotify is not available here");
            return;
        }
        assert_eq!(first.listed, 6);
        let quiet = index.scan(roots, 100, now_ns());
        assert_eq!((quiet.listed, quiet.dirs), (0, 6));
        assert_eq!(quiet.entries, first.entries);

        std::fs::create_dir(root.join("a/b/c/.git")).unwrap();
        let deep = index.scan(roots, 100, now_ns());
        assert_eq!(deep.listed, 1, "only the folder that changed");
        assert!(deep.entries.contains_key(&root.join("a/b/c/.git")));

        // `x` goes away and a folder holding a repository takes its name: the walk reaches
        // `x` through a parent that changed, so `x` is checked and listed afresh.
        std::fs::create_dir_all(root.join("z/.git")).unwrap();
        std::fs::rename(root.join("x"), root.join("old")).unwrap();
        std::fs::rename(root.join("z"), root.join("x")).unwrap();
        let swapped = index.scan(roots, 100, now_ns());
        assert!(swapped.entries.contains_key(&root.join("x/.git")));
        assert!(swapped.dirs >= 6);
        // The moved folder keeps its watch under its new name.
        std::fs::write(root.join("old/y/.gitattributes"), "* filter=x").unwrap();
        let moved = index.scan(roots, 100, now_ns());
        assert!(moved
            .entries
            .contains_key(&root.join("old/y/.gitattributes")));
        assert_eq!(moved.listed, 1);

        std::fs::remove_dir(root.join("a/b/c/.git")).unwrap();
        let removed = index.scan(roots, 100, now_ns());
        assert!(!removed.entries.contains_key(&root.join("a/b/c/.git")));
    }

    #[test]
    fn a_root_that_appears_later_is_looked_at() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("later");
        let mut index = Index::default();
        let roots = std::slice::from_ref(&root);
        assert!(index.scan(roots, 100, now_ns()).entries.is_empty());
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let found = index.scan(roots, 100, now_ns());
        assert!(found.entries.contains_key(&root.join(".git")));
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
