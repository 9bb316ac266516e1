//! Sandboxes for sessions: the one place that turns config into a running sandbox. The host
//! backend shares one jail (its rulesets are built once); the Docker backend keeps one warm
//! container per session, created on first use and removed when idle or at shutdown.

use super::docker::DockerSandbox;
use super::host::{HostOptions, HostSandbox};
use super::{Backend, JailSpec, Sandbox, SandboxError};
use crate::config::SandboxConfig;
use crate::policy::PathPolicy;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Mutex;

impl JailSpec {
    /// The jail's roots are the path validator's roots: what the policy checked is exactly
    /// what the jail allows.
    pub fn for_paths(paths: &PathPolicy, config: &SandboxConfig) -> JailSpec {
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
        spec.limits = config.limits.clone();
        spec
    }
}

pub struct SandboxPool {
    backend: Backend,
    config: SandboxConfig,
    spec: JailSpec,
    host_options: HostOptions,
    host: Mutex<Option<Arc<HostSandbox>>>,
    docker: Mutex<HashMap<String, Arc<DockerSandbox>>>,
}

impl SandboxPool {
    pub fn new(
        backend: Backend,
        config: &SandboxConfig,
        spec: JailSpec,
        allow_without_landlock: bool,
    ) -> SandboxPool {
        SandboxPool {
            backend,
            config: config.clone(),
            spec,
            host_options: HostOptions::new(allow_without_landlock, config),
            host: Mutex::new(None),
            docker: Mutex::new(HashMap::new()),
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The sandbox for `session`, opened on first use. Setup failures (no Landlock without the
    /// opt-in, no Docker daemon, a missing image) are errors: nothing runs unconfined.
    pub async fn get(&self, session: &str) -> Result<Arc<dyn Sandbox>, SandboxError> {
        match self.backend {
            Backend::Host => {
                let mut host = self.host.lock().await;
                if let Some(sandbox) = host.as_ref() {
                    return Ok(sandbox.clone());
                }
                let sandbox = Arc::new(HostSandbox::with_options(
                    self.spec.clone(),
                    self.host_options,
                )?);
                *host = Some(sandbox.clone());
                Ok(sandbox)
            }
            Backend::Docker => {
                let mut docker = self.docker.lock().await;
                if let Some(sandbox) = docker.get(session) {
                    return Ok(sandbox.clone());
                }
                let sandbox = Arc::new(
                    DockerSandbox::connect(&self.config.docker, self.spec.clone(), session).await?,
                );
                docker.insert(session.to_string(), sandbox.clone());
                Ok(sandbox)
            }
        }
    }

    /// The jail every sandbox of this pool starts from, for a line that needs a changed one
    /// ([`SandboxPool::own`]).
    pub fn spec(&self) -> JailSpec {
        self.spec.clone()
    }

    /// A sandbox of its own over `spec` (one command line with the network: its confinement
    /// and proxy), dropped when the caller drops it: a host jail, or on the Docker backend a
    /// container of its own (removed when dropped), apart from the session's warm one.
    pub async fn own(
        &self,
        session: &str,
        spec: JailSpec,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        match self.backend {
            Backend::Host => Ok(Arc::new(HostSandbox::with_options(
                spec,
                self.host_options,
            )?)),
            Backend::Docker => {
                // Container names must differ while lines of one session overlap.
                static LINES: AtomicU64 = AtomicU64::new(0);
                let n = LINES.fetch_add(1, Ordering::Relaxed);
                let name = format!("{session}-net{n}");
                Ok(Arc::new(
                    DockerSandbox::connect(&self.config.docker, spec, &name).await?,
                ))
            }
        }
    }

    /// Remove every container this pool started (warden is exiting).
    pub async fn shutdown(&self) {
        let sandboxes: Vec<Arc<DockerSandbox>> =
            self.docker.lock().await.drain().map(|(_, s)| s).collect();
        for sandbox in sandboxes {
            match Arc::try_unwrap(sandbox) {
                Ok(sandbox) => sandbox.shutdown().await,
                // Still in use by a run: its drop removes the container.
                Err(shared) => drop(shared),
            }
        }
        self.host.lock().await.take();
    }
}
