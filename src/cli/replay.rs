//! `warden policy replay NEW.toml [--since 30d]`: every command the agent's `bash` tool was
//! given (the audit log) checked again, with the current policy and with NEW: how many NEW
//! would allow, ask about or refuse, and each command whose decision changes, with what
//! happened to it then. A team gates a policy change on its real history: exit 1 when NEW
//! widens what may run for any of those commands (deny → ask/allow, ask → allow).

use super::policy::print_changes;
use crate::audit::{self, CommandRow};
use crate::config::Config;
use crate::policy::{compare, Decision, Policy};
use anyhow::Context;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct ReplayArgs {
    /// The policy file to try (`@default`: the embedded one).
    pub new: String,
    /// The policy the commands are compared with (default: the config's, else the default).
    pub current: Option<PathBuf>,
    /// `--since` as given (`30d`, an RFC 3339 time).
    pub since: Option<String>,
    /// Where the commands are checked (default: the agent's workspace).
    pub workspace: Option<PathBuf>,
    pub allow_widening: bool,
}

/// A policy file, or `@default`.
pub fn load_named(name: &str) -> anyhow::Result<Arc<Policy>> {
    if name == "@default" {
        return Ok(Arc::new(Policy::embedded_default()));
    }
    let text = std::fs::read_to_string(name)
        .map_err(|e| anyhow::anyhow!("cannot read policy file {name}: {e}"))?;
    Ok(Arc::new(Policy::from_user_toml(&text, name)?))
}

/// The workspace commands of the audit log ran in: `--workspace`, else the config's.
pub fn workspace(config: &Config, given: Option<PathBuf>) -> PathBuf {
    let dir = given.unwrap_or_else(|| config.workspace.clone());
    dir.canonicalize().unwrap_or(dir)
}

/// The distinct commands of `rows`, in first-seen order, each with its calls.
pub fn distinct(rows: &[CommandRow]) -> Vec<(String, Vec<&CommandRow>)> {
    let mut order: Vec<String> = Vec::new();
    let mut calls: BTreeMap<&str, Vec<&CommandRow>> = BTreeMap::new();
    for row in rows {
        let entry = calls.entry(row.command.as_str()).or_default();
        if entry.is_empty() {
            order.push(row.command.clone());
        }
        entry.push(row);
    }
    order
        .into_iter()
        .map(|command| {
            let rows = calls.remove(command.as_str()).unwrap_or_default();
            (command, rows)
        })
        .collect()
}

/// `approved ×3, rejected ×1`: what happened to a command's calls.
pub fn outcomes(rows: &[&CommandRow]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for row in rows {
        *counts.entry(row.decision.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(decision, n)| format!("{decision} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every command of `commands` checked with `current` and `new` as the agent checks them (the
/// policy's roots and `read`): the ones whose decision changes, and how many `new` allows,
/// asks about and refuses.
pub fn replay(
    current: &Arc<Policy>,
    new: &Arc<Policy>,
    commands: &[(String, Vec<&CommandRow>)],
    workspace: &Path,
    read: &[PathBuf],
) -> anyhow::Result<(Vec<compare::Change>, HashMap<Decision, usize>)> {
    // `~` is the workspace, as in the jail where the commands ran.
    let mut current = current.checker(workspace, read, workspace)?;
    let mut new = new.checker(workspace, read, workspace)?;
    let mut totals: HashMap<Decision, usize> = HashMap::new();
    let mut changes = Vec::new();
    for (command, _) in commands {
        let (before, after) = (current.check(command), new.check(command));
        *totals.entry(after.decision).or_default() += 1;
        if before.decision != after.decision {
            let mut programs: Vec<String> = before
                .script
                .commands()
                .chain(after.script.commands())
                .filter_map(|c| c.argv.first().cloned())
                .collect();
            programs.sort();
            programs.dedup();
            changes.push(compare::Change {
                command: command.clone(),
                programs,
                old: (before.decision, before.reason),
                new: (after.decision, after.reason),
            });
        }
    }
    Ok((changes, totals))
}

pub fn run(config: &Config, args: ReplayArgs) -> anyhow::Result<i32> {
    let since = args
        .since
        .as_deref()
        .map(|t| super::audit::since(t, chrono::Utc::now()))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let new = load_named(&args.new)?;
    let current = Arc::new(Policy::load(
        args.current.as_deref().or(config.policy.as_deref()),
    )?);
    let workspace = workspace(config, args.workspace);
    let db = crate::schema::open_in(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let rows = audit::bash_commands(&db, since.as_deref())?;
    let commands = distinct(&rows);
    let (changes, totals) = replay(&current, &new, &commands, &workspace, &config.sandbox.read)?;
    let by_command: BTreeMap<&str, &Vec<&CommandRow>> = commands
        .iter()
        .map(|(c, rows)| (c.as_str(), rows))
        .collect();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    print_changes(&mut out, &changes, |change| {
        by_command
            .get(change.command.as_str())
            .map(|rows| format!("then: {}", outcomes(rows)))
            .unwrap_or_default()
    })?;
    let count = |d: Decision| totals.get(&d).copied().unwrap_or_default();
    let widening = changes.iter().filter(|c| c.widens()).count();
    let window = since
        .as_deref()
        .map(|s| format!(" since {s}"))
        .unwrap_or_default();
    writeln!(
        out,
        "policy replay: {} commands ({} calls{window}) in {}; with {} now {} allowed, {} asked, \
         {} refused; {} change decision against the current policy, {widening} widen",
        commands.len(),
        rows.len(),
        workspace.display(),
        args.new,
        count(Decision::Allow),
        count(Decision::Ask),
        count(Decision::Deny),
        changes.len(),
    )?;
    Ok(if widening > 0 && !args.allow_widening {
        1
    } else {
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(command: &str, decision: &str) -> CommandRow {
        CommandRow {
            at: "2026-11-26T10:00:00.000Z".into(),
            session: "telegram:1".into(),
            command: command.into(),
            decision: decision.into(),
            reason: String::new(),
        }
    }

    #[test]
    fn commands_are_counted_once_with_what_happened_to_each_call() {
        let rows = [
            row("rm -r build", "approved"),
            row("ls", "allow"),
            row("rm -r build", "rejected"),
            row("rm -r build", "approved"),
        ];
        let commands = distinct(&rows);
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[0].0, "rm -r build");
        assert_eq!(outcomes(&commands[0].1), "approved ×2, rejected ×1");
        assert_eq!(outcomes(&commands[1].1), "allow ×1");
    }
}
