//! Building the sandbox a CLI command runs in (`jail`, `exec`): the jail's roots are exactly the
//! roots the path checks use, so Landlock and the executor's own opens agree with the policy.

use crate::config::{home_dir, Config};
use crate::policy::PathPolicy;
use crate::sandbox::docker::DockerSandbox;
use crate::sandbox::host::{HostOptions, HostSandbox};
use crate::sandbox::{Backend, JailSpec, Sandbox, SandboxError};
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The jail for `paths`: its workspace, writable and readable roots, and the config's limits.
pub fn jail_spec(paths: &PathPolicy, config: &Config) -> JailSpec {
    let mut spec = JailSpec::new(paths.workspace().to_path_buf());
    spec.write_roots = paths
        .write_roots()
        .iter()
        .filter(|r| r.as_path() != paths.workspace())
        .cloned()
        .collect();
    spec.read_roots = paths
        .read_roots()
        .iter()
        .filter(|r| !paths.write_roots().contains(r))
        .cloned()
        .collect();
    spec.limits = config.sandbox.limits.clone();
    spec
}

/// Path roots for a command run without the policy (`warden jail`): the workspace (default:
/// the current directory) plus the config's and the flags' readable roots.
pub fn plain_paths(
    config: &Config,
    workspace: Option<PathBuf>,
    read: &[PathBuf],
) -> Result<PathPolicy, SandboxError> {
    let workspace = super::workspace_or_cwd(workspace)
        .map_err(|e| SandboxError::Setup(format!("cannot determine the workspace: {e}")))?;
    let read: Vec<PathBuf> = config.sandbox.read.iter().chain(read).cloned().collect();
    PathPolicy::new(&workspace, &[], &read, &home_dir()).map_err(|e| {
        SandboxError::Setup(format!("cannot use the workspace or a readable root: {e}"))
    })
}

/// The host sandbox, honouring `--allow-without-landlock` and the config.
pub fn host_sandbox(
    spec: JailSpec,
    config: &Config,
    allow_without_landlock: bool,
) -> Result<HostSandbox, SandboxError> {
    let options = HostOptions {
        allow_without_landlock: allow_without_landlock || config.sandbox.allow_without_landlock,
    };
    HostSandbox::with_options(spec, options)
}

/// The backend a command runs in: the flag, else the config's `sandbox.backend`.
pub fn backend(flag: Option<Backend>, config: &Config) -> Backend {
    flag.unwrap_or(config.sandbox.backend)
}

/// A sandbox of either backend, as a CLI command uses it.
pub enum CliSandbox {
    Host(Box<HostSandbox>),
    Docker(DockerSandbox),
}

impl CliSandbox {
    /// Build the sandbox over `spec`. The Docker one is session `session` (its container is
    /// labelled so); connecting removes the containers of crashed wardens first.
    pub async fn open(
        backend: Backend,
        spec: JailSpec,
        config: &Config,
        allow_without_landlock: bool,
        session: &str,
    ) -> Result<CliSandbox, SandboxError> {
        match backend {
            Backend::Host => Ok(CliSandbox::Host(Box::new(host_sandbox(
                spec,
                config,
                allow_without_landlock,
            )?))),
            Backend::Docker => Ok(CliSandbox::Docker(
                DockerSandbox::connect(&config.sandbox.docker, spec, session).await?,
            )),
        }
    }

    pub fn get(&self) -> &dyn Sandbox {
        match self {
            CliSandbox::Host(sandbox) => sandbox.as_ref(),
            CliSandbox::Docker(sandbox) => sandbox,
        }
    }

    /// End the sandbox: the Docker backend removes its session container.
    pub async fn close(self) {
        if let CliSandbox::Docker(sandbox) = self {
            sandbox.shutdown().await;
        }
    }
}

/// The timeout from a flag or the config.
pub fn timeout(flag: Option<u64>, config: &Config) -> Duration {
    Duration::from_secs(flag.unwrap_or(config.sandbox.timeout_secs))
}

/// Cancel `token` on SIGINT, SIGTERM or SIGHUP, so the jailed processes are killed rather than
/// orphaned when warden is interrupted. The handlers are installed before this returns (call it
/// before starting anything): a signal arriving earlier would kill warden and orphan the jail.
pub fn cancel_on_signals(token: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::warn!(
            "cannot install signal handlers; an interrupted warden may leave jailed processes running"
        );
        return;
    };
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
        token.cancel();
    });
}

/// A runtime for one CLI command: a single thread is enough and starts fastest.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
