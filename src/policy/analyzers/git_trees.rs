//! What git's tree-switching subcommands write into the work tree, checked before they run.
//!
//! `checkout`, `switch`, `restore --source`, `reset`, `merge` and `stash apply|pop|branch`
//! write (or stage) the files of another tree. The policy reads that tree (`git_repo`) and
//! compares it with HEAD's: an entry that would change a path the policy keeps read-only (a
//! root `.gitconfig` or `.config/git`, any `.gitattributes` or `.gitmodules`) is refused. HEAD
//! is the baseline because everything that moves HEAD or fills the index
//! from another tree is checked here too: HEAD's protected files are the user's, or ones
//! already checked. Merging by subtree (`-s subtree`, `-X subtree=…`) moves every path of the
//! other tree and is refused.
//!
//! What discards uncommitted work asks, as `rm -r` does: `reset --hard`, `checkout` of paths
//! or with `-f`, `switch -f`, `restore` of the work tree, `clean -f`, `rm -r`/`rm -f`,
//! `stash drop|clear`.

use super::git_objects::Oid;
use super::git_repo::{Entry, Repo, MODE_TREE};
use crate::policy::paths::PathPolicy;
use crate::policy::rules::{FlagTakes, ProgramRule};
use crate::policy::Denial;
use std::path::{Path, PathBuf};

/// More entries than this are not compared one by one.
const MAX_ENTRIES: usize = 500_000;

/// Subcommands checked here.
pub const TREE_COMMANDS: &[&str] = &[
    "checkout", "switch", "restore", "reset", "merge", "stash", "clean", "rm",
];

/// Where the repository is.
pub struct Location {
    pub git_dir: PathBuf,
    pub common_dir: PathBuf,
    pub work_tree: PathBuf,
}

/// What the command needs besides the checks: an approval.
#[derive(Debug, Default)]
pub struct Outcome {
    pub ask: Option<String>,
}

/// A subcommand's words, read with its rule: options (with values) and the operands before
/// and after `--`.
struct Words {
    options: Vec<(String, Option<String>)>,
    operands: Vec<String>,
    after_dashes: Option<Vec<String>>,
}

impl Words {
    fn read(rule: &ProgramRule, rest: &[String]) -> Words {
        let mut words = Words {
            options: Vec::new(),
            operands: Vec::new(),
            after_dashes: None,
        };
        let mut i = 0;
        while i < rest.len() {
            let word = &rest[i];
            i += 1;
            if let Some(after) = &mut words.after_dashes {
                after.push(word.clone());
                continue;
            }
            if word == "--" {
                words.after_dashes = Some(Vec::new());
                continue;
            }
            if !word.starts_with('-') || word == "-" {
                words.operands.push(word.clone());
                continue;
            }
            if let Some(long) = word.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (format!("--{n}"), Some(v.to_string())),
                    None => (word.clone(), None),
                };
                let takes = rule.flag_takes(&name);
                let value = match value {
                    Some(v) => Some(v),
                    None if takes.is_some_and(FlagTakes::takes_argument) => {
                        i += 1;
                        rest.get(i - 1).cloned()
                    }
                    None => None,
                };
                words.options.push((name, value));
                continue;
            }
            let letters: Vec<char> = word[1..].chars().collect();
            for (j, letter) in letters.iter().enumerate() {
                let name = format!("-{letter}");
                let takes = rule.flag_takes(&name);
                let attached: String = letters[j + 1..].iter().collect();
                if takes.is_some_and(FlagTakes::takes_argument) {
                    let value = if attached.is_empty() {
                        i += 1;
                        rest.get(i - 1).cloned()
                    } else {
                        Some(attached)
                    };
                    words.options.push((name, value));
                    break;
                }
                if takes == Some(FlagTakes::Optional) {
                    words
                        .options
                        .push((name, (!attached.is_empty()).then_some(attached)));
                    break;
                }
                words.options.push((name, None));
            }
        }
        words
    }

    fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(n, _)| names.contains(&n.as_str()))
    }

    fn count(&self, names: &[&str]) -> usize {
        self.options
            .iter()
            .filter(|(n, _)| names.contains(&n.as_str()))
            .count()
    }

    fn value(&self, names: &[&str]) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(n, _)| names.contains(&n.as_str()))
            .and_then(|(_, v)| v.as_deref())
    }

    /// Every operand, before and after `--`.
    fn all(&self) -> Vec<String> {
        let mut out = self.operands.clone();
        out.extend(self.after_dashes.iter().flatten().cloned());
        out
    }
}

/// A tree the command writes: from which tree it starts, to which, limited to some paths.
struct Write {
    what: String,
    from: Option<Oid>,
    to: Option<Oid>,
    scope: Option<Vec<PathBuf>>,
}

/// Check `git SUB REST…`, run with its paths relative to `base` (the cwd joined with `-C`).
pub fn check(
    sub: &str,
    rule: &ProgramRule,
    rest: &[String],
    base: &Path,
    location: Option<&Location>,
    paths: &PathPolicy,
) -> Result<Outcome, Denial> {
    let words = Words::read(rule, rest);
    if sub == "clean" && words.count(&["-f", "--force"]) > 1 {
        return Err(Denial::new(
            "git clean -ff: a second -f removes nested repositories, their .git folders \
             included",
        ));
    }
    let mut outcome = Outcome {
        ask: discards(sub, &words),
    };
    let Some(location) = location else {
        return Ok(outcome);
    };
    if sub == "clean" || sub == "rm" {
        return Ok(outcome);
    }
    let refuse = |why: String| Denial::new(format!("git {sub}: {why}"));
    let repo = Repo::open(&location.git_dir, &location.common_dir);
    let scope = Scope {
        base,
        work_tree: &location.work_tree,
    };
    let plan = plan(sub, &words, &repo, &scope).map_err(|why| {
        refuse(format!(
            "cannot check the tree it would write: {why}; run it yourself"
        ))
    })?;
    if sub == "checkout" && plan.paths_only {
        outcome.ask = Some(DISCARDS.replace("{}", "git checkout of paths"));
    }
    for write in plan.writes {
        let changed = changes(&repo, write.from, write.to, write.scope.as_deref())
            .map_err(|why| refuse(format!("cannot read {} ({why})", write.what)))?;
        for (path, _) in changed {
            let at = location.work_tree.join(&path);
            if let Some(why) = paths.protected(&at) {
                return Err(refuse(format!(
                    "{} would write {}: {why}",
                    write.what,
                    path.display()
                )));
            }
        }
    }
    Ok(outcome)
}

const DISCARDS: &str = "{} discards uncommitted changes in the work tree";

/// Why the command needs approval because it throws away work, if it does.
fn discards(sub: &str, words: &Words) -> Option<String> {
    let what = match sub {
        "reset" if words.has(&["--hard"]) => "git reset --hard",
        "checkout" if words.has(&["-f", "--force"]) => "git checkout --force",
        "checkout" if words.after_dashes.is_some() => "git checkout of paths",
        "switch" if words.has(&["-f", "--force", "--discard-changes"]) => "git switch --force",
        "restore" if words.has(&["-W", "--worktree"]) || !words.has(&["-S", "--staged"]) => {
            "git restore of the work tree"
        }
        "clean" if words.has(&["-f", "--force"]) && !words.has(&["-n", "--dry-run"]) => {
            "git clean -f"
        }
        "rm" if !words.has(&["--cached", "-n", "--dry-run"])
            && words.has(&["-r", "-f", "--force"]) =>
        {
            "git rm -r/-f"
        }
        "stash"
            if matches!(
                words.operands.first().map(String::as_str),
                Some("drop" | "clear")
            ) =>
        {
            "git stash drop/clear"
        }
        _ => return None,
    };
    Some(DISCARDS.replace("{}", what))
}

/// Paths as git's pathspecs name them, relative to the work tree; `None`: the whole tree
/// (a glob or magic pathspec is taken to mean anything).
struct Scope<'a> {
    base: &'a Path,
    work_tree: &'a Path,
}

impl Scope<'_> {
    /// Whether a pathspec can match a file: a glob or magic one may, a plain one when it
    /// exists.
    fn names_something(&self, spec: &str) -> bool {
        spec.starts_with(':')
            || spec.contains(['*', '?', '[', '\\'])
            || self.base.join(spec).symlink_metadata().is_ok()
    }

    fn of(&self, specs: &[String]) -> Option<Vec<PathBuf>> {
        if specs.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        for spec in specs {
            if spec.starts_with(':') || spec.contains(['*', '?', '[', '\\']) {
                return None;
            }
            let at = crate::policy::paths::lexically_normal(&self.base.join(spec));
            let rel = at.strip_prefix(self.work_tree).ok()?;
            if rel.as_os_str().is_empty() {
                return None;
            }
            out.push(rel.to_path_buf());
        }
        Some(out)
    }
}

struct Plan {
    writes: Vec<Write>,
    /// `checkout X` where X names no commit: X is a path, restored from the index.
    paths_only: bool,
}

fn plan(sub: &str, words: &Words, repo: &Repo, scope: &Scope) -> Result<Plan, String> {
    // HEAD's tree, read when a write needs it.
    let head_cell = std::cell::OnceCell::new();
    let head =
        || -> Result<Option<Oid>, String> { head_cell.get_or_init(|| repo.head_tree()).clone() };
    let mut plan = Plan {
        writes: Vec::new(),
        paths_only: false,
    };
    // A switch to `rev` (checked out whole), or nothing when git finds no such commit.
    let switch_to = |rev: &str, plan: &mut Plan, guess: bool| -> Result<bool, String> {
        let verb = if sub == "merge" {
            "merging"
        } else {
            "checking out"
        };
        let mut targets = Vec::new();
        match repo.resolve(rev)? {
            Some(oid) => targets.push(oid),
            None if guess && !rev.contains('/') && !repo.has_branch(rev)? => {
                // No branch of that name: git makes one from a remote-tracking branch.
                targets.extend(repo.remote_branches(rev)?)
            }
            None => {}
        }
        let found = !targets.is_empty();
        for oid in targets {
            plan.writes.push(Write {
                what: format!("{verb} {rev}"),
                from: head()?,
                to: Some(repo.tree_of(&oid)?),
                scope: None,
            });
        }
        Ok(found)
    };
    let from_rev = |rev: &str, specs: &[String], plan: &mut Plan| -> Result<(), String> {
        if let Some(oid) = repo.resolve(rev)? {
            plan.writes.push(Write {
                what: format!("the files of {rev}"),
                from: head()?,
                to: Some(repo.tree_of(&oid)?),
                scope: scope.of(specs),
            });
        }
        Ok(())
    };
    match sub {
        "checkout" => {
            let new_branch = words.value(&["-b", "-B", "--orphan"]).is_some();
            let operands = &words.operands;
            // Paths named in a file are restored from the commit given, or from the index.
            plan.paths_only = words.has(&["--pathspec-from-file"]);
            if new_branch {
                if words.after_dashes.is_some() || operands.len() > 1 {
                    return Err(
                        "a new branch and paths together is not a form warden checks".into(),
                    );
                }
                if let Some(start) = operands.first() {
                    switch_to(start, &mut plan, false)?;
                }
            } else if let Some(paths) = &words.after_dashes {
                match operands.as_slice() {
                    [] => {}
                    [rev] => from_rev(rev, paths, &mut plan)?,
                    _ => return Err("more than one commit before `--`".into()),
                }
            } else if let Some((first, others)) = operands.split_first() {
                if others.is_empty() {
                    let tracks = words.has(&["-t", "--track"]);
                    let rev = if first == "-" {
                        "@{-1}"
                    } else {
                        first.as_str()
                    };
                    let guess = !words.has(&["--no-guess"]);
                    // Not a commit: a path (git fails when it names nothing there either).
                    if !switch_to(rev, &mut plan, guess)? && !tracks && first != "-" {
                        plan.paths_only |= scope.names_something(first);
                    }
                } else if repo.resolve(first)?.is_some() {
                    from_rev(first, others, &mut plan)?;
                    plan.paths_only = true;
                } else {
                    plan.paths_only = true;
                }
            }
        }
        "switch" => {
            let operands = &words.operands;
            if words.has(&["--orphan"]) {
                // An empty tree: nothing is written.
            } else if let Some(rev) = operands.first() {
                let rev = if rev == "-" { "@{-1}" } else { rev.as_str() };
                let creates = words
                    .value(&["-c", "-C", "--create", "--force-create"])
                    .is_some();
                let guess = !creates && !words.has(&["--no-guess", "--detach", "-d"]);
                switch_to(rev, &mut plan, guess)?;
            }
        }
        "restore" => {
            if let Some(source) = words.value(&["-s", "--source"]) {
                from_rev(source, &words.all(), &mut plan)?;
            }
        }
        "reset" => {
            let (rev, specs): (Option<&String>, Vec<String>) = match &words.after_dashes {
                Some(after) => (words.operands.first(), after.clone()),
                None => match words.operands.split_first() {
                    Some((first, rest)) if repo.resolve(first)?.is_some() => {
                        (Some(first), rest.to_vec())
                    }
                    _ => (None, words.operands.clone()),
                },
            };
            if let Some(rev) = rev {
                from_rev(rev, &specs, &mut plan)?;
            }
        }
        "merge" => {
            let subtree = words.options.iter().any(|(name, value)| {
                let value = value.as_deref().unwrap_or_default();
                (matches!(name.as_str(), "-s" | "--strategy") && value == "subtree")
                    || (matches!(name.as_str(), "-X" | "--strategy-option")
                        && value.starts_with("subtree"))
            });
            if subtree {
                return Err(
                    "merging by subtree moves the other tree's paths to where the \
                            policy cannot check them"
                        .into(),
                );
            }
            if words.has(&["--abort", "--quit", "--continue"]) {
                return Ok(plan);
            }
            if words.operands.is_empty() {
                return Err("name the branch to merge (the upstream branch is not checked)".into());
            }
            for rev in &words.operands {
                if rev == "FETCH_HEAD" {
                    // It may list several heads, all merged.
                    return Err("name the commit to merge instead of FETCH_HEAD".into());
                }
                let rev = if rev == "-" { "@{-1}" } else { rev.as_str() };
                switch_to(rev, &mut plan, false)?;
            }
        }
        "stash" => {
            let operands = &words.operands;
            let (form, stash) = match operands.first().map(String::as_str) {
                Some("apply" | "pop") => (operands[0].as_str(), operands.get(1)),
                Some("branch") => ("branch", operands.get(2)),
                _ => return Ok(plan),
            };
            let stash = stash.map_or("stash@{0}", String::as_str);
            let Some(w) = repo.resolve(stash)? else {
                return Ok(plan);
            };
            let parents = repo.parents(&w)?;
            let base = match parents.first() {
                Some(h) => Some(repo.tree_of(h)?),
                None => return Err(format!("{stash} is not a stash entry")),
            };
            if form == "branch" {
                if let Some(h) = parents.first() {
                    plan.writes.push(Write {
                        what: format!("checking out the commit {stash} was made on"),
                        from: head()?,
                        to: Some(repo.tree_of(h)?),
                        scope: None,
                    });
                }
            }
            plan.writes.push(Write {
                what: format!("the changes in {stash}"),
                from: base,
                to: Some(repo.tree_of(&w)?),
                scope: None,
            });
            if let Some(index) = parents.get(1) {
                plan.writes.push(Write {
                    what: format!("the staged changes in {stash}"),
                    from: base,
                    to: Some(repo.tree_of(index)?),
                    scope: None,
                });
            }
            if let Some(untracked) = parents.get(2) {
                plan.writes.push(Write {
                    what: format!("the untracked files in {stash}"),
                    from: None,
                    to: Some(repo.tree_of(untracked)?),
                    scope: None,
                });
            }
        }
        _ => {}
    }
    Ok(plan)
}

/// The entries of `to` that are new or different from `from` (files, links, submodules;
/// folders are walked), within `scope`.
fn changes(
    repo: &Repo,
    from: Option<Oid>,
    to: Option<Oid>,
    scope: Option<&[PathBuf]>,
) -> Result<Vec<(PathBuf, Entry)>, String> {
    let mut out = Vec::new();
    let mut budget = MAX_ENTRIES;
    walk(repo, from, to, Path::new(""), scope, &mut out, &mut budget)?;
    Ok(out)
}

fn in_scope(path: &Path, scope: Option<&[PathBuf]>) -> bool {
    scope.is_none_or(|prefixes| {
        prefixes
            .iter()
            .any(|p| path.starts_with(p) || p.starts_with(path))
    })
}

fn walk(
    repo: &Repo,
    from: Option<Oid>,
    to: Option<Oid>,
    at: &Path,
    scope: Option<&[PathBuf]>,
    out: &mut Vec<(PathBuf, Entry)>,
    budget: &mut usize,
) -> Result<(), String> {
    let Some(to) = to else { return Ok(()) };
    if from == Some(to) {
        return Ok(());
    }
    let old = match from {
        Some(oid) => repo.tree(&oid)?,
        None => Vec::new(),
    };
    for entry in repo.tree(&to)? {
        *budget = budget
            .checked_sub(1)
            .ok_or("more entries than warden compares")?;
        let path = at.join(&entry.name);
        if !in_scope(&path, scope) {
            continue;
        }
        let before = old.iter().find(|e| e.name == entry.name);
        if before.is_some_and(|b| b.oid == entry.oid && b.mode == entry.mode) {
            continue;
        }
        if entry.mode == MODE_TREE {
            let from = before.filter(|b| b.mode == MODE_TREE).map(|b| b.oid);
            walk(repo, from, Some(entry.oid), &path, scope, out, budget)?;
        } else if scope.is_none_or(|prefixes| prefixes.iter().any(|p| path.starts_with(p))) {
            out.push((path, entry));
        }
    }
    Ok(())
}
