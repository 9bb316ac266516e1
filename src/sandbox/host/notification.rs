//! One seccomp notification listener as its handlers use it: receiving a request, reading the
//! caller's memory and descriptors, answering. Shared by the supervisor loop
//! (`supervisor.rs`) and its handlers (`flock.rs`, `connect.rs`), which import it from here
//! rather than from the loop that calls them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Why the caller's descriptor could not be taken.
#[derive(Debug, PartialEq, Eq)]
pub enum TakeFailure {
    /// The caller stopped waiting (killed, interrupted): nobody reads the answer.
    Gone,
    /// No such descriptor in the caller.
    BadFd,
    /// Warden may not look (Yama, an old kernel without `pidfd_getfd`).
    Denied,
}

/// A tree's notification listener: receiving requests, reading the caller, answering.
pub struct Listener(pub(super) OwnedFd);

impl Listener {
    pub(super) fn receive(&self) -> Option<libc::seccomp_notif> {
        // SAFETY: the kernel wants a zeroed buffer; it fills it.
        let mut request: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: RECV on our listener; poll said a request is there, and a request withdrawn
        // in between makes it fail with ENOENT rather than block.
        let r = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut request,
            )
        };
        (r == 0).then_some(request)
    }

    /// Whether the caller of request `id` still waits for its answer (and so still is the
    /// thread the request named, its memory and descriptors the ones read).
    pub fn still_waiting(&self, id: u64) -> bool {
        // SAFETY: ID_VALID reads the id we pass.
        unsafe { libc::ioctl(self.0.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 }
    }

    /// Send the result; `false` when the caller is no longer waiting.
    pub fn respond(&self, id: u64, result: Result<(), i32>) -> bool {
        let response = libc::seccomp_notif_resp {
            id,
            val: 0,
            error: match result {
                Ok(()) => 0,
                Err(e) => -e,
            },
            flags: 0,
        };
        // SAFETY: SEND with a response we built.
        unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &response,
            ) == 0
        }
    }

    /// A copy of the caller's descriptor `fd` (`pidfd_getfd`: the same open file).
    pub fn take_fd(
        &self,
        request: &libc::seccomp_notif,
        fd: RawFd,
    ) -> Result<OwnedFd, TakeFailure> {
        let pidfd = thread_pidfd(request.pid).map_err(|_| TakeFailure::Denied)?;
        // The caller still waits in this request, so its id was not reused before pidfd_open.
        if !self.still_waiting(request.id) {
            return Err(TakeFailure::Gone);
        }
        // SAFETY: pidfd_getfd returns a new descriptor (close-on-exec) or -1.
        let copy = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
        if copy < 0 {
            return Err(match super::fds::errno() {
                libc::EBADF => TakeFailure::BadFd,
                _ => TakeFailure::Denied,
            });
        }
        // SAFETY: a fresh descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(copy as RawFd) })
    }

    /// `len` bytes of the caller's memory at `address`, then the check that the caller still
    /// waits (so the pid was not reused by someone else's process in between). What the
    /// caller's other threads write there afterwards changes nothing: the copy is warden's.
    pub fn read_memory(
        &self,
        request: &libc::seccomp_notif,
        address: u64,
        len: usize,
    ) -> Result<Vec<u8>, i32> {
        let mut buffer = vec![0u8; len];
        let local = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: len,
        };
        let remote = libc::iovec {
            iov_base: address as *mut libc::c_void,
            iov_len: len,
        };
        // SAFETY: reads into our buffer of `len` bytes; the remote side is the kernel's to
        // check.
        let n =
            unsafe { libc::process_vm_readv(request.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(super::fds::errno());
        }
        if !self.still_waiting(request.id) {
            return Err(libc::EINTR);
        }
        if n as usize != len {
            return Err(libc::EFAULT);
        }
        Ok(buffer)
    }
}

/// A pidfd for the calling thread: the request names a thread id (rustc locks from a thread
/// of its own). Kernels before 6.9 have no `PIDFD_THREAD`; there the thread's process is
/// taken, whose descriptor table its threads share.
fn thread_pidfd(tid: u32) -> io::Result<OwnedFd> {
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    let open = |pid: u32, flags: libc::c_int| {
        // SAFETY: pidfd_open returns a new descriptor or -1.
        match unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) } {
            // SAFETY: a fresh descriptor we own.
            fd if fd >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }),
            _ => Err(io::Error::last_os_error()),
        }
    };
    match open(tid, PIDFD_THREAD) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
            let tgid = status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| io::Error::other("no Tgid"))?;
            open(tgid, 0)
        }
        other => other,
    }
}
