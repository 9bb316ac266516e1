//! `git`: read-only subcommands only, and never a program configured by the repository.
//!
//! git runs programs named in configuration: pagers, `core.fsmonitor`, `diff.external`,
//! textconv and filter drivers, hooks, `gpg.program`, `core.sshCommand`. The analyzer
//! (1) allows only the global options and subcommands the rule lists, (2) reads every config
//! file git would read for this repository and refuses when one of them configures a program,
//! (3) refuses when an earlier command in the same string writes files (the config it reads
//! now may not be the config git reads then), and (4) rewrites argv to switch the known hooks
//! off explicitly (`--no-pager`, `-c core.fsmonitor=false`, `--no-ext-diff --no-textconv`, …).

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
    "log.showSignature=false",
    "safe.bareRepository=explicit",
    "core.sshCommand=false",
];

/// Subcommands that would run diff drivers without these flags.
const DIFFING: &[&str] = &["log", "show", "diff", "blame"];

pub fn analyze(
    rule: &ProgramRule,
    program: &str,
    args: &[String],
    ctx: &AnalyzerContext,
) -> Result<Analysis, Denial> {
    // Global options: everything before the subcommand, checked with the git rule's flags.
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        let takes_value = matches!(
            rule.flag_takes(&args[i]),
            Some(FlagTakes::Value | FlagTakes::Read | FlagTakes::Write)
        );
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
    if sub == "branch" {
        deny_branch_changes(rest)?;
    }

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

    // The subcommand's paths are relative to the `-C` directory.
    analysis.paths.extend(
        sub_analysis
            .paths
            .into_iter()
            .map(|(p, access)| (base.join(&p).to_string_lossy().into_owned(), access)),
    );
    analysis.ask.extend(sub_analysis.ask);
    let mut argv = vec![program.to_string(), "--no-pager".to_string()];
    for setting in SAFETY_CONFIG {
        argv.push("-c".into());
        argv.push((*setting).into());
    }
    argv.extend(global.iter().cloned());
    argv.push(sub.clone());
    if DIFFING.contains(&sub.as_str()) {
        argv.push("--no-textconv".into());
        if sub != "blame" {
            argv.push("--no-ext-diff".into());
        }
    }
    argv.extend(rest.iter().cloned());
    analysis.argv = Some(argv);
    Ok(analysis)
}

/// `git branch NAME` creates a branch; only listing is read-only.
fn deny_branch_changes(rest: &[String]) -> Result<(), Denial> {
    let listing = rest
        .iter()
        .any(|a| a == "--list" || a == "-l" || a == "--show-current");
    let value_flags = [
        "--contains",
        "--no-contains",
        "--merged",
        "--no-merged",
        "--points-at",
        "--sort",
        "--format",
        "--color",
        "--column",
    ];
    let mut positional = false;
    let mut k = 0;
    while k < rest.len() {
        let a = rest[k].as_str();
        if value_flags.contains(&a) {
            k += 2;
            continue;
        }
        if !a.starts_with('-') {
            positional = true;
        }
        k += 1;
    }
    if positional && !listing {
        return Err(Denial::new(
            "git branch NAME creates a branch; only listing branches is allowed (use --list PATTERN)",
        ));
    }
    Ok(())
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
            .check(ctx.cwd, &git_dir.to_string_lossy(), Access::Read)
            .map_err(|d| {
                Denial::new(format!(
                    "git would use the repository at {}, outside the roots: {}",
                    git_dir.display(),
                    d.reason
                ))
            })?;
        files.push(git_dir.join("config"));
        files.push(git_dir.join("config.worktree"));
        if let Ok(common) = std::fs::read_to_string(git_dir.join("commondir")) {
            let common_dir = git_dir.join(common.trim());
            ctx.paths
                .check(ctx.cwd, &common_dir.to_string_lossy(), Access::Read)
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
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(Denial::new(format!(
                    "cannot read git config {} to check it: {e}",
                    file.display()
                )))
            }
        };
        if let Some(key) = dangerous_key(&text) {
            return Err(Denial::new(format!(
                "git config {} sets `{key}`, which makes git run a program; refusing to run git \
                 in this repository",
                file.display()
            )));
        }
    }
    Ok(())
}

/// Walk up from `start` as git does: the first `.git` directory or `gitdir:` file wins.
fn discover_git_dir(start: &Path) -> Result<Option<PathBuf>, Denial> {
    for dir in start.ancestors() {
        let dot_git = dir.join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) if meta.is_dir() => return Ok(Some(dot_git)),
            Ok(meta) if meta.is_file() => {
                let text = std::fs::read_to_string(&dot_git)
                    .map_err(|e| Denial::new(format!("cannot read {}: {e}", dot_git.display())))?;
                let target = text.strip_prefix("gitdir:").map(str::trim).ok_or_else(|| {
                    Denial::new(format!("{} is not a gitdir file", dot_git.display()))
                })?;
                return Ok(Some(dir.join(target)));
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

/// The first config key (section.key) that names a program, or an include git would follow.
/// Lines that cannot be understood count as dangerous.
fn dangerous_key(text: &str) -> Option<String> {
    let mut section = String::new();
    let mut subsection = false;
    let mut continued = false;
    for raw in text.lines() {
        let line = raw.trim();
        if continued {
            continued = line.ends_with('\\');
            continue;
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let Some(end) = header.find(']') else {
                return Some(format!("unparsable line {line:?}"));
            };
            let header = &header[..end];
            let (name, sub) = match header.split_once([' ', '"', '.']) {
                Some((n, s)) => (n, !s.trim().is_empty()),
                None => (header, false),
            };
            section = name.trim().to_ascii_lowercase();
            subsection = sub;
            let rest = header.len() + 2;
            if rest < line.len() {
                // `[core] pager = less` on one line.
                let tail = line[rest..].trim();
                if let Some(k) = key_danger(&section, subsection, tail) {
                    return Some(k);
                }
            }
            if matches!(
                section.as_str(),
                "include" | "includeif" | "filter" | "pager" | "gpg"
            ) {
                return Some(format!("[{section}]"));
            }
            continue;
        }
        continued = line.ends_with('\\');
        if let Some(k) = key_danger(&section, subsection, line) {
            return Some(k);
        }
    }
    None
}

fn key_danger(section: &str, subsection: bool, line: &str) -> Option<String> {
    let key = line
        .split(|c: char| c == '=' || c.is_whitespace())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Some(format!("unparsable line {line:?}"));
    }
    let dangerous = match section {
        "core" => matches!(
            key.as_str(),
            "fsmonitor"
                | "pager"
                | "editor"
                | "askpass"
                | "sshcommand"
                | "hookspath"
                | "gitproxy"
                | "alternaterefscommand"
                | "worktree"
                | "attributesfile"
        ),
        "diff" => {
            key == "external" || (subsection && matches!(key.as_str(), "textconv" | "command"))
        }
        "merge" | "mergetool" | "difftool" => subsection,
        "credential" => key == "helper",
        "sequence" => key == "editor",
        "interactive" => key == "difffilter",
        "uploadpack" | "receive" | "remote" => {
            key.ends_with("hook") || key == "uploadpack" || key == "receivepack"
        }
        "include" | "includeif" | "filter" | "pager" | "gpg" => true,
        "log" => key == "showsignature",
        _ => false,
    };
    dangerous.then(|| format!("{section}.{key}"))
}

#[cfg(test)]
mod tests {
    use super::dangerous_key;

    #[test]
    fn plain_repository_config_is_fine() {
        let cfg = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                   [remote \"origin\"]\n\turl = https://example.com/x.git\n\
                   [branch \"main\"]\n\tremote = origin\n";
        assert_eq!(dangerous_key(cfg), None);
    }

    #[test]
    fn program_settings_are_found() {
        for (cfg, key) in [
            ("[core]\n\tfsmonitor = ./evil.sh\n", "core.fsmonitor"),
            ("[CORE]\n\tPager = less\n", "core.pager"),
            ("[diff \"x\"]\n\ttextconv = cat\n", "diff.textconv"),
            ("[diff]\n\texternal = ./x\n", "diff.external"),
            ("[filter \"lfs\"]\n\tclean = x\n", "[filter]"),
            ("[include]\n\tpath = other\n", "[include]"),
            ("[core] sshCommand = x\n", "core.sshcommand"),
            ("[core]\n\tpager\n", "core.pager"),
        ] {
            let found = dangerous_key(cfg).unwrap_or_default();
            assert!(found.contains(key), "{cfg:?}: {found}");
        }
    }
}
