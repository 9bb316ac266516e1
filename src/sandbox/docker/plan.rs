//! What a session container looks like: every restriction, as one Engine API create body, and
//! the check that the daemon really applied each of them (it may drop some with only a warning).

use super::user::ContainerUser;
use crate::config::DockerConfig;
use crate::sandbox::{JailSpec, Limits, SandboxError};
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, HostConfig, HostConfigLogConfig, Mount,
    MountBindOptions, MountBindOptionsPropagationEnum, MountType, ResourcesUlimits, RestartPolicy,
    RestartPolicyNameEnum,
};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Where the workspace appears inside the container.
pub const GUEST_WORKSPACE: &str = "/workspace";
/// `PATH` inside the container.
const GUEST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The small scratch space at `/tmp`: no executables, no set-uid, no devices, size-limited.
const TMPFS_OPTIONS: &str = "rw,noexec,nosuid,nodev,size=67108864,mode=1777";
/// PID 1: idles and reaps the orphans commands leave behind. `kill -9 -1` from a command's
/// user cannot hit PID 1 (the kernel skips a namespace's init), only its `sleep`, which the
/// loop restarts.
pub const IDLE_LOOP: &str = "trap '' HUP INT TERM; while :; do sleep 2147483647 & wait; done";
/// Container paths an extra read or write root may not be mounted on or under. (Below `/tmp`
/// is fine: the bind mount lands inside the tmpfs.)
const RESERVED: &[&str] = &["/workspace", "/proc", "/sys", "/dev"];

/// One session container, fully described before anything is created.
#[derive(Clone, Debug)]
pub struct ContainerPlan {
    pub image: String,
    pub runtime: Option<String>,
    pub user: ContainerUser,
    pub workspace: PathBuf,
    /// Extra host roots, mounted at the same path inside: (path, writable).
    pub extra_roots: Vec<(PathBuf, bool)>,
    /// `NAME=value`, the complete environment of every process in the container.
    pub env: Vec<String>,
    /// Warden's egress proxy, when the run has `[network]` rules: the container still has
    /// network none, and reaches it only through a listener in its namespace (`egress.rs`).
    pub egress_proxy: Option<SocketAddr>,
    pub limits: Limits,
    pub labels: HashMap<String, String>,
}

impl ContainerPlan {
    /// Validate the jail for a container; anything the container could not enforce is refused.
    pub fn new(
        config: &DockerConfig,
        jail: &JailSpec,
        user: ContainerUser,
        labels: HashMap<String, String>,
    ) -> Result<ContainerPlan, SandboxError> {
        if jail.network_namespace.is_some()
            || jail.user_namespace.is_some()
            || jail.supervised_network.is_some()
        {
            return Err(SandboxError::Setup(
                "a host jail's network confinement cannot be given to a container (its network is its \
                 own, reaching only the egress proxy)"
                    .into(),
            ));
        }
        if !jail.workspace.is_absolute() {
            return Err(SandboxError::Setup(format!(
                "workspace {} must be an absolute path",
                jail.workspace.display()
            )));
        }
        check_limits(&jail.limits)?;
        let mut extra_roots = Vec::new();
        for (roots, writable) in [(&jail.read_roots, false), (&jail.write_roots, true)] {
            for root in roots {
                check_extra_root(root)?;
                extra_roots.push((root.clone(), writable));
            }
        }
        Ok(ContainerPlan {
            image: config.image.clone(),
            runtime: config.runtime.clone(),
            user,
            workspace: jail.workspace.clone(),
            extra_roots,
            env: environment(&jail.env)?,
            egress_proxy: jail.egress_proxy,
            limits: jail.limits.clone(),
            labels,
        })
    }

    /// The create body: network none, read-only rootfs, no capabilities, no new privileges,
    /// limits, a non-root user and the workspace as the only host directory (plus roots the
    /// jail explicitly lists).
    pub fn body(&self) -> ContainerCreateBody {
        let limits = &self.limits;
        let memory = limits.memory_bytes as i64;
        let mut mounts = vec![bind(&self.workspace, GUEST_WORKSPACE, false)];
        for (root, writable) in &self.extra_roots {
            mounts.push(bind(root, &root.to_string_lossy(), !writable));
        }
        // No core files: a killed program must not drop its memory into the workspace.
        let ulimits = [
            ("nofile", limits.open_files),
            ("fsize", limits.file_size_bytes),
            ("cpu", limits.cpu_seconds),
            ("core", 0),
        ]
        .into_iter()
        .map(|(name, value)| ResourcesUlimits {
            name: Some(name.into()),
            soft: Some(value as i64),
            hard: Some(value as i64),
        })
        .collect();
        ContainerCreateBody {
            image: Some(self.image.clone()),
            user: Some(self.user.spec()),
            env: Some(self.env.clone()),
            entrypoint: Some(vec!["/bin/sh".into(), "-c".into(), IDLE_LOOP.into()]),
            working_dir: Some(GUEST_WORKSPACE.into()),
            hostname: Some("warden".into()),
            labels: Some(self.labels.clone()),
            attach_stdin: Some(false),
            attach_stdout: Some(false),
            attach_stderr: Some(false),
            open_stdin: Some(false),
            tty: Some(false),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                readonly_rootfs: Some(true),
                cap_drop: Some(vec!["ALL".into()]),
                security_opt: Some(vec!["no-new-privileges".into()]),
                privileged: Some(false),
                tmpfs: Some(HashMap::from([("/tmp".into(), TMPFS_OPTIONS.into())])),
                mounts: Some(mounts),
                pids_limit: Some(limits.max_processes as i64),
                memory: Some(memory),
                memory_swap: Some(memory),
                nano_cpus: Some(nano_cpus(limits.cpus)),
                ulimits: Some(ulimits),
                runtime: self.runtime.clone(),
                init: Some(false),
                ipc_mode: Some("private".into()),
                oom_score_adj: Some(500),
                log_config: Some(HostConfigLogConfig {
                    typ: Some("none".into()),
                    config: None,
                }),
                restart_policy: Some(RestartPolicy {
                    name: Some(RestartPolicyNameEnum::NO),
                    maximum_retry_count: None,
                }),
                auto_remove: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Compare what the daemon reports for the created container with this plan; every
    /// difference is a reason to refuse the container.
    pub fn verify(&self, inspect: &ContainerInspectResponse) -> Result<(), String> {
        let host = inspect
            .host_config
            .as_ref()
            .ok_or("the daemon reported no host config")?;
        let mut wrong = Vec::new();
        if host.network_mode.as_deref() != Some("none") {
            wrong.push(format!("network mode is {:?}, not none", host.network_mode));
        }
        if host.readonly_rootfs != Some(true) {
            wrong.push("the root filesystem is writable".to_string());
        }
        if host.privileged == Some(true) {
            wrong.push("the container is privileged".to_string());
        }
        let drops_all = host.cap_drop.iter().flatten().any(|c| {
            let c = c.to_ascii_uppercase();
            c == "ALL" || c == "CAP_ALL"
        });
        if !drops_all || host.cap_add.as_ref().is_some_and(|a| !a.is_empty()) {
            wrong.push("not every capability is dropped".to_string());
        }
        let no_new_privs = host
            .security_opt
            .iter()
            .flatten()
            .any(|o| o == "no-new-privileges" || o == "no-new-privileges:true");
        if !no_new_privs {
            wrong.push("no-new-privileges is not set".to_string());
        }
        let memory = self.limits.memory_bytes as i64;
        let expected = [
            (
                "pids limit",
                host.pids_limit,
                self.limits.max_processes as i64,
            ),
            ("memory limit", host.memory, memory),
            ("memory+swap limit", host.memory_swap, memory),
            ("CPU limit", host.nano_cpus, nano_cpus(self.limits.cpus)),
        ];
        for (what, got, want) in expected {
            if got != Some(want) {
                wrong.push(format!("{what} is {got:?}, not {want}"));
            }
        }
        let tmp = host.tmpfs.as_ref().and_then(|t| t.get("/tmp"));
        if tmp.map(String::as_str) != Some(TMPFS_OPTIONS) {
            wrong.push(format!("/tmp is {tmp:?}, not a {TMPFS_OPTIONS} tmpfs"));
        }
        if self.runtime.is_some() && host.runtime != self.runtime {
            wrong.push(format!(
                "runtime is {:?}, not {:?}",
                host.runtime, self.runtime
            ));
        }
        let user = inspect.config.as_ref().and_then(|c| c.user.as_deref());
        if user != Some(self.user.spec().as_str()) {
            wrong.push(format!("user is {user:?}, not {}", self.user.spec()));
        }
        let mut allowed: Vec<String> = vec![GUEST_WORKSPACE.into()];
        allowed.extend(
            self.extra_roots
                .iter()
                .map(|(p, _)| p.to_string_lossy().into_owned()),
        );
        for mount in inspect.mounts.iter().flatten() {
            let target = mount.destination.clone().unwrap_or_default();
            if !allowed.contains(&target) {
                wrong.push(format!("unexpected mount at {target} (an image VOLUME?)"));
            }
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("; "))
        }
    }
}

fn bind(source: &Path, target: &str, read_only: bool) -> Mount {
    Mount {
        target: Some(target.into()),
        source: Some(source.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(read_only),
        bind_options: Some(MountBindOptions {
            propagation: Some(MountBindOptionsPropagationEnum::RPRIVATE),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn nano_cpus(cpus: f64) -> i64 {
    (cpus * 1e9).round() as i64
}

fn check_limits(limits: &Limits) -> Result<(), SandboxError> {
    let counts = [
        ("max_processes", limits.max_processes),
        ("memory_bytes", limits.memory_bytes),
        ("file_size_bytes", limits.file_size_bytes),
        ("cpu_seconds", limits.cpu_seconds),
        ("open_files", limits.open_files),
    ];
    for (name, value) in counts {
        if value == 0 || value > i64::MAX as u64 {
            return Err(SandboxError::Setup(format!(
                "sandbox limit {name} = {value} cannot be enforced by a container"
            )));
        }
    }
    // The kernel refuses memory cgroup limits below a few MiB; say so before Docker does.
    if limits.memory_bytes < 6 << 20 {
        return Err(SandboxError::Setup(format!(
            "sandbox limit memory_bytes = {} is below the 6 MiB a container needs",
            limits.memory_bytes
        )));
    }
    if !(limits.cpus.is_finite() && limits.cpus >= 0.01) {
        return Err(SandboxError::Setup(format!(
            "sandbox limit cpus = {} must be at least 0.01",
            limits.cpus
        )));
    }
    Ok(())
}

fn check_extra_root(root: &Path) -> Result<(), SandboxError> {
    if !root.is_absolute() || root.to_str().is_none() {
        return Err(SandboxError::Setup(format!(
            "extra sandbox root {} must be an absolute UTF-8 path",
            root.display()
        )));
    }
    let clash = root == Path::new("/")
        || root == Path::new("/tmp")
        || RESERVED.iter().any(|r| root.starts_with(r));
    if clash {
        return Err(SandboxError::Setup(format!(
            "extra sandbox root {} would be mounted over a path the container needs \
             (/, /workspace, /tmp, /proc, /sys, /dev)",
            root.display()
        )));
    }
    Ok(())
}

/// The scrubbed environment: a fixed base plus the jail's own variables, nothing from warden.
fn environment(extra: &[(String, String)]) -> Result<Vec<String>, SandboxError> {
    let mut vars: Vec<(String, String)> = [
        ("PATH", GUEST_PATH),
        ("HOME", GUEST_WORKSPACE),
        ("LANG", "C.UTF-8"),
        ("TERM", "dumb"),
        // As in the host jail: no lazy fetch, no transport but a local path.
        ("GIT_NO_LAZY_FETCH", "1"),
        ("GIT_ALLOW_PROTOCOL", "file"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (name, value) in extra {
        let valid_name = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid_name || value.contains('\0') {
            return Err(SandboxError::Setup(format!(
                "sandbox environment variable {name:?} is not a valid NAME=value pair"
            )));
        }
        vars.retain(|(k, _)| k != name);
        vars.push((name.clone(), value.clone()));
    }
    Ok(vars.into_iter().map(|(k, v)| format!("{k}={v}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(jail: &JailSpec) -> Result<ContainerPlan, SandboxError> {
        let user = ContainerUser {
            uid: 1000,
            gid: 1000,
        };
        ContainerPlan::new(&DockerConfig::default(), jail, user, HashMap::new())
    }

    #[test]
    fn the_body_carries_every_restriction() {
        let mut jail = JailSpec::new("/home/u/ws".into());
        jail.read_roots.push("/usr/share/dict".into());
        let body = plan(&jail).unwrap().body();
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(host.memory, host.memory_swap);
        assert_eq!(host.pids_limit, Some(256));
        let mounts = host.mounts.unwrap();
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[0].target.as_deref(), Some("/workspace"));
        assert_eq!(mounts[0].read_only, Some(false));
        assert_eq!(mounts[1].target.as_deref(), Some("/usr/share/dict"));
        assert_eq!(mounts[1].read_only, Some(true));
        assert!(host.binds.is_none(), "nothing else from the host");
        assert_eq!(body.user.as_deref(), Some("1000:1000"));
    }

    /// What a daemon that applied everything reports for `plan`.
    fn faithful_inspect(plan: &ContainerPlan) -> ContainerInspectResponse {
        let body = plan.body();
        ContainerInspectResponse {
            host_config: body.host_config,
            config: Some(bollard::models::ContainerConfig {
                user: body.user,
                ..Default::default()
            }),
            mounts: Some(vec![bollard::models::MountPoint {
                destination: Some(GUEST_WORKSPACE.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn every_weakened_restriction_is_caught() {
        let plan = plan(&JailSpec::new("/ws".into())).unwrap();
        assert_eq!(plan.verify(&faithful_inspect(&plan)), Ok(()));
        type Weaken = fn(&mut HostConfig);
        let weaken: Vec<(&str, Weaken)> = vec![
            ("network", |h| h.network_mode = Some("bridge".into())),
            ("writable", |h| h.readonly_rootfs = Some(false)),
            ("privileged", |h| h.privileged = Some(true)),
            ("capability", |h| h.cap_add = Some(vec!["NET_RAW".into()])),
            ("no-new-privileges", |h| h.security_opt = Some(vec![])),
            ("pids limit", |h| h.pids_limit = Some(0)),
            ("memory+swap", |h| h.memory_swap = Some(-1)),
            ("CPU", |h| h.nano_cpus = None),
            ("/tmp", |h| h.tmpfs = None),
        ];
        for (what, change) in weaken {
            let mut inspect = faithful_inspect(&plan);
            change(inspect.host_config.as_mut().unwrap());
            let err = plan.verify(&inspect).unwrap_err();
            assert!(err.contains(what), "{what}: {err}");
        }
        let mut inspect = faithful_inspect(&plan);
        inspect.config.as_mut().unwrap().user = Some("0:0".into());
        assert!(plan.verify(&inspect).unwrap_err().contains("user"));
        let mut inspect = faithful_inspect(&plan);
        inspect
            .mounts
            .as_mut()
            .unwrap()
            .push(bollard::models::MountPoint {
                destination: Some("/var/run/docker.sock".into()),
                ..Default::default()
            });
        assert!(plan.verify(&inspect).unwrap_err().contains("docker.sock"));
    }

    #[test]
    fn the_environment_is_scrubbed_and_extended() {
        let mut jail = JailSpec::new("/ws".into());
        jail.env.push(("LANG".into(), "de_DE.UTF-8".into()));
        jail.env.push(("EDITOR".into(), "vi".into()));
        let env = plan(&jail).unwrap().env;
        assert!(env.contains(&"HOME=/workspace".to_string()));
        assert!(env.contains(&"LANG=de_DE.UTF-8".to_string()));
        assert!(!env.contains(&"LANG=C.UTF-8".to_string()));
        assert!(env.contains(&"EDITOR=vi".to_string()));
        assert!(env.contains(&"GIT_NO_LAZY_FETCH=1".to_string()));
        assert_eq!(env.len(), 7);
        jail.env.push(("BAD=NAME".into(), "x".into()));
        assert!(plan(&jail).is_err());
    }

    #[test]
    fn what_a_container_cannot_enforce_is_refused() {
        let mut jail = JailSpec::new("/ws".into());
        jail.network_namespace = Some(std::sync::Arc::new(
            std::fs::File::open("/proc/self/ns/net").unwrap().into(),
        ));
        assert!(plan(&jail).unwrap_err().to_string().contains("confinement"));
        let mut jail = JailSpec::new("/ws".into());
        jail.limits.max_processes = 0;
        assert!(plan(&jail)
            .unwrap_err()
            .to_string()
            .contains("max_processes"));
        let mut jail = JailSpec::new("/ws".into());
        jail.read_roots.push("/proc/1".into());
        assert!(plan(&jail).unwrap_err().to_string().contains("/proc/1"));
        assert!(plan(&JailSpec::new("ws".into())).is_err());
    }
}
