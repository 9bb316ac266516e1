//! `warden approvals suggest [--since 30d]`: what people approved again and again (the audit
//! log's `approved` bash calls, grouped by the shape the policy asks about), each with its
//! counts and, where a policy file can stop the asking, the smallest change that does: a copy
//! of the current `[programs.X]` with that one ask removed (a user file's entry replaces the
//! default's whole). Each change is shown as a `policy diff` against the current policy over
//! every command of the audit log, so what it widens beyond the approved command is in plain
//! sight. Nothing is applied. Code the policy cannot read (`python3 tool.py`, `make`) is always
//! asked: no snippet, "Always in this chat" is the tool for that.

use super::policy::print_changes;
use super::replay::{distinct, load_named, replay, workspace};
use crate::audit::{self, CommandRow};
use crate::config::Config;
use crate::policy::{Decision, Policy};
use anyhow::Context;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use toml::{Table, Value};

pub struct SuggestArgs {
    /// `30d`, `12h`, or an RFC 3339 time.
    pub since: String,
    /// Approved at least this many times.
    pub min: usize,
    pub workspace: Option<PathBuf>,
}

/// One asking command approved `calls` times.
#[derive(Debug)]
pub struct Approved {
    pub program: String,
    /// How it is shown (`rm -r build`, `cargo test (in sub/)`).
    pub shown: String,
    pub reasons: Vec<String>,
    pub calls: usize,
    /// Of `calls`, approved by a chat's stored rule rather than a person.
    pub by_rule: usize,
    /// One line it was approved in, and the command's argv there.
    pub example: String,
    pub argv: Vec<String>,
    /// It runs code the policy cannot read (a script, a build): always asked.
    pub runs_code: bool,
}

/// The approved calls of `rows` grouped by what the policy (`checker`) asks about now: one
/// group per shape, most approved first. A line that no longer asks is left out.
pub fn approved(
    checker: &mut crate::policy::Checker,
    rows: &[CommandRow],
) -> BTreeMap<String, Approved> {
    let workspace = checker.paths().workspace().to_path_buf();
    let mut groups: BTreeMap<String, Approved> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.decision == "approved") {
        let verdict = checker.check(&row.command);
        if verdict.decision != Decision::Ask {
            continue;
        }
        for shape in crate::policy::shape::CommandShape::of_script(&verdict.script) {
            let command = verdict.script.commands().find(|c| {
                c.ask.as_ref().is_some_and(|a| a.shape == shape.words) && c.cwd == shape.cwd
            });
            let argv = command.map_or_else(|| shape.words.clone(), |c| c.argv.clone());
            let runs_code = command.is_some_and(|c| c.runs_code);
            let group = groups.entry(shape.key()).or_insert_with(|| Approved {
                program: shape.words.first().cloned().unwrap_or_default(),
                shown: shape.describe(&workspace),
                reasons: shape.reasons.clone(),
                calls: 0,
                by_rule: 0,
                example: row.command.clone(),
                argv,
                runs_code,
            });
            group.calls += 1;
            group.by_rule += usize::from(row.reason.contains("standing rule"));
        }
    }
    groups
}

/// The rule of `program` as TOML: the user file's entry if it has one, else the default's.
fn rule_source(user: Option<&Table>, program: &str) -> Option<Table> {
    let from = |table: &Table| {
        table
            .get("programs")?
            .as_table()?
            .get(program)?
            .as_table()
            .cloned()
    };
    user.and_then(from).or_else(|| {
        let default: Table = crate::policy::DEFAULT_POLICY.parse().ok()?;
        from(&default)
    })
}

/// `rule` with the asks `argv` meets removed: its subcommand's or its own `decision = "ask"`,
/// and `{ ask = … }` on the flags it uses. What was changed, for people; empty: nothing.
fn without_asks(rule: &mut Table, argv: &[String]) -> Vec<String> {
    let mut changed = Vec::new();
    let words: Vec<&str> = argv.iter().skip(1).map(String::as_str).collect();
    let sub = words.iter().find(|w| !w.starts_with('-')).copied();
    let mut flags: Vec<String> = Vec::new();
    for word in words.iter().filter(|w| w.starts_with('-')) {
        let name = word.split('=').next().unwrap_or(word);
        flags.push(name.to_string());
        // `-rf`: the short flags one by one.
        if !name.starts_with("--") && name.len() > 2 {
            flags.extend(name[1..].chars().map(|c| format!("-{c}")));
        }
    }
    let clear = |table: &mut Table, what: String, changed: &mut Vec<String>| {
        if table.get("decision").and_then(Value::as_str) == Some("ask") {
            table.insert("decision".into(), Value::String("allow".into()));
            table.remove("reason");
            changed.push(what);
        }
        if let Some(listed) = table.get_mut("flags").and_then(Value::as_table_mut) {
            for flag in &flags {
                let Some(Value::Table(spec)) = listed.get_mut(flag) else {
                    continue;
                };
                if spec.remove("ask").is_none() {
                    continue;
                }
                let takes = spec.get("takes").and_then(Value::as_str).map(String::from);
                if spec.keys().all(|k| k == "takes") {
                    listed.insert(
                        flag.clone(),
                        Value::String(takes.unwrap_or_else(|| "flag".into())),
                    );
                }
                changed.push(format!("{flag} no longer asks"));
            }
        }
    };
    if let Some(sub) = sub {
        if let Some(Value::Table(sub_rule)) = rule
            .get_mut("subcommands")
            .and_then(Value::as_table_mut)
            .and_then(|subs| subs.get_mut(sub))
        {
            clear(
                sub_rule,
                format!("the subcommand {sub} no longer asks"),
                &mut changed,
            );
        }
    }
    clear(rule, "the program no longer asks".into(), &mut changed);
    changed
}

/// A proposal for one group: the snippet, and the whole proposed policy file's text.
struct Proposal {
    snippet: String,
    changed: Vec<String>,
    policy: Arc<Policy>,
}

/// The smallest policy change after which `approved` is no longer asked, verified by checking
/// its example again; `Err`: why none can be offered.
fn propose(
    user: Option<&Table>,
    approved: &Approved,
    checker_for: &dyn Fn(&Arc<Policy>) -> anyhow::Result<crate::policy::Checker>,
) -> Result<Proposal, String> {
    if approved.runs_code {
        return Err(format!(
            "{} runs code the policy cannot read, which is always asked: no policy file allows \
             it; \"Always in this chat\" (for 1 hour, today or until revoked) answers it in a \
             chat",
            approved.program
        ));
    }
    let mut rule = rule_source(user, &approved.program)
        .ok_or_else(|| format!("no [programs.{}] rule to change", approved.program))?;
    let changed = without_asks(&mut rule, &approved.argv);
    if changed.is_empty() {
        return Err(
            "the ask does not come from a rule a policy file can change (an analyzer asks)".into(),
        );
    }
    let mut programs = Table::new();
    programs.insert(approved.program.clone(), Value::Table(rule));
    let mut snippet = Table::new();
    snippet.insert("programs".into(), Value::Table(programs.clone()));
    let snippet = toml::to_string(&snippet).map_err(|e| e.to_string())?;
    let mut whole = user.cloned().unwrap_or_default();
    match whole.get_mut("programs").and_then(Value::as_table_mut) {
        Some(existing) => existing.extend(programs),
        None => {
            whole.insert("programs".into(), Value::Table(programs));
        }
    }
    let text = toml::to_string(&whole).map_err(|e| e.to_string())?;
    let policy =
        Arc::new(Policy::from_user_toml(&text, "the suggested policy").map_err(|e| e.to_string())?);
    let mut checker = checker_for(&policy).map_err(|e| e.to_string())?;
    let verdict = checker.check(&approved.example);
    let still_asked = verdict
        .script
        .commands()
        .any(|c| c.argv == approved.argv && c.ask.is_some());
    if verdict.decision == Decision::Deny || still_asked {
        return Err(format!(
            "removing the rule's ask is not enough ({}: {})",
            verdict.decision, verdict.reason
        ));
    }
    Ok(Proposal {
        snippet,
        changed,
        policy,
    })
}

pub fn run(config: &Config, args: SuggestArgs) -> anyhow::Result<i32> {
    let since = super::audit::since(&args.since, chrono::Utc::now()).map_err(anyhow::Error::msg)?;
    let user: Option<Table> = match &config.policy {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the policy file {}", path.display()))?
                .parse()
                .with_context(|| format!("parsing the policy file {}", path.display()))?,
        ),
        None => None,
    };
    let current = match &config.policy {
        Some(path) => load_named(&path.to_string_lossy())?,
        None => Arc::new(Policy::embedded_default()),
    };
    let workspace = workspace(config, args.workspace);
    let db = crate::schema::open_in(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let rows = audit::bash_commands(&db, Some(&since))?;
    let read = config.sandbox.read.clone();
    let checker_for = |policy: &Arc<Policy>| Ok(policy.checker(&workspace, &read, &workspace)?);
    let mut checker = checker_for(&current)?;
    let mut groups: Vec<Approved> = approved(&mut checker, &rows)
        .into_values()
        .filter(|g| g.calls >= args.min.max(1))
        .collect();
    groups.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.shown.cmp(&b.shown)));
    let commands = distinct(&rows);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if groups.is_empty() {
        writeln!(
            out,
            "Nothing was approved {} times or more since {since}: no suggestion.",
            args.min.max(1)
        )?;
        return Ok(0);
    }
    for group in &groups {
        writeln!(
            out,
            "{}× approved ({} by a person, {} by a chat's standing rule): {}",
            group.calls,
            group.calls - group.by_rule,
            group.by_rule,
            group.shown
        )?;
        writeln!(out, "  asked because: {}", group.reasons.join("; "))?;
        match propose(user.as_ref(), group, &checker_for) {
            Err(why) => writeln!(out, "  no policy change suggested: {why}")?,
            Ok(proposal) => {
                writeln!(
                    out,
                    "  suggested policy (replaces [programs.{}] as a whole: a copy of the current \
                     rule where {}):",
                    group.program,
                    proposal.changed.join(", ")
                )?;
                for line in proposal.snippet.lines() {
                    writeln!(out, "    {line}")?;
                }
                let (changes, _) =
                    replay(&current, &proposal.policy, &commands, &workspace, &read)?;
                let widening = changes.iter().filter(|c| c.widens()).count();
                writeln!(
                    out,
                    "  policy diff against the current policy, over the audit log's {} commands:",
                    commands.len()
                )?;
                let mut diff = Vec::new();
                print_changes(&mut diff, &changes, |_| String::new())?;
                for line in String::from_utf8_lossy(&diff).lines() {
                    writeln!(out, "    {line}")?;
                }
                writeln!(
                    out,
                    "    {} of {} commands change decision, {widening} widen",
                    changes.len(),
                    commands.len()
                )?;
            }
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "approvals suggest: {} shapes approved {} times or more since {since}; nothing is \
         applied (add a snippet to your policy file, then `warden policy replay FILE`)",
        groups.len(),
        args.min.max(1)
    )?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn only_the_asks_the_command_meets_are_removed() {
        let mut rm = rule_source(None, "rm").unwrap();
        let changed = without_asks(&mut rm, &argv(&["rm", "-rf", "build"]));
        assert_eq!(changed, ["-r no longer asks"]);
        let flags = rm["flags"].as_table().unwrap();
        assert_eq!(flags["-r"].as_str(), Some("flag"));
        assert!(
            flags["-R"].as_table().unwrap().contains_key("ask"),
            "-R untouched"
        );
        assert!(
            flags["--recursive"].as_table().unwrap().contains_key("ask"),
            "--recursive untouched"
        );
        let mut ls = rule_source(None, "ls").unwrap();
        assert!(without_asks(&mut ls, &argv(&["ls", "-l"])).is_empty());
    }
}
