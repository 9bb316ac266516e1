//! The network a jail with an egress proxy sees: a network namespace of its own holding only
//! the loopback interface, on which the one listening socket is warden's egress proxy.
//!
//! Landlock matches TCP connects by port only and seccomp cannot read `connect`'s address, so
//! in warden's own namespace a jail allowed the proxy's port could reach any host on that
//! port. Here the destination is enforced by the kernel's routing instead: the namespace has
//! no other interface and no route, so every address but its own loopback is unreachable, and
//! on that loopback nothing listens but the proxy. The listener is created inside the
//! namespace (a socket belongs to the namespace it was created in, for life) and served by
//! warden from its own namespace, whose sockets reach upstream.
//!
//! The namespace is made on a short-lived thread (`unshare(CLONE_NEWNET)` affects the calling
//! thread only, never warden's other threads), which needs `CAP_SYS_ADMIN`: warden run as
//! root. A warden run as a normal user makes it instead in a user namespace of its own, where
//! the kernel allows that: a forked helper (a user namespace needs a single-threaded caller)
//! creates both, sets up loopback and the listener, hands the namespaces and the listener back
//! over a socket pair and exits. It maps no uid (writing the map would need warden's memory
//! dumpable, even briefly): jailed processes keep their uid for every file and permission
//! check, and only see it as the overflow uid (65534) from inside. A jailed process then
//! joins the user namespace before the network namespace, and loses the capabilities it holds
//! there with the rest (`capabilities.rs`) before it runs anything. Where neither works no
//! sound destination check is available, and network stays off.
//!
//! The namespace's kernel counters (`/proc/net/snmp`, opened from inside) tell afterwards how
//! many connections the jail tried that did not reach the proxy.

use std::fs::File;
use std::io::{Read, Seek};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// A jail's network namespace, with the proxy's listening socket inside it.
#[derive(Debug)]
pub struct JailNetwork {
    namespace: Arc<OwnedFd>,
    /// The user namespace that owns `namespace`, when warden is not root.
    user_namespace: Option<Arc<OwnedFd>>,
    listener: Option<TcpListener>,
    addr: SocketAddr,
    snmp: File,
    baseline: Counters,
}

/// What the namespace's kernel counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// TCP connections opened from the namespace, and accepted in it (by the proxy).
    active_opens: u64,
    passive_opens: u64,
    /// Packets with no route (any address outside the namespace).
    no_routes: u64,
}

/// Connections a jail tried that did not reach the proxy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bypasses {
    /// TCP connects to an address or port of the namespace where nothing listens.
    pub refused: u64,
    /// Connects and packets to addresses outside the namespace (no route).
    pub unroutable: u64,
}

impl Bypasses {
    /// One line for the run's report, `None` when there were none.
    pub fn describe(&self) -> Option<String> {
        if self.refused == 0 && self.unroutable == 0 {
            return None;
        }
        Some(format!(
            "the jail tried to go around the egress proxy: {} connection(s) to addresses where \
             only the proxy could have answered were refused, {} to addresses outside its \
             network namespace had no route (counted by the kernel)",
            self.refused, self.unroutable
        ))
    }
}

impl JailNetwork {
    /// A new namespace with loopback up and a listener on `127.0.0.1` (an ephemeral port).
    pub fn create() -> Result<JailNetwork, String> {
        let made = std::thread::Builder::new()
            .name("warden-netns".into())
            .spawn(make_in_new_namespace)
            .map_err(|e| format!("starting the namespace thread failed: {e}"))?
            .join()
            .map_err(|_| "the namespace thread panicked".to_string())?;
        let (namespace, user_namespace, listener, mut snmp) = match made {
            Ok((namespace, listener, snmp)) => (namespace, None, listener, snmp),
            Err(why) if !nix::unistd::geteuid().is_root() => {
                let (user, namespace, listener, snmp) = make_in_user_namespace().map_err(|e| {
                    format!(
                        "{why}; a user namespace of warden's own could not be made either \
                             ({e}): the kernel or a security module (AppArmor's \
                             restrict_unprivileged_userns, kernel.unprivileged_userns_clone) \
                             refuses them"
                    )
                })?;
                (namespace, Some(Arc::new(user)), listener, snmp)
            }
            Err(why) => return Err(why),
        };
        let addr = listener
            .local_addr()
            .map_err(|e| format!("the proxy listener has no address: {e}"))?;
        let baseline = read_counters(&mut snmp)?;
        Ok(JailNetwork {
            namespace: Arc::new(namespace),
            user_namespace,
            listener: Some(listener),
            addr,
            snmp,
            baseline,
        })
    }

    /// Whether a namespace can be made here, and if not why (for `warden doctor` and refusals).
    pub fn check_available() -> Result<(), String> {
        JailNetwork::create().map(drop)
    }

    /// The proxy's address as the jail reaches it.
    pub fn proxy_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The listening socket, for the proxy to serve (once).
    pub fn take_listener(&mut self) -> Option<TcpListener> {
        self.listener.take()
    }

    /// The namespace, for the jail's processes to join.
    pub fn namespace(&self) -> Arc<OwnedFd> {
        self.namespace.clone()
    }

    /// The user namespace the jail's processes join first (warden not root).
    pub fn user_namespace(&self) -> Option<Arc<OwnedFd>> {
        self.user_namespace.clone()
    }

    /// What the jail tried since the namespace was made.
    pub fn bypasses(&mut self) -> Result<Bypasses, String> {
        let now = read_counters(&mut self.snmp)?;
        let opens = now.active_opens.saturating_sub(self.baseline.active_opens);
        let accepted = now
            .passive_opens
            .saturating_sub(self.baseline.passive_opens);
        Ok(Bypasses {
            refused: opens.saturating_sub(accepted),
            unroutable: now.no_routes.saturating_sub(self.baseline.no_routes),
        })
    }
}

type Made = (OwnedFd, TcpListener, File);

/// On its own thread: leave warden's namespace for a new one and set it up.
fn make_in_new_namespace() -> Result<Made, String> {
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        let err = std::io::Error::last_os_error();
        return Err(format!(
            "creating a network namespace failed ({err}); it needs CAP_SYS_ADMIN, that is \
             warden run as root"
        ));
    }
    let namespace = File::open("/proc/thread-self/ns/net")
        .map_err(|e| format!("opening the new network namespace failed: {e}"))?;
    loopback_up().map_err(|e| format!("bringing up loopback in the namespace failed: {e}"))?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("listening inside the namespace failed: {e}"))?;
    let snmp = File::open("/proc/thread-self/net/snmp")
        .map_err(|e| format!("opening the namespace's counters failed: {e}"))?;
    Ok((OwnedFd::from(namespace), listener, snmp))
}

fn loopback_up() -> std::io::Result<()> {
    let socket = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if socket < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let socket = unsafe { OwnedFd::from_raw_fd(socket) };
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    unsafe { request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn read_counters(snmp: &mut File) -> Result<Counters, String> {
    let mut text = String::new();
    snmp.rewind()
        .and_then(|_| snmp.read_to_string(&mut text))
        .map_err(|e| format!("reading the namespace's counters failed: {e}"))?;
    let field = |section: &str, name: &str| -> Result<u64, String> {
        let mut rows = text.lines().filter(|l| l.starts_with(section));
        let (names, values) = (rows.next(), rows.next());
        names
            .zip(values)
            .and_then(|(names, values)| {
                let at = names.split_whitespace().position(|n| n == name)?;
                values.split_whitespace().nth(at)?.parse().ok()
            })
            .ok_or_else(|| format!("/proc/net/snmp has no {section} {name}"))
    };
    Ok(Counters {
        active_opens: field("Tcp:", "ActiveOpens")?,
        passive_opens: field("Tcp:", "PassiveOpens")?,
        no_routes: field("Ip:", "OutNoRoutes")?,
    })
}

/// In the jailed child, before capabilities are dropped: join the user namespace (when warden
/// is not root), then the network namespace. Async-signal-safe (system calls only).
///
/// # Safety
/// Called in the freshly cloned child only.
pub unsafe fn join_in_child(namespace: RawFd, user_namespace: Option<RawFd>) -> Result<(), i32> {
    if let Some(user) = user_namespace {
        if libc::setns(user, libc::CLONE_NEWUSER) != 0 {
            return Err(super::fds::errno());
        }
    }
    if libc::setns(namespace, libc::CLONE_NEWNET) != 0 {
        return Err(super::fds::errno());
    }
    Ok(())
}

/// The user namespace, network namespace, listener and counters a forked helper made.
type MadeAsUser = (OwnedFd, OwnedFd, TcpListener, File);

/// Fork a helper that makes a user and network namespace and sends back what it made.
fn make_in_user_namespace() -> Result<MadeAsUser, String> {
    // Everything the helper uses is prepared here: after fork only system calls.
    let mut pair = [0 as libc::c_int; 2];
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } != 0
    {
        return Err(format!("socketpair: {}", std::io::Error::last_os_error()));
    }
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    let mut loopback: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    loopback.sin_family = libc::AF_INET as libc::sa_family_t;
    loopback.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
    let mut control = vec![0u8; unsafe { libc::CMSG_SPACE(4 * 4) } as usize];
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let status = unsafe { helper(theirs.as_raw_fd(), &loopback, &mut control) };
        unsafe { libc::_exit(status) };
    }
    drop(theirs);
    let received = receive_fds(ours.as_raw_fd());
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let step = match libc::WEXITSTATUS(status) {
            10 => "unshare(CLONE_NEWUSER | CLONE_NEWNET) was refused",
            12 => "bringing up loopback failed",
            13 => "listening on loopback failed",
            14 => "opening its namespaces failed",
            _ => "it failed",
        };
        return Err(format!("the namespace helper: {step}"));
    }
    let fds = received?;
    let [user, net, listener, snmp] = fds;
    Ok((user, net, TcpListener::from(listener), File::from(snmp)))
}

/// The helper, after fork: only system calls. Returns its exit status (the failed step).
unsafe fn helper(socket: RawFd, loopback: &libc::sockaddr_in, control: &mut [u8]) -> libc::c_int {
    if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
        return 10;
    }
    if loopback_up().is_err() {
        return 12;
    }
    let listener = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
    if listener < 0
        || libc::bind(
            listener,
            (loopback as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
        || libc::listen(listener, 128) != 0
    {
        return 13;
    }
    let open = |path: &std::ffi::CStr| libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    let fds = [
        open(c"/proc/self/ns/user"),
        open(c"/proc/self/ns/net"),
        listener,
        open(c"/proc/self/net/snmp"),
    ];
    if fds.iter().any(|fd| *fd < 0) {
        return 14;
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len() as _;
    let cmsg = libc::CMSG_FIRSTHDR(&msg);
    (*cmsg).cmsg_level = libc::SOL_SOCKET;
    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
    (*cmsg).cmsg_len = libc::CMSG_LEN(4 * 4) as _;
    std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), 4);
    if libc::sendmsg(socket, &msg, 0) != 1 {
        return 15;
    }
    0
}

/// The four descriptors the helper sends.
fn receive_fds(socket: RawFd) -> Result<[OwnedFd; 4], String> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = vec![0u8; unsafe { libc::CMSG_SPACE(4 * 4) } as usize];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len() as _;
    let n = unsafe { libc::recvmsg(socket, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n != 1 {
        return Err("the namespace helper sent nothing".into());
    }
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if cmsg.is_null()
        || unsafe { (*cmsg).cmsg_type } != libc::SCM_RIGHTS
        || unsafe { (*cmsg).cmsg_len } as usize != unsafe { libc::CMSG_LEN(4 * 4) } as usize
    {
        return Err("the namespace helper sent no descriptors".into());
    }
    let mut raw = [0 as libc::c_int; 4];
    unsafe { std::ptr::copy_nonoverlapping(libc::CMSG_DATA(cmsg).cast(), raw.as_mut_ptr(), 4) };
    Ok(raw.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;
    use std::time::Duration;

    /// Run `f` on a thread that joined the namespace (as a jailed process would).
    fn inside<T: Send + 'static>(
        network: &JailNetwork,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let fd = network.namespace();
        std::thread::spawn(move || {
            unsafe { join_in_child(fd.as_raw_fd(), None) }.expect("setns");
            f()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn only_the_proxy_listens_and_bypasses_are_counted() {
        let mut network = match JailNetwork::create() {
            Ok(network) => network,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        if network.user_namespace().is_some() {
            // A thread of a threaded process cannot join a user namespace; the jail tests
            // cover this form through real jailed processes.
            eprintln!("skipped: not root, the namespace is owned by a user namespace");
            return;
        }
        let addr = network.proxy_addr();
        assert!(addr.ip().is_loopback(), "{addr}");
        // A listener on the same port at another loopback address of warden's namespace.
        let outside = TcpListener::bind(("127.0.0.2", addr.port()))
            .or_else(|_| TcpListener::bind("127.0.0.2:0"));
        let outside_port = outside
            .as_ref()
            .map(|l| l.local_addr().unwrap().port())
            .ok();
        let listener = network.take_listener().unwrap();
        let results = inside(&network, move || {
            let timeout = Duration::from_secs(2);
            let proxy = TcpStream::connect_timeout(&addr, timeout).is_ok();
            let other = outside_port
                .map(|p| {
                    TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 2], p)), timeout)
                        .is_ok()
                })
                .unwrap_or(false);
            let far = TcpStream::connect_timeout(&"192.0.2.1:80".parse().unwrap(), timeout).is_ok();
            (proxy, other, far)
        });
        assert_eq!(results, (true, false, false));
        let accepted = listener.accept();
        assert!(accepted.is_ok());
        let bypasses = network.bypasses().unwrap();
        assert_eq!(
            bypasses.refused,
            u64::from(outside_port.is_some()),
            "{bypasses:?}"
        );
        assert_eq!(bypasses.unroutable, 1, "{bypasses:?}");
        assert!(bypasses.describe().unwrap().contains("refused"));
    }
}
