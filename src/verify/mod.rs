//! The write verifier: the second layer behind the command policy. The policy *predicts* what
//! a command writes; programs make names the prediction never sees (archive members through
//! links, escapes, backup and split suffixes, names stored in headers), and Landlock cannot
//! carve `.git/` or `AGENTS.md` out of a writable workspace. So every checked command runs
//! between two looks at the **protected set** ([`state`]): before it starts and after it ends
//! (and while it runs: [`watch`]), and whatever changed there that the command's IR did not
//! declare — or, for git's own files, that git could not have written safely — is undone
//! ([`undo`]) and the command refused with a reason naming the file, the change and the command.
//!
//! One [`Guard`] per set of writable roots in the process, shared by every command running in
//! them (a background command and the next foreground one): the state they are compared with
//! is the one before the first of them began, and what any of them was allowed to write is
//! allowed for all — so one command's approved change is not undone as another's, and a change
//! nobody approved stops them all. Between commands there is no baseline: what the user does
//! by hand while nothing runs is theirs.
//!
//! Order (this is an invariant): look, run, stop every process, look again, undo. Undoing
//! while a process of the command still runs would let it write again.

mod dir;
mod judge;
mod listed;
mod scan;
mod state;
mod undo;
mod watch;

pub use judge::{is_git, Allowance};
pub use listed::Listed;
pub use undo::Undone;

use crate::locks::lock;
use crate::policy::ir::Script;
use crate::policy::PathPolicy;
use judge::{allowed, changes, Change};
use scan::{now_ns, Index};
use state::{Contents, ReadCache, Scope, Snapshot};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use tokio_util::sync::CancellationToken;

/// What one command's run protects. Built from the path policy (git's files in every writable
/// root), then given the workspace's instruction files and, in a tainted run, its memory files.
#[derive(Clone, Debug)]
pub struct Protection {
    scope: Scope,
    scan_limit: usize,
}

impl Protection {
    /// git's files in every writable root of `paths`.
    pub fn for_paths(paths: &PathPolicy) -> Protection {
        Protection {
            scope: Scope {
                roots: paths.write_roots().to_vec(),
                ..Scope::default()
            },
            scan_limit: scan::DEFAULT_LIMIT,
        }
    }

    /// Files that tell the agent how to behave (and any the user added), relative to the
    /// workspace: a change must be declared by the command (the agent asked first).
    pub fn with_instructions(mut self, listed: &[Listed]) -> Protection {
        self.scope.instructions.extend(listed.iter().cloned());
        self
    }

    /// Memory files, protected like instructions (for a command of a tainted run).
    pub fn with_memory(mut self, listed: &[Listed]) -> Protection {
        self.scope.memory_files.extend(listed.iter().cloned());
        self.scope.memory = true;
        self
    }

    /// At most `limit` folders per root are looked at for new `.git` entries.
    pub fn with_scan_limit(mut self, limit: usize) -> Protection {
        self.scan_limit = limit.max(1);
        self
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.scope.roots
    }
}

/// A command refused after it ran, because it changed protected files; what was undone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub command: String,
    pub undone: Vec<Undone>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refused after it ran: `{}` changed files warden protects (git's hooks and config, \
             the agent's instructions and memory), which nobody approved:",
            self.command.replace('\n', "; ")
        )?;
        for u in &self.undone {
            match &u.result {
                Ok(()) => write!(f, "\n- {}: {}; undone", u.name, u.change)?,
                Err(why) => write!(
                    f,
                    "\n- {}: {}; NOT undone ({why}): check it by hand",
                    u.name, u.change
                )?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}

struct Running {
    allowance: Allowance,
    kill: CancellationToken,
    undone: Vec<Undone>,
}

#[derive(Default)]
struct GuardState {
    index: Index,
    cache: ReadCache,
    scope: Scope,
    scan_limit: usize,
    /// The state every running command is compared with; `None` while nothing runs.
    baseline: Option<Snapshot>,
    /// When the baseline's look began.
    began_ns: i128,
    running: BTreeMap<u64, Running>,
    next: u64,
    /// An incomplete look was reported (once per guard).
    warned_incomplete: bool,
}

pub struct Guard {
    state: Mutex<GuardState>,
}

/// The guards of this process, by their roots: the ones in use, and the last few used, kept
/// so that their next command reuses what they have seen (listings, watches, hashes).
#[derive(Default)]
struct Guards {
    by_roots: HashMap<Vec<PathBuf>, Weak<Guard>>,
    recent: Vec<Arc<Guard>>,
}

/// Idle guards kept alive (a bot serves few workspaces; each keeps one inotify instance).
const RECENT_GUARDS: usize = 4;

fn guards() -> &'static Mutex<Guards> {
    static GUARDS: OnceLock<Mutex<Guards>> = OnceLock::new();
    GUARDS.get_or_init(Default::default)
}

impl Guard {
    fn for_roots(roots: &[PathBuf]) -> Arc<Guard> {
        let mut all = lock(guards());
        all.by_roots.retain(|_, g| g.strong_count() > 0);
        let guard = match all.by_roots.get(roots).and_then(Weak::upgrade) {
            Some(guard) => guard,
            None => {
                let guard = Arc::new(Guard {
                    state: Mutex::new(GuardState::default()),
                });
                all.by_roots.insert(roots.to_vec(), Arc::downgrade(&guard));
                guard
            }
        };
        all.recent.retain(|g| !Arc::ptr_eq(g, &guard));
        all.recent.insert(0, guard.clone());
        all.recent.truncate(RECENT_GUARDS);
        guard
    }
}

impl GuardState {
    fn look(&mut self, scope: &Scope) -> Snapshot {
        let found = self
            .index
            .scan(&scope.roots, self.scan_limit, self.began_ns);
        let empty = Contents::new();
        let keep = self.baseline.as_ref().map_or(&empty, |b| &b.contents);
        let snapshot = Snapshot::take(scope, &found, &mut self.cache, keep);
        if !snapshot.complete && !self.warned_incomplete {
            self.warned_incomplete = true;
            tracing::warn!(
                roots = ?scope.roots,
                folders = found.dirs,
                "the write verifier looks at {} folders per root; beyond that, new .git entries \
                 are not seen (the protected files it knows are still checked)",
                self.scan_limit
            );
        }
        snapshot
    }

    /// Compare now with the baseline. Allowed changes become the baseline; the others are
    /// returned (with the look they were seen in).
    fn compare(&mut self) -> (Vec<Change>, Snapshot) {
        let scope = self.scope.clone();
        let after = self.look(&scope);
        let Some(baseline) = self.baseline.as_mut() else {
            return (Vec::new(), after);
        };
        let mut allowance = Allowance::default();
        for running in self.running.values() {
            allowance.merge(&running.allowance);
        }
        let mut bad = Vec::new();
        for change in changes(baseline, &after) {
            if allowed(&change, &allowance, &after) {
                accept(baseline, &after, &change);
            } else {
                bad.push(change);
            }
        }
        (bad, after)
    }

    fn stop_all(&self) {
        for running in self.running.values() {
            running.kill.cancel();
        }
    }
}

/// Make `change` part of `baseline`.
fn accept(baseline: &mut Snapshot, after: &Snapshot, change: &Change) {
    match after.items.get(&change.path) {
        Some(item) => {
            if let state::State::File {
                hash: Some(hash), ..
            } = &item.state
            {
                if let Some(bytes) = after.content(hash) {
                    baseline.contents.insert(*hash, bytes.clone());
                }
            }
            baseline.items.insert(change.path.clone(), item.clone());
        }
        None => {
            baseline.items.remove(&change.path);
        }
    }
}

/// One command's part in its guard: begun before it starts, finished after its processes are
/// gone.
pub struct Ticket {
    guard: Arc<Guard>,
    id: u64,
    kill: CancellationToken,
    finished: bool,
}

/// Look at the protected set before `script` runs. Its processes must be run under
/// [`Ticket::kill_token`], which the verifier cancels when it sees a change nobody approved.
pub fn begin(protection: &Protection, script: &Script, cancel: &CancellationToken) -> Ticket {
    let guard = Guard::for_roots(&protection.scope.roots);
    let kill = cancel.child_token();
    let id = {
        let mut st = lock(&guard.state);
        if st.baseline.is_none() || st.running.is_empty() {
            st.scope = protection.scope.clone();
            st.scan_limit = protection.scan_limit;
            st.began_ns = now_ns();
            st.baseline = None;
            let scope = st.scope.clone();
            let snapshot = st.look(&scope);
            st.baseline = Some(snapshot);
        } else {
            widen(&mut st, &protection.scope);
        }
        st.next += 1;
        let id = st.next;
        st.running.insert(
            id,
            Running {
                allowance: Allowance::of(script),
                kill: kill.clone(),
                undone: Vec::new(),
            },
        );
        id
    };
    Ticket {
        guard,
        id,
        kill,
        finished: false,
    }
}

/// A command joining running ones protects more (memory, in a tainted run): record the extra
/// paths as they are now.
fn widen(st: &mut GuardState, scope: &Scope) {
    let mut wider = st.scope.clone();
    for listed in &scope.instructions {
        if !wider.instructions.contains(listed) {
            wider.instructions.push(listed.clone());
        }
    }
    for listed in &scope.memory_files {
        if !wider.memory_files.contains(listed) {
            wider.memory_files.push(listed.clone());
        }
    }
    wider.memory |= scope.memory;
    if wider == st.scope {
        return;
    }
    let extra = st.look(&wider);
    if let Some(baseline) = st.baseline.as_mut() {
        for (path, item) in extra.items {
            if !baseline.items.contains_key(&path) {
                if let state::State::File {
                    hash: Some(hash), ..
                } = &item.state
                {
                    if let Some(bytes) = extra.contents.get(hash) {
                        baseline.contents.insert(*hash, bytes.clone());
                    }
                }
                baseline.items.insert(path, item);
            }
        }
    }
    st.scope = wider;
}

impl Ticket {
    /// The token the command's processes run under.
    pub fn kill_token(&self) -> &CancellationToken {
        &self.kill
    }

    /// A look while the command runs (before git starts, from the watcher): `false` when a
    /// change nobody approved was seen — every running command was told to stop; the change is
    /// undone when they have ended ([`Ticket::finish`]).
    pub fn check_running(&self) -> bool {
        check_running(&self.guard)
    }

    /// Start watching the protected set while the command runs.
    pub fn watch(&self) -> watch::Watcher {
        watch::Watcher::start(self.guard.clone(), self.kill.clone())
    }

    /// The last look, after the command's processes are gone: undo what nobody approved.
    /// Returns what was undone for this command (also what another command running beside it
    /// did: it was stopped too).
    pub fn finish(mut self) -> Vec<Undone> {
        self.finished = true;
        finish(&self.guard, self.id)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.finished {
            finish(&self.guard, self.id);
        }
    }
}

fn check_running(guard: &Guard) -> bool {
    let mut st = lock(&guard.state);
    let (bad, _) = st.compare();
    if bad.is_empty() {
        return true;
    }
    tracing::warn!(
        changed = ?bad.iter().map(|c| c.path.display().to_string()).collect::<Vec<_>>(),
        "a running command changed protected files; stopping every command in these roots"
    );
    st.stop_all();
    false
}

fn finish(guard: &Guard, id: u64) -> Vec<Undone> {
    let mut st = lock(&guard.state);
    let (bad, after) = st.compare();
    if !bad.is_empty() {
        let roots = st.scope.roots.clone();
        let undone = match st.baseline.as_ref() {
            Some(baseline) => undo::undo(&bad, baseline, &after, &roots),
            None => Vec::new(),
        };
        // Whatever remains different after the undo is reported as not undone.
        let (still, _) = st.compare();
        let undone: Vec<Undone> = undone
            .into_iter()
            .map(|mut u| {
                if u.result.is_ok() && still.iter().any(|c| undo::name(&c.path, &roots) == u.name) {
                    u.result = Err("it changed again while being restored".into());
                }
                u
            })
            .collect();
        tracing::warn!(
            undone = ?undone.iter().map(|u| format!("{}: {}", u.name, u.change)).collect::<Vec<_>>(),
            "protected files changed without approval; undone"
        );
        st.stop_all();
        for running in st.running.values_mut() {
            running.undone.extend(undone.iter().cloned());
        }
    }
    let mine = st.running.remove(&id).map(|r| r.undone).unwrap_or_default();
    if st.running.is_empty() {
        st.baseline = None;
    }
    let mut mine = mine;
    mine.sort_by(|a, b| a.name.cmp(&b.name));
    mine.dedup_by(|a, b| a.name == b.name && a.change == b.change);
    mine
}

#[cfg(test)]
mod tests;
