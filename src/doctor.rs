//! `warden doctor`: what this kernel (and Docker daemon) supports, and which sandbox backend
//! warden will use and why; with [`setup`], whether the rest of the setup works (config,
//! model, Telegram, binaries, workspace), each failure with its fix.

pub mod setup;

use crate::config::Config;
use crate::sandbox::docker::probe::DockerReport;
use crate::sandbox::host::{cgroup, kernel};
use crate::sandbox::Backend;
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub kernel: String,
    pub machine: String,
    pub root: bool,
    pub landlock: Landlock,
    pub seccomp: Feature,
    pub pidfd: Feature,
    pub user_namespaces: kernel::UserNamespaces,
    pub cgroup: Cgroup,
    /// How a skill's network is confined to the egress proxy on the host backend.
    pub skill_egress: Feature,
    /// Whether `[network]` rules can give jailed commands a network (the same namespace).
    pub command_network: Feature,
    /// Filled by the Docker backend (daemon reachable, version, runtime, image present).
    pub docker: DockerStatus,
    /// The command policy every command is checked against: loaded, or why not.
    pub policy: PolicyStatus,
    /// The backend warden will use.
    pub backend: Backend,
    /// Whether that backend can run commands here.
    pub usable: bool,
    /// Why, in a sentence or two.
    pub reason: String,
    /// Weaknesses of the chosen setup worth knowing.
    pub warnings: Vec<String>,
    /// The setup checks (empty with `--sandbox`).
    pub setup: Vec<setup::Check>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Landlock {
    pub abi: Option<u32>,
    pub detail: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Feature {
    pub available: bool,
    pub detail: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Cgroup {
    pub version: Option<cgroup::CgroupVersion>,
    pub pids_dir: Option<String>,
    pub detail: String,
}

/// The command policy: the embedded default or a file, and whether it loads.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyStatus {
    /// `embedded default` or the file's path.
    pub source: String,
    pub loaded: bool,
    pub detail: String,
}

impl PolicyStatus {
    /// Load the policy as every other command would; a missing or broken file is reported.
    pub fn check(file: Option<&std::path::Path>) -> PolicyStatus {
        let source = file.map_or_else(
            || "embedded default".to_string(),
            |f| f.display().to_string(),
        );
        match crate::policy::Policy::load(file) {
            Ok(policy) => PolicyStatus {
                source,
                loaded: true,
                detail: format!("{} programs ruled", policy.programs().count()),
            },
            Err(e) => PolicyStatus {
                source,
                loaded: false,
                detail: e.to_string(),
            },
        }
    }
}

/// The Docker section: daemon reachable, versions, runtime, image.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DockerStatus {
    pub probed: bool,
    pub available: bool,
    pub detail: String,
    /// Everything the probe found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<DockerReport>,
}

/// Probe the Docker daemon configured in `sandbox.docker` (on a thread of its own, so this
/// works inside or outside an async runtime).
pub fn probe_docker(config: &Config) -> DockerStatus {
    let docker = config.sandbox.docker.clone();
    let probed = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start an async runtime: {e}"))?;
        Ok::<_, String>(runtime.block_on(crate::sandbox::docker::probe::probe(&docker)))
    })
    .join();
    let report = match probed {
        Ok(Ok(report)) => report,
        Ok(Err(why)) => {
            return DockerStatus {
                probed: false,
                available: false,
                detail: why,
                report: None,
            }
        }
        Err(_) => {
            return DockerStatus {
                probed: false,
                available: false,
                detail: "the Docker probe panicked".into(),
                report: None,
            }
        }
    };
    let detail = match (&report.error, &report.server_version, &report.runtime) {
        (Some(problem), _, _) => problem.clone(),
        (None, Some(version), Some(runtime)) => format!(
            "Docker {version} (API {}) at {}, runtime {runtime}, image {} present",
            report.api_version.as_deref().unwrap_or("?"),
            report.socket.display(),
            report.image
        ),
        _ => format!("daemon at {} answers", report.socket.display()),
    };
    DockerStatus {
        probed: true,
        available: report.usable(),
        detail,
        report: Some(report),
    }
}

/// Look at this machine with `config`'s choices.
pub fn collect(config: &Config) -> Report {
    let landlock = match kernel::landlock_abi() {
        Ok(abi) => Landlock {
            abi: Some(abi),
            detail: landlock_detail(abi),
        },
        Err(why) => Landlock {
            abi: None,
            detail: why,
        },
    };
    let seccomp = match kernel::seccomp_available() {
        Ok(()) => Feature {
            available: true,
            detail: "seccomp filters with errno returns".into(),
        },
        Err(why) => Feature {
            available: false,
            detail: why,
        },
    };
    let pidfd_ok = kernel::pidfd_available();
    let pidfd = Feature {
        available: pidfd_ok,
        detail: if pidfd_ok {
            "pidfd_open works".into()
        } else {
            "pidfd_open failed (Linux ≥ 5.3 needed)".into()
        },
    };
    let root = kernel::is_root();
    let cgroup = match cgroup::PidsCgroupRoot::detect() {
        Ok(found) => Cgroup {
            version: Some(found.version),
            pids_dir: Some(found.dir.display().to_string()),
            detail: "one pids cgroup per jailed process".into(),
        },
        Err(why) => Cgroup {
            version: None,
            pids_dir: None,
            detail: why,
        },
    };

    let namespace = crate::sandbox::host::netns::JailNetwork::check_available();
    let command_network =
        match crate::egress::confinement::Confined::probe(config.network.confinement) {
            Ok(how) => Feature {
                available: true,
                detail: format!(
                    "with [network] rules, jailed commands reach the hosts they name through \
                 warden's egress proxy; confinement: {how}"
                ),
            },
            Err(why) => Feature {
                available: false,
                detail: format!(
                    "none ({why}); with [network] rules, network programs still run but without \
                 network. Run warden as root, allow unprivileged user namespaces, or use a \
                 kernel with seccomp user notification and pidfd_getfd (Linux 5.6 or newer) to \
                 give them one"
                ),
            },
        };
    let skill_egress = match namespace {
        Ok(()) => Feature {
            available: true,
            detail: "network namespace per run: only loopback, where only warden's egress proxy \
             listens; per-run proxy token"
                .into(),
        },
        Err(why) => Feature {
            available: false,
            detail: format!(
                "none ({why}); skills that declare domains or routes are refused on the host \
                 backend"
            ),
        },
    };
    let mut warnings = Vec::new();
    if root && cgroup.pids_dir.is_none() {
        warnings.push(
            "running as root without a usable pids cgroup: the process limit is not enforced \
             (the kernel ignores RLIMIT_NPROC for uid 0)"
                .to_string(),
        );
    }
    if let Some(abi) = landlock.abi {
        if abi < 4 {
            warnings.push(format!(
                "Landlock ABI {abi} cannot restrict TCP; only seccomp keeps jailed commands off the network"
            ));
        }
        if abi < 6 {
            warnings.push(format!(
                "Landlock ABI {abi} has no signal scoping: a jail running as warden's uid can \
                 signal warden's other processes"
            ));
        }
    }

    let backend = config.sandbox.backend;
    let docker = probe_docker(config);
    let policy = PolicyStatus::check(config.policy.as_deref());
    let (usable, reason) = match backend {
        Backend::Host => host_verdict(config, &landlock, &seccomp, &pidfd),
        Backend::Docker => (
            docker.available,
            format!(
                "configured (sandbox.backend = \"docker\"); {}",
                docker.detail
            ),
        ),
    };
    // Every command refuses to start with a policy that does not load; so does doctor.
    let (usable, reason) = if policy.loaded {
        (usable, reason)
    } else {
        (
            false,
            format!(
                "the command policy ({}) cannot be loaded, so every command is refused: {}",
                policy.source, policy.detail
            ),
        )
    };
    Report {
        kernel: kernel::release(),
        machine: kernel::machine(),
        root,
        landlock,
        seccomp,
        pidfd,
        user_namespaces: kernel::user_namespaces(),
        cgroup,
        skill_egress,
        command_network,
        docker,
        policy,
        backend,
        usable,
        reason,
        warnings,
        setup: Vec::new(),
    }
}

fn landlock_detail(abi: u32) -> String {
    let mut parts = vec!["files"];
    if abi >= 2 {
        parts.push("renames across directories");
    }
    if abi >= 3 {
        parts.push("truncation");
    }
    if abi >= 4 {
        parts.push("TCP bind/connect");
    }
    if abi >= 5 {
        parts.push("device ioctls");
    }
    if abi >= 6 {
        parts.push("signal and abstract-socket scopes");
    }
    format!("restricts {}", parts.join(", "))
}

fn host_verdict(
    config: &Config,
    landlock: &Landlock,
    seccomp: &Feature,
    pidfd: &Feature,
) -> (bool, String) {
    if !seccomp.available {
        return (false, format!("host jail unusable: {}", seccomp.detail));
    }
    if !pidfd.available {
        return (false, format!("host jail unusable: {}", pidfd.detail));
    }
    match landlock.abi {
        Some(abi) => (
            true,
            format!("host jail: Landlock ABI {abi}, seccomp allow-list, rlimits, no capabilities"),
        ),
        None if config.sandbox.allow_without_landlock => (
            true,
            "host jail WITHOUT Landlock (sandbox.allow_without_landlock = true): files, /proc and \
             TCP are not confined"
                .into(),
        ),
        None => (
            false,
            "host jail refuses to run without Landlock; use sandbox.backend = \"docker\" or \
             (much weaker) sandbox.allow_without_landlock = true"
                .into(),
        ),
    }
}

impl Report {
    /// Whether everything checked works: the backend can run commands and no setup check
    /// failed.
    pub fn healthy(&self) -> bool {
        self.usable && !self.setup.iter().any(|c| c.status == setup::Status::Fail)
    }

    /// Human-readable form.
    pub fn render(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let mut s = String::new();
        let mut line = |k: &str, v: String| {
            let _ = writeln!(s, "  {k:<17} {v}");
        };
        line("kernel", format!("{} ({})", self.kernel, self.machine));
        line(
            "landlock",
            match self.landlock.abi {
                Some(abi) => format!("ABI {abi}: {}", self.landlock.detail),
                None => format!("unavailable: {}", self.landlock.detail),
            },
        );
        line("seccomp", self.seccomp.detail.clone());
        line("pidfd", self.pidfd.detail.clone());
        line(
            "user namespaces",
            format!(
                "warden: {}, unprivileged: {}{}",
                yes(self.user_namespaces.available_to_warden),
                yes(self.user_namespaces.unprivileged),
                if self.user_namespaces.detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", self.user_namespaces.detail)
                }
            ),
        );
        line(
            "pids cgroup",
            match (&self.cgroup.version, &self.cgroup.pids_dir) {
                (Some(v), Some(dir)) => format!("{v:?} at {dir}"),
                _ => format!("none: {}", self.cgroup.detail),
            },
        );
        line("skill egress", self.skill_egress.detail.clone());
        line("command network", self.command_network.detail.clone());
        line("root", yes(self.root).into());
        line(
            "docker",
            if self.docker.probed {
                format!(
                    "{}: {}",
                    if self.docker.available {
                        "available"
                    } else {
                        "unavailable"
                    },
                    self.docker.detail
                )
            } else {
                self.docker.detail.clone()
            },
        );
        line(
            "policy",
            format!(
                "{}: {}",
                self.policy.source,
                if self.policy.loaded {
                    self.policy.detail.clone()
                } else {
                    format!("BROKEN: {}", self.policy.detail)
                }
            ),
        );
        line(
            "backend",
            format!(
                "{} ({}): {}",
                self.backend,
                if self.usable { "usable" } else { "NOT usable" },
                self.reason
            ),
        );
        for w in &self.warnings {
            line("warning", w.clone());
        }
        let mut setup = String::new();
        for check in &self.setup {
            let mark = match check.status {
                setup::Status::Ok => "ok  ",
                setup::Status::Warn => "WARN",
                setup::Status::Skip => "--  ",
                setup::Status::Fail => "FAIL",
            };
            let _ = writeln!(setup, "  {mark} {:<10} {}", check.name, check.detail);
            if let Some(fix) = check.fix.as_ref().filter(|f| !f.is_empty()) {
                let _ = writeln!(setup, "       {:<10} fix: {fix}", "");
            }
        }
        if setup.is_empty() {
            format!("warden doctor\n{s}")
        } else {
            format!("warden doctor\nsetup\n{setup}sandbox\n{s}")
        }
    }
}
