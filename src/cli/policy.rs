//! `warden policy check|test|explain|diff`: decide allow / deny / ask for command strings
//! without running them, check a policy's expectations, show how a decision was reached, and
//! compare two policies.

use crate::policy::{compare, suite, Checker, Policy, Verdict};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct CheckArgs {
    pub policy: Option<PathBuf>,
    pub workspace: PathBuf,
    pub read_roots: Vec<PathBuf>,
    /// The config's `[network]`: with rules, the network programs are checked as `exec` and
    /// the agent would (`policy/network.toml`).
    pub network: crate::egress::network::NetworkConfig,
    pub json: bool,
    /// `-` for stdin.
    pub batch: Option<PathBuf>,
    /// Threads that check a batch, each with a checker of its own.
    pub jobs: usize,
    pub command: Option<String>,
}

impl CheckArgs {
    /// The arguments of `policy check` and `policy explain`, completed from the config file.
    pub fn new(
        config: Option<&Path>,
        policy: Option<PathBuf>,
        workspace: Option<PathBuf>,
        json: bool,
        batch: Option<PathBuf>,
        jobs: usize,
        command: Vec<String>,
    ) -> anyhow::Result<CheckArgs> {
        let config = super::load_config(config)?;
        Ok(CheckArgs {
            policy: policy.or(config.policy),
            workspace: super::workspace_or_cwd(workspace)?,
            read_roots: config.sandbox.read,
            network: config.network,
            json,
            batch,
            jobs: jobs.max(1),
            command: (!command.is_empty()).then(|| command.join(" ")),
        })
    }
}

/// Build a checker from a policy file (or the embedded default) for a workspace, with the
/// network programs when `[network]` has rules.
pub fn checker(args: &CheckArgs) -> anyhow::Result<Checker> {
    checkers(args, 1)?
        .pop()
        .ok_or_else(|| anyhow::anyhow!("no checker was built"))
}

/// `count` checkers (at least one) over one loaded policy.
fn checkers(args: &CheckArgs, count: usize) -> anyhow::Result<Vec<Checker>> {
    let policy = Arc::new(Policy::load_with_network(
        args.policy.as_deref(),
        &args.network,
    )?);
    let (workspace, read_roots) = (&args.workspace, &args.read_roots);
    // As `warden exec` runs it: `$NAME` of a `[network.secrets]` binding is its placeholder.
    let jail_variables = args.network.over(policy.network()).jail_variables();
    // `~` is the workspace: in the jail HOME is the workspace.
    (0..count.max(1))
        .map(|_| {
            let mut checker = policy.checker(workspace, read_roots, workspace)?;
            checker.set_jail_variables(jail_variables.clone());
            Ok(checker)
        })
        .collect()
}

/// Runs the check and returns the process exit code.
pub fn run(args: CheckArgs) -> anyhow::Result<i32> {
    if let Some(batch) = &args.batch {
        let checkers = checkers(&args, args.jobs)?;
        return super::policy_batch::run(checkers, batch);
    }
    let mut checker = checker(&args)?;
    let Some(command) = args.command else {
        anyhow::bail!("give a command after `--`, or --batch FILE");
    };
    let verdict = checker.check(&command);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        writeln!(out, "{}", verdict.to_json())?;
    } else {
        print_human(&mut out, &verdict)?;
    }
    Ok(verdict.decision.exit_code())
}

fn print_human(out: &mut impl Write, verdict: &Verdict) -> std::io::Result<()> {
    writeln!(out, "{}: {}", verdict.decision, verdict.reason)?;
    for command in verdict.script.commands() {
        writeln!(out, "  {}", command.display())?;
    }
    Ok(())
}

/// `warden policy test`: run expectations; exit 0 all passed, 1 any failed.
pub fn test(
    policy_file: Option<&Path>,
    files: &[PathBuf],
    junit: Option<&Path>,
) -> anyhow::Result<i32> {
    let policy = Arc::new(Policy::load(policy_file)?);
    let suites = suite::collect(policy_file, files).map_err(anyhow::Error::msg)?;
    let outcomes = suite::run(&policy, &suites).map_err(anyhow::Error::msg)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let failed: Vec<&suite::Outcome> = outcomes.iter().filter(|o| o.failure.is_some()).collect();
    for outcome in &failed {
        writeln!(
            out,
            "FAIL {} #{}: {}\n     {}",
            outcome.origin,
            outcome.index,
            outcome.case.cmd.replace('\n', "\\n"),
            outcome.failure.as_deref().unwrap_or_default()
        )?;
    }
    writeln!(
        out,
        "policy test: {} passed, {} failed",
        outcomes.len() - failed.len(),
        failed.len()
    )?;
    if let Some(path) = junit {
        std::fs::write(path, suite::junit(&outcomes))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(if failed.is_empty() { 0 } else { 1 })
}

/// `warden policy explain`: the decision, then for each command the rule that judged it, the
/// paths as written and as resolved, and the whole IR.
pub fn explain(args: CheckArgs) -> anyhow::Result<i32> {
    let mut checker = checker(&args)?;
    let Some(command) = args.command else {
        anyhow::bail!("give a command after `--`");
    };
    let verdict = checker.check(&command);
    let policy = checker.policy();
    let commands: Vec<serde_json::Value> = verdict
        .script
        .commands()
        .map(|c| {
            let program = c.argv.first().cloned().unwrap_or_default();
            let rule = match (&c.builtin, policy.rule(&program)) {
                (Some(crate::policy::ir::Builtin::Cd(_)), _) => {
                    serde_json::json!({"builtin": "cd"})
                }
                (_, Some(rule)) => serde_json::json!({
                    "program": program,
                    "decision": rule.decision,
                    "analyzer": rule.analyzer.map(|a| format!("{a:?}").to_lowercase()),
                    "reason": rule.reason,
                }),
                (_, None) => serde_json::json!({"program": program, "unlisted": true}),
            };
            let paths: Vec<serde_json::Value> = c
                .paths
                .iter()
                .map(|p| serde_json::json!({"written": p.written, "resolved": p.path, "access": p.access}))
                .collect();
            serde_json::json!({"argv": c.argv, "cwd": c.cwd, "rule": rule, "paths": paths})
        })
        .collect();
    let mut roots: Vec<String> = policy
        .read_roots()
        .iter()
        .chain(args.read_roots.iter())
        .map(|p| p.display().to_string())
        .collect();
    roots.dedup();
    let why = super::why::why(&verdict, policy, checker.paths().workspace(), &roots);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        let json = serde_json::json!({
            "decision": verdict.decision,
            "reason": verdict.reason,
            "why": why,
            "commands": commands,
            "ir": verdict.script,
        });
        writeln!(out, "{json}")?;
        return Ok(verdict.decision.exit_code());
    }
    writeln!(out, "decision: {} — {}", verdict.decision, verdict.reason)?;
    if let Some(why) = &why {
        writeln!(out, "decided by: {}", why.decided_by)?;
        if let Some(change) = &why.change {
            writeln!(
                out,
                "to let it through, in a policy file (--policy, or `policy` in the config):"
            )?;
            for line in change.lines() {
                writeln!(out, "    {line}")?;
            }
        }
        writeln!(out, "note: {}", why.note)?;
    }
    for (i, command) in verdict.script.commands().enumerate() {
        let json = &commands[i];
        writeln!(out, "command {}: {}", i + 1, command.display())?;
        writeln!(out, "  cwd: {}", command.cwd.display())?;
        let rule = &json["rule"];
        if rule.get("builtin").is_some() {
            writeln!(out, "  rule: the cd builtin (evaluated by warden)")?;
        } else if rule.get("unlisted").is_some() {
            writeln!(out, "  rule: none (not in the allowlist)")?;
        } else {
            let analyzer = rule["analyzer"]
                .as_str()
                .map(|a| format!(", analyzer {a}"))
                .unwrap_or_default();
            writeln!(
                out,
                "  rule: [programs.{}] decision {}{analyzer}",
                rule["program"].as_str().unwrap_or_default(),
                rule["decision"].as_str().unwrap_or_default()
            )?;
        }
        for path in &command.paths {
            writeln!(
                out,
                "  path: {:?} -> {} ({:?})",
                path.written,
                path.path.display(),
                path.access
            )?;
        }
        for redirect in &command.redirects {
            writeln!(out, "  redirect: {}", serde_json::to_string(redirect)?)?;
        }
    }
    writeln!(out, "IR: {}", serde_json::to_string(&verdict.script)?)?;
    Ok(verdict.decision.exit_code())
}

pub struct DiffArgs {
    /// Policy files, or `@default` for the embedded default.
    pub old: String,
    pub new: String,
    pub corpus: Option<PathBuf>,
    pub workspace: Option<PathBuf>,
    pub allow_widening: bool,
}

/// `warden policy diff OLD NEW`: commands whose decision changes, grouped by program; exit 1
/// when any change widens what may run (unless allowed).
pub fn diff(args: DiffArgs) -> anyhow::Result<i32> {
    let load = |name: &str| -> anyhow::Result<(Arc<Policy>, Option<suite::Suite>)> {
        if name == "@default" {
            return Ok((Arc::new(Policy::embedded_default()), None));
        }
        let path = Path::new(name);
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read policy file {name}: {e}"))?;
        let policy = Policy::from_user_toml(&text, name)?;
        let own = suite::Suite::from_policy_text(&text, name).map_err(anyhow::Error::msg)?;
        Ok((Arc::new(policy), Some(own)))
    };
    let (old, old_suite) = load(&args.old)?;
    let (new, new_suite) = load(&args.new)?;
    let default_suite =
        suite::Suite::from_policy_text(crate::policy::DEFAULT_POLICY, "embedded default policy")
            .map_err(anyhow::Error::msg)?;
    // The corpus: a file of commands (one per line), else every test of the three policies.
    let corpus: Vec<String> = match &args.corpus {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read corpus {}: {e}", path.display()))?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(String::from)
            .collect(),
        None => {
            let mut all: Vec<String> = [&new_suite, &old_suite]
                .into_iter()
                .flatten()
                .chain([&default_suite])
                .flat_map(|s| s.tests.iter().map(|t| t.cmd.clone()))
                .collect();
            all.sort();
            all.dedup();
            all
        }
    };
    // The fixture of the new file, else the old one's, else the default's.
    let spec = [&new_suite, &old_suite]
        .into_iter()
        .flatten()
        .map(|s| &s.fixture)
        .find(|f| **f != crate::policy::fixture::FixtureSpec::default())
        .unwrap_or(&default_suite.fixture);
    let place = match &args.workspace {
        Some(dir) => compare::Place::Workspace { dir },
        None => compare::Place::Fixture(spec),
    };
    let changes = compare::compare(&old, &new, &corpus, place).map_err(anyhow::Error::msg)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    print_changes(&mut out, &changes, |_| String::new())?;
    let widening = changes.iter().filter(|c| c.widens()).count();
    writeln!(
        out,
        "policy diff: {} of {} commands change decision, {widening} widen",
        changes.len(),
        corpus.len()
    )?;
    Ok(if widening > 0 && !args.allow_widening {
        1
    } else {
        0
    })
}

/// Changed decisions grouped by program, each WIDENS or narrows with both reasons; `note`
/// adds a line about a command (empty: none).
pub fn print_changes(
    out: &mut impl Write,
    changes: &[compare::Change],
    note: impl Fn(&compare::Change) -> String,
) -> std::io::Result<()> {
    let mut groups: std::collections::BTreeMap<String, Vec<&compare::Change>> = Default::default();
    for change in changes {
        groups
            .entry(change.programs.join(" "))
            .or_default()
            .push(change);
    }
    for (programs, changes) in &groups {
        writeln!(out, "[{programs}]")?;
        for change in changes {
            let mark = if change.widens() { "WIDENS" } else { "narrows" };
            writeln!(
                out,
                "  {mark} {} -> {}: {}\n    was: {}\n    now: {}",
                change.old.0,
                change.new.0,
                change.command.replace('\n', "\\n"),
                change.old.1,
                change.new.1
            )?;
            let note = note(change);
            if !note.is_empty() {
                writeln!(out, "    {note}")?;
            }
        }
    }
    Ok(())
}

pub struct FuzzArgs {
    pub options: crate::fuzzing::Options,
    pub junit: Option<PathBuf>,
    pub json: bool,
}

/// `warden policy fuzz`: exit 0 when no oracle failed, 1 with findings (each printed as a
/// ready `[[tests]]` entry).
pub fn fuzz(args: FuzzArgs) -> anyhow::Result<i32> {
    let report = crate::fuzzing::run(&args.options).map_err(anyhow::Error::msg)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let rate = report.cases as f64 / report.seconds.max(0.001);
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        for (i, finding) in report.findings.iter().enumerate() {
            writeln!(
                out,
                "finding {}: {} — {}\n  input:     {}\n  minimized: {}\n  {}: {}\n{}",
                i + 1,
                finding.oracle.describe(),
                finding.decision,
                finding.original.replace('\n', "\\n"),
                finding.command.replace('\n', "\\n"),
                finding.oracle.describe(),
                finding.detail,
                finding.as_test()
            )?;
        }
        for skipped in &report.skipped {
            writeln!(out, "skipped: {skipped}")?;
        }
        writeln!(
            out,
            "policy fuzz: {} cases in {:.1} s ({rate:.0}/s), {} run for real under strace, {} by bash; {} findings",
            report.cases,
            report.seconds,
            report.behaviour_runs,
            report.bash_runs,
            report.findings.len()
        )?;
    }
    if let Some(path) = &args.junit {
        let outcomes: Vec<suite::Outcome> = report
            .findings
            .iter()
            .enumerate()
            .map(|(i, f)| suite::Outcome {
                origin: "warden policy fuzz".into(),
                index: i + 1,
                case: suite::TestCase {
                    cmd: f.command.clone(),
                    expect: crate::policy::Decision::Deny,
                    reason_contains: None,
                    cwd: None,
                },
                decision: f.decision,
                reason: f.detail.clone(),
                failure: Some(format!("{}: {}", f.oracle.describe(), f.detail)),
            })
            .collect();
        let mut xml = suite::junit(&outcomes);
        if outcomes.is_empty() {
            xml = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"warden policy fuzz\" \
                 tests=\"1\" failures=\"0\">\n  <testsuite name=\"warden policy fuzz\" tests=\"1\" \
                 failures=\"0\">\n    <testcase classname=\"warden policy fuzz\" name=\"{} cases\"/>\n  \
                 </testsuite>\n</testsuites>\n",
                report.cases
            );
        }
        std::fs::write(path, xml)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(if report.findings.is_empty() { 0 } else { 1 })
}
