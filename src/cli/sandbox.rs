//! Building the sandbox a CLI command runs in (`jail`, `exec`): the jail's roots are exactly the
//! roots the path checks use, so Landlock and the executor's own opens agree with the policy.

use super::EXIT_SETUP;
use crate::config::Config;
use crate::egress::jailed::JailedNetwork;
use crate::egress::network::{NetworkAsker, NetworkConfig};
use crate::exec::{run_script, ExecOptions};
use crate::policy::{PathPolicy, Script};
use crate::sandbox::host::{HostOptions, HostSandbox};
use crate::sandbox::pool::SandboxPool;
use crate::sandbox::{Backend, JailSpec, Sandbox, SandboxError};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
    let paths = PathPolicy::new(&workspace, &[], &read, &workspace).map_err(|e| {
        SandboxError::Setup(format!("cannot use the workspace or a readable root: {e}"))
    })?;
    paths
        .refuse_exposing(&config.own_files(config.policy.as_deref()))
        .map_err(SandboxError::Setup)?;
    Ok(paths)
}

/// The backend a command runs in: the flag, else the config's `sandbox.backend`.
pub fn backend(flag: Option<Backend>, config: &Config) -> Backend {
    flag.unwrap_or(config.sandbox.backend)
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

/// What `exec` and `jail` share after their checks: a sandbox over `paths` (the jail's roots
/// are the checked roots), the script run on warden's own terminal until it ends, times out or
/// warden is interrupted, and everything torn down. Returns the process exit code.
pub fn run_in_sandbox(config: &Config, run: SandboxRun<'_>) -> i32 {
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warden: cannot start the async runtime: {e}");
            return EXIT_SETUP;
        }
    };
    let mut spec = JailSpec::for_paths(&run.paths, &config.sandbox);
    // The proxy runs on this runtime while the script does.
    let network = match &run.network {
        Some(network) => {
            let _entered = runtime.enter();
            open_network(run.backend, network, &mut spec)
        }
        None => None,
    };
    let pool = SandboxPool::new(
        run.backend,
        &config.sandbox,
        spec,
        run.allow_without_landlock,
    );
    let mut options = ExecOptions::inherit(run.paths, timeout(run.timeout_flag, config));
    options.protection = run.protection;
    let started = std::time::Instant::now();
    let audit = run.audit;
    let pool = Arc::new(pool);
    let opened = pool.clone();
    let close = |status: i32| async move {
        pool.shutdown().await;
        if let Some(network) = network {
            let report = network.close().await;
            for line in report.lines() {
                eprintln!("warden: {line}");
            }
            if let Some(audit) = audit {
                audit.record(config, status, started.elapsed(), &report);
            }
        }
    };
    run_with(runtime, options, run.script, opened.get(run.session), close)
}

/// The jail's network when `[network]` has rules and this backend can confine it to the
/// proxy (`egress::jailed::open`, as for the agent's commands); otherwise none, said on stderr.
fn open_network(
    backend: Backend,
    network: &NetworkRun,
    spec: &mut JailSpec,
) -> Option<JailedNetwork> {
    let yes = network.yes;
    let asker = NetworkAsker::new(move |request| {
        if yes {
            eprintln!("warden: approved with --yes: {}", request.describe());
        } else {
            eprintln!(
                "warden: refused: {}; there is nobody to ask while the command runs (pass \
                 --yes to approve [network.hosts] asks from a script)",
                request.describe()
            );
        }
        Box::pin(async move { yes })
    });
    let secrets = &network.secrets;
    let secret = |name: &str| crate::secret::stored_secret(secrets, name);
    match crate::egress::jailed::open(&network.config, backend, asker, &secret, spec) {
        Ok(jailed) => jailed,
        Err(why) => {
            eprintln!("warden: {why}");
            None
        }
    }
}

/// What [`run_in_sandbox`] runs, and how.
pub struct SandboxRun<'a> {
    pub backend: Backend,
    /// The checked roots (the jail's are the same).
    pub paths: PathPolicy,
    pub script: &'a Script,
    pub timeout_flag: Option<u64>,
    pub allow_without_landlock: bool,
    pub session: &'a str,
    /// What the write verifier protects; `None` only for `warden jail` (no policy either).
    pub protection: Option<crate::verify::Protection>,
    /// `[network]` (the config's over the policy file's); `None` for `warden jail`.
    pub network: Option<NetworkRun>,
    /// The audit row written when the run had the network; `None` for `warden jail`.
    pub audit: Option<ExecAudit>,
}

/// What `warden exec`'s audit row says about a run that had the network (the proxy's every
/// decision and the bytes by host go into it, as for the agent's commands).
pub struct ExecAudit {
    pub command: String,
    pub workspace: PathBuf,
    pub decision: crate::audit::AuditDecision,
    /// The policy's reason.
    pub reason: String,
}

impl ExecAudit {
    /// Written after the run (the report exists only then); a failure is said on stderr.
    fn record(
        self,
        config: &Config,
        status: i32,
        took: Duration,
        report: &crate::egress::jailed::NetworkReport,
    ) {
        let entry = crate::audit::AuditEntry {
            session: "exec".into(),
            tool: "exec".into(),
            input: serde_json::json!({
                "command": self.command,
                "workspace": self.workspace,
            })
            .to_string(),
            decision: self.decision,
            reason: self.reason,
            exit_code: Some(status),
            duration_ms: took.as_millis() as u64,
            network: Some(report.to_json()),
        };
        let recorded = crate::schema::open_in(&config.data_dir)
            .map_err(|e| e.to_string())
            .and_then(|db| crate::audit::record(&db, &entry).map_err(|e| e.to_string()));
        if let Err(e) = recorded {
            eprintln!(
                "warden: the audit log in {} could not be written: {e}",
                config.data_dir.display()
            );
        }
    }
}

/// The network a run may use.
pub struct NetworkRun {
    pub config: NetworkConfig,
    /// `[skills.secrets]`, warden's secret store, for `[network.secrets]`.
    pub secrets: std::collections::BTreeMap<String, crate::secret::Secret>,
    /// `--yes`: `ask` rules are approved without asking.
    pub yes: bool,
}

/// [`run_in_sandbox`] on the host backend alone: the same jail, without linking the Docker
/// client, for the `warden` front binary (a jailed command's start-up cost is warden's own).
pub fn run_on_host(
    config: &Config,
    paths: PathPolicy,
    script: &Script,
    timeout_flag: Option<u64>,
    allow_without_landlock: bool,
) -> i32 {
    let spec = JailSpec::for_paths(&paths, &config.sandbox);
    let host = HostOptions::new(allow_without_landlock, &config.sandbox);
    let open = async move {
        HostSandbox::with_options(spec, host).map(|s| Arc::new(s) as Arc<dyn Sandbox>)
    };
    // `warden jail` runs a program without the policy, so with no IR to hold its writes to.
    let mut options = ExecOptions::inherit(paths, timeout(timeout_flag, config));
    options.protection = None;
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warden: cannot start the async runtime: {e}");
            return EXIT_SETUP;
        }
    };
    crate::sandbox::steps::mark("async runtime");
    run_with(runtime, options, script, open, |_| async {})
}

/// Open a sandbox with `open`, run `script` in it, then `close` (inside one runtime, with
/// SIGINT/SIGTERM/SIGHUP cancelling the script).
fn run_with<Close: Future<Output = ()>>(
    runtime: tokio::runtime::Runtime,
    mut options: ExecOptions,
    script: &Script,
    open: impl Future<Output = Result<Arc<dyn Sandbox>, SandboxError>>,
    close: impl FnOnce(i32) -> Close,
) -> i32 {
    runtime.block_on(async {
        let cancel = CancellationToken::new();
        cancel_on_signals(cancel.clone());
        let sandbox = match open.await {
            Ok(s) => {
                crate::sandbox::steps::mark("jail ready");
                s
            }
            Err(e) => {
                eprintln!("warden: {e}");
                return EXIT_SETUP;
            }
        };
        options.cancel = cancel;
        let status = match run_script(sandbox.as_ref(), script, &options).await {
            Ok(out) => out.status,
            Err(e) => {
                eprintln!("warden: {e}");
                e.exit_code()
            }
        };
        crate::sandbox::steps::mark("script finished");
        drop(sandbox);
        close(status).await;
        crate::sandbox::steps::mark("sandbox closed");
        status
    })
}
