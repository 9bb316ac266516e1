//! Running a skill, the one path for `warden skill run` and the agent's `skill` tool:
//!
//! 1. find it (workspace over bundled) and refuse it unless its current content is exactly
//!    what was granted (bundled skills: what was built in);
//! 2. write a private copy of the very bytes that were hashed into a fresh run folder, beside
//!    an empty scratch folder — the jail sees that copy read-only, never the workspace's
//!    folder, so nothing can change between the check and the run;
//! 3. check the command with the default policy widened or narrowed only by the manifest;
//!    `ask` goes to the approver; the allowed IR is re-verified independently;
//! 4. start the egress proxy when the skill declared domains or routes (never on Docker:
//!    containers have no network), listening inside a network namespace of the run's own where
//!    nothing else listens and nothing else is routed, with a token only this run knows;
//! 5. run the checked IR in a fresh sandbox — the scratch folder as its workspace and HOME,
//!    the copy and the granted workspace folders as its only other roots, an environment with
//!    no secret in it, the manifest's limits — then remove the run folder;
//! 6. audit it (`tool = "skill:NAME"`) and remember it as the skill's last run.

use super::discovery::discover;
use super::grants::{GrantStatus, Grants};
use super::jail::{Prepared, SetupError};
use super::report::SkillReport;
use super::settings::SkillSettings;
use super::Skill;
use crate::audit::{self, AuditDecision, AuditEntry};
use crate::db::Database;
use crate::exec::{run_script, ExecOptions};
use crate::policy::{invariant, Checker, Decision, Verdict};
use crate::tools::approval::{Approval, ApprovalRequest, Approver};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The audit log's session for runs from the command line.
pub const CLI_SESSION: &str = "cli";

/// What to run inside the skill.
#[derive(Clone, Debug)]
pub enum Invocation {
    /// Appended to the manifest's `run` (or the whole argv when it has none).
    Args(Vec<String>),
    /// A command line, checked like a bash tool command.
    Command(String),
}

impl Invocation {
    fn to_json(&self, name: &str) -> serde_json::Value {
        match self {
            Invocation::Args(args) => json!({"skill": name, "args": args}),
            Invocation::Command(command) => json!({"skill": name, "command": command}),
        }
    }
}

pub struct SkillRequest {
    pub name: String,
    pub invocation: Invocation,
    /// The audit session (`cli`, `telegram:42`…).
    pub session: String,
    pub cancel: CancellationToken,
    pub approver: Arc<dyn Approver>,
    /// A shorter timeout than the manifest's (never a longer one).
    pub timeout: Option<Duration>,
}

pub struct SkillRunner {
    settings: Arc<SkillSettings>,
    db: Arc<Database>,
}

impl SkillRunner {
    pub fn new(settings: Arc<SkillSettings>, db: Arc<Database>) -> SkillRunner {
        SkillRunner { settings, db }
    }

    pub fn settings(&self) -> &SkillSettings {
        &self.settings
    }

    /// Run (or refuse) and record it. A result that could not be audited is withheld.
    pub async fn run(&self, request: SkillRequest) -> SkillReport {
        let started = Instant::now();
        let mut report = self.execute(&request).await;
        let entry = AuditEntry {
            session: request.session.clone(),
            tool: format!("skill:{}", request.name),
            input: request.invocation.to_json(&request.name).to_string(),
            decision: report.decision,
            reason: report.reason.clone(),
            exit_code: report.exit_code(),
            duration_ms: started.elapsed().as_millis() as u64,
            network: None,
        };
        let recorded = audit::record(&self.db, &entry).and_then(|()| {
            Grants::new(&self.db).record_run(
                &request.name,
                report.hash.as_deref().unwrap_or("-"),
                &request.session,
                report.decision.as_str(),
                report.exit_code(),
                &report.reason,
            )
        });
        if let Err(e) = recorded {
            tracing::error!("audit log write failed: {e}");
            report = SkillReport::error(
                &request.name,
                format!("the audit log could not be written ({e}); result withheld"),
            );
        }
        report
    }

    async fn execute(&self, request: &SkillRequest) -> SkillReport {
        let name = request.name.as_str();
        let catalog = discover(&self.settings.roots(), &self.settings.bounds);
        let Some(skill) = catalog.get(name) else {
            return match catalog.skipped(name) {
                Some(skipped) => SkillReport::denied(
                    name,
                    format!(
                        "the skill {name} in {} is not valid: {}",
                        skipped.dir.display(),
                        skipped.reason
                    ),
                ),
                None => SkillReport::denied(
                    name,
                    format!(
                        "there is no skill named {name:?} (available: {})",
                        catalog.names().join(", ")
                    ),
                ),
            };
        };
        if let Err(reason) = self.check_grant(skill) {
            return SkillReport::denied(name, reason).with_hash(&skill.hash);
        }
        match self.prepare_and_run(skill, request).await {
            Ok(report) | Err(report) => report,
        }
    }

    /// Runnable only as granted: the same content hash, or bundled.
    fn check_grant(&self, skill: &Skill) -> Result<(), String> {
        let status = Grants::new(&self.db)
            .status(skill)
            .map_err(|e| format!("reading the skill's grant failed: {e}"))?;
        match status {
            GrantStatus::Bundled | GrantStatus::Granted(_) => Ok(()),
            GrantStatus::NotGranted => Err(format!(
                "the skill {} is not granted: review its permissions with `warden skill show {0}` \
                 and grant them with `warden skill grant {0}` (or install it with `warden skill \
                 install PATH`)",
                skill.name
            )),
            GrantStatus::Changed(grant) => Err(format!(
                "the skill {} changed since it was granted (granted {} for {}, now {}): its files \
                 or its manifest were edited; nothing of it runs until you review it and grant \
                 it again with `warden skill grant {0}`",
                skill.name,
                super::grants::short_time(&grant.granted_at),
                super::tree::short_hash(&grant.hash),
                super::tree::short_hash(&skill.hash)
            )),
        }
    }

    /// Everything after the grant check; `Err` carries a refusal.
    async fn prepare_and_run(
        &self,
        skill: &Skill,
        request: &SkillRequest,
    ) -> Result<SkillReport, SkillReport> {
        let name = skill.name.as_str();
        let report = |e: SetupError| match e {
            SetupError::Denied(reason) => SkillReport::denied(name, reason).with_hash(&skill.hash),
            SetupError::Failed(reason) => SkillReport::error(name, reason).with_hash(&skill.hash),
        };
        let settings = &self.settings;
        let command = match &request.invocation {
            Invocation::Command(command) => command.clone(),
            Invocation::Args(args) => {
                let mut argv = skill.manifest.run.clone().unwrap_or_default();
                argv.extend(args.iter().cloned());
                if argv.is_empty() {
                    return Err(report(SetupError::Denied(format!(
                        "the skill {name} has no `run` command in its skill.toml; give the whole \
                         command"
                    ))));
                }
                shell_words::join(&argv)
            }
        };

        let who = format!("the skill {name}");
        let prepared = Prepared::new(settings, skill, &who).map_err(report)?;
        let plan = &prepared.plan;
        let copy = plan.copy.clone();
        let mut checker = Checker::new(plan.policy.clone(), plan.paths.clone());
        let verdict = checker.check_in(&command, &copy);
        let approved = self
            .decide(name, &verdict, request)
            .await
            .map_err(|r| r.with_hash(&skill.hash))?;
        if let Err(violation) = invariant::verify(&verdict, &plan.policy, &plan.paths, &[]) {
            tracing::error!(skill = name, %violation, "policy invariant violated; refusing to run");
            return Err(report(SetupError::Denied(format!(
                "internal policy check failed ({violation}); not run"
            ))));
        }
        let timeout = Duration::from_secs(prepared.effective.timeout_secs)
            .min(request.timeout.unwrap_or(Duration::MAX));
        let mut options = ExecOptions::capture(plan.paths.clone(), timeout);
        options.cancel = request.cancel.clone();
        let notes = plan.notes.clone();

        let jail = prepared.start(settings, skill).await.map_err(report)?;
        let result = run_script(jail.sandbox(), &verdict.script, &options).await;
        let egress = jail.close().await;
        let output = result.map_err(|e| {
            report(SetupError::Failed(format!(
                "the skill could not be run: {e}"
            )))
        })?;
        let mut report = SkillReport {
            name: name.to_string(),
            decision: if approved {
                AuditDecision::Approved
            } else {
                AuditDecision::Allow
            },
            reason: String::new(),
            hash: Some(skill.hash.clone()),
            command: Some(command),
            output: Some(output),
            egress,
            notes,
        };
        report.summarize(&verdict.reason, &settings.backend.to_string());
        Ok(report)
    }

    /// Allow, or ask the approver; returns whether it was approved by someone.
    async fn decide(
        &self,
        name: &str,
        verdict: &Verdict,
        request: &SkillRequest,
    ) -> Result<bool, SkillReport> {
        match verdict.decision {
            Decision::Allow => Ok(false),
            // The run's path validator names its writable root as the scratch folder.
            Decision::Deny => Err(SkillReport::denied(name, verdict.reason.clone())),
            Decision::Ask => {
                let ask = ApprovalRequest {
                    session: request.session.clone(),
                    tool: format!("skill:{name}"),
                    command: verdict
                        .script
                        .commands()
                        .map(|c| c.display())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    reason: verdict.reason.clone(),
                    always: None,
                    detail: None,
                };
                match request.approver.approve(&ask).await {
                    Approval::Approved => Ok(true),
                    Approval::Denied(why) => Err(SkillReport::rejected(
                        name,
                        format!("{why}; {}", verdict.reason),
                    )),
                }
            }
        }
    }
}
