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
//! A blocking lock that is not free yet is retried without blocking every [`RETRY`] until it
//! is granted or the caller stops waiting (killed, interrupted); warden never sleeps in
//! `flock` itself. One thread serves the listeners of every jailed process tree of this
//! warden (started with the first); a tree is forgotten when its last process is gone or its
//! process is dropped.
//!
//! The listener is created by the child when it installs the filter and passed to warden over
//! a socket pair made for that spawn ([`Handover`]), then closed in the child before `execve`:
//! a jailed program holding its own listener could answer its own calls.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How often a blocking lock that was not free is tried again.
const RETRY: Duration = Duration::from_millis(10);
/// Blocking locks waited for at once (each holds a descriptor in warden); more get ENOLCK,
/// the kernel's answer when it has no lock records left.
const MAX_WAITING: usize = 256;

/// The socket pair one spawn's listener travels over, child end to parent end.
pub struct Handover {
    parent: OwnedFd,
    child: OwnedFd,
}

impl Handover {
    pub fn new() -> io::Result<Handover> {
        let mut fds = [-1; 2];
        // SAFETY: socketpair fills two new descriptors we then own.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both are fresh descriptors owned by nobody else.
        let (parent, child) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Handover {
            parent,
            // Above the numbers the child's plan assigns, close-on-exec like the rest.
            child: super::fds::dup_private(&child)?,
        })
    }

    /// The end the child sends on.
    pub fn child_end(&self) -> RawFd {
        self.child.as_raw_fd()
    }

    /// Parent side, after the child executed: the listener it sent, `None` when it had none.
    pub fn receive(self) -> io::Result<Option<OwnedFd>> {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control = [0u64; 4];
        // SAFETY: msghdr is plain data; every pointer in it points at a live local.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: recvmsg on our socket into the buffers above.
        let n = unsafe {
            libc::recvmsg(
                self.parent.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: walking the control messages the kernel wrote into `control`.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if cmsg.is_null()
                || (*cmsg).cmsg_level != libc::SOL_SOCKET
                || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            {
                return Err(io::Error::other(
                    "the jail's seccomp listener did not arrive",
                ));
            }
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const RawFd);
            Ok(Some(OwnedFd::from_raw_fd(fd)))
        }
    }
}

/// Child side: send the filter's listener to warden and close it. Async-signal-safe (no
/// allocation; `sendmsg` and `close` are allowed by the filter just installed).
///
/// # Safety
/// Call only in the jail's child, with the listener `install_in_child` returned.
pub unsafe fn hand_over_in_child(socket: RawFd, listener: RawFd) -> Result<(), i32> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; 4];
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
    let cmsg = libc::CMSG_FIRSTHDR(&msg);
    (*cmsg).cmsg_level = libc::SOL_SOCKET;
    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
    (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, listener);
    let sent = libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL);
    let e = super::fds::errno();
    libc::close(listener);
    if sent < 0 {
        return Err(e);
    }
    Ok(())
}

/// One jailed process tree's registration with the supervisor thread: dropping it forgets the
/// tree (its listener closes; a process still alive then gets ENOSYS from `flock`).
pub struct Supervisor {
    id: u64,
}

impl Supervisor {
    /// Have the supervisor answer the `flock` calls arriving on `listener`, locking only
    /// beneath `writable`. One thread serves every tree of this process (started with the
    /// first), so a jail's start costs a message, not a thread.
    pub fn start(listener: OwnedFd, writable: Arc<[PathBuf]>) -> io::Result<Supervisor> {
        let thread = supervisor()?;
        let id = thread.next_id.fetch_add(1, Ordering::Relaxed);
        thread.send(Change::Add(Tree {
            id,
            listener,
            writable,
            waiting: Vec::new(),
        }));
        Ok(Supervisor { id })
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if let Some(Ok(thread)) = SUPERVISOR.get() {
            thread.send(Change::Remove(self.id));
        }
    }
}

/// The supervisor thread, started once per process; `Err` when it could not be.
static SUPERVISOR: OnceLock<Result<Handle, String>> = OnceLock::new();

fn supervisor() -> io::Result<&'static Handle> {
    SUPERVISOR
        .get_or_init(|| Handle::spawn().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| io::Error::other(e.clone()))
}

/// How the rest of warden talks to the thread: changes in a queue, a byte in a pipe to wake it.
struct Handle {
    changes: Arc<Mutex<Vec<Change>>>,
    wake: OwnedFd,
    next_id: AtomicU64,
}

enum Change {
    Add(Tree),
    Remove(u64),
}

/// A jailed process tree the thread answers for.
struct Tree {
    id: u64,
    listener: OwnedFd,
    writable: Arc<[PathBuf]>,
    waiting: Vec<Waiting>,
}

/// A blocking lock not granted yet.
struct Waiting {
    id: u64,
    file: OwnedFd,
    operation: libc::c_int,
}

impl Handle {
    fn spawn() -> io::Result<Handle> {
        use nix::fcntl::OFlag;
        let (wake_read, wake) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let changes = Arc::new(Mutex::new(Vec::new()));
        let queue = changes.clone();
        std::thread::Builder::new()
            .name("warden-flock".into())
            .spawn(move || serve(&queue, &wake_read))?;
        Ok(Handle {
            changes,
            wake,
            next_id: AtomicU64::new(0),
        })
    }

    fn send(&self, change: Change) {
        crate::locks::lock(&self.changes).push(change);
        // A full pipe already holds a wake-up.
        let _ = nix::unistd::write(&self.wake, &[1]);
    }
}

fn serve(changes: &Mutex<Vec<Change>>, wake: &OwnedFd) {
    let mut trees: Vec<Tree> = Vec::new();
    loop {
        for change in std::mem::take(&mut *crate::locks::lock(changes)) {
            match change {
                Change::Add(tree) => trees.push(tree),
                Change::Remove(id) => trees.retain(|t| t.id != id),
            }
        }
        let mut fds: Vec<libc::pollfd> = std::iter::once(wake.as_raw_fd())
            .chain(trees.iter().map(|t| t.listener.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let timeout = match trees.iter().all(|t| t.waiting.is_empty()) {
            true => -1,
            false => RETRY.as_millis() as libc::c_int,
        };
        // SAFETY: poll over descriptors we hold, `fds.len()` of them.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            tracing::warn!(error = %io::Error::last_os_error(), "the jail's flock supervisor failed");
            return;
        }
        if fds[0].revents != 0 {
            let mut drain = [0u8; 64];
            while matches!(nix::unistd::read(wake, &mut drain), Ok(n) if n > 0) {}
        }
        let mut gone = Vec::new();
        for (tree, fd) in trees.iter_mut().zip(&fds[1..]) {
            if fd.revents & libc::POLLIN != 0 {
                serve_one(tree);
            } else if fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                // No process of the tree is left.
                gone.push(tree.id);
            }
        }
        trees.retain(|t| !gone.contains(&t.id));
        for tree in &mut trees {
            let listener = &tree.listener;
            tree.waiting.retain(|w| retry(listener, w));
        }
    }
}

/// Answer the request waiting on `tree`'s listener, or queue it.
fn serve_one(tree: &mut Tree) {
    let Some(request) = receive(&tree.listener) else {
        return;
    };
    if let Some(w) = answer(&tree.listener, &request, &tree.writable) {
        match tree.waiting.len() < MAX_WAITING {
            true => tree.waiting.push(w),
            false => {
                respond(&tree.listener, w.id, Err(libc::ENOLCK));
            }
        }
    }
}

fn receive(listener: &OwnedFd) -> Option<libc::seccomp_notif> {
    // SAFETY: the kernel wants a zeroed buffer; it fills it.
    let mut request: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: RECV on our listener; poll said a request is there, and a request withdrawn in
    // between makes it fail with ENOENT rather than block.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut request,
        )
    };
    (r == 0).then_some(request)
}

/// Answer one request now, or return it to be retried.
fn answer(
    listener: &OwnedFd,
    request: &libc::seccomp_notif,
    writable: &[PathBuf],
) -> Option<Waiting> {
    if i64::from(request.data.nr) != libc::SYS_flock {
        respond(listener, request.id, Err(libc::ENOSYS));
        return None;
    }
    let file = match caller_file(listener, request) {
        Ok(file) => file,
        Err(e) => {
            respond(listener, request.id, Err(e));
            return None;
        }
    };
    if !beneath(&file, writable) {
        respond(listener, request.id, Err(libc::ENOSYS));
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
            respond(listener, request.id, result);
            None
        }
    }
}

/// Try a waiting lock again; `false` once it is answered or its caller stopped waiting.
fn retry(listener: &OwnedFd, waiting: &Waiting) -> bool {
    if !still_waiting(listener, waiting.id) {
        return false;
    }
    match lock(&waiting.file, waiting.operation) {
        Err(libc::EWOULDBLOCK) => true,
        result => {
            if !respond(listener, waiting.id, result) && result.is_ok() {
                // The caller left in between: give back the lock it will not know it has.
                let _ = lock(&waiting.file, libc::LOCK_UN);
            }
            false
        }
    }
}

/// The open file behind the caller's descriptor (argument 0).
fn caller_file(listener: &OwnedFd, request: &libc::seccomp_notif) -> Result<OwnedFd, i32> {
    let fd = request.data.args[0] as libc::c_int;
    let pidfd = thread_pidfd(request.pid).map_err(|_| libc::ENOSYS)?;
    // The caller still waits in this request, so its id was not reused before pidfd_open.
    if !still_waiting(listener, request.id) {
        return Err(libc::EINTR);
    }
    // SAFETY: pidfd_getfd returns a new descriptor (close-on-exec) or -1.
    let file = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if file < 0 {
        return Err(match super::fds::errno() {
            libc::EBADF => libc::EBADF,
            // Not allowed to look (Yama) or no such call: as if flock did not exist.
            _ => libc::ENOSYS,
        });
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(file as RawFd) })
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

fn still_waiting(listener: &OwnedFd, id: u64) -> bool {
    // SAFETY: ID_VALID reads the id we pass.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id,
        ) == 0
    }
}

/// Send the result; `false` when the caller is no longer waiting.
fn respond(listener: &OwnedFd, id: u64, result: Result<(), i32>) -> bool {
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
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &response,
        ) == 0
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
