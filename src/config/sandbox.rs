//! `[sandbox]`: which backend runs commands, their limits and timeout, the Docker backend's
//! image and socket, and background commands.

use crate::sandbox::{Backend, Limits};
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    pub backend: Backend,
    /// Wall-clock limit for one command string, in seconds.
    pub timeout_secs: u64,
    /// Extra readable roots for the policy and the jail.
    pub read: Vec<PathBuf>,
    /// Run the host backend even when the kernel has no Landlock (much weaker: says so).
    pub allow_without_landlock: bool,
    pub limits: Limits,
    pub docker: DockerConfig,
    pub background: BackgroundConfig,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            backend: Backend::Host,
            timeout_secs: 120,
            read: Vec::new(),
            allow_without_landlock: false,
            limits: Limits::default(),
            docker: DockerConfig::default(),
            background: BackgroundConfig::default(),
        }
    }
}

/// `[sandbox.background]`: commands the agent starts with `bash` `background: true` (same
/// policy, approvals and sandbox as any other; see `crate::tools::background`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackgroundConfig {
    /// Background commands that may run at once in the agent (all chats together); 0: none.
    pub max_running: usize,
    /// Wall-clock limit of one background command, in seconds.
    pub timeout_secs: u64,
    /// How much of its output is kept: the last bytes, stdout and stderr together.
    pub tail_bytes: usize,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        BackgroundConfig {
            max_running: 4,
            timeout_secs: 3600,
            tail_bytes: 16 * 1024,
        }
    }
}

impl BackgroundConfig {
    /// The largest tail a setting may ask for (it is kept in memory per command).
    pub const MAX_TAIL_BYTES: usize = 1 << 20;

    pub(super) fn validate(&self) -> Result<(), String> {
        if self.timeout_secs == 0 {
            return Err("sandbox.background.timeout_secs must be at least 1".into());
        }
        if !(1024..=Self::MAX_TAIL_BYTES).contains(&self.tail_bytes) {
            return Err(format!(
                "sandbox.background.tail_bytes = {} must be between 1024 and {}",
                self.tail_bytes,
                Self::MAX_TAIL_BYTES
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DockerConfig {
    /// Image the session containers run.
    pub image: String,
    /// OCI runtime: `runc` (default) or `runsc` for gVisor.
    pub runtime: Option<String>,
    /// Remove a session's container after this many idle seconds.
    pub idle_secs: u64,
    /// Docker Engine socket.
    pub socket: PathBuf,
}

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            image: "warden-sandbox:minimal".into(),
            runtime: None,
            idle_secs: 600,
            socket: PathBuf::from("/var/run/docker.sock"),
        }
    }
}
