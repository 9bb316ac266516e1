//! File descriptors of a jailed process: exactly 0-2 plus the redirections the executor asked
//! for (3-9), nothing else from warden (its sockets, database, the Telegram connection).
//!
//! The parent first duplicates every source to a number ≥ [`FIRST_PRIVATE_FD`] with
//! close-on-exec, so no source can collide with a target number (`3>&5` while the source happens
//! to be fd 3) and nothing leaks if a process forked elsewhere in warden inherits them. The child
//! then `dup2`s each source onto its target (which clears close-on-exec), closes the unused
//! numbers 3-9, and marks everything from [`FIRST_PRIVATE_FD`] up close-on-exec. The jail's own
//! descriptors (Landlock ruleset, cgroup) also live up there and stay usable until
//! `execve`.

use crate::sandbox::{SandboxError, Stdio};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Lowest descriptor number the parent uses for anything handed to the child.
pub const FIRST_PRIVATE_FD: RawFd = 10;

/// Where each of the child's descriptors comes from.
#[derive(Debug)]
pub struct FdPlan {
    /// (target, source), targets unique, sources ≥ FIRST_PRIVATE_FD.
    entries: Vec<(RawFd, OwnedFd)>,
    /// The same pairs as raw numbers, for the child (no allocation in the child).
    raw: [(RawFd, RawFd); 10],
    len: usize,
}

impl FdPlan {
    pub fn new(
        stdin: Stdio,
        stdout: Stdio,
        stderr: Stdio,
        extra: Vec<(u8, OwnedFd)>,
    ) -> Result<FdPlan, SandboxError> {
        let mut entries = Vec::with_capacity(3 + extra.len());
        for (target, stdio) in [(0, stdin), (1, stdout), (2, stderr)] {
            let source = match stdio {
                Stdio::Null => open_dev_null()?,
                Stdio::Fd(fd) => fd,
            };
            entries.push((target, dup_private(&source)?));
        }
        for (target, source) in extra {
            let target = RawFd::from(target);
            if !(3..=9).contains(&target) {
                return Err(SandboxError::Setup(format!(
                    "extra descriptor {target} is outside 3-9"
                )));
            }
            if entries.iter().any(|(t, _)| *t == target) {
                return Err(SandboxError::Setup(format!(
                    "descriptor {target} was given twice"
                )));
            }
            entries.push((target, dup_private(&source)?));
        }
        entries.sort_by_key(|(t, _)| *t);
        let mut raw = [(-1, -1); 10];
        for (slot, (target, source)) in raw.iter_mut().zip(&entries) {
            *slot = (*target, source.as_raw_fd());
        }
        let len = entries.len();
        Ok(FdPlan { entries, raw, len })
    }

    /// Target descriptor numbers, in order (for tests and logs).
    pub fn targets(&self) -> Vec<RawFd> {
        self.entries.iter().map(|(t, _)| *t).collect()
    }

    /// Child side: install the plan. Async-signal-safe.
    ///
    /// # Safety
    /// Call only in the jail's child before `execve`.
    pub unsafe fn apply_in_child(&self) -> Result<(), i32> {
        let pairs = &self.raw[..self.len.min(self.raw.len())];
        for &(target, source) in pairs {
            if libc::dup2(source, target) < 0 {
                return Err(errno());
            }
        }
        let mut fd = 3;
        while fd < FIRST_PRIVATE_FD {
            if !pairs.iter().any(|&(t, _)| t == fd) {
                libc::close(fd);
            }
            fd += 1;
        }
        // Everything above stays open for the jail's own use until execve closes it.
        let r = libc::syscall(
            libc::SYS_close_range,
            FIRST_PRIVATE_FD as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        if r == 0 {
            return Ok(());
        }
        // Kernels before 5.11 lack CLOSE_RANGE_CLOEXEC: mark each possible descriptor.
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(errno());
        }
        let max = limit.rlim_cur.min(1 << 20) as RawFd;
        let mut fd = FIRST_PRIVATE_FD;
        while fd < max {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            fd += 1;
        }
        Ok(())
    }
}

/// Duplicate `fd` to a number ≥ FIRST_PRIVATE_FD, close-on-exec.
pub fn dup_private(fd: &impl AsRawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor that we own.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, FIRST_PRIVATE_FD) };
    if new < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `new` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn open_dev_null() -> Result<OwnedFd, SandboxError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| SandboxError::Setup(format!("cannot open /dev/null: {e}")))?;
    Ok(file.into())
}

/// The calling thread's errno (async-signal-safe).
pub fn errno() -> i32 {
    // SAFETY: reads the thread-local errno.
    unsafe { *libc::__errno_location() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> (OwnedFd, OwnedFd) {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap()
    }

    #[test]
    fn sources_move_above_the_target_range() {
        let (r, w) = pipe();
        let (_r2, w2) = pipe();
        let plan = FdPlan::new(Stdio::Fd(r), Stdio::Fd(w), Stdio::Null, vec![(5, w2)]).unwrap();
        assert_eq!(plan.targets(), vec![0, 1, 2, 5]);
        for (_, source) in &plan.entries {
            assert!(source.as_raw_fd() >= FIRST_PRIVATE_FD);
            let flags = nix::fcntl::fcntl(source, nix::fcntl::FcntlArg::F_GETFD).unwrap();
            assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        }
        assert_eq!(plan.len, 4);
    }

    #[test]
    fn targets_outside_3_to_9_or_repeated_are_refused() {
        let (_r, w) = pipe();
        let err = FdPlan::new(Stdio::Null, Stdio::Null, Stdio::Null, vec![(10, w)]).unwrap_err();
        assert!(err.to_string().contains("outside 3-9"), "{err}");
        let (_r, w) = pipe();
        let err = FdPlan::new(Stdio::Null, Stdio::Null, Stdio::Null, vec![(2, w)]).unwrap_err();
        assert!(err.to_string().contains("outside 3-9"), "{err}");
        let (r, w) = pipe();
        let err =
            FdPlan::new(Stdio::Null, Stdio::Null, Stdio::Null, vec![(4, w), (4, r)]).unwrap_err();
        assert!(err.to_string().contains("given twice"), "{err}");
    }

    #[test]
    fn plan_applies_in_a_child() {
        // Fork a child that applies a plan mapping a pipe's write end to fd 7 and writes there.
        let (r, w) = pipe();
        let plan = FdPlan::new(Stdio::Null, Stdio::Null, Stdio::Null, vec![(7, w)]).unwrap();
        // SAFETY: the child only makes raw syscalls and _exits.
        match unsafe { libc::fork() } {
            0 => unsafe {
                let ok = plan.apply_in_child().is_ok()
                    && libc::write(7, b"ok".as_ptr().cast(), 2) == 2
                    // fd 7 must have lost close-on-exec; fd 8 must be closed.
                    && libc::fcntl(7, libc::F_GETFD) == 0
                    && libc::fcntl(8, libc::F_GETFD) == -1;
                libc::_exit(if ok { 0 } else { 1 });
            },
            pid => {
                drop(plan);
                let mut status = 0;
                unsafe { libc::waitpid(pid, &mut status, 0) };
                assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
                let mut buf = [0u8; 2];
                let n = nix::unistd::read(&r, &mut buf).unwrap();
                assert_eq!(&buf[..n], b"ok");
            }
        }
    }
}
