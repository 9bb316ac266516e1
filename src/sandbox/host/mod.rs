//! The host backend: Landlock + seccomp + rlimits + capabilities + a pids cgroup, applied to
//! each process warden starts, on this machine, without user namespaces.
//!
//! One file per kernel mechanism — `landlock.rs`, `seccomp.rs`, `rlimits.rs`,
//! `capabilities.rs`, `cgroup.rs`, `env.rs`, `fds.rs` — and `launcher.rs`, the child-side
//! sequence that applies them in order; `supervisor.rs`, the one thread that answers the calls
//! the filter hands to warden (`flock.rs`, `connect.rs`), and `netns.rs`, the jail's own
//! network namespace. [`HostSandbox::new`] builds everything that can be
//! built once (the Landlock rule table, the seccomp programs, the environment, the limits), so
//! a spawn only clones and applies.

mod capabilities;
pub mod cgroup;
pub mod connect;
mod env;
mod fds;
mod flock;
pub mod kernel;
mod landlock;
mod launcher;
pub mod netns;
mod notification;
mod process;
mod rlimits;
mod seccomp;
mod supervisor;
mod tmpdir;

pub use env::JAIL_PATH;
pub use seccomp::Network;

use crate::config::SandboxConfig;
use crate::sandbox::steps::mark;
use crate::sandbox::{Backend, JailSpec, JailedProcess, ProcessSpec, Sandbox, SandboxError};
use async_trait::async_trait;
use std::ffi::{c_char, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Choices the caller makes about the host jail.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostOptions {
    /// Run even when the kernel has no Landlock (config `sandbox.allow_without_landlock`, CLI
    /// `--allow-without-landlock`). Files, TCP and `/proc` are then NOT confined.
    pub allow_without_landlock: bool,
}

impl HostOptions {
    /// The weak mode is on when either the CLI flag or the config asks for it.
    pub fn new(allow_without_landlock_flag: bool, config: &SandboxConfig) -> HostOptions {
        HostOptions {
            allow_without_landlock: allow_without_landlock_flag || config.allow_without_landlock,
        }
    }
}

/// What the jail could and could not set up, for logs and `warden doctor`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct HostJailStatus {
    /// The kernel's Landlock ABI, or why there is none.
    pub landlock_abi: Result<u32, String>,
    /// Running without Landlock because the caller allowed it.
    pub weak_mode: bool,
    /// The pids cgroup directory in use, or why there is none.
    pub pids_cgroup: Result<PathBuf, String>,
    /// Whether warden runs as root (then capabilities are dropped and the cgroup counts).
    pub root: bool,
}

pub struct HostSandbox {
    spec: JailSpec,
    tmp: tmpdir::PrivateTmp,
    env: Vec<CString>,
    landlock: Option<landlock::LandlockTemplate>,
    seccomp: seccomp::SeccompProgram,
    rlimits: rlimits::RlimitPlan,
    capabilities: capabilities::CapabilityPlan,
    cgroups: Option<cgroup::PidsCgroupRoot>,
    /// What the supervisor answers for the jail: `flock` beneath the workspace, the TMPDIR and
    /// the writable roots (canonical), and `connect` to the proxy when supervised.
    answers: supervisor::Answers,
    status: HostJailStatus,
}

impl HostSandbox {
    /// Build the jail for `spec`, failing closed when the kernel lacks Landlock.
    pub fn new(spec: JailSpec) -> Result<HostSandbox, SandboxError> {
        HostSandbox::with_options(spec, HostOptions::default())
    }

    pub fn with_options(spec: JailSpec, options: HostOptions) -> Result<HostSandbox, SandboxError> {
        if !spec.workspace.is_absolute() || !spec.workspace.is_dir() {
            return Err(SandboxError::Setup(format!(
                "the workspace {} is not an existing absolute directory",
                spec.workspace.display()
            )));
        }
        let landlock_abi = kernel::landlock_abi();
        if let Err(why) = &landlock_abi {
            if !options.allow_without_landlock {
                return Err(SandboxError::Setup(format!(
                    "Landlock is not available: {why}. Without it the host jail cannot confine \
                     files, /proc or TCP, so warden refuses to run commands. Use the Docker backend, \
                     or accept a much weaker jail with --allow-without-landlock \
                     (config: sandbox.allow_without_landlock = true)."
                )));
            }
            let warning = format!(
                "WARNING: running the host jail WITHOUT Landlock ({why}): jailed commands can read \
                 and write every file warden's user can, read other processes' /proc entries \
                 (including warden's environment) and use TCP. Only seccomp, rlimits and \
                 capability dropping remain."
            );
            eprintln!("{warning}");
            tracing::warn!("{warning}");
        }
        let network = network_mode(&spec, &landlock_abi).map_err(SandboxError::Setup)?;
        kernel::seccomp_available().map_err(|why| {
            SandboxError::Setup(format!("seccomp filters are not available: {why}"))
        })?;
        if !kernel::pidfd_available() {
            return Err(SandboxError::Setup(
                "pidfd_open is not available (Linux ≥ 5.3 needed to wait for jailed processes)"
                    .into(),
            ));
        }
        mark("kernel probes");

        let tmp = tmpdir::PrivateTmp::create()?;
        mark("private TMPDIR");
        let env = env::build(&spec.workspace, tmp.path(), &spec.env)?;
        mark("environment");
        let landlock = match &landlock_abi {
            // Rulesets are instantiated per spawn; a failure there is a setup error too.
            Ok(_) => Some(landlock::LandlockTemplate::new(&spec, tmp.path())?),
            Err(_) => None,
        };
        mark("Landlock rule table");
        let seccomp = seccomp::SeccompProgram::new(network)?;
        mark("seccomp program");
        let capabilities = capabilities::CapabilityPlan::for_current_process()?;
        let root = kernel::is_root();
        mark("capability plan");

        let (cgroups, pids_cgroup) = match cgroup::PidsCgroupRoot::detect() {
            Ok(found) => {
                let dir = found.dir.clone();
                (Some(found), Ok(dir))
            }
            Err(why) => {
                if root {
                    tracing::warn!(
                        reason = %why,
                        "no pids cgroup: the process limit is not enforced for root (RLIMIT_NPROC does not apply to uid 0)"
                    );
                }
                (None, Err(why))
            }
        };
        // RLIMIT_NPROC counts all tasks of the real uid; root is exempt from it anyway.
        let baseline = if root {
            0
        } else {
            rlimits::tasks_of_user(nix::unistd::getuid().as_raw())
        };
        mark("pids cgroup root");
        let rlimits = rlimits::RlimitPlan::new(&spec.limits, baseline);
        let lockable: Arc<[PathBuf]> = [spec.workspace.as_path(), tmp.path()]
            .into_iter()
            .chain(spec.write_roots.iter().map(PathBuf::as_path))
            .map(|root| root.canonicalize().unwrap_or_else(|_| root.to_path_buf()))
            .collect();

        let answers = supervisor::Answers {
            writable: lockable,
            network: match network {
                Network::Supervised => spec.supervised_network.clone(),
                Network::None | Network::EgressProxy => None,
            },
        };
        mark("rlimits, flock roots");
        tracing::debug!(
            workspace = %spec.workspace.display(),
            rules = ?landlock.as_ref().map(|l| l.paths()),
            landlock = ?landlock_abi,
            cgroup = ?pids_cgroup,
            root,
            "host jail ready"
        );
        Ok(HostSandbox {
            status: HostJailStatus {
                weak_mode: landlock_abi.is_err(),
                landlock_abi,
                pids_cgroup,
                root,
            },
            spec,
            tmp,
            env,
            landlock,
            seccomp,
            rlimits,
            capabilities,
            cgroups,
            answers,
        })
    }

    pub fn status(&self) -> &HostJailStatus {
        &self.status
    }

    pub fn spec(&self) -> &JailSpec {
        &self.spec
    }

    /// The private TMPDIR jailed processes see.
    pub fn tmpdir(&self) -> &Path {
        self.tmp.path()
    }

    /// Start one process (synchronous: clone, child setup, exec).
    fn start(&self, spec: ProcessSpec) -> Result<process::Started, SandboxError> {
        let argv0 = spec
            .argv
            .first()
            .ok_or_else(|| SandboxError::Setup("empty argv".into()))?
            .clone();
        let program = env::resolve_program(&argv0, &spec.cwd)
            .ok_or_else(|| SandboxError::NotFound(argv0.clone()))?;
        let program = env::c_path(&program)?;
        let argv: Vec<CString> = spec
            .argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| {
                SandboxError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{argv0}: an argument contains a NUL byte"),
                ))
            })?;
        let argv_ptrs = null_terminated(&argv);
        // Assignments written before the command (`LANG=C sort`) for this process only.
        let env = match spec.env.is_empty() {
            true => None,
            false => Some(env::with_extra(&self.env, &spec.env)?),
        };
        let envp_ptrs = null_terminated(env.as_deref().unwrap_or(&self.env));
        let cwd = env::c_path(&spec.cwd)?;
        let fds = fds::FdPlan::new(spec.stdin, spec.stdout, spec.stderr, spec.extra_fds)?;
        tracing::trace!(program = %argv0, fds = ?fds.targets(), "spawning a jailed process");
        mark("program, argv, fds");
        let mut cgroup = match &self.cgroups {
            Some(root) => Some(root.create(self.spec.limits.max_processes)?),
            None => None,
        };
        mark("pids cgroup");
        let ruleset: Option<OwnedFd> = match &self.landlock {
            Some(template) => match template.instantiate()? {
                Some(fd) => Some(fds::dup_private(&fd)?),
                None => None,
            },
            None => None,
        };
        mark("Landlock ruleset");
        let handover = supervisor::Handover::new()
            .map_err(|e| SandboxError::Setup(format!("cannot make the listener's socket: {e}")))?;
        mark("listener socket");
        let plan = launcher::ChildPlan {
            program: &program,
            argv: &argv_ptrs,
            envp: &envp_ptrs,
            cwd: &cwd,
            fds: &fds,
            cgroup_join: cgroup.as_ref().and_then(|c| c.join_fd()),
            network_namespace: match self.spec.egress_proxy {
                Some(_) => self
                    .spec
                    .network_namespace
                    .as_ref()
                    .map(|fd| fd.as_raw_fd()),
                None => None,
            },
            user_namespace: match self.spec.egress_proxy {
                Some(_) => self.spec.user_namespace.as_ref().map(|fd| fd.as_raw_fd()),
                None => None,
            },
            rlimits: &self.rlimits,
            capabilities: &self.capabilities,
            landlock: match (&ruleset, &self.landlock) {
                (Some(fd), Some(t)) => Some((fd.as_raw_fd(), t.proc_self_access())),
                _ => None,
            },
            seccomp: &self.seccomp,
            listener_socket: handover.child_end(),
            trace: crate::sandbox::steps::enabled(),
        };
        let (pid, pidfd) =
            launcher::launch(&plan).map_err(|e| e.into_sandbox_error(&argv0, &spec.cwd))?;
        if let Some(cg) = &mut cgroup {
            cg.close_join_fd();
        }
        // The process runs already: a failure here leaves it without flock and connect (both
        // ENOSYS), not without a jail.
        let supervisor = match handover.receive() {
            Ok(Some(listener)) => supervisor::Supervisor::start(listener, self.answers.clone())
                .map_err(
                    |e| tracing::warn!(error = %e, "no seccomp supervisor for a jailed process"),
                )
                .ok(),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "the jail's seccomp listener was not received");
                None
            }
        };
        mark("supervisor");
        Ok(process::Started {
            pid,
            pidfd,
            cgroup,
            supervisor,
        })
    }

    /// Whether a jailed program can see `path` at all.
    fn visible(&self, path: &Path) -> bool {
        let roots = [self.spec.workspace.as_path(), self.tmp.path()]
            .into_iter()
            .chain(self.spec.read_roots.iter().map(PathBuf::as_path))
            .chain(self.spec.write_roots.iter().map(PathBuf::as_path));
        roots.into_iter().any(|r| path.starts_with(r))
            || ["/usr", "/bin", "/sbin", "/lib", "/lib64"]
                .iter()
                .any(|d| path.starts_with(d))
    }
}

/// How the jail reaches its egress proxy, if it has one: in a network namespace of its own
/// (`netns.rs`), or in warden's with every `connect` made by warden (`connect.rs`).
fn network_mode(spec: &JailSpec, landlock_abi: &Result<u32, String>) -> Result<Network, String> {
    let Some(proxy) = spec.egress_proxy else {
        return Ok(Network::None);
    };
    if spec.network_namespace.is_some() {
        egress_confinable(landlock_abi)?;
        return Ok(Network::EgressProxy);
    }
    match &spec.supervised_network {
        Some(supervised) if supervised.proxy() == proxy => {
            kernel::connect_supervision_available()?;
            Ok(Network::Supervised)
        }
        Some(supervised) => Err(format!(
            "the supervised network's proxy {} is not the jail's egress proxy {proxy}",
            supervised.proxy()
        )),
        None => Err(
            "an egress proxy needs the jail's own network namespace (host::netns) or warden's \
             connect supervisor (host::connect): without either the jail could reach any host \
             on the proxy's port"
                .into(),
        ),
    }
}

/// In the jail's own namespace seccomp lets the jail `connect`; only Landlock's TCP rules (ABI ≥ 4)
/// then keep it to the proxy's port. Without them the jail could connect anywhere: refuse.
fn egress_confinable(landlock_abi: &Result<u32, String>) -> Result<(), String> {
    match landlock_abi {
        Ok(abi) if *abi >= 4 => Ok(()),
        Ok(abi) => Err(format!(
            "an egress proxy needs Landlock ABI 4 or newer to confine TCP connects to its port; \
             this kernel has ABI {abi}, so a jail with network access could connect anywhere"
        )),
        Err(why) => Err(format!(
            "an egress proxy needs Landlock to confine TCP connects to its port ({why})"
        )),
    }
}

fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

#[async_trait]
impl Sandbox for HostSandbox {
    fn backend(&self) -> Backend {
        Backend::Host
    }

    async fn spawn(&self, spec: ProcessSpec) -> Result<Box<dyn JailedProcess>, SandboxError> {
        Ok(Box::new(process::HostProcess::new(self.start(spec)?)?))
    }

    fn guest_path(&self, host_path: &Path) -> Option<PathBuf> {
        self.visible(host_path).then(|| host_path.to_path_buf())
    }

    fn ignores_chmod(&self) -> bool {
        true
    }

    /// Not in the weak mode: without Landlock, only seccomp stands between code and the files.
    fn confines_code(&self) -> bool {
        self.landlock.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_egress_proxy_needs_landlock_tcp_rules() {
        assert!(egress_confinable(&Ok(4)).is_ok());
        assert!(egress_confinable(&Ok(7)).is_ok());
        assert!(egress_confinable(&Ok(3)).unwrap_err().contains("ABI 3"));
        assert!(egress_confinable(&Err("not compiled in".into()))
            .unwrap_err()
            .contains("not compiled in"));
    }

    #[tokio::test]
    async fn a_failing_child_step_is_reported() {
        let ws = tempfile::tempdir().unwrap();
        let sandbox = HostSandbox::new(JailSpec::new(ws.path().canonicalize().unwrap())).unwrap();
        let err = match sandbox
            .spawn(ProcessSpec::silent(
                &["true"],
                Path::new("/nonexistent-dir"),
            ))
            .await
        {
            Err(e) => e,
            Ok(_) => panic!("spawned in a missing directory"),
        };
        assert!(
            err.to_string().contains("cannot enter /nonexistent-dir"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn jailed_processes_lock_against_each_other_through_one_supervisor() {
        if !Path::new("/usr/bin/flock").exists() {
            eprintln!("skipped: flock(1) (util-linux) is not installed");
            return;
        }
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let sandbox = HostSandbox::new(JailSpec::new(ws.clone())).unwrap();
        let mut holder = sandbox
            .spawn(ProcessSpec::silent(
                &["flock", "build.lock", "sleep", "2"],
                &ws,
            ))
            .await
            .unwrap();
        // The holder's lock, seen by a second tree: `flock -n` fails (status 1) while it holds.
        let mut seen = None;
        for _ in 0..100 {
            let mut probe = sandbox
                .spawn(ProcessSpec::silent(
                    &["flock", "-n", "build.lock", "true"],
                    &ws,
                ))
                .await
                .unwrap();
            let status = probe.wait().await.unwrap();
            if status == crate::sandbox::ExitStatus::Code(1) {
                seen = Some(status);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(seen, Some(crate::sandbox::ExitStatus::Code(1)));
        assert_eq!(
            holder.wait().await.unwrap(),
            crate::sandbox::ExitStatus::Code(0)
        );
        let mut after = sandbox
            .spawn(ProcessSpec::silent(
                &["flock", "-n", "build.lock", "true"],
                &ws,
            ))
            .await
            .unwrap();
        assert_eq!(
            after.wait().await.unwrap(),
            crate::sandbox::ExitStatus::Code(0)
        );
    }

    #[tokio::test]
    async fn programs_run_and_report_their_status() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let sandbox = HostSandbox::new(JailSpec::new(ws.clone())).unwrap();
        let mut p = sandbox
            .spawn(ProcessSpec::silent(&["sh", "-c", "exit 3"], &ws))
            .await
            .unwrap();
        assert_eq!(p.wait().await.unwrap(), crate::sandbox::ExitStatus::Code(3));
        let mut p = sandbox
            .spawn(ProcessSpec::silent(&["sleep", "30"], &ws))
            .await
            .unwrap();
        p.kill().await;
        assert_eq!(
            p.wait().await.unwrap(),
            crate::sandbox::ExitStatus::Signal(libc::SIGKILL)
        );
        assert!(matches!(
            sandbox
                .spawn(ProcessSpec::silent(&["no-such-program-x"], &ws))
                .await,
            Err(SandboxError::NotFound(_))
        ));
        assert_eq!(sandbox.guest_path(&ws.join("f")), Some(ws.join("f")));
        assert_eq!(sandbox.guest_path(Path::new("/etc/shadow")), None);
    }
}
