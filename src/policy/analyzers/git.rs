//! `git`: reading and local writes of the repository in the workspace, never the network, and
//! never a program configured by the repository or named on the command line.
//!
//! git runs programs named in configuration: pagers, `core.fsmonitor`, `diff.external`,
//! textconv and filter drivers, hooks, `gpg.program`, `core.sshCommand`. The analyzer
//! (1) allows only the global options and subcommands the rule lists, (2) reads every config
//! file git would read for this repository exactly as git does (`git_config`) and refuses when
//! one of them holds an entry not known to be safe,
//! (3) refuses when an earlier command in the same string writes files (the config it reads
//! now may not be the config git reads then), and (4) rewrites argv to switch the known hooks
//! off explicitly (`--no-pager`, `-c core.fsmonitor=false`, `--no-ext-diff --no-textconv`, …).

use super::git_config;
use super::git_files::{common_dir, gitfile_target, read_if_present};
use super::git_trees::{self, Location};
use crate::policy::analyzers::AnalyzerContext;
use crate::policy::paths::Access;
use crate::policy::rules::{Analysis, FlagTakes, ProgramRule};
use crate::policy::Denial;
use std::path::{Path, PathBuf};

/// Safety options put in front of every git invocation.
const SAFETY_CONFIG: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    // Local writes: no editor (a commit without -m fails instead), no signing program, no
    // background maintenance, no transport (a partial clone would fetch missing objects).
    "core.editor=false",
    "sequence.editor=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "merge.verifySignatures=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "log.showSignature=false",
    "safe.bareRepository=explicit",
    "core.sshCommand=false",
    // Submodules are other repositories whose config was not inspected: git status and diff
    // would run git inside them.
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
];

/// Subcommands that change files of the work tree.
const WORK_TREE_WRITERS: &[&str] = &[
    "checkout", "switch", "restore", "stash", "merge", "reset", "mv", "rm", "clean",
];

/// Subcommands that would run diff drivers without these flags.
const DIFFING: &[&str] = &[
    "log",
    "show",
    "diff",
    "blame",
    "annotate",
    "diff-tree",
    "diff-index",
    "diff-files",
    "range-diff",
    "format-patch",
];

/// Of those, the ones that take blame's options (no `--no-ext-diff`).
const BLAMING: &[&str] = &["blame", "annotate"];

pub fn analyze(
    rule: &ProgramRule,
    program: &str,
    args: &[String],
    ctx: &AnalyzerContext,
) -> Result<Analysis, Denial> {
    // Global options: everything before the subcommand, checked with the git rule's flags.
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        let takes_value = rule
            .flag_takes(&args[i])
            .is_some_and(FlagTakes::takes_argument);
        i += if takes_value { 2 } else { 1 };
    }
    let global = &args[..i.min(args.len())];
    let mut analysis = rule.analyze(program, global)?;
    let Some(sub) = args.get(i) else {
        return Err(Denial::new(format!("{program}: no subcommand given")));
    };
    let Some(sub_rule) = rule.subcommands.get(sub.as_str()) else {
        let allowed: Vec<&str> = rule.subcommands.keys().map(String::as_str).collect();
        return Err(Denial::new(format!(
            "{program} {sub} is not allowed (allowed subcommands: {})",
            allowed.join(", ")
        )));
    };
    match sub_rule.decision {
        crate::policy::Decision::Deny => {
            return Err(Denial::new(format!(
                "{program} {sub}: {}",
                sub_rule.reason.as_deref().unwrap_or("denied by policy")
            )))
        }
        crate::policy::Decision::Ask => analysis.ask.push(format!(
            "{program} {sub}: {}",
            sub_rule.reason.as_deref().unwrap_or("needs approval")
        )),
        crate::policy::Decision::Allow => {}
    }
    let rest = &args[i + 1..];
    let sub_analysis = sub_rule.analyze(&format!("{program} {sub}"), rest)?;
    analysis
        .ask
        .extend(super::git_forms::check(sub, sub_rule, rest)?);

    // `-C dir` options compose; paths of the subcommand are relative to the result.
    let mut base = PathBuf::new();
    let mut j = 0;
    while j < global.len() {
        if global[j] == "-C" {
            if let Some(dir) = global.get(j + 1) {
                base.push(dir);
            }
            j += 2;
        } else {
            j += 1;
        }
    }
    let base_text = if base.as_os_str().is_empty() {
        ".".to_string()
    } else {
        base.to_string_lossy().into_owned()
    };
    let start = ctx.paths.check(ctx.cwd, &base_text, Access::Read)?;
    if ctx.earlier_writes {
        return Err(Denial::new(format!(
            "{program} must run as its own command, not after a command that writes files in \
             the same string: the repository config checked now could change before git reads it"
        )));
    }
    check_repository_config(&start, ctx)?;
    // Recursing into submodules runs git in repositories whose config was not inspected; in a
    // repository without any, the option changes nothing.
    let recurses = args.iter().any(|a| a.starts_with("--recurse-submodules"))
        && !args.iter().any(|a| a == "--recurse-submodules=no");
    if (recurses || sub == "submodule") && has_submodules(&start)? {
        let what = if sub == "submodule" {
            format!("{program} submodule")
        } else {
            format!("{program} {sub} --recurse-submodules")
        };
        return Err(Denial::new(format!(
            "{what}: the repository has submodules, other repositories whose config was not \
             checked"
        )));
    }
    // What a tree-switching subcommand checks out is read and checked; what discards work asks.
    if git_trees::TREE_COMMANDS.contains(&sub.as_str()) {
        let location = locate(&start)?;
        let outcome = git_trees::check(sub, sub_rule, rest, &start, location.as_ref(), ctx.paths)?;
        analysis.ask.extend(outcome.ask);
        // It may restore symbolic links anywhere in the work tree (from the index or HEAD too,
        // which the policy does not read): later commands of the line may not resolve there.
        if !matches!(sub.as_str(), "rm" | "clean") && !stash_reads(sub, rest) {
            let tree = location.as_ref().map_or(&start, |l| &l.work_tree);
            analysis
                .changed_trees
                .push(tree.to_string_lossy().into_owned());
        }
    }
    // A subcommand that changes the work tree writes where it runs: a later git in the same
    // string would read config this one may have changed (a checkout can create any tracked
    // file, `.config/git/config` included). Index and ref changes (add, commit, tag) cannot.
    if WORK_TREE_WRITERS.contains(&sub.as_str()) && !stash_reads(sub, rest) {
        analysis.paths.push((base_text.clone(), Access::Write));
    }
    // pull merges a tree nobody has read yet: it may write anything in the work tree, so the
    // whole work tree is declared written (an instruction file there asks first), and later
    // commands of the line may not resolve paths beneath it. What it leaves in git's own
    // files is judged by the write verifier after it ran.
    if sub == "pull" {
        let tree = locate(&start)?.map_or_else(|| start.clone(), |l| l.work_tree);
        let tree = tree.to_string_lossy().into_owned();
        analysis.paths.push((tree.clone(), Access::Write));
        analysis.changed_trees.push(tree);
    }
    // clone makes its directory where it runs unless told where.
    if sub == "clone" {
        analysis.paths.push((base_text.clone(), Access::Write));
    }
    // format-patch writes its NNNN-subject.patch files where it runs unless told otherwise.
    if sub == "format-patch" && !writes_patches_elsewhere(&sub_analysis) {
        analysis.paths.push((base_text.clone(), Access::Write));
    }
    // `git mv DIR .config` brings DIR's tree along: every path it creates is checked.
    if sub == "mv" {
        let links = crate::policy::copies::check(
            &format!("{program} mv"),
            rest,
            &sub_analysis,
            &start,
            ctx.paths,
            None,
        )?;
        // Absolute: the checker takes them as they are.
        analysis
            .links
            .extend(links.iter().map(|l| l.to_string_lossy().into_owned()));
    }

    // The subcommand's paths are relative to the `-C` directory.
    analysis.paths.extend(
        sub_analysis
            .paths
            .into_iter()
            .map(|(p, access)| (base.join(&p).to_string_lossy().into_owned(), access)),
    );
    analysis.ask.extend(sub_analysis.ask);
    analysis.network |= sub_analysis.network;
    analysis.shape = Some(i + 1);
    // Replacement refs would make git use other objects than the ones the policy read.
    let mut argv = vec![
        program.to_string(),
        "--no-pager".to_string(),
        "--no-replace-objects".to_string(),
    ];
    for setting in SAFETY_CONFIG {
        argv.push("-c".into());
        argv.push((*setting).into());
    }
    argv.extend(global.iter().cloned());
    argv.push(sub.clone());
    if DIFFING.contains(&sub.as_str()) {
        argv.push("--no-textconv".into());
        if !BLAMING.contains(&sub.as_str()) {
            argv.push("--no-ext-diff".into());
        }
    }
    argv.extend(rest.iter().cloned());
    analysis.argv = Some(argv);
    Ok(analysis)
}

/// Find the repository git would use from `start` and refuse when any config file it reads
/// names a program to run.
fn check_repository_config(start: &Path, ctx: &AnalyzerContext) -> Result<(), Denial> {
    let mut files: Vec<PathBuf> = vec![
        ctx.paths.workspace().join(".gitconfig"),
        ctx.paths.workspace().join(".config/git/config"),
    ];
    if let Some(git_dir) = discover_git_dir(start)? {
        ctx.paths
            .check(ctx.cwd, checkable(&git_dir)?, Access::Read)
            .map_err(|d| {
                Denial::new(format!(
                    "git would use the repository at {}, outside the roots: {}",
                    git_dir.display(),
                    d.reason
                ))
            })?;
        files.push(git_dir.join("config"));
        files.push(git_dir.join("config.worktree"));
        if let Some(common_dir) = common_dir(&git_dir) {
            ctx.paths
                .check(ctx.cwd, checkable(&common_dir)?, Access::Read)
                .map_err(|d| {
                    Denial::new(format!(
                        "git's common dir is outside the roots: {}",
                        d.reason
                    ))
                })?;
            files.push(common_dir.join("config"));
        }
    }
    for file in files {
        let text = match read_if_present(&file) {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(e) => {
                return Err(Denial::new(format!(
                    "cannot read git config {} to check it: {e}",
                    file.display()
                )))
            }
        };
        let entries = git_config::parse(&text).map_err(|why| {
            Denial::new(format!(
                "git config {}: {why}; refusing to run git in this repository",
                file.display()
            ))
        })?;
        if let Some(why) = git_config::first_unsafe(&entries) {
            return Err(Denial::new(format!(
                "git config {}: {why}; refusing to run git in this repository",
                file.display()
            )));
        }
    }
    Ok(())
}

/// A git dir named by a `.git` or `commondir` file, as the path check takes it. The files hold
/// bytes; a name that is not UTF-8 is refused rather than checked under another spelling.
fn checkable(dir: &Path) -> Result<&str, Denial> {
    dir.to_str().ok_or_else(|| {
        Denial::new(format!(
            "git would use {}, a name that is not UTF-8, which the policy cannot check",
            dir.display()
        ))
    })
}

/// Whether the repository at `start` has submodules (a `.gitmodules` file in its work tree or
/// a `modules` folder in its git dir).
fn has_submodules(start: &Path) -> Result<bool, Denial> {
    let Some(at) = locate(start)? else {
        return Ok(false);
    };
    Ok(at.git_dir.join("modules").exists()
        || at.common_dir.join("modules").exists()
        || at.work_tree.join(".gitmodules").exists())
}

/// `git format-patch --stdout` (nothing written) or `-o DIR` (the folder is checked as a write
/// with the flag), as the rule read the arguments.
fn writes_patches_elsewhere(sub: &Analysis) -> bool {
    sub.flags.iter().any(|(flag, _)| flag == "--stdout")
        || sub
            .path_flags
            .iter()
            .any(|(flag, _)| flag == "-o" || flag == "--output-directory")
}

/// `git stash list|show`: only reads.
fn stash_reads(sub: &str, rest: &[String]) -> bool {
    sub == "stash"
        && matches!(
            rest.iter()
                .find(|a| !a.starts_with('-'))
                .map(String::as_str),
            Some("list" | "show")
        )
}

/// The repository git would use from `start`: its git dir, common dir and work tree.
fn locate(start: &Path) -> Result<Option<Location>, Denial> {
    let Some((git_dir, work_tree)) = discover(start)? else {
        return Ok(None);
    };
    let common_dir = common_dir(&git_dir).unwrap_or_else(|| git_dir.clone());
    Ok(Some(Location {
        git_dir,
        common_dir,
        work_tree,
    }))
}

/// The git dir git would use from `start`.
fn discover_git_dir(start: &Path) -> Result<Option<PathBuf>, Denial> {
    Ok(discover(start)?.map(|(git_dir, _)| git_dir))
}

/// Walk up from `start` as git does: the first `.git` directory or `gitdir:` file wins. The git
/// dir and the work tree, which is where `.git` was found (for a linked worktree `.git` is a
/// file naming a git dir elsewhere, so the git dir's parent is not the work tree).
fn discover(start: &Path) -> Result<Option<(PathBuf, PathBuf)>, Denial> {
    for dir in start.ancestors() {
        let dot_git = dir.join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) if meta.is_dir() => return Ok(Some((dot_git, dir.to_path_buf()))),
            Ok(meta) if meta.is_file() => {
                let bytes = std::fs::read(&dot_git)
                    .map_err(|e| Denial::new(format!("cannot read {}: {e}", dot_git.display())))?;
                let target = gitfile_target(&bytes).ok_or_else(|| {
                    Denial::new(format!(
                        "{} is not a gitdir file git accepts (`gitdir: PATH`)",
                        dot_git.display()
                    ))
                })?;
                return Ok(Some((dir.join(target), dir.to_path_buf())));
            }
            Ok(_) => {
                return Err(Denial::new(format!(
                    "{} is neither a directory nor a file",
                    dot_git.display()
                )))
            }
            Err(_) => continue,
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::paths::PathPolicy;

    fn context_for(ws: &Path) -> (PathPolicy, PathBuf) {
        let p = PathPolicy::new(ws, &[], &[], ws).unwrap();
        let cwd = p.workspace().to_path_buf();
        (p, cwd)
    }

    /// The repository config check of a git run in `ws/sub`.
    fn check_in(ws: &Path, sub: &str) -> Result<(), Denial> {
        let (paths, _) = context_for(ws);
        let cwd = paths.workspace().join(sub);
        let ctx = AnalyzerContext {
            cwd: &cwd,
            paths: &paths,
            earlier_writes: false,
        };
        check_repository_config(&cwd, &ctx)
    }

    #[test]
    fn a_linked_worktree_s_common_config_is_inspected() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let private = ws.join("main/.git/worktrees/wt");
        std::fs::create_dir_all(&private).unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(
            ws.join("wt/.git"),
            format!("gitdir: {}\n", private.display()),
        )
        .unwrap();
        std::fs::write(private.join("commondir"), "../..\n").unwrap();
        std::fs::write(ws.join("main/.git/config"), "[core]\n\tbare = false\n").unwrap();
        assert!(check_in(ws, "wt").is_ok());
        let unsafe_config = "[core]\n\tfsmonitor = ./watch.sh\n";
        std::fs::write(ws.join("main/.git/config"), unsafe_config).unwrap();
        let err = check_in(ws, "wt").unwrap_err().reason;
        assert!(err.contains("main/.git/worktrees/wt/../../config"), "{err}");
    }

    #[test]
    fn submodules_are_found_in_the_work_tree_the_git_dir_and_the_common_dir() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join("main/.git/worktrees/wt")).unwrap();
        std::fs::create_dir_all(ws.join("main/src")).unwrap();
        assert!(!has_submodules(&ws.join("main/src")).unwrap());
        // `.gitmodules` at the work tree's top, seen from a folder below it.
        std::fs::write(ws.join("main/.gitmodules"), "").unwrap();
        assert!(has_submodules(&ws.join("main/src")).unwrap());
        std::fs::remove_file(ws.join("main/.gitmodules")).unwrap();
        // A linked worktree: no `.gitmodules` of its own, the modules in the common dir.
        let private = ws.join("main/.git/worktrees/wt");
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        let gitfile = format!("gitdir: {}\n", private.display());
        std::fs::write(ws.join("wt/.git"), gitfile).unwrap();
        std::fs::write(private.join("commondir"), "../..\n").unwrap();
        assert!(!has_submodules(&ws.join("wt")).unwrap());
        std::fs::create_dir(ws.join("main/.git/modules")).unwrap();
        assert!(has_submodules(&ws.join("wt")).unwrap());
        assert!(has_submodules(&ws.join("main")).unwrap());
    }

    #[test]
    fn a_git_dir_whose_name_is_not_utf8_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/.git"), b"gitdir: ../m\xffin/.git\n").unwrap();
        let err = check_in(ws, "wt").unwrap_err().reason;
        assert!(err.contains("not UTF-8"), "{err}");
        // A file git would refuse is refused too.
        std::fs::write(ws.join("wt/.git"), "gitdir:../main/.git\n").unwrap();
        let err = check_in(ws, "wt").unwrap_err().reason;
        assert!(err.contains("not a gitdir file git accepts"), "{err}");
    }

    #[test]
    fn every_config_file_git_reads_is_inspected() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
        let (paths, cwd) = context_for(ws);
        let ctx = AnalyzerContext {
            cwd: &cwd,
            paths: &paths,
            earlier_writes: false,
        };
        assert!(check_repository_config(&cwd, &ctx).is_ok());
        // The global config under the jail's HOME (the workspace), with git's comment rule.
        std::fs::create_dir_all(ws.join(".config/git")).unwrap();
        std::fs::write(
            ws.join(".config/git/config"),
            "[core]\n# looks continued \\\n[filter \"x\"]\n\tclean = sh\n",
        )
        .unwrap();
        let err = check_repository_config(&cwd, &ctx).unwrap_err().reason;
        assert!(
            err.contains("[filter]") && err.contains(".config/git/config"),
            "{err}"
        );
        std::fs::remove_dir_all(ws.join(".config")).unwrap();
        std::fs::write(ws.join(".gitconfig"), "[core]\n\tpager = \"less\n").unwrap();
        let err = check_repository_config(&cwd, &ctx).unwrap_err().reason;
        assert!(err.contains("bad config line"), "{err}");
    }
}
