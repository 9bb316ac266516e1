//! An independent re-check of an allowed verdict, used by the fuzz target and the property
//! tests (and cheap enough to run before execution): it re-resolves every path the IR carries
//! instead of trusting the checker's result.
//!
//! For an allowed (or asked) verdict: every program is listed and not denied (or unlisted
//! programs are set to `ask`); every cwd, `cd` target, checked path and redirection file lies
//! inside the roots (writes inside a writable root) or is a permitted device; and no argument
//! of a program whose arguments may be paths resolves to one of the given secret files; no
//! write lands where git reads config, attributes or submodules (`.git/`, `.gitattributes`,
//! `.gitmodules`, the root's `.gitconfig` and `.config/git`), nor does a directory a copying
//! program (`cp`, `mv`) copies hold one.

use super::ir::{Builtin, RedirectTarget};
use super::paths::{resolve, Access, PathPolicy};
use super::rules::ArgRole;
use super::{Decision, Policy, Verdict};
use std::path::{Path, PathBuf};

const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"];

/// Variables an allowed command may set (a superset check: none of these loads code).
const ALLOWED_ENV: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_COLLATE",
    "LC_MESSAGES",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_MONETARY",
    "LC_PAPER",
    "LC_MEASUREMENT",
    "TZ",
    "NO_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "FORCE_COLOR",
    "GREP_COLOR",
    "GREP_COLORS",
    "LS_COLORS",
    "TIME_STYLE",
    "QUOTING_STYLE",
    "BLOCK_SIZE",
    "DU_BLOCK_SIZE",
    "POSIXLY_CORRECT",
    "SOURCE_DATE_EPOCH",
    "COLUMNS",
    "LINES",
    "TERM",
];

/// Names whose contents git reads as configuration, attributes or submodules.
const GIT_NAMES: &[&str] = &[".git", ".gitattributes", ".gitmodules"];

/// A written path must not be one git reads config or attributes from.
fn git_reads(path: &Path, paths: &PathPolicy) -> Result<(), String> {
    let hit = path
        .components()
        .any(|c| GIT_NAMES.iter().any(|n| c.as_os_str() == *n));
    let global = paths.write_roots().iter().any(|root| {
        path.starts_with(root.join(".gitconfig")) || path.starts_with(root.join(".config/git"))
    });
    if hit || global {
        return Err(format!(
            "{} is written, and git reads its configuration there",
            path.display()
        ));
    }
    Ok(())
}

/// A directory tree copied by cp or mv must not carry git config or attributes along.
fn copied_tree_is_clean(root: &Path) -> Result<(), String> {
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > 100_000 {
                return Ok(());
            }
            let name = entry.file_name();
            if GIT_NAMES.iter().any(|n| name == *n) || name == ".gitconfig" {
                return Err(format!(
                    "copying {} carries {} along",
                    root.display(),
                    entry.path().display()
                ));
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    Ok(())
}

/// `Err` describes the first violated invariant. Its paths are resolved again in a snapshot
/// of its own (never the checker's).
pub fn verify(
    verdict: &Verdict,
    policy: &Policy,
    paths: &PathPolicy,
    secrets: &[PathBuf],
) -> Result<(), String> {
    super::lstat_memo::during(|| verify_snapshot(verdict, policy, paths, secrets))
}

fn verify_snapshot(
    verdict: &Verdict,
    policy: &Policy,
    paths: &PathPolicy,
    secrets: &[PathBuf],
) -> Result<(), String> {
    if verdict.decision == Decision::Deny {
        return Ok(());
    }
    if verdict.script.steps.is_empty() {
        return Err("an allowed verdict without commands".into());
    }
    for command in verdict.script.commands() {
        for env in &command.env {
            if !ALLOWED_ENV.contains(&env.0.as_str()) {
                return Err(format!(
                    "the assignment {}= reached an allowed verdict",
                    env.0
                ));
            }
        }
    }
    let readable = |p: &Path| paths.read_roots().iter().any(|r| p.starts_with(r));
    let writable = |p: &Path| paths.write_roots().iter().any(|r| p.starts_with(r));
    let device = |p: &Path| p.to_str().is_some_and(|p| DEVICES.contains(&p));
    // Re-resolve from scratch: the path must still be what the checker says it is.
    let recheck = |p: &Path, access: Access| -> Result<(), String> {
        if device(p) {
            return Ok(());
        }
        let again =
            resolve(p, access == Access::Delete).map_err(|e| format!("{}: {e}", p.display()))?;
        let ok = match access {
            Access::Read => readable(&again),
            Access::Write | Access::Delete => writable(&again),
        };
        if !ok || again != p {
            return Err(format!(
                "{} ({access:?}) resolves to {} outside the roots",
                p.display(),
                again.display()
            ));
        }
        Ok(())
    };
    // Compound commands carry a cwd and redirections of their own.
    for compound in verdict.script.compounds() {
        recheck(&compound.cwd, Access::Read)?;
        for redirect in &compound.redirects {
            if let RedirectTarget::File { path, mode } = &redirect.target {
                let access = match mode {
                    super::ir::OpenMode::Read => Access::Read,
                    _ => Access::Write,
                };
                recheck(path, access)?;
                if access == Access::Write && !device(path) {
                    git_reads(path, paths)?;
                }
            }
        }
    }
    for command in verdict.script.commands() {
        recheck(&command.cwd, Access::Read)?;
        for checked in &command.paths {
            recheck(&checked.path, checked.access)?;
            if checked.access != Access::Read {
                git_reads(&checked.path, paths)?;
            }
        }
        for redirect in &command.redirects {
            if let RedirectTarget::File { path, mode } = &redirect.target {
                let access = match mode {
                    super::ir::OpenMode::Read => Access::Read,
                    _ => Access::Write,
                };
                recheck(path, access)?;
                if access == Access::Write && !device(path) {
                    git_reads(path, paths)?;
                }
            }
        }
        let copies = command
            .argv
            .first()
            .and_then(|a| policy.rule(a.rsplit('/').next().unwrap_or(a)))
            .is_some_and(|r| r.copies);
        if copies {
            for source in command.paths.iter().filter(|c| c.access != Access::Write) {
                copied_tree_is_clean(&source.path)?;
            }
        }
        if let Some(Builtin::Cd(target)) = &command.builtin {
            recheck(target, Access::Read)?;
            continue;
        }
        // A bare `name=value` leaves a command that runs nothing: no argv, no redirection,
        // no path, no environment (the executor gives it status 0).
        if command.argv.is_empty()
            && command.redirects.is_empty()
            && command.paths.is_empty()
            && command.env.is_empty()
            && command.builtin.is_none()
        {
            continue;
        }
        let arg0 = command.argv.first().ok_or("an empty argv")?;
        let name = arg0.rsplit('/').next().unwrap_or(arg0);
        let rule = policy.rule(name);
        match rule {
            Some(rule) if rule.decision == Decision::Deny => {
                return Err(format!("denied program {name} in an allowed verdict"))
            }
            None if policy.settings().unknown_programs != Decision::Ask => {
                return Err(format!("unlisted program {name} allowed"))
            }
            _ => {}
        }
        if rule.is_some_and(|r| r.args == ArgRole::Value) {
            continue;
        }
        // git's operands are revisions and pathspecs, which git itself confines to the
        // repository (a path beyond a symlink or outside is a fatal error); only --no-index
        // compares arbitrary files.
        let git = rule.is_some_and(|r| r.analyzer == Some(super::rules::AnalyzerKind::Git));
        if git && !command.argv.iter().any(|a| a == "--no-index") {
            continue;
        }
        // unzip's operands after the archive are member names matched inside it, never opened
        // as files; the archive and the `-d` folder are checked paths (re-resolved above).
        let unzip = rule.is_some_and(|r| r.analyzer == Some(super::rules::AnalyzerKind::Unzip));
        if unzip {
            continue;
        }
        // Any positional-looking argument (not the value of a preceding flag) that reaches a
        // secret means a path escaped classification. An argument checked for removal names
        // the link itself (rm, mv), so it is resolved without following its last component.
        // After `--` every argument is an operand: no flags, no `--flag=value` splitting.
        // The `--` that ends options, not one a flag took as its value (`du -X -- …`).
        let options_end = {
            let mut i = 1;
            loop {
                match command.argv.get(i) {
                    None => break usize::MAX,
                    Some(a) if a == "--" => break i,
                    Some(a) if rule.is_some_and(|r| r.flag_consumes_next(a)) => i += 2,
                    Some(_) => i += 1,
                }
            }
        };
        let removes = command.paths.iter().any(|c| c.access == Access::Delete);
        for (i, arg) in command.argv.iter().enumerate().skip(1) {
            let operand = i > options_end;
            let prev = &command.argv[i - 1];
            // The value of a flag the rule says takes one is the rule's business (a count, a
            // pattern, or a path the checker already resolved into `command.paths`).
            let flag_value = !operand && i > 1 && rule.is_some_and(|r| r.flag_consumes_next(prev));
            if flag_value {
                continue;
            }
            let after_flag = !operand && i > 1 && prev.starts_with('-');
            // Only `--flag=value` carries a value after `=` (getopt_long): of a flag the rule
            // does not know, or knows as a path. A boolean or word-valued flag's text is not a
            // path (getopt refuses or reads it as a word); `-abc=x` is a cluster of short
            // options; a positional `a=b` is a file name.
            let path_value = arg.starts_with("--")
                && arg.split_once('=').is_some_and(|(flag, _)| {
                    !matches!(
                        rule.and_then(|r| r.flag_takes(flag)),
                        Some(
                            super::rules::FlagTakes::Flag
                                | super::rules::FlagTakes::ChecksumLists
                                | super::rules::FlagTakes::Value
                                | super::rules::FlagTakes::ValueNotFile
                                | super::rules::FlagTakes::Optional
                        )
                    )
                });
            let value = if operand || !path_value {
                None
            } else {
                arg.split_once('=').map(|(_, v)| v)
            };
            for text in std::iter::once(arg.as_str()).chain(value) {
                if text.is_empty() || (after_flag && value.is_none()) {
                    continue;
                }
                let joined = command.cwd.join(text);
                // Only a command that removes something can name a removed link.
                let removed = removes
                    && resolve(&joined, true).is_ok_and(|p| {
                        command
                            .paths
                            .iter()
                            .any(|c| c.access == Access::Delete && c.path == p)
                    });
                if removed {
                    continue;
                }
                if let Ok(resolved) = resolve(&joined, false) {
                    if secrets.iter().any(|s| s == &resolved) {
                        return Err(format!(
                            "{name}: argument {arg:?} reaches the secret {}",
                            resolved.display()
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}
