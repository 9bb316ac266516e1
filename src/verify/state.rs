//! The protected set at one moment: every protected path with its type, mode, link target and
//! content (hashed; the bytes kept so a change can be undone), and where git-named entries are.
//!
//! Which paths, per writable root: every `.git` the scan finds (a directory: its `config`,
//! `config.worktree`, `commondir`, `info/attributes`, `hooks/**`, the hooks folder its config
//! names with `core.hooksPath`, submodules' and linked worktrees' configs and hooks; a file or
//! link: itself and the git directory it names when that is inside a root), every
//! `.gitattributes` and `.gitmodules`, and the root's `.gitconfig` and `.config/git/**` (the
//! jail's HOME is the workspace: that is git's global config inside the jail). In the
//! workspace: the instruction files, extra protected files, and the memory files when the
//! command runs in a tainted run. Paths that do not exist are recorded as missing, so that
//! creating one is a change.

use super::dir::{Dir, Kind};
use super::scan::{now_ns, Found, RECENT_NS};
use super::Listed;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Protected files larger than this are compared by hash and cannot be restored.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Hashes kept by a guard's read cache before it starts afresh.
const MAX_CACHED_HASHES: usize = 8192;
/// Entries recorded beneath one protected folder (hooks, `memory/`).
const MAX_TREE_ENTRIES: usize = 4096;

/// Why a path is protected: what a change to it can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A git config file: changes only through git, and only to text the inspector accepts.
    GitConfig,
    /// A hook, or the hooks folder: git runs these.
    GitHook,
    /// `.gitattributes`, `info/attributes`, `.gitmodules`: name drivers and submodules.
    GitAttributes,
    /// A `.git` file or link, `commondir`: point git at another directory and its config.
    GitPointer,
    /// A folder that holds protected entries (`.git`, `info`, `.config/git`).
    GitFolder,
    /// A folder under a git directory's `modules/` that is no git directory (yet: no `HEAD`):
    /// only git makes those. Hooks and a config planted in one would wait for a later `HEAD`.
    GitModule,
    /// Instruction files, and the files `[trust] protected` adds.
    Instructions,
    /// Memory files (protected in tainted runs).
    Memory,
}

impl Role {
    pub fn is_git(self) -> bool {
        matches!(
            self,
            Role::GitConfig
                | Role::GitHook
                | Role::GitAttributes
                | Role::GitPointer
                | Role::GitFolder
                | Role::GitModule
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Missing,
    File {
        mode: u32,
        len: u64,
        /// `None` for a file over [`MAX_FILE_BYTES`] or one that could not be read.
        hash: Option<[u8; 32]>,
    },
    Dir {
        mode: u32,
    },
    Link {
        target: PathBuf,
    },
    Other {
        mode: u32,
    },
}

impl State {
    pub fn kind_name(&self) -> &'static str {
        match self {
            State::Missing => "missing",
            State::File { mode, .. } if mode & 0o111 != 0 => "executable file",
            State::File { .. } => "file",
            State::Dir { .. } => "folder",
            State::Link { .. } => "symlink",
            State::Other { .. } => "special file",
        }
    }
}

/// Contents by hash, shared between snapshots.
pub type Contents = HashMap<[u8; 32], Arc<Vec<u8>>>;

/// A file's identity as far as "unchanged since it was read" goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Ident {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// Files read before, by identity: an unchanged file is not read again. Only files whose
/// change time is well before the read are kept: timestamps may be coarse (a clock tick of a
/// few ms on kernels before 6.13), and a same-length rewrite within the tick of the last change
/// would keep the identity while changing the bytes.
#[derive(Debug, Default)]
pub struct ReadCache {
    hashes: HashMap<Ident, [u8; 32]>,
}

/// What a snapshot covers beyond the git set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// The writable roots; the first is the workspace.
    pub roots: Vec<PathBuf>,
    /// Always protected, relative to the workspace.
    pub instructions: Vec<Listed>,
    /// Protected when `memory` is on.
    pub memory_files: Vec<Listed>,
    pub memory: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub role: Role,
    pub state: State,
}

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub items: BTreeMap<PathBuf, Item>,
    pub contents: Contents,
    pub complete: bool,
}

impl Snapshot {
    /// Record `scope` as it is now; `found` is the scan of its roots.
    pub fn take(scope: &Scope, found: &Found, cache: &mut ReadCache, keep: &Contents) -> Snapshot {
        // Every change of a kept file adds an identity; a guard lives as long as its process.
        if cache.hashes.len() > MAX_CACHED_HASHES {
            cache.hashes.clear();
        }
        let mut taker = Taker {
            snap: Snapshot {
                complete: found.complete,
                ..Snapshot::default()
            },
            cache,
            keep,
            roots: &scope.roots,
            settled_before_ns: now_ns() - RECENT_NS,
        };
        for root in &scope.roots {
            taker.record(root, Role::GitConfig, Some(".gitconfig"));
            taker.record_tree(&root.join(".config/git"), Role::GitConfig);
        }
        let mut git_dirs: Vec<(PathBuf, PathBuf)> = Vec::new();
        for (path, kind) in &found.entries {
            let name = path.file_name().unwrap_or_default();
            if name == ".git" {
                let work_tree = path.parent().unwrap_or(path).to_path_buf();
                match kind {
                    Kind::Dir => git_dirs.push((path.clone(), work_tree)),
                    _ => {
                        taker.record_path(path, Role::GitPointer);
                        if let Some(target) = pointed_git_dir(path, *kind) {
                            git_dirs.push((target, work_tree));
                        }
                    }
                }
            } else {
                taker.record_path(path, Role::GitAttributes);
            }
        }
        git_dirs.sort();
        git_dirs.dedup();
        for (git_dir, work_tree) in git_dirs {
            if scope.roots.iter().any(|r| git_dir.starts_with(r)) {
                taker.record_git_dir(&git_dir, &work_tree, 0);
            }
        }
        if let Some(workspace) = scope.roots.first() {
            let lists = [(&scope.instructions, Role::Instructions, true)];
            let memory = [(&scope.memory_files, Role::Memory, scope.memory)];
            for (list, role, on) in lists.into_iter().chain(memory) {
                if !on {
                    continue;
                }
                for listed in list.iter() {
                    match listed {
                        Listed::File(rel) => {
                            taker.record_path(&workspace.join(rel), role);
                        }
                        Listed::Tree(rel) => taker.record_tree(&workspace.join(rel), role),
                    }
                }
            }
        }
        taker.snap
    }

    pub fn content(&self, hash: &[u8; 32]) -> Option<&Arc<Vec<u8>>> {
        self.contents.get(hash)
    }
}

/// The git directory a `.git` file (`gitdir: PATH`) or link names, when it is a directory.
fn pointed_git_dir(dot_git: &Path, kind: Kind) -> Option<PathBuf> {
    let base = dot_git.parent()?;
    let target = match kind {
        Kind::Link => std::fs::read_link(dot_git).ok()?,
        // As git reads it: the verifier watches the repository git will use.
        Kind::File => {
            let bytes = std::fs::read(dot_git).ok()?;
            PathBuf::from(crate::policy::git_files::gitfile_target(&bytes)?)
        }
        _ => return None,
    };
    let joined = base.join(target);
    let real = std::fs::canonicalize(joined).ok()?;
    real.is_dir().then_some(real)
}

struct Taker<'a> {
    snap: Snapshot,
    cache: &'a mut ReadCache,
    /// Contents an earlier snapshot holds (reused instead of read again).
    keep: &'a Contents,
    roots: &'a [PathBuf],
    /// Files changed before this (ns since the epoch) may have their hash kept.
    settled_before_ns: i128,
}

impl Taker<'_> {
    /// Record `dir/name` (or `dir` itself without a name).
    fn record(&mut self, dir: &Path, role: Role, name: Option<&str>) {
        let path = match name {
            Some(n) => dir.join(n),
            None => dir.to_path_buf(),
        };
        self.record_path(&path, role);
    }

    /// The state of `path`, read without following a link anywhere on the way from its root.
    fn state_of(&mut self, path: &Path) -> State {
        let Some((parent, name)) = self.open_parent(path) else {
            return State::Missing;
        };
        let Ok(stat) = parent.stat(name) else {
            return State::Missing;
        };
        let mode = stat.st_mode & 0o7777;
        match Kind::of(&stat) {
            Kind::Dir => State::Dir { mode },
            Kind::Other => State::Other { mode },
            Kind::Link => State::Link {
                target: parent.read_link(name).unwrap_or_default(),
            },
            Kind::File => {
                let ident = Ident {
                    dev: stat.st_dev,
                    ino: stat.st_ino,
                    len: stat.st_size as u64,
                    mtime: (stat.st_mtime, stat.st_mtime_nsec),
                    ctime: (stat.st_ctime, stat.st_ctime_nsec),
                };
                let len = stat.st_size as u64;
                let hash = match self.cache.hashes.get(&ident) {
                    Some(hash) if self.keep.contains_key(hash) => {
                        let bytes = self.keep[hash].clone();
                        self.snap.contents.insert(*hash, bytes);
                        Some(*hash)
                    }
                    _ => match parent.read_file(name, MAX_FILE_BYTES) {
                        Ok(Some(bytes)) if bytes.len() as u64 == len => {
                            let hash: [u8; 32] = Sha256::digest(&bytes).into();
                            let changed_ns = i128::from(stat.st_ctime) * 1_000_000_000
                                + i128::from(stat.st_ctime_nsec);
                            if changed_ns < self.settled_before_ns {
                                self.cache.hashes.insert(ident, hash);
                            }
                            self.snap.contents.insert(hash, Arc::new(bytes));
                            Some(hash)
                        }
                        // Changing while read: no hash, so it never compares equal.
                        _ => None,
                    },
                };
                State::File { mode, len, hash }
            }
        }
    }

    /// The real directory holding `path` (every component a directory, none a link) and the
    /// final name.
    fn open_parent<'p>(&self, path: &'p Path) -> Option<(Dir, &'p OsStr)> {
        let root = self.roots.iter().find(|r| path.starts_with(r))?;
        let rel = path.strip_prefix(root).ok()?;
        let name = rel.file_name()?;
        let parent_rel = rel.parent().unwrap_or(Path::new(""));
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return None;
        }
        let parent = Dir::open_root(root).ok()?.open_path(parent_rel).ok()?;
        Some((parent, name))
    }

    fn record_path(&mut self, path: &Path, role: Role) -> State {
        let state = self.state_of(path);
        self.snap.items.insert(
            path.to_path_buf(),
            Item {
                role,
                state: state.clone(),
            },
        );
        state
    }

    /// `dir` and, when it is a real folder, everything beneath it (links recorded, not
    /// followed).
    fn record_tree(&mut self, dir: &Path, role: Role) {
        let folder_role = if role.is_git() && role != Role::GitHook {
            Role::GitFolder
        } else {
            role
        };
        if !matches!(self.record_path(dir, folder_role), State::Dir { .. }) {
            return;
        }
        let mut stack = vec![dir.to_path_buf()];
        let mut count = 0;
        while let Some(at) = stack.pop() {
            let Some(handle) = self.open_dir(&at) else {
                continue;
            };
            let Ok(entries) = handle.entries() else {
                continue;
            };
            for (name, kind) in entries {
                count += 1;
                if count > MAX_TREE_ENTRIES {
                    self.snap.complete = false;
                    return;
                }
                let child = at.join(&name);
                let child_role = if kind == Kind::Dir { folder_role } else { role };
                self.record_path(&child, child_role);
                if kind == Kind::Dir {
                    stack.push(child);
                }
            }
        }
    }

    fn open_dir(&self, path: &Path) -> Option<Dir> {
        let root = self.roots.iter().find(|r| path.starts_with(r))?;
        let rel = path.strip_prefix(root).ok()?;
        Dir::open_root(root).ok()?.open_path(rel).ok()
    }

    /// A git directory's protected files; `work_tree` is where relative hook paths start.
    fn record_git_dir(&mut self, git_dir: &Path, work_tree: &Path, depth: usize) {
        if !matches!(
            self.record_path(git_dir, Role::GitFolder),
            State::Dir { .. }
        ) {
            return;
        }
        self.record(git_dir, Role::GitConfig, Some("config"));
        self.record(git_dir, Role::GitConfig, Some("config.worktree"));
        self.record(git_dir, Role::GitPointer, Some("commondir"));
        self.record(git_dir, Role::GitFolder, Some("info"));
        self.record(
            &git_dir.join("info"),
            Role::GitAttributes,
            Some("attributes"),
        );
        self.record_tree(&git_dir.join("hooks"), Role::GitHook);
        if let Some(hooks) = self.hooks_path(git_dir, work_tree) {
            if self.roots.iter().any(|r| hooks.starts_with(r)) {
                self.record_tree(&hooks, Role::GitHook);
            }
        }
        if depth > 8 {
            return;
        }
        // Linked worktrees: each has its own config.worktree and commondir.
        if let Some(worktrees) = self.open_dir(&git_dir.join("worktrees")) {
            for (name, kind) in worktrees.entries().unwrap_or_default() {
                if kind == Kind::Dir {
                    let wt = git_dir.join("worktrees").join(name);
                    self.record(&wt, Role::GitConfig, Some("config.worktree"));
                    self.record(&wt, Role::GitPointer, Some("commondir"));
                }
            }
        }
        // Submodules' git directories (names may hold slashes: look for their HEAD). A folder
        // without one is no git directory yet, to git or here, but hooks and a config planted
        // in it would wait for a later `HEAD`: such folders are recorded themselves
        // (`Role::GitModule`), so one a command other than git creates is undone.
        let modules = git_dir.join("modules");
        self.record_path(&modules, Role::GitFolder);
        let mut stack = vec![modules];
        let mut seen = 0;
        while let Some(at) = stack.pop() {
            let Some(handle) = self.open_dir(&at) else {
                continue;
            };
            for (name, kind) in handle.entries().unwrap_or_default() {
                seen += 1;
                if kind != Kind::Dir || seen > MAX_TREE_ENTRIES {
                    continue;
                }
                let child = at.join(&name);
                if handle
                    .open_dir(&name)
                    .ok()
                    .is_some_and(|d| d.stat(OsStr::new("HEAD")).is_ok())
                {
                    self.record_git_dir(&child, work_tree, depth + 1);
                } else {
                    self.record_path(&child, Role::GitModule);
                    stack.push(child);
                }
            }
        }
    }

    /// The folder `core.hooksPath` names in this git directory's config, if any.
    fn hooks_path(&self, git_dir: &Path, work_tree: &Path) -> Option<PathBuf> {
        let hash = match self.snap.items.get(&git_dir.join("config"))?.state {
            State::File { hash: Some(h), .. } => h,
            _ => return None,
        };
        let text = self.snap.contents.get(&hash)?;
        let entries = crate::policy::git_config::parse(text).ok()?;
        let value = entries
            .iter()
            .rev()
            .find(|e| e.section == "core" && e.subsection.is_none() && e.key == "hookspath")?
            .value
            .clone()?;
        let path = Path::new(&value);
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            work_tree.join(path)
        };
        Some(crate::policy::paths::lexically_normal(&joined))
    }
}

/// The size a file item had, for reports.
pub fn describe_len(len: u64) -> String {
    if len == 1 {
        "1 byte".into()
    } else {
        format!("{len} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freshly_changed_file_is_read_again_at_the_next_look() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join(".gitconfig"), "[user]\n").unwrap();
        let scope = Scope {
            roots: vec![root.clone()],
            ..Scope::default()
        };
        let mut cache = ReadCache::default();
        let snap = Snapshot::take(&scope, &Found::default(), &mut cache, &Contents::new());
        let item = &snap.items[&root.join(".gitconfig")];
        assert!(matches!(item.state, State::File { hash: Some(_), .. }));
        assert!(
            cache.hashes.is_empty(),
            "a file changed a moment ago may change again in the same clock tick"
        );
    }
}
