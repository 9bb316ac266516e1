//! The seccomp user-notification supervisor: the one thread of warden that answers the calls
//! the jail's filter hands over (`SECCOMP_RET_USER_NOTIF`) — `flock` for every jailed tree
//! (`flock.rs`) and, where the jail shares warden's network, `connect` (`connect.rs`).
//!
//! The listener is created by the child when it installs the filter and passed to warden over
//! a socket pair made for that spawn ([`Handover`]), then closed in the child before `execve`:
//! a jailed program holding its own listener could answer its own calls.
//!
//! One thread serves the listeners of every jailed process tree of this warden (started with
//! the first request), so a jail's start costs a message, not a thread. Inside an async
//! runtime a tree's listener goes to the thread only when its first request arrives: most
//! commands never call `flock` or `connect`, and then no thread is started or woken at all
//! (a task of the runtime waits for the listener instead). A tree is forgotten when its
//! last process is gone or its process is dropped. A handler never blocks the thread: a
//! request it cannot answer at once (a lock not free yet, a connect still in progress) waits in
//! the tree's list and is tried again every [`RETRY`], or as soon as its descriptor is ready.

use super::connect::{self, SupervisedNetwork};
use super::flock;
use super::notification::Listener;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How often a request that waits is tried again (and its caller checked).
const RETRY: Duration = Duration::from_millis(10);
/// Requests waiting at once per tree (each holds a descriptor in warden); more are answered
/// with the handler's "no resources" errno.
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

/// What the handlers may do for one tree.
#[derive(Clone)]
pub struct Answers {
    /// `flock` locks only beneath these.
    pub writable: Arc<[PathBuf]>,
    /// `connect` reaches the proxy only; `None` refuses every `connect` (ECONNREFUSED), the
    /// filter hands none over then anyway.
    pub network: Option<Arc<SupervisedNetwork>>,
}

/// One jailed process tree's registration with the supervisor thread: dropping it forgets the
/// tree (its listener closes; a process still alive then gets ENOSYS from `flock` and
/// `connect`).
pub struct Supervisor {
    id: u64,
    /// Where the listener is; shared with the task that waits for its first request.
    state: Arc<Mutex<TreeState>>,
    /// That task, while the listener waits for its first request.
    first_request: Option<tokio::task::AbortHandle>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TreeState {
    /// No request yet: the listener is with the task.
    Waiting,
    /// With the supervisor thread.
    Handed,
    /// The registration was dropped.
    Dropped,
}

/// Numbers the trees of this warden process.
static NEXT_TREE: AtomicU64 = AtomicU64::new(0);

impl Supervisor {
    /// Have the supervisor answer the calls arriving on `listener`: in an async runtime from
    /// the first request on, elsewhere at once.
    pub fn start(listener: OwnedFd, answers: Answers) -> io::Result<Supervisor> {
        let id = NEXT_TREE.fetch_add(1, Ordering::Relaxed);
        let tree = move |listener| Tree {
            id,
            listener: Listener(listener),
            answers,
            waiting: Vec::new(),
        };
        let watched = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let _entered = runtime.enter();
                // SAFETY: the descriptor moves into the AsyncFd, open for its whole lifetime.
                unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        listener,
                        tokio::io::Interest::READABLE,
                    )
                }
                .map_err(|e| e.into_parts().0)
            }
            Err(_) => Err(listener),
        };
        let listener = match watched {
            Ok(watched) => {
                let state = Arc::new(Mutex::new(TreeState::Waiting));
                let task_state = state.clone();
                let task = tokio::spawn(async move {
                    if !first_request(&watched).await {
                        return;
                    }
                    let tree = tree(watched.into_inner());
                    let mut state = crate::locks::lock(&task_state);
                    if *state == TreeState::Waiting {
                        match supervisor() {
                            Ok(thread) => {
                                thread.send(Change::Add(tree));
                                *state = TreeState::Handed;
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "no seccomp supervisor for a jailed process")
                            }
                        }
                    }
                });
                return Ok(Supervisor {
                    id,
                    state,
                    first_request: Some(task.abort_handle()),
                });
            }
            Err(listener) => listener,
        };
        supervisor()?.send(Change::Add(tree(listener)));
        Ok(Supervisor {
            id,
            state: Arc::new(Mutex::new(TreeState::Handed)),
            first_request: None,
        })
    }
}

/// Until a request waits on `listener` (`true`), or every process of the tree is gone.
async fn first_request(listener: &tokio::io::unix::AsyncFd<OwnedFd>) -> bool {
    loop {
        let Ok(mut guard) = listener.readable().await else {
            return false;
        };
        let mut fd = pollfd(listener.get_ref().as_raw_fd(), libc::POLLIN);
        // SAFETY: poll of one descriptor we hold, without waiting.
        let r = unsafe { libc::poll(&mut fd, 1, 0) };
        if r > 0 && fd.revents & libc::POLLIN != 0 {
            return true;
        }
        if r > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return false;
        }
        guard.clear_ready();
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if let Some(task) = &self.first_request {
            task.abort();
        }
        let previous = std::mem::replace(&mut *crate::locks::lock(&self.state), TreeState::Dropped);
        if previous == TreeState::Handed {
            if let Some(Ok(thread)) = SUPERVISOR.get() {
                thread.send(Change::Remove(self.id));
            }
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
}

enum Change {
    Add(Tree),
    Remove(u64),
}

/// A jailed process tree the thread answers for.
struct Tree {
    id: u64,
    listener: Listener,
    answers: Answers,
    waiting: Vec<Waiting>,
}

/// A request a handler could not answer at once.
pub enum Waiting {
    Lock(flock::Waiting),
    Connect(connect::Waiting),
}

impl Waiting {
    /// A descriptor whose readiness may finish the request, with the events to wait for.
    fn ready_on(&self) -> Option<(RawFd, libc::c_short)> {
        match self {
            Waiting::Lock(_) => None,
            Waiting::Connect(c) => Some(c.ready_on()),
        }
    }

    /// Try again; `false` once it is answered or its caller stopped waiting.
    fn retry(&self, listener: &Listener) -> bool {
        match self {
            Waiting::Lock(w) => flock::retry(listener, w),
            Waiting::Connect(c) => connect::retry(listener, c),
        }
    }

    /// The answer when too many wait already.
    fn overflow(&self) -> (u64, i32) {
        match self {
            // The kernel's answer when it has no lock records left.
            Waiting::Lock(w) => (w.id, libc::ENOLCK),
            Waiting::Connect(c) => (c.id, libc::EAGAIN),
        }
    }
}

impl Handle {
    fn spawn() -> io::Result<Handle> {
        use nix::fcntl::OFlag;
        let (wake_read, wake) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let changes = Arc::new(Mutex::new(Vec::new()));
        let queue = changes.clone();
        std::thread::Builder::new()
            .name("warden-supervisor".into())
            .spawn(move || serve(&queue, &wake_read))?;
        Ok(Handle { changes, wake })
    }

    fn send(&self, change: Change) {
        crate::locks::lock(&self.changes).push(change);
        // A full pipe already holds a wake-up.
        let _ = nix::unistd::write(&self.wake, &[1]);
    }
}

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
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
        // The wake pipe, each tree's listener, then every waiting request's descriptor.
        let mut fds: Vec<libc::pollfd> = std::iter::once(pollfd(wake.as_raw_fd(), libc::POLLIN))
            .chain(
                trees
                    .iter()
                    .map(|t| pollfd(t.listener.0.as_raw_fd(), libc::POLLIN)),
            )
            .chain(
                trees
                    .iter()
                    .flat_map(|t| t.waiting.iter().filter_map(Waiting::ready_on))
                    .map(|(fd, events)| pollfd(fd, events)),
            )
            .collect();
        let timeout = match trees.iter().all(|t| t.waiting.is_empty()) {
            true => -1,
            false => RETRY.as_millis() as libc::c_int,
        };
        // SAFETY: poll over descriptors we hold, `fds.len()` of them.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            tracing::warn!(error = %io::Error::last_os_error(), "the jail's seccomp supervisor failed");
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
            tree.waiting.retain(|w| w.retry(listener));
        }
    }
}

/// Answer the request waiting on `tree`'s listener, or queue it.
fn serve_one(tree: &mut Tree) {
    let Some(request) = tree.listener.receive() else {
        return;
    };
    let nr = i64::from(request.data.nr);
    let waiting = if nr == libc::SYS_flock {
        flock::answer(&tree.listener, &request, &tree.answers.writable).map(Waiting::Lock)
    } else if nr == libc::SYS_connect {
        connect::answer(&tree.listener, &request, tree.answers.network.as_deref())
            .map(Waiting::Connect)
    } else {
        tree.listener.respond(request.id, Err(libc::ENOSYS));
        None
    };
    if let Some(w) = waiting {
        match tree.waiting.len() < MAX_WAITING {
            true => tree.waiting.push(w),
            false => {
                let (id, errno) = w.overflow();
                tree.listener.respond(id, Err(errno));
            }
        }
    }
}
