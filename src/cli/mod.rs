//! The subcommands behind `main.rs`: argument structs (clap) and their logic, so the binary
//! stays a thin dispatcher and tests can drive the same code.

pub mod backend;
pub mod doctor;
pub mod image;
pub mod jail;

use crate::config::{Config, ProcessEnv};
use crate::exec::ExecRoots;
use crate::sandbox::host::{HostOptions, HostSandbox};
use crate::sandbox::{JailSpec, SandboxError};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Exit status when the sandbox could not be set up.
pub const EXIT_SETUP: i32 = 125;
/// Exit status for usage and configuration errors.
pub const EXIT_USAGE: i32 = 2;

/// Logs go to stderr, filtered by `RUST_LOG` (default: warnings).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Load the config (`--config`, `WARDEN_CONFIG`, or `~/.warden/config.toml`).
pub fn load_config(explicit: Option<&Path>) -> Result<Config, String> {
    Config::load(explicit, &ProcessEnv).map_err(|e| e.to_string())
}

/// What a sandboxed subcommand needs from its flags.
pub struct JailRequest {
    pub workspace: Option<PathBuf>,
    pub read: Vec<PathBuf>,
    pub allow_without_landlock: bool,
}

/// The jail for a CLI subcommand: workspace (default: the current directory) and read roots
/// canonicalized, limits from the config.
pub fn jail_spec(config: &Config, request: &JailRequest) -> Result<JailSpec, SandboxError> {
    let workspace = match &request.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| {
            SandboxError::Setup(format!("cannot determine the current directory: {e}"))
        })?,
    };
    let canonical = |p: &Path, what: &str| {
        p.canonicalize()
            .map_err(|e| SandboxError::Setup(format!("{what} {}: {e}", p.display())))
    };
    let mut spec = JailSpec::new(canonical(&workspace, "workspace")?);
    for root in config.sandbox.read.iter().chain(&request.read) {
        spec.read_roots.push(canonical(root, "readable root")?);
    }
    spec.limits = config.sandbox.limits.clone();
    Ok(spec)
}

/// The host sandbox for a CLI subcommand.
pub fn host_sandbox(
    config: &Config,
    request: &JailRequest,
) -> Result<(HostSandbox, ExecRoots), SandboxError> {
    let spec = jail_spec(config, request)?;
    let roots = ExecRoots::from_spec(&spec);
    let options = HostOptions {
        allow_without_landlock: request.allow_without_landlock
            || config.sandbox.allow_without_landlock,
    };
    Ok((HostSandbox::with_options(spec, options)?, roots))
}

/// The timeout from a flag or the config.
pub fn timeout(flag: Option<u64>, config: &Config) -> Duration {
    Duration::from_secs(flag.unwrap_or(config.sandbox.timeout_secs))
}

/// Cancel `token` on SIGINT, SIGTERM or SIGHUP, so the jailed processes are killed rather than
/// orphaned when warden is interrupted.
pub fn cancel_on_signals(token: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    tokio::spawn(async move {
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::warn!("cannot install signal handlers; an interrupted warden may leave jailed processes running");
            return;
        };
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
