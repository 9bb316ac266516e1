//! The sandbox a CLI subcommand runs in, whichever backend was chosen (`--backend`, else the
//! config's `sandbox.backend`), and its orderly end.

use super::JailRequest;
use crate::config::Config;
use crate::exec::ExecRoots;
use crate::sandbox::docker::DockerSandbox;
use crate::sandbox::host::HostSandbox;
use crate::sandbox::{Backend, Sandbox, SandboxError};
use std::path::PathBuf;

/// A sandbox of either backend.
pub enum CliSandbox {
    Host(Box<HostSandbox>),
    Docker(DockerSandbox),
}

/// What a subcommand needs to run scripts.
pub struct Opened {
    pub sandbox: CliSandbox,
    pub roots: ExecRoots,
    /// The canonical workspace: the working directory of `warden jail`.
    pub workspace: PathBuf,
}

impl CliSandbox {
    /// Build the sandbox for `backend`. The Docker one belongs to session `session`; connecting
    /// also removes the containers of crashed wardens.
    pub async fn open(
        backend: Backend,
        config: &Config,
        request: &JailRequest,
        session: &str,
    ) -> Result<Opened, SandboxError> {
        match backend {
            Backend::Host => {
                let (sandbox, roots) = super::host_sandbox(config, request)?;
                let workspace = sandbox.spec().workspace.clone();
                Ok(Opened {
                    sandbox: CliSandbox::Host(Box::new(sandbox)),
                    roots,
                    workspace,
                })
            }
            Backend::Docker => {
                let spec = super::jail_spec(config, request)?;
                let roots = ExecRoots::from_spec(&spec);
                let workspace = spec.workspace.clone();
                let sandbox = DockerSandbox::connect(&config.sandbox.docker, spec, session).await?;
                Ok(Opened {
                    sandbox: CliSandbox::Docker(sandbox),
                    roots,
                    workspace,
                })
            }
        }
    }

    pub fn get(&self) -> &dyn Sandbox {
        match self {
            CliSandbox::Host(s) => s.as_ref(),
            CliSandbox::Docker(s) => s,
        }
    }

    /// End the sandbox: the Docker backend removes its session container.
    pub async fn close(self) {
        if let CliSandbox::Docker(sandbox) = self {
            sandbox.shutdown().await;
        }
    }
}
