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
use super::egress::{new_token, EgressEvent, EgressProxy, EgressRules};
use super::grants::{GrantStatus, Grants};
use super::policy::{self as run_policy, RunPolicy};
use super::report::SkillReport;
use super::settings::SkillSettings;
use super::Skill;
use crate::audit::{self, AuditDecision, AuditEntry};
use crate::db::Database;
use crate::exec::{run_script, ExecOptions};
use crate::policy::{invariant, Checker, Decision, Verdict};
use crate::sandbox::docker::DockerSandbox;
use crate::sandbox::host::kernel::landlock_abi;
use crate::sandbox::host::netns::JailNetwork;
use crate::sandbox::host::{HostOptions, HostSandbox};
use crate::sandbox::{Backend, JailSpec, Sandbox};
use crate::tools::approval::{Approval, ApprovalRequest, Approver};
use serde_json::json;
use std::path::{Path, PathBuf};
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
        let deny = |reason: String| SkillReport::denied(name, reason).with_hash(&skill.hash);
        let fail = |reason: String| SkillReport::error(name, reason).with_hash(&skill.hash);
        let settings = &self.settings;
        let domains = skill.manifest.domains().map_err(deny)?;
        let network = &skill.manifest.permissions.network;
        let needs_network = !domains.is_empty() || !network.routes.is_empty();
        if needs_network && settings.backend == Backend::Docker {
            return Err(deny(format!(
                "the skill {name} needs network access ({}), and the Docker backend runs \
                 containers without any network, so it cannot reach warden's egress proxy; use \
                 the host backend for this skill",
                domains
                    .iter()
                    .map(|d| d.to_string())
                    .chain(network.routes.keys().map(|r| format!("route {r}")))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let routes = network
            .routes
            .iter()
            .map(|(route_name, spec)| {
                let route = spec.resolve(route_name, &|secret| settings.secret(secret))?;
                if !route.tls && !settings.hosts.contains_key(&route.domain.name) {
                    return Err(format!(
                        "route {route_name} goes to {} over plain http, which would send its \
                         headers in clear; only a name mapped in [skills] hosts may be reached \
                         that way",
                        spec.url
                    ));
                }
                for (_, value) in &route.headers {
                    crate::redact::register(value.expose());
                }
                Ok(route)
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(deny)?;
        let effective = skill.manifest.effective(&settings.bounds).map_err(deny)?;
        let command = match &request.invocation {
            Invocation::Command(command) => command.clone(),
            Invocation::Args(args) => {
                let mut argv = skill.manifest.run.clone().unwrap_or_default();
                argv.extend(args.iter().cloned());
                if argv.is_empty() {
                    return Err(deny(format!(
                        "the skill {name} has no `run` command in its skill.toml; give the whole \
                         command"
                    )));
                }
                shell_words::join(&argv)
            }
        };

        let run_dir = RunDir::create(&settings.runs_dir, name, settings.backend).map_err(fail)?;
        skill
            .tree
            .write_to(&run_dir.copy)
            .map_err(|e| fail(format!("writing the skill's private copy failed: {e}")))?;
        let places = run_policy::RunPlaces {
            workspace: &settings.workspace,
            skill_copy: &run_dir.copy,
            scratch: &run_dir.scratch,
            data_dir: &settings.data_dir,
            own_files: &settings.own_files,
        };
        let plan = run_policy::build(&skill.manifest, &places).map_err(deny)?;
        let copy = plan.copy.clone();
        let mut checker = Checker::new(plan.policy.clone(), plan.paths.clone());
        let verdict = checker.check_in(&command, &copy);
        let approved = self
            .decide(name, &verdict, request)
            .await
            .map_err(|r| r.with_hash(&skill.hash))?;
        if let Err(violation) = invariant::verify(&verdict, &plan.policy, &plan.paths, &[]) {
            tracing::error!(skill = name, %violation, "policy invariant violated; refusing to run");
            return Err(deny(format!(
                "internal policy check failed ({violation}); not run"
            )));
        }

        let mut jail_network = match needs_network {
            false => None,
            true => Some(JailNetwork::create().map_err(|why| {
                deny(format!(
                    "the skill {name} needs network access, and on the host backend warden \
                     confines it to the egress proxy with a network namespace of its own, which \
                     cannot be made here: {why}. Without it the jail could reach any host on \
                     the proxy's port, so the skill is refused (the Docker backend gives \
                     containers no network at all)"
                ))
            })?),
        };
        let proxy = match &mut jail_network {
            None => None,
            Some(jail_network) => {
                let listener = jail_network
                    .take_listener()
                    .ok_or_else(|| fail("the proxy's listener is gone".into()))?;
                let rules = EgressRules {
                    domains,
                    hosts: settings.hosts.clone(),
                    rules: network
                        .rules
                        .iter()
                        .map(|(domain, rules)| (domain.clone(), rules.clone()))
                        .collect(),
                    routes,
                    token: new_token(),
                };
                let token = rules.token.clone();
                let proxy = EgressProxy::serve_on(listener, rules)
                    .map_err(|e| fail(format!("starting the egress proxy failed: {e}")))?;
                Some((proxy, token, jail_network.namespace()))
            }
        };
        let spec = jail_spec(
            skill,
            &plan,
            &copy,
            &run_dir.scratch,
            &settings.workspace,
            &effective.limits,
            proxy.as_ref().map(|(proxy, token, namespace)| JailEgress {
                addr: proxy.addr(),
                token,
                namespace: namespace.clone(),
                routes: &network.routes,
            }),
        );
        let timeout = Duration::from_secs(effective.timeout_secs)
            .min(request.timeout.unwrap_or(Duration::MAX));
        let mut options = ExecOptions::capture(plan.paths.clone(), timeout);
        options.cancel = request.cancel.clone();

        let result = match settings.backend {
            Backend::Host => {
                // Asked here rather than read out of the jail's error text: the jail's own
                // advice (opt into the weaker jail) does not apply to skills.
                if let Err(why) = landlock_abi() {
                    return Err(fail(format!(
                        "Landlock is not available: {why}. Skills never run in the weaker jail, \
                         whatever allow_without_landlock says; use the Docker backend."
                    )));
                }
                let options_host = HostOptions {
                    allow_without_landlock: false,
                };
                let sandbox = HostSandbox::with_options(spec, options_host)
                    .map_err(|e| fail(e.to_string()))?;
                run_script(&sandbox, &verdict.script, &options).await
            }
            Backend::Docker => {
                // A container of its own per run, named after the run folder.
                let session = format!("skill-{}", run_dir.id);
                let sandbox = DockerSandbox::connect(&settings.docker, spec, &session)
                    .await
                    .map_err(|e| fail(e.to_string()))?;
                let result = run_script(&sandbox as &dyn Sandbox, &verdict.script, &options).await;
                sandbox.shutdown().await;
                result
            }
        };
        let mut egress = match proxy {
            Some((proxy, _, _)) => proxy.stop().await,
            None => Vec::new(),
        };
        if let Some(jail_network) = &mut jail_network {
            // What the kernel saw go elsewhere than the proxy (it was refused or unroutable).
            match jail_network.bypasses() {
                Ok(bypasses) => {
                    if let Some(what) = bypasses.describe() {
                        egress.push(EgressEvent {
                            target: "around the proxy".into(),
                            allowed: false,
                            detail: what,
                        });
                    }
                }
                Err(why) => tracing::warn!(%why, "reading the jail's network counters failed"),
            }
        }
        drop(run_dir);
        let output = result.map_err(|e| fail(format!("the skill could not be run: {e}")))?;
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
            notes: plan.notes,
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

/// The jail: the scratch folder is its workspace and HOME; the copy and granted folders are
/// the only other roots; the environment names the skill and the proxy, nothing else.
fn jail_spec(
    skill: &Skill,
    plan: &RunPolicy,
    copy: &Path,
    scratch: &Path,
    workspace: &Path,
    limits: &crate::sandbox::Limits,
    egress: Option<JailEgress<'_>>,
) -> JailSpec {
    let mut spec = JailSpec::new(scratch.to_path_buf());
    spec.read_roots = std::iter::once(copy.to_path_buf())
        .chain(plan.reads.iter().cloned())
        .collect();
    spec.write_roots = plan.writes.clone();
    spec.limits = limits.clone();
    spec.env = vec![
        ("SKILL_NAME".into(), skill.name.clone()),
        ("SKILL_DIR".into(), copy.display().to_string()),
        ("WORKSPACE".into(), workspace.display().to_string()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ];
    if let Some(egress) = egress {
        // The token is this run's alone; it lets nothing but this proxy be reached.
        let url = format!("http://warden:{}@{}", egress.token, egress.addr);
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            spec.env.push((name.into(), url.clone()));
        }
        // Route addresses are the proxy itself, asked directly rather than as a proxy.
        for name in ["NO_PROXY", "no_proxy"] {
            spec.env.push((name.into(), egress.addr.ip().to_string()));
        }
        for (route, route_spec) in egress.routes {
            spec.env.push((
                route_spec.env_name(route),
                format!("http://{}/{}/{route}", egress.addr, egress.token),
            ));
        }
        spec.egress_proxy = Some(egress.addr);
        spec.network_namespace = Some(egress.namespace);
    }
    spec
}

/// How a jail reaches its run's egress proxy.
struct JailEgress<'a> {
    addr: std::net::SocketAddr,
    token: &'a str,
    namespace: Arc<std::os::fd::OwnedFd>,
    routes: &'a std::collections::BTreeMap<String, super::routes::RouteSpec>,
}

/// A run's private folder: `copy/` (the skill, read-only to the jail) and `home/` (scratch).
/// Removed when dropped.
struct RunDir {
    /// `NAME-PID-RANDOM`, unique among runs.
    id: String,
    root: PathBuf,
    copy: PathBuf,
    scratch: PathBuf,
}

impl RunDir {
    fn create(runs_dir: &Path, name: &str, backend: Backend) -> Result<RunDir, String> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let err =
            |e: std::io::Error| format!("creating the run folder in {}: {e}", runs_dir.display());
        std::fs::create_dir_all(runs_dir).map_err(err)?;
        std::fs::set_permissions(runs_dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
        let id = format!(
            "{name}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        let root = runs_dir.join(&id);
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&root)
            .map_err(err)?;
        let scratch = root.join("home");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&scratch)
            .map_err(err)?;
        // As root, Docker runs the container as nobody (never root): give it its scratch.
        if backend == Backend::Docker && nix::unistd::geteuid().is_root() {
            let nobody = crate::sandbox::docker::user::NOBODY;
            nix::unistd::chown(&scratch, Some(nobody.into()), Some(nobody.into()))
                .map_err(|e| err(e.into()))?;
        }
        let root = root.canonicalize().map_err(err)?;
        Ok(RunDir {
            id,
            copy: root.join("skill"),
            scratch: root.join("home"),
            root,
        })
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.root) {
            tracing::warn!(dir = %self.root.display(), error = %e, "a skill run folder was left behind");
        }
    }
}
