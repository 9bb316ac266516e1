//! Probes of what this kernel offers, shared by the host jail and `warden doctor`.
//!
//! Every probe asks the kernel directly (a syscall, a sysctl, a throwaway child) rather than
//! guessing from a version number: distributions backport and disable features.

use std::io;

/// `uname -r`.
pub fn release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

/// The machine architecture (`uname -m`).
pub fn machine() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.machine().to_string_lossy().into_owned())
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

/// Whether warden itself runs as root (effective uid 0).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The Landlock ABI version, or why there is none.
pub fn landlock_abi() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_ulong = 1;
    // SAFETY: with a NULL attribute and the VERSION flag the syscall only returns a number.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi >= 1 {
        return Ok(abi as u32);
    }
    let err = io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel was built without Landlock (CONFIG_SECURITY_LANDLOCK)".into(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built in but not enabled at boot (add `landlock` to the `lsm=` kernel parameter)"
                .into()
        }
        _ => format!("landlock_create_ruleset failed: {err}"),
    })
}

/// Whether seccomp filters can be installed (`CONFIG_SECCOMP_FILTER`).
pub fn seccomp_available() -> Result<(), String> {
    // SAFETY: PR_GET_SECCOMP only reads the calling thread's mode.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    if mode < 0 {
        return Err(format!(
            "prctl(PR_GET_SECCOMP) failed: {} (kernel without CONFIG_SECCOMP)",
            io::Error::last_os_error()
        ));
    }
    match std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail") {
        Ok(actions) if actions.split_whitespace().any(|a| a == "errno") => Ok(()),
        Ok(actions) => Err(format!(
            "seccomp filters cannot return errno (actions: {})",
            actions.trim()
        )),
        // Older kernels lack the sysctl but have filters whenever PR_GET_SECCOMP works.
        Err(_) => Ok(()),
    }
}

/// The highest capability number this kernel knows (`/proc/sys/kernel/cap_last_cap`).
pub fn cap_last_cap() -> io::Result<u32> {
    let text = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")?;
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected cap_last_cap {text:?}"),
        )
    })
}

/// Whether `pidfd_open` works (Linux ≥ 5.3); the jail waits for its processes through pidfds.
pub fn pidfd_available() -> bool {
    // SAFETY: opens a pidfd for ourselves and closes it again.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: fd was just returned by the kernel and is owned here.
    unsafe { libc::close(fd as i32) };
    true
}

/// Whether warden can answer a jail's `connect` itself (`connect.rs`): seccomp filters that
/// hand calls to a listener (`user_notif`, Linux ≥ 5.0), `pidfd_getfd` (Linux ≥ 5.6), and
/// Yama letting warden take its jailed children's descriptors.
pub fn connect_supervision_available() -> Result<(), String> {
    seccomp_available()?;
    if let Ok(actions) = std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail") {
        if !actions.split_whitespace().any(|a| a == "user_notif") {
            return Err(format!(
                "seccomp filters cannot hand calls to warden (no user_notif among the actions: \
                 {}; Linux ≥ 5.0 needed)",
                actions.trim()
            ));
        }
    }
    // SAFETY: a pidfd for ourselves; pidfd_getfd of our own stderr; both closed again.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if pidfd < 0 {
        return Err("pidfd_open is not available (Linux ≥ 5.3 needed)".into());
    }
    let copy = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd as i32, 2, 0) };
    let error = io::Error::last_os_error();
    unsafe {
        if copy >= 0 {
            libc::close(copy as i32);
        }
        libc::close(pidfd as i32);
    }
    if copy < 0 && error.raw_os_error() != Some(libc::EBADF) {
        return Err(format!(
            "pidfd_getfd is not available ({error}; Linux ≥ 5.6 needed)"
        ));
    }
    match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
    {
        Some(3) => Err(
            "Yama's ptrace_scope is 3, so warden may not take its jailed processes' sockets \
             (pidfd_getfd); set kernel.yama.ptrace_scope to 2 or lower"
                .into(),
        ),
        Some(2) if !is_root() => Err(
            "Yama's ptrace_scope is 2, so only root may take its jailed processes' sockets \
             (pidfd_getfd); run warden as root or set kernel.yama.ptrace_scope to 1"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// What user namespaces allow here (the jail does not need them; they would add isolation).
#[derive(Clone, Debug, serde::Serialize)]
pub struct UserNamespaces {
    /// Whether this process can create one.
    pub available_to_warden: bool,
    /// Whether an unprivileged user (uid 65534) can create one.
    pub unprivileged: bool,
    pub detail: String,
}

/// Try `unshare(CLONE_NEWUSER)` in throwaway children, as warden and as uid 65534.
pub fn user_namespaces() -> UserNamespaces {
    let as_self = probe_in_child(None);
    let unprivileged = if is_root() {
        probe_in_child(Some(65534))
    } else {
        as_self
    };
    let mut notes = Vec::new();
    for (path, label) in [
        ("/proc/sys/user/max_user_namespaces", "max_user_namespaces"),
        (
            "/proc/sys/kernel/unprivileged_userns_clone",
            "unprivileged_userns_clone",
        ),
        (
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "apparmor_restrict_unprivileged_userns",
        ),
    ] {
        if let Ok(v) = std::fs::read_to_string(path) {
            notes.push(format!("{label}={}", v.trim()));
        }
    }
    UserNamespaces {
        available_to_warden: as_self,
        unprivileged,
        detail: notes.join(", "),
    }
}

fn probe_in_child(uid: Option<u32>) -> bool {
    // SAFETY: the child only makes raw syscalls and leaves with _exit.
    match unsafe { libc::fork() } {
        -1 => false,
        0 => unsafe {
            if let Some(id) = uid {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(id) != 0
                    || libc::setuid(id) != 0
                {
                    libc::_exit(2);
                }
            }
            let ok = libc::unshare(libc::CLONE_NEWUSER) == 0;
            libc::_exit(if ok { 0 } else { 1 });
        },
        pid => {
            let mut status = 0;
            // SAFETY: waits for the child forked above.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        }
    }
}
