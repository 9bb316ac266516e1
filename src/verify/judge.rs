//! Which changes to the protected set a command may make: what its checked IR declared it
//! writes (for the instruction and memory files, which the agent's tools asked a person about
//! before it ran) and what git itself writes when git runs (a config the inspector accepts, a
//! new repository's sample hooks). Everything else is undone.

use super::state::{Item, Role, Snapshot, State};
use crate::policy::ir::Script;
use std::path::{Path, PathBuf};

/// What one running command may change.
#[derive(Clone, Debug, Default)]
pub struct Allowance {
    /// Paths the IR writes or removes (a folder: everything beneath it).
    pub declared: Vec<PathBuf>,
    /// The script runs git.
    pub runs_git: bool,
}

impl Allowance {
    pub fn of(script: &Script) -> Allowance {
        let mut declared: Vec<PathBuf> = script
            .written_paths()
            .into_iter()
            .map(Path::to_path_buf)
            .collect();
        declared.sort();
        declared.dedup();
        Allowance {
            declared,
            runs_git: script.commands().any(|c| is_git(&c.argv)),
        }
    }

    pub fn merge(&mut self, other: &Allowance) {
        self.declared.extend(other.declared.iter().cloned());
        self.declared.sort();
        self.declared.dedup();
        self.runs_git |= other.runs_git;
    }

    fn declares(&self, path: &Path) -> bool {
        self.declared.iter().any(|d| path.starts_with(d))
    }
}

/// Whether argv runs git.
pub fn is_git(argv: &[String]) -> bool {
    argv.first()
        .and_then(|p| Path::new(p).file_name())
        .is_some_and(|n| n == "git")
}

/// One protected path that is not as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    pub role: Role,
    pub before: State,
    pub after: State,
}

/// Every protected path whose state differs between the two snapshots (a path one of them
/// does not hold was missing there).
pub fn changes(before: &Snapshot, after: &Snapshot) -> Vec<Change> {
    let missing = |role| Item {
        role,
        state: State::Missing,
    };
    let mut out = Vec::new();
    let paths: std::collections::BTreeSet<&PathBuf> =
        before.items.keys().chain(after.items.keys()).collect();
    for path in paths {
        let old = before.items.get(path);
        let new = after.items.get(path);
        let role = old.or(new).map(|i| i.role).unwrap_or(Role::GitFolder);
        let old = old.cloned().unwrap_or_else(|| missing(role));
        let new = new.cloned().unwrap_or_else(|| missing(role));
        if !same(&old.state, &new.state) {
            out.push(Change {
                path: path.clone(),
                role: new.role.min(old.role),
                before: old.state,
                after: new.state,
            });
        }
    }
    out
}

/// Equal states; a file whose content could not be hashed never equals anything.
fn same(a: &State, b: &State) -> bool {
    match (a, b) {
        (State::File { hash: None, .. }, _) | (_, State::File { hash: None, .. }) => false,
        _ => a == b,
    }
}

/// Whether `allowance` covers `change` (`after` holds the new contents).
pub fn allowed(change: &Change, allowance: &Allowance, after: &Snapshot) -> bool {
    // Removing never makes anything run; what the command declared it removes may go (an
    // approved `rm -r proj` takes proj/.git with it).
    if change.after == State::Missing && allowance.declares(&change.path) {
        return true;
    }
    match change.role {
        Role::Instructions | Role::Memory => allowance.declares(&change.path),
        // Folders: created, or their mode changed; what they hold is judged entry by entry.
        Role::GitFolder => {
            matches!(change.before, State::Missing | State::Dir { .. })
                && matches!(change.after, State::Dir { .. })
        }
        Role::GitConfig => allowance.runs_git && config_is_safe(&change.after, after),
        // A submodule's folder without a `HEAD`: git makes those (`git submodule`).
        Role::GitModule => match (&change.before, &change.after) {
            (State::Dir { .. }, State::Dir { .. }) => true,
            (State::Missing, State::Dir { .. }) => allowance.runs_git,
            _ => false,
        },
        // The hooks folder itself: as any folder; what it holds is judged entry by entry.
        Role::GitHook if matches!(change.after, State::Dir { .. }) => {
            matches!(change.before, State::Missing | State::Dir { .. })
        }
        Role::GitHook => {
            allowance.runs_git
                && change.before == State::Missing
                && match &change.after {
                    // `git init` and `git clone` copy git's sample hooks; git never runs them.
                    State::File { .. } => change
                        .path
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().ends_with(".sample")),
                    _ => false,
                }
        }
        Role::GitAttributes | Role::GitPointer => false,
    }
}

/// A config file git wrote, which warden's inspector accepts (no program-running keys).
fn config_is_safe(state: &State, snapshot: &Snapshot) -> bool {
    let State::File {
        hash: Some(hash), ..
    } = state
    else {
        return false;
    };
    let Some(text) = snapshot.content(hash) else {
        return false;
    };
    match crate::policy::git_config::parse(text) {
        Ok(entries) => crate::policy::git_config::first_unsafe(&entries).is_none(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(mode: u32, byte: u8) -> State {
        State::File {
            mode,
            len: 1,
            hash: Some([byte; 32]),
        }
    }

    fn change(path: &str, role: Role, before: State, after: State) -> Change {
        Change {
            path: PathBuf::from(path),
            role,
            before,
            after,
        }
    }

    #[test]
    fn declared_writes_allow_only_the_files_the_agent_asked_about() {
        let allowance = Allowance {
            declared: vec![PathBuf::from("/ws/MEMORY.md"), PathBuf::from("/ws/out")],
            runs_git: false,
        };
        let snap = Snapshot::default();
        let memory = change(
            "/ws/MEMORY.md",
            Role::Memory,
            file(0o644, 1),
            file(0o644, 2),
        );
        assert!(allowed(&memory, &allowance, &snap));
        let agents = change(
            "/ws/AGENTS.md",
            Role::Instructions,
            file(0o644, 1),
            file(0o644, 2),
        );
        assert!(!allowed(&agents, &allowance, &snap));
        // A write declared beneath a folder never allows git's files there.
        let hook = change(
            "/ws/out/.git/hooks/pre-commit",
            Role::GitHook,
            State::Missing,
            file(0o755, 3),
        );
        assert!(!allowed(&hook, &allowance, &snap));
        // Removing it is what `rm -r out` does.
        let gone = change(
            "/ws/out/.git/config",
            Role::GitConfig,
            file(0o644, 1),
            State::Missing,
        );
        assert!(allowed(&gone, &allowance, &snap));
    }

    #[test]
    fn git_may_write_a_safe_config_and_sample_hooks_only() {
        let mut snap = Snapshot::default();
        let safe = b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n".to_vec();
        let bad = b"[core]\n\tfsmonitor = ./x.sh\n".to_vec();
        snap.contents.insert([1; 32], std::sync::Arc::new(safe));
        snap.contents.insert([2; 32], std::sync::Arc::new(bad));
        let git = Allowance {
            declared: vec![],
            runs_git: true,
        };
        let cfg = |byte| {
            change(
                "/ws/.git/config",
                Role::GitConfig,
                State::Missing,
                file(0o644, byte),
            )
        };
        assert!(allowed(&cfg(1), &git, &snap));
        assert!(!allowed(&cfg(2), &git, &snap));
        assert!(!allowed(&cfg(1), &Allowance::default(), &snap));
        let sample = change(
            "/ws/.git/hooks/pre-commit.sample",
            Role::GitHook,
            State::Missing,
            file(0o755, 1),
        );
        assert!(allowed(&sample, &git, &snap));
        let real = change(
            "/ws/.git/hooks/pre-commit",
            Role::GitHook,
            State::Missing,
            file(0o755, 1),
        );
        assert!(!allowed(&real, &git, &snap));
        let attributes = change(
            "/ws/.gitattributes",
            Role::GitAttributes,
            State::Missing,
            file(0o644, 1),
        );
        assert!(!allowed(&attributes, &git, &snap));
        let link = change(
            "/ws/.git",
            Role::GitFolder,
            State::Dir { mode: 0o755 },
            State::Link {
                target: "/tmp/x".into(),
            },
        );
        assert!(!allowed(&link, &git, &snap));
        // A submodule's folder without a HEAD: git may make one, nothing else.
        let module = change(
            "/ws/.git/modules/sub",
            Role::GitModule,
            State::Missing,
            State::Dir { mode: 0o755 },
        );
        assert!(allowed(&module, &git, &snap));
        assert!(!allowed(&module, &Allowance::default(), &snap));
        let mode = change(
            "/ws/.git/modules/sub",
            Role::GitModule,
            State::Dir { mode: 0o755 },
            State::Dir { mode: 0o700 },
        );
        assert!(allowed(&mode, &Allowance::default(), &snap));
    }
}
