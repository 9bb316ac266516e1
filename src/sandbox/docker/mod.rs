//! The Docker backend: one warm container per session, one `docker exec` per simple command.
//!
//! The executor runs the checked IR itself and hands each simple command to
//! [`Sandbox::spawn`] with the descriptors it opened; here that command becomes one exec in
//! the session's container, and [`pump`] moves the bytes between the exec and those
//! descriptors. No shell ever sees the original command string (the one shell involved, when
//! stdout and stderr must be merged, runs a constant script over the argv: see [`stdio`]).
//!
//! Files, in the order a session meets them: [`connect`] (the daemon), [`owner`] and
//! [`orphans`] (containers of crashed wardens), [`user`] (who the container runs as), [`plan`]
//! (every restriction), [`container`] (create, verify, remove), [`session`] (the warm
//! container, idle removal, kill), [`stdio`], [`process`] and [`pump`] (one exec), [`signal`]
//! (SIGPIPE and SIGXFSZ for execs); [`image`] builds the sandbox images and [`probe`] reports
//! for `warden doctor`.
//!
//! Use: one [`DockerSandbox`] per session (a chat, a `warden exec`), built with
//! [`DockerSandbox::connect`]`(&config.sandbox.docker, jail_spec, session_name)` and ended with
//! [`DockerSandbox::shutdown`] when the session ends or warden exits. Between commands the
//! container stays warm; after `idle_secs` without one it is removed and the next command gets
//! a new one (files live in the workspace, so only `/tmp` and stray processes are lost).

pub mod connect;
pub mod container;
pub mod egress;
pub mod image;
pub mod orphans;
pub mod owner;
pub mod plan;
pub mod probe;
pub mod process;
pub mod pump;
pub mod session;
pub mod signal;
pub mod stdio;
pub mod user;

use crate::config::DockerConfig;
use crate::sandbox::{Backend, JailSpec, JailedProcess, ProcessSpec, Sandbox, SandboxError};
use async_trait::async_trait;
use bollard::Docker;
use owner::Owner;
use plan::{ContainerPlan, GUEST_WORKSPACE};
use process::{DockerProcess, ExecRequest};
use session::Session;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;
use user::ContainerUser;

/// A session's sandbox in Docker.
///
/// Construct with [`DockerSandbox::connect`] inside a tokio runtime; the container is created
/// on the first [`Sandbox::spawn`], removed after `idle_secs` without commands (and recreated
/// on the next), and removed for good by [`DockerSandbox::shutdown`] or, failing that, when
/// the sandbox is dropped.
pub struct DockerSandbox {
    session: Arc<Session>,
    workspace: PathBuf,
    extra_roots: Vec<PathBuf>,
    host_signals: bool,
    reaper: tokio::task::JoinHandle<()>,
}

impl DockerSandbox {
    /// Reach the daemon, check the image and runtime, remove containers of crashed wardens,
    /// and prepare (but not yet create) the container for session `session`.
    pub async fn connect(
        config: &DockerConfig,
        jail: JailSpec,
        session: &str,
    ) -> Result<DockerSandbox, SandboxError> {
        let docker = connect::connect(&config.socket).await?;
        let runtime = effective_runtime(&docker, config.runtime.as_deref()).await?;
        if jail.egress_proxy.is_some() {
            egress::runtime_reaches_namespace(&runtime.name, &runtime.path, &runtime.args)
                .map_err(SandboxError::Setup)?;
        }
        if docker.inspect_image(&config.image).await.is_err() {
            return Err(SandboxError::Setup(container::missing_image(&config.image)));
        }
        let me = Owner::current()
            .map_err(|e| SandboxError::Setup(format!("cannot identify this process: {e}")))?;
        orphans::remove_orphans(&docker, &me).await?;
        let user = ContainerUser::for_workspace(&jail.workspace)?;
        let plan = ContainerPlan::new(config, &jail, user, me.labels(session))?;
        let extra_roots = plan.extra_roots.iter().map(|(p, _)| p.clone()).collect();
        let idle = Duration::from_secs(config.idle_secs.max(1));
        let session = Arc::new(Session::new(
            docker,
            plan,
            config.socket.clone(),
            session,
            idle,
        ));
        let reaper = tokio::spawn(reap_when_idle(Arc::downgrade(&session), idle));
        Ok(DockerSandbox {
            session,
            workspace: jail.workspace,
            extra_roots,
            host_signals: is_runc(&runtime.name),
            reaper,
        })
    }

    /// Create the session's container now instead of on the first command.
    pub async fn warm_up(&self) -> Result<(), SandboxError> {
        let (_id, mut busy) = self.session.acquire().await?;
        busy.release();
        Ok(())
    }

    /// The id of the session's container while one runs.
    pub async fn container_id(&self) -> Option<String> {
        self.session.container_id().await
    }

    /// The uid:gid commands run as.
    pub fn user(&self) -> ContainerUser {
        self.session.plan.user
    }

    /// The Engine API client this sandbox uses.
    pub fn docker(&self) -> &Docker {
        &self.session.docker
    }

    /// Remove the session's container (killing whatever runs in it).
    pub async fn shutdown(&self) {
        self.session.shutdown().await;
    }
}

impl Drop for DockerSandbox {
    fn drop(&mut self) {
        self.reaper.abort();
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn backend(&self) -> Backend {
        Backend::Docker
    }

    async fn spawn(&self, spec: ProcessSpec) -> Result<Box<dyn JailedProcess>, SandboxError> {
        if spec.argv.is_empty() {
            return Err(SandboxError::Setup("empty command".into()));
        }
        if let Some((fd, _)) = spec.extra_fds.first() {
            return Err(SandboxError::Setup(format!(
                "the Docker backend cannot hand descriptor {fd} to a container program \
                 (only stdin, stdout and stderr)"
            )));
        }
        let guest_cwd = self.guest_path(&spec.cwd).ok_or_else(|| {
            SandboxError::Setup(format!(
                "working directory {} is not visible in the container",
                spec.cwd.display()
            ))
        })?;
        let argv0 = spec.argv[0].clone();
        if spec.env.iter().any(|(name, _)| name == "PATH") {
            return Err(SandboxError::Setup(
                "PATH cannot be set for a command in the sandbox".into(),
            ));
        }
        let env = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let streams = stdio::prepare(spec.argv, spec.stdin, spec.stdout, spec.stderr);
        let request = ExecRequest {
            argv0,
            cmd: streams.cmd,
            guest_cwd: guest_cwd.to_string_lossy().into_owned(),
            fds: streams.fds,
            env,
        };
        let process = DockerProcess::start(&self.session, request, self.host_signals).await?;
        Ok(Box::new(process))
    }

    fn guest_path(&self, host_path: &Path) -> Option<PathBuf> {
        if let Ok(rest) = host_path.strip_prefix(&self.workspace) {
            return Some(Path::new(GUEST_WORKSPACE).join(rest));
        }
        self.extra_roots
            .iter()
            .any(|root| host_path.starts_with(root))
            .then(|| host_path.to_path_buf())
    }

    /// A container with no network, a read-only root and only the workspace mounted writable.
    fn confines_code(&self) -> bool {
        true
    }
}

/// The OCI runtime containers will use, as the daemon has it configured.
struct EffectiveRuntime {
    name: String,
    path: String,
    args: Vec<String>,
}

/// The runtime containers will use: the configured one, which the daemon must know, or the
/// daemon's default.
async fn effective_runtime(
    docker: &Docker,
    wanted: Option<&str>,
) -> Result<EffectiveRuntime, SandboxError> {
    let info = docker
        .info()
        .await
        .map_err(|e| SandboxError::Setup(format!("cannot query the Docker daemon: {e}")))?;
    let mut runtimes = info.runtimes.unwrap_or_default();
    let name = match wanted {
        Some(runtime) if runtimes.contains_key(runtime) => runtime.to_string(),
        Some(runtime) => {
            let mut known: Vec<String> = runtimes.into_keys().collect();
            known.sort();
            return Err(SandboxError::Setup(format!(
                "the Docker daemon does not know the runtime {runtime:?} \
                 (sandbox.docker.runtime); it has: {}",
                known.join(", ")
            )));
        }
        None => info.default_runtime.unwrap_or_else(|| "runc".into()),
    };
    let configured = runtimes.remove(&name).unwrap_or_default();
    Ok(EffectiveRuntime {
        path: configured.path.unwrap_or_default(),
        args: configured.runtime_args.unwrap_or_default(),
        name,
    })
}

/// Whether exec'd programs are host processes warden can signal (see `signal.rs`).
fn is_runc(runtime: &str) -> bool {
    matches!(runtime, "runc" | "io.containerd.runc.v2")
}

/// Remove the session's container whenever it has been idle long enough.
async fn reap_when_idle(session: Weak<Session>, idle: Duration) {
    let every = (idle / 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
    loop {
        tokio::time::sleep(every).await;
        let Some(session) = session.upgrade() else {
            return;
        };
        session.reap_if_idle().await;
    }
}
