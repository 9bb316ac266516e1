//! A skill's run environment, shared by `warden skill run` (a command that runs to its end)
//! and jailed MCP servers (a process that lives on, speaking over its stdin and stdout):
//!
//! - [`Prepared`]: a fresh run folder holding a private copy of exactly the granted bytes and a
//!   scratch folder, and the run's policy (the default widened or narrowed only by the
//!   manifest) — enough to check the command before anything starts;
//! - [`RunJail`]: the sandbox itself, with, when the manifest declared domains or routes, the
//!   jail's own network namespace and the egress proxy listening inside it; closing it stops
//!   the proxy, reports what the kernel saw go around it, and removes the run folder.

use super::manifest::Effective;
use super::policy::{self as run_policy, RunPolicy};
use super::settings::SkillSettings;
use super::Skill;
use crate::egress::proxy::{new_token, EgressEvent, EgressProxy, EgressRules};
use crate::sandbox::docker::DockerSandbox;
use crate::sandbox::host::kernel::landlock_abi;
use crate::sandbox::host::netns::JailNetwork;
use crate::sandbox::host::{HostOptions, HostSandbox};
use crate::sandbox::{Backend, JailSpec, Sandbox};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a run could not be set up: a refusal (the setup is not allowed) or a failure.
#[derive(Debug)]
pub enum SetupError {
    Denied(String),
    Failed(String),
}

/// The run folder and policy, before any process or proxy exists.
pub struct Prepared {
    /// What runs, in messages: `the skill NAME`, `the MCP server NAME`.
    pub who: String,
    pub run_dir: RunDir,
    pub plan: RunPolicy,
    pub effective: Effective,
}

impl Prepared {
    /// `who` names what runs in refusals (`the skill NAME`).
    pub fn new(settings: &SkillSettings, skill: &Skill, who: &str) -> Result<Prepared, SetupError> {
        let network = &skill.manifest.permissions.network;
        let needs_network = !network.domains.is_empty() || !network.routes.is_empty();
        if needs_network && settings.backend == Backend::Docker {
            let domains = skill
                .manifest
                .domains()
                .map_err(SetupError::Denied)?
                .iter()
                .map(|d| d.to_string())
                .chain(network.routes.keys().map(|r| format!("route {r}")))
                .collect::<Vec<_>>();
            return Err(SetupError::Denied(format!(
                "{who} needs network access ({}), and the Docker backend runs containers \
                 without any network, so it cannot reach warden's egress proxy; use the host \
                 backend for it",
                domains.join(", ")
            )));
        }
        let effective = skill
            .manifest
            .effective(&settings.bounds)
            .map_err(SetupError::Denied)?;
        let run_dir = RunDir::create(&settings.runs_dir, &skill.name, settings.backend)
            .map_err(SetupError::Failed)?;
        skill.tree.write_to(&run_dir.copy).map_err(|e| {
            SetupError::Failed(format!("writing the skill's private copy failed: {e}"))
        })?;
        let places = run_policy::RunPlaces {
            workspace: &settings.workspace,
            skill_copy: &run_dir.copy,
            scratch: &run_dir.scratch,
            data_dir: &settings.data_dir,
            own_files: &settings.own_files,
        };
        let plan = run_policy::build(&skill.manifest, &places).map_err(SetupError::Denied)?;
        Ok(Prepared {
            who: who.to_string(),
            run_dir,
            plan,
            effective,
        })
    }

    /// Start the network (when declared) and the sandbox.
    pub async fn start(
        self,
        settings: &SkillSettings,
        skill: &Skill,
    ) -> Result<RunJail, SetupError> {
        let who = self.who.clone();
        let deny = SetupError::Denied;
        let fail = SetupError::Failed;
        let network = &skill.manifest.permissions.network;
        let domains = skill.manifest.domains().map_err(deny)?;
        let needs_network = !domains.is_empty() || !network.routes.is_empty();
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
        let mut jail_network = match needs_network {
            false => None,
            true => Some(JailNetwork::create().map_err(|why| {
                deny(format!(
                    "{who} needs network access, and on the host backend warden confines it \
                     to the egress proxy with a network namespace of its own, which cannot be \
                     made here: {why}. Without it the jail could reach any host on the proxy's \
                     port, so it is refused (the Docker backend gives containers no network at \
                     all)"
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
                    rules: network.rules.clone(),
                    routes,
                    token: new_token(),
                    network: None,
                    asker: None,
                    interception: None,
                };
                let token = rules.token.clone();
                let proxy = EgressProxy::serve_on(listener, rules)
                    .map_err(|e| fail(format!("starting the egress proxy failed: {e}")))?;
                Some((
                    proxy,
                    token,
                    jail_network.namespace(),
                    jail_network.user_namespace(),
                ))
            }
        };
        let spec = jail_spec(
            skill,
            &self.plan,
            &self.run_dir.copy,
            &self.run_dir.scratch,
            &settings.workspace,
            &self.effective.limits,
            proxy
                .as_ref()
                .map(|(proxy, token, namespace, user)| JailEgress {
                    addr: proxy.addr(),
                    token,
                    namespace: namespace.clone(),
                    user_namespace: user.clone(),
                    routes: &network.routes,
                }),
        );
        let sandbox = match settings.backend {
            Backend::Host => {
                // Asked here rather than read out of the jail's error text: the jail's own
                // advice (opt into the weaker jail) does not apply to skills.
                if let Err(why) = landlock_abi() {
                    return Err(fail(format!(
                        "Landlock is not available: {why}. Skills never run in the weaker jail, \
                         whatever allow_without_landlock says; use the Docker backend."
                    )));
                }
                let options = HostOptions {
                    allow_without_landlock: false,
                };
                JailSandbox::Host(Box::new(
                    HostSandbox::with_options(spec, options).map_err(|e| fail(e.to_string()))?,
                ))
            }
            Backend::Docker => {
                // A container of its own per run, named after the run folder.
                let session = format!("skill-{}", self.run_dir.id);
                JailSandbox::Docker(
                    DockerSandbox::connect(&settings.docker, spec, &session)
                        .await
                        .map_err(|e| fail(e.to_string()))?,
                )
            }
        };
        Ok(RunJail {
            prepared: self,
            sandbox,
            proxy: proxy.map(|(proxy, ..)| proxy),
            network: jail_network,
        })
    }
}

enum JailSandbox {
    Host(Box<HostSandbox>),
    Docker(DockerSandbox),
}

/// A started run environment. [`RunJail::close`] ends it; dropping it also stops the proxy
/// and removes the run folder.
pub struct RunJail {
    pub prepared: Prepared,
    sandbox: JailSandbox,
    proxy: Option<EgressProxy>,
    network: Option<JailNetwork>,
}

impl RunJail {
    pub fn sandbox(&self) -> &dyn Sandbox {
        match &self.sandbox {
            JailSandbox::Host(sandbox) => sandbox.as_ref(),
            JailSandbox::Docker(sandbox) => sandbox,
        }
    }

    /// Stop the proxy and the container; the proxy's decisions, and what the kernel saw go
    /// around the proxy (refused or unroutable).
    pub async fn close(self) -> Vec<EgressEvent> {
        if let JailSandbox::Docker(sandbox) = &self.sandbox {
            sandbox.shutdown().await;
        }
        let mut egress = match self.proxy {
            Some(proxy) => proxy.stop().await,
            None => Vec::new(),
        };
        if let Some(mut network) = self.network {
            match network.bypasses() {
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
        egress
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
        spec.user_namespace = egress.user_namespace;
    }
    spec
}

/// How a jail reaches its run's egress proxy.
struct JailEgress<'a> {
    addr: std::net::SocketAddr,
    token: &'a str,
    namespace: Arc<std::os::fd::OwnedFd>,
    user_namespace: Option<Arc<std::os::fd::OwnedFd>>,
    routes: &'a std::collections::BTreeMap<String, crate::egress::proxy::routes::RouteSpec>,
}

/// A run's private folder: `copy/` (the skill, read-only to the jail) and `home/` (scratch).
/// Removed when dropped.
pub struct RunDir {
    /// `NAME-PID-RANDOM`, unique among runs.
    pub id: String,
    root: PathBuf,
    pub copy: PathBuf,
    pub scratch: PathBuf,
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
