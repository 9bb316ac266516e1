//! Sandboxes: where checked commands run.
//!
//! A [`Sandbox`] starts one program at a time inside its confinement; the executor
//! (`crate::exec`) wires pipes and redirections between such processes itself, so both
//! backends run exactly the IR the policy checked. The jail assumes the policy was fooled.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

pub mod docker;
pub mod host;
pub mod pool;
pub mod starts;
pub mod steps;

/// Which sandbox implementation runs commands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Landlock + seccomp + rlimits on this machine.
    #[default]
    Host,
    /// One warm container per session, driven through the Docker Engine API.
    Docker,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Host => "host",
            Backend::Docker => "docker",
        })
    }
}

/// Resource limits for every process a sandbox starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Processes (and threads) the jailed command may have at once.
    pub max_processes: u64,
    /// Address space per process (host) or memory of the container (Docker), in bytes.
    pub memory_bytes: u64,
    /// Largest file a process may write, in bytes.
    pub file_size_bytes: u64,
    /// CPU seconds per process.
    pub cpu_seconds: u64,
    /// Open file descriptors per process.
    pub open_files: u64,
    /// CPUs for a container (Docker only).
    pub cpus: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_processes: 256,
            memory_bytes: 2 << 30,
            file_size_bytes: 1 << 30,
            cpu_seconds: 300,
            open_files: 1024,
            cpus: 1.0,
        }
    }
}

/// What one jail may touch. Built once per session or `warden exec` and reused per process.
#[derive(Clone, Debug)]
pub struct JailSpec {
    /// Canonical path of the workspace: readable and writable, and `HOME` inside the jail.
    pub workspace: PathBuf,
    /// Extra readable (and, on the host, executable) roots.
    pub read_roots: Vec<PathBuf>,
    /// Extra writable roots besides the workspace.
    pub write_roots: Vec<PathBuf>,
    /// Variables added to the scrubbed base environment. Never secrets.
    pub env: Vec<(String, String)>,
    pub limits: Limits,
    /// When set, the only network destination the jail may reach (an egress proxy in warden).
    pub egress_proxy: Option<SocketAddr>,
    /// The network namespace the host jail's processes join with an egress proxy: only
    /// loopback, on which only the proxy listens (`host::netns`). Required with a proxy.
    pub network_namespace: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// The user namespace that owns `network_namespace`, joined first (warden not root).
    pub user_namespace: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// Without a namespace: the jail shares warden's network and warden makes every `connect`
    /// itself, to the proxy only (`host::connect`). One of this and `network_namespace` is
    /// required with a proxy on the host backend.
    pub supervised_network: Option<std::sync::Arc<host::connect::SupervisedNetwork>>,
}

impl JailSpec {
    /// A jail over `workspace` with default limits and nothing else readable.
    pub fn new(workspace: PathBuf) -> JailSpec {
        JailSpec {
            workspace,
            read_roots: Vec::new(),
            write_roots: Vec::new(),
            env: Vec::new(),
            limits: Limits::default(),
            egress_proxy: None,
            network_namespace: None,
            user_namespace: None,
            supervised_network: None,
        }
    }
}

/// One of a jailed process's standard streams.
#[derive(Debug)]
pub enum Stdio {
    /// `/dev/null`.
    Null,
    /// An already-opened descriptor (a pipe end or a file warden opened after the path check).
    Fd(OwnedFd),
}

/// One program to start inside a sandbox.
#[derive(Debug)]
pub struct ProcessSpec {
    pub argv: Vec<String>,
    /// Host path of the working directory, inside the workspace or a readable root.
    pub cwd: PathBuf,
    pub stdin: Stdio,
    pub stdout: Stdio,
    pub stderr: Stdio,
    /// Further descriptors (3-9) for redirections such as `3>file`, as (target fd, source).
    pub extra_fds: Vec<(u8, OwnedFd)>,
    /// Variables added to the sandbox's environment for this process only (`LANG=C sort`;
    /// the policy decided which are harmless).
    pub env: Vec<(String, String)>,
}

impl ProcessSpec {
    /// `argv` in `cwd` with no input or output (tests and benches).
    pub fn silent(argv: &[&str], cwd: &std::path::Path) -> ProcessSpec {
        ProcessSpec {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: cwd.to_path_buf(),
            stdin: Stdio::Null,
            stdout: Stdio::Null,
            stderr: Stdio::Null,
            extra_fds: Vec::new(),
            env: Vec::new(),
        }
    }
}

/// How a jailed process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl ExitStatus {
    /// The status as a shell reports it (`128 + n` for a signal).
    pub fn as_shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The jail could not be built or entered; nothing ran (exit 125).
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    /// The program does not exist inside the sandbox (exit 127).
    #[error("{0}: command not found in the sandbox")]
    NotFound(String),
    /// The program exists but the kernel refused to execute it, e.g. a file in the workspace,
    /// which the jail never lets execute (exit 126; 127 for a missing interpreter).
    #[error("{program}: cannot execute: {source}")]
    CannotExecute {
        program: String,
        source: std::io::Error,
    },
    #[error("sandbox I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// A place to run jailed programs.
#[async_trait]
pub trait Sandbox: Send + Sync {
    fn backend(&self) -> Backend;

    /// Start one program inside the jail with the given standard streams.
    async fn spawn(&self, spec: ProcessSpec) -> Result<Box<dyn JailedProcess>, SandboxError>;

    /// The path under which a jailed program sees `host_path` (identity on the host,
    /// `/workspace/...` in a container); `None` when the jail cannot see it at all.
    fn guest_path(&self, host_path: &Path) -> Option<PathBuf>;

    /// Whether `chmod` inside this jail does nothing (the host jail: Landlock cannot confine
    /// it by path), so the executor applies checked chmod commands itself.
    fn ignores_chmod(&self) -> bool {
        false
    }

    /// Whether code the policy cannot read (`python3 tool.py`, `make`) stays confined here:
    /// filesystem and network enforced by the kernel (Landlock + seccomp) or a container. The
    /// executor refuses such commands elsewhere; unknown sandboxes do not.
    fn confines_code(&self) -> bool {
        false
    }
}

/// A program started by a [`Sandbox`].
#[async_trait]
pub trait JailedProcess: Send {
    /// Wait for the program itself to end.
    async fn wait(&mut self) -> Result<ExitStatus, SandboxError>;

    /// Kill the program and everything it started. Idempotent; after it returns no process
    /// started by this program is left running.
    async fn kill(&mut self);

    /// After [`JailedProcess::wait`]: how many processes the program had left running in the
    /// background when it exited (all killed). Backends that cannot tell report 0.
    fn background_killed(&self) -> usize {
        0
    }
}
