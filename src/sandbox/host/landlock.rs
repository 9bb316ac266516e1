//! Landlock: what a jailed process may read, write, execute and connect to.
//!
//! - read + execute: the system directories (`/usr`, `/bin`, `/sbin`, `/lib*`);
//! - read only: a short list of `/etc` files programs need (the loader cache, passwd/group,
//!   nsswitch, localtime, certificates…), never `/etc` as a whole (`/etc/shadow`), `/root` or
//!   `/home`;
//! - `/dev/null` read + write, `/dev/zero`, `/dev/random`, `/dev/urandom` read;
//! - read + write, never execute: the workspace, the private TMPDIR and `JailSpec.write_roots`;
//! - read + execute: `JailSpec.read_roots`;
//! - `/proc`: only the process's own `/proc/<pid>`, added in the child (see below);
//! - TCP bind and connect denied (ABI ≥ 4), except connecting to the egress proxy's port (with
//!   the connect supervisor the jail's own `connect` never runs — warden connects for it — and
//!   the rule stays as a second wall);
//! - scopes (ABI ≥ 6): no signals to, and no abstract unix sockets of, processes outside.
//!
//! The rule table (opened `O_PATH` descriptors and their rights) is built once, in
//! `HostSandbox::new`. Each spawn instantiates a fresh kernel ruleset from it in the parent —
//! a few `landlock_add_rule` calls — because the child adds one rule of its own, for its own
//! `/proc/<pid>` (only known in the child): adding it to a ruleset shared between spawns (as a
//! `try_clone` would) would let every later process read its predecessors' `/proc` entries and
//! grow the kernel object forever. The child then adds that rule and restricts itself with raw
//! syscalls, no allocation.
//!
//! The access rights requested are those of ABI 7 (tested on this machine); with
//! `CompatLevel::BestEffort` an older kernel gets the subset it supports. A kernel without
//! Landlock at all is refused in `HostSandbox::new` unless weak mode was asked for.

use super::fds::errno;
use crate::sandbox::{JailSpec, SandboxError};
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// The newest ABI whose rights were tested with this jail.
const TESTED_ABI: ABI = ABI::V7;

/// System directories: read and execute.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
];

/// `/etc` entries programs commonly need, none of them secret.
const ETC_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/alternatives",
    "/etc/magic",
    "/etc/magic.mime",
    "/etc/mime.types",
    "/etc/protocols",
    "/etc/services",
    "/etc/locale.alias",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/perl",
    "/etc/terminfo",
];

/// Devices read only.
const READ_DEVICES: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];

#[derive(Debug)]
pub struct LandlockTemplate {
    rules: Vec<(PathFd, BitFlags<AccessFs>, PathBuf)>,
    connect_port: Option<u16>,
    /// Rights the child grants on its own `/proc/<pid>`.
    proc_self_access: u64,
}

fn read_exec() -> BitFlags<AccessFs> {
    AccessFs::from_read(TESTED_ABI)
}

fn read_only() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// Everything for files and directories except executing, devices and device ioctls.
fn read_write() -> BitFlags<AccessFs> {
    AccessFs::from_all(TESTED_ABI)
        & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev)
}

impl LandlockTemplate {
    /// Open every rule's path once. Missing system paths are skipped; a missing workspace or
    /// configured root is an error.
    pub fn new(spec: &JailSpec, tmpdir: &Path) -> Result<LandlockTemplate, SandboxError> {
        let mut rules = Vec::new();
        let mut optional = |path: &Path, access: BitFlags<AccessFs>| {
            if let Ok(fd) = PathFd::new(path) {
                rules.push((fd, access, path.to_path_buf()));
            }
        };
        for dir in SYSTEM_DIRS {
            optional(Path::new(dir), read_exec());
        }
        for file in ETC_FILES {
            optional(Path::new(file), read_only());
        }
        for python_etc in etc_python_dirs() {
            optional(&python_etc, read_only());
        }
        optional(
            Path::new("/dev/null"),
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
        );
        for dev in READ_DEVICES {
            optional(Path::new(dev), AccessFs::ReadFile.into());
        }

        let mut required = |path: &Path, access: BitFlags<AccessFs>, what: &str| {
            let fd = PathFd::new(path).map_err(|e| {
                SandboxError::Setup(format!("cannot open {what} {}: {e}", path.display()))
            })?;
            rules.push((fd, access, path.to_path_buf()));
            Ok::<(), SandboxError>(())
        };
        required(&spec.workspace, read_write(), "the workspace")?;
        required(tmpdir, read_write(), "the jail's TMPDIR")?;
        for root in &spec.write_roots {
            required(root, read_write(), "the writable root")?;
        }
        for root in &spec.read_roots {
            required(root, read_exec(), "the readable root")?;
        }

        Ok(LandlockTemplate {
            rules,
            connect_port: spec.egress_proxy.map(|a| a.port()),
            proc_self_access: read_only().bits(),
        })
    }

    /// The paths that have a rule, for logs.
    pub fn paths(&self) -> Vec<&Path> {
        self.rules
            .iter()
            .map(|(_, _, path)| path.as_path())
            .collect()
    }

    /// Create a fresh kernel ruleset for one spawn (parent side). `None` when the kernel has no
    /// Landlock (only reachable in weak mode).
    pub fn instantiate(&self) -> Result<Option<OwnedFd>, SandboxError> {
        let err = |e: landlock::RulesetError| {
            SandboxError::Setup(format!("building the Landlock ruleset failed: {e}"))
        };
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(TESTED_ABI))
            .map_err(err)?
            .handle_access(AccessNet::from_all(TESTED_ABI))
            .map_err(err)?
            .scope(Scope::from_all(TESTED_ABI))
            .map_err(err)?
            .create()
            .map_err(err)?;
        for (fd, access, _) in &self.rules {
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd.as_fd(), *access))
                .map_err(err)?;
        }
        if let Some(port) = self.connect_port {
            ruleset = ruleset
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(err)?;
        }
        Ok(ruleset.into())
    }

    pub fn proc_self_access(&self) -> u64 {
        self.proc_self_access
    }
}

/// `/etc/python3` and `/etc/python3.N` (Debian keeps `sitecustomize.py` there). Probed by name:
/// listing `/etc` costs more than these lookups.
fn etc_python_dirs() -> Vec<PathBuf> {
    std::iter::once("/etc/python3".to_string())
        .chain((6..=20).map(|minor| format!("/etc/python3.{minor}")))
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect()
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_path_beneath_attr` (packed in the kernel UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Child side: allow reading the process's own `/proc/<pid>` (its `status`, `fd`, `environ`).
/// Async-signal-safe.
///
/// # Safety
/// Call only in the jail's child, with a ruleset descriptor from [`LandlockTemplate::instantiate`].
pub unsafe fn allow_proc_self_in_child(ruleset: RawFd, access: u64) -> Result<(), i32> {
    let dir = libc::open(
        c"/proc/self".as_ptr(),
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
    );
    if dir < 0 {
        return Err(errno());
    }
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: dir,
    };
    let r = libc::syscall(
        libc::SYS_landlock_add_rule,
        ruleset,
        LANDLOCK_RULE_PATH_BENEATH,
        &attr as *const PathBeneathAttr,
        0,
    );
    let e = errno();
    libc::close(dir);
    if r != 0 {
        return Err(e);
    }
    Ok(())
}

/// Child side: enforce the ruleset on this process (needs `no_new_privs`). Async-signal-safe.
///
/// # Safety
/// Call only in the jail's child.
pub unsafe fn restrict_self_in_child(ruleset: RawFd) -> Result<(), i32> {
    if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) != 0 {
        return Err(errno());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_is_writable_but_not_executable() {
        let rw = read_write();
        assert!(rw.contains(AccessFs::WriteFile | AccessFs::ReadFile | AccessFs::MakeReg));
        assert!(rw.contains(AccessFs::Truncate | AccessFs::Refer | AccessFs::RemoveFile));
        assert!(!rw.contains(AccessFs::Execute));
        assert!(!rw.intersects(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev));
        assert!(!read_only().contains(AccessFs::Execute));
        assert!(read_exec().contains(AccessFs::Execute));
    }

    #[test]
    fn rule_table_never_covers_secrets() {
        let ws = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let spec = JailSpec::new(ws.path().to_path_buf());
        let template = LandlockTemplate::new(&spec, tmp.path()).unwrap();
        let paths = template.paths();
        for forbidden in [
            "/",
            "/etc",
            "/root",
            "/home",
            "/proc",
            "/etc/shadow",
            "/tmp",
            "/dev",
        ] {
            assert!(
                !paths.contains(&Path::new(forbidden)),
                "{forbidden} must not be a rule"
            );
        }
        assert!(paths.contains(&ws.path()));
        assert!(paths.contains(&Path::new("/usr")));
    }

    #[test]
    fn missing_workspace_is_a_setup_error() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = JailSpec::new(PathBuf::from("/nonexistent/warden-workspace"));
        let err = LandlockTemplate::new(&spec, tmp.path()).unwrap_err();
        assert!(err.to_string().contains("the workspace"), "{err}");
    }
}
