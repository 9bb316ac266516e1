//! `warden skill list|show|install|grant|revoke|run`: the same discovery, grants and runner as
//! the agent's `skill` tool. Installing and granting show the permissions in plain words and
//! ask; with no terminal to ask on, only `--yes` grants.
//!
//! Exit status: 0 done; 1 refused (invalid skill, not confirmed); for `run`, the skill's own
//! status, 126 when it was refused, 125 when its sandbox could not be set up.

use super::sandbox as cli_sandbox;
use crate::audit::AuditDecision;
use crate::config::Config;
use crate::db::Database;
use crate::skills::describe;
use crate::skills::discovery::discover;
use crate::skills::grants::Grants;
use crate::skills::install::{self, Review};
use crate::skills::listing::{self, SkillRow};
use crate::skills::runner::{Invocation, SkillRequest, SkillRunner, CLI_SESSION};
use crate::skills::settings::SkillSettings;
use crate::skills::tree::short_hash;
use crate::tools::approval::NoApprover;
use anyhow::Context;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A request refused (invalid, not confirmed).
pub const EXIT_REFUSED: i32 = 1;
/// A run the policy or the grant check refused (as `warden exec`).
pub const EXIT_RUN_REFUSED: i32 = 126;

pub enum Action {
    List {
        json: bool,
    },
    Show {
        name: String,
    },
    Install {
        path: PathBuf,
        yes: bool,
    },
    Grant {
        name: String,
        yes: bool,
    },
    Revoke {
        name: String,
    },
    Run {
        name: String,
        command: Option<String>,
        timeout: Option<u64>,
        args: Vec<String>,
    },
}

pub fn run(config: &Config, action: Action) -> anyhow::Result<i32> {
    let workspace = crate::app::prepare_workspace(&config.workspace)?;
    let db = crate::schema::open_in(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let settings = Arc::new(SkillSettings::prepare(config, &workspace)?);
    match action {
        Action::List { json } => list(&settings, &db, json),
        Action::Show { name } => show(&settings, &db, &name),
        Action::Install { path, yes } => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let input = json!({"path": path.display().to_string()});
            let review = install::review_install(&settings, &path);
            decide(&settings, &db, "install", &name, input, review, yes)
        }
        Action::Grant { name, yes } => {
            let review = install::review_grant(&settings, &db, &name);
            decide(&settings, &db, "grant", &name, json!({}), review, yes)
        }
        Action::Revoke { name } => {
            let had = install::revoke(&db, &name).map_err(anyhow::Error::msg)?;
            let reason = if had {
                "grant removed"
            } else {
                "there was no grant"
            };
            install::audit_action(
                &db,
                "revoke",
                &name,
                json!({}),
                AuditDecision::Allow,
                reason,
            )
            .map_err(anyhow::Error::msg)?;
            println!("{name}: {reason}.");
            Ok(0)
        }
        Action::Run {
            name,
            command,
            timeout,
            args,
        } => run_skill(settings, db, name, command, timeout, args),
    }
}

/// Show the review, ask (or take `--yes`), commit, and audit every outcome.
fn decide(
    settings: &SkillSettings,
    db: &Database,
    action: &str,
    name: &str,
    input: serde_json::Value,
    review: Result<Review, String>,
    yes: bool,
) -> anyhow::Result<i32> {
    let audit = |decision: AuditDecision, reason: &str| {
        install::audit_action(db, action, name, input.clone(), decision, reason)
            .map_err(anyhow::Error::msg)
    };
    let review = match review {
        Ok(review) => review,
        Err(why) => {
            audit(AuditDecision::Deny, &why)?;
            eprintln!("warden: {why}");
            return Ok(EXIT_REFUSED);
        }
    };
    println!("{}", review.text);
    match super::confirm(&review.question(), yes) {
        Ok(true) => {}
        Ok(false) => {
            audit(AuditDecision::Rejected, "the user declined")?;
            println!("Nothing was {}.", past(action));
            return Ok(EXIT_REFUSED);
        }
        Err(why) => {
            audit(AuditDecision::Rejected, &why)?;
            eprintln!("warden: {why}");
            return Ok(EXIT_REFUSED);
        }
    }
    match install::commit(settings, db, &review) {
        Ok(message) => {
            let reason = format!("{} {}", past(action), review.skill.hash);
            audit(
                AuditDecision::Allow,
                &format!("{reason}; {}", review.origin),
            )?;
            println!("{message}");
            Ok(0)
        }
        Err(why) => {
            audit(AuditDecision::Error, &why)?;
            eprintln!("warden: {why}");
            Ok(EXIT_REFUSED)
        }
    }
}

fn past(action: &str) -> &'static str {
    match action {
        "install" => "installed",
        _ => "granted",
    }
}

fn run_skill(
    settings: Arc<SkillSettings>,
    db: Arc<Database>,
    name: String,
    command: Option<String>,
    timeout: Option<u64>,
    args: Vec<String>,
) -> anyhow::Result<i32> {
    let invocation = match command {
        Some(_) if !args.is_empty() => {
            anyhow::bail!("give either --command or arguments, not both")
        }
        Some(command) => Invocation::Command(command),
        None => Invocation::Args(args),
    };
    let runner = SkillRunner::new(settings, db);
    let runtime = cli_sandbox::runtime()?;
    let report = runtime.block_on(async {
        let cancel = tokio_util::sync::CancellationToken::new();
        cli_sandbox::cancel_on_signals(cancel.clone());
        runner
            .run(SkillRequest {
                name,
                invocation,
                session: CLI_SESSION.into(),
                cancel,
                approver: Arc::new(NoApprover),
                timeout: timeout.map(Duration::from_secs),
            })
            .await
    });
    let Some(output) = &report.output else {
        eprintln!("warden: {}", report.render());
        return Ok(match report.decision {
            AuditDecision::Error => super::EXIT_SETUP,
            _ => EXIT_RUN_REFUSED,
        });
    };
    print!("{}", output.stdout);
    eprint!("{}", output.stderr);
    for note in &report.notes {
        eprintln!("warden: note: {note}");
    }
    eprintln!("warden: skill {}: {}", report.name, report.reason);
    Ok(output.status)
}

fn show(settings: &SkillSettings, db: &Database, name: &str) -> anyhow::Result<i32> {
    let catalog = discover(&settings.roots(), &settings.bounds);
    let Some(skill) = catalog.get(name) else {
        match catalog.skipped(name) {
            Some(s) => eprintln!("warden: {name} is not a valid skill: {}", s.reason),
            None => eprintln!("warden: there is no skill named {name:?}"),
        }
        return Ok(EXIT_REFUSED);
    };
    println!("{}", describe::describe(skill, &settings.bounds));
    let status = Grants::new(db).status(skill)?;
    println!("Grant: {}", status.describe());
    println!("Folder: {}", skill.dir.display());
    Ok(0)
}

fn list(settings: &SkillSettings, db: &Database, as_json: bool) -> anyhow::Result<i32> {
    let rows = listing::rows(settings, db)?;
    if as_json {
        println!(
            "{}",
            serde_json::Value::Array(rows.iter().map(|r| r.json.clone()).collect())
        );
        return Ok(0);
    }
    if rows.is_empty() {
        println!(
            "No skills. Install one with `warden skill install PATH` (a folder with SKILL.md)."
        );
        return Ok(0);
    }
    let width = |f: fn(&SkillRow) -> &str, title: &str| {
        rows.iter()
            .map(|r| f(r).chars().count())
            .chain([title.len()])
            .max()
            .unwrap_or(0)
    };
    let (name_w, source_w) = (width(|r| &r.name, "NAME"), width(|r| &r.source, "SOURCE"));
    let grant_w = width(|r| &r.grant, "GRANT");
    println!(
        "{:<name_w$}  {:<source_w$}  {:<19}  {:<grant_w$}  LAST RUN",
        "NAME", "SOURCE", "HASH", "GRANT"
    );
    for row in &rows {
        println!(
            "{:<name_w$}  {:<source_w$}  {:<19}  {:<grant_w$}  {}",
            row.name,
            row.source,
            row.hash.as_deref().map(short_hash).unwrap_or("-"),
            row.grant,
            row.last_run
        );
    }
    Ok(0)
}
