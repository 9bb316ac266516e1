//! `flock` for the jail, done by warden on files beneath the jail's writable roots.
//!
//! `flock` locks any open file, however read-only, so a jailed process could hold an
//! exclusive lock on `/etc/passwd` or on a file of a read root and stall every host process
//! that locks it. Seccomp sees only a descriptor number, so the filter hands each `flock` to
//! warden (`SECCOMP_RET_USER_NOTIF`). Warden takes a copy of the caller's descriptor
//! (`pidfd_getfd`: the same open file, so the same lock), looks at which file it is, and
//!
//! - beneath the workspace, the private TMPDIR or a writable root: performs the `flock` on the
//!   copy and answers with its result, so cargo's, rustc's and python's locks work as before,
//!   against the host's and each other's;
//! - anything else (a read root, a system file, a pipe): answers ENOSYS, the answer of a kernel
//!   without `flock`, which cargo and Go take as "no locking here" and python's `filelock`
//!   reports. The same answer comes from the kernel when nobody listens.
//!
//! A blocking lock that is not free yet is retried without blocking (the supervisor's retry
//! tick) until it is granted or the caller stops waiting (killed, interrupted); warden never
//! sleeps in `flock` itself. The thread, the listeners and the copy of the caller's descriptor
//! are the supervisor's (`supervisor.rs`); this file is the `flock` answer.

use super::notification::{Listener, TakeFailure};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A blocking lock not granted yet.
pub struct Waiting {
    pub id: u64,
    file: OwnedFd,
    operation: libc::c_int,
}

/// Answer one request now, or return it to be retried.
pub fn answer(
    listener: &Listener,
    request: &libc::seccomp_notif,
    writable: &[PathBuf],
) -> Option<Waiting> {
    let file = match caller_file(listener, request) {
        Ok(file) => file,
        Err(e) => {
            listener.respond(request.id, Err(e));
            return None;
        }
    };
    if !beneath(&file, writable) {
        listener.respond(request.id, Err(libc::ENOSYS));
        return None;
    }
    let operation = request.data.args[1] as libc::c_int;
    match lock(&file, operation) {
        Err(libc::EWOULDBLOCK) if operation & libc::LOCK_NB == 0 => Some(Waiting {
            id: request.id,
            file,
            operation,
        }),
        result => {
            listener.respond(request.id, result);
            None
        }
    }
}

/// Try a waiting lock again; `false` once it is answered or its caller stopped waiting.
pub fn retry(listener: &Listener, waiting: &Waiting) -> bool {
    if !listener.still_waiting(waiting.id) {
        return false;
    }
    match lock(&waiting.file, waiting.operation) {
        Err(libc::EWOULDBLOCK) => true,
        result => {
            if !listener.respond(waiting.id, result) && result.is_ok() {
                // The caller left in between: give back the lock it will not know it has.
                let _ = lock(&waiting.file, libc::LOCK_UN);
            }
            false
        }
    }
}

/// The open file behind the caller's descriptor (argument 0).
fn caller_file(listener: &Listener, request: &libc::seccomp_notif) -> Result<OwnedFd, i32> {
    let fd = request.data.args[0] as libc::c_int;
    listener.take_fd(request, fd).map_err(|why| match why {
        TakeFailure::Gone => libc::EINTR,
        TakeFailure::BadFd => libc::EBADF,
        // Not allowed to look (Yama) or no such call: as if flock did not exist.
        TakeFailure::Denied => libc::ENOSYS,
    })
}

/// Whether `file` is a file or directory beneath one of the writable roots. A deleted file
/// counts where it was.
fn beneath(file: &OwnedFd, writable: &[PathBuf]) -> bool {
    let link = format!("/proc/self/fd/{}", file.as_raw_fd());
    let Ok(target) = std::fs::read_link(link) else {
        return false;
    };
    let text = target.to_string_lossy();
    let path = Path::new(text.strip_suffix(" (deleted)").unwrap_or(&text));
    path.is_absolute() && writable.iter().any(|root| path.starts_with(root))
}

fn lock(file: &OwnedFd, operation: libc::c_int) -> Result<(), i32> {
    // SAFETY: flock on a descriptor we hold; never blocks (LOCK_NB).
    match unsafe { libc::flock(file.as_raw_fd(), operation | libc::LOCK_NB) } {
        0 => Ok(()),
        _ => Err(super::fds::errno()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_beneath_a_writable_root_count() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let inside = root.join("a/lock");
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::write(&inside, "").unwrap();
        let writable: Vec<PathBuf> = vec![root.clone()];
        let open = |p: &Path| OwnedFd::from(std::fs::File::open(p).unwrap());
        assert!(beneath(&open(&inside), &writable));
        assert!(beneath(&open(&root), &writable));
        assert!(!beneath(&open(Path::new("/etc/passwd")), &writable));
        // A sibling whose name starts like the root is not beneath it.
        let sibling = PathBuf::from(format!("{}-other", root.display()));
        std::fs::write(&sibling, "").unwrap();
        assert!(!beneath(&open(&sibling), &writable));
        std::fs::remove_file(&sibling).unwrap();
        // Deleted, it still counts where it was.
        let deleted = open(&inside);
        std::fs::remove_file(&inside).unwrap();
        assert!(beneath(&deleted, &writable));
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert!(!beneath(&r, &writable));
    }
}
