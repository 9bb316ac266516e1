//! `connect` for a jail that shares warden's network (no network namespace could be made):
//! warden connects, the jail never does.
//!
//! The filter (`seccomp::Network::Supervised`) lets the jail make TCP sockets only and hands
//! every `connect` to warden's supervisor (`supervisor.rs`). For each one warden
//!
//! 1. reads the address from the caller's memory, then checks that the request is still
//!    pending (so the memory read was the caller's);
//! 2. takes a copy of the caller's socket (`pidfd_getfd`: the same open socket) and checks on
//!    the copy that it is a TCP socket (`SO_DOMAIN`, `SO_TYPE`, `SO_PROTOCOL`);
//! 3. only if the address read is the proxy's (IPv4, or the v4-mapped proxy address on an
//!    AF_INET6 socket) connects **its copy** to **its own copy** of the proxy's address, and
//!    answers with that result (0, or the errno, `EINPROGRESS` for a non-blocking socket);
//! 4. answers everything else ECONNREFUSED, counted and described for the run's report.
//!
//! The call is never let through (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the kernel would read
//! the address again, after a racing thread of the jail rewrote it, and would connect whatever
//! socket then has the number (a racing `dup2`). Here neither matters: the address connected is
//! warden's, and whatever socket warden took was a TCP socket connected only to the proxy.
//!
//! The supervisor thread also answers `flock` for every other jail, so a connect must never
//! stall it (a hostile jail can fill the proxy's backlog, and a connect to a full backlog waits
//! for SYN retries). Warden therefore connects without blocking: it sets `O_NONBLOCK` on the
//! (shared) open socket for the one `connect` call and restores the caller's flags right after.
//! A caller whose socket was non-blocking gets the kernel's answer as it is (`EINPROGRESS`
//! included); a blocking caller whose connect is still in progress waits in the supervisor's
//! list, and is answered with `SO_ERROR` as soon as the socket is writable (the supervisor
//! polls it) or dropped when it stops waiting. A helper thread per connect would bound the
//! stall too, but costs a thread per connect and still needs the same flag dance to be
//! cancellable; the poll costs nothing extra.

use super::notification::{Listener, TakeFailure};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// How many refused destinations the report names.
const FIRST_FEW: usize = 5;
/// `sizeof(struct sockaddr_storage)`: the kernel refuses longer addresses (EINVAL).
const MAX_ADDRESS: usize = 128;

/// What a supervised jail may connect to (the proxy, nothing else) and what it tried besides.
#[derive(Debug)]
pub struct SupervisedNetwork {
    proxy: SocketAddrV4,
    refused: Mutex<RefusedConnects>,
}

/// Connects warden refused: how many, and the first few destinations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RefusedConnects {
    pub count: u64,
    pub first: Vec<String>,
}

impl RefusedConnects {
    /// One line for the run's report, `None` when there were none.
    pub fn describe(&self) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let more = match self.count as usize > self.first.len() {
            true => ", …",
            false => "",
        };
        Some(format!(
            "the jail tried to go around the egress proxy: warden refused {} connect(s) to \
             anything but the proxy ({}{more})",
            self.count,
            self.first.join(", ")
        ))
    }
}

impl SupervisedNetwork {
    pub fn new(proxy: SocketAddrV4) -> SupervisedNetwork {
        SupervisedNetwork {
            proxy,
            refused: Mutex::new(RefusedConnects::default()),
        }
    }

    pub fn proxy(&self) -> SocketAddr {
        SocketAddr::V4(self.proxy)
    }

    /// What was refused so far.
    pub fn refused(&self) -> RefusedConnects {
        crate::locks::lock(&self.refused).clone()
    }

    fn refuse(&self, what: String) {
        tracing::debug!(destination = %what, "a jailed connect around the proxy was refused");
        let mut refused = crate::locks::lock(&self.refused);
        refused.count += 1;
        if refused.first.len() < FIRST_FEW && !refused.first.contains(&what) {
            refused.first.push(what);
        }
    }
}

/// Where a `connect` asked to go, as read from the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Destination {
    V4(SocketAddrV4),
    V6(SocketAddrV6),
    /// Any other family (AF_UNIX, AF_UNSPEC…) or an address too short for its family.
    Other(u16),
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destination::V4(a) => write!(f, "{a}"),
            Destination::V6(a) => write!(f, "[{}]:{}", a.ip(), a.port()),
            Destination::Other(family) => write!(f, "an address of family {family}"),
        }
    }
}

fn parse(bytes: &[u8]) -> Destination {
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    let port = || u16::from_be_bytes([bytes[2], bytes[3]]);
    match i32::from(family) {
        // The kernel's minimum lengths: sizeof(sockaddr_in), SIN6_LEN_RFC2133.
        libc::AF_INET if bytes.len() >= 16 => {
            let ip = Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]);
            Destination::V4(SocketAddrV4::new(ip, port()))
        }
        libc::AF_INET6 if bytes.len() >= 24 => {
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&bytes[8..24]);
            Destination::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port(), 0, 0))
        }
        _ => Destination::Other(family),
    }
}

/// Whether `destination`, asked for on a socket of `domain`, is the proxy.
fn is_proxy(domain: i32, destination: &Destination, proxy: SocketAddrV4) -> bool {
    match (domain, destination) {
        (libc::AF_INET, Destination::V4(a)) => *a == proxy,
        (libc::AF_INET6, Destination::V6(a)) => {
            a.ip().to_ipv4_mapped() == Some(*proxy.ip()) && a.port() == proxy.port()
        }
        _ => false,
    }
}

/// A blocking caller's connect still in progress on warden's copy of its socket.
pub struct Waiting {
    pub id: u64,
    socket: OwnedFd,
}

impl Waiting {
    pub fn ready_on(&self) -> (RawFd, libc::c_short) {
        (self.socket.as_raw_fd(), libc::POLLOUT)
    }
}

/// Answer one `connect` now, or return it to be answered when the socket is writable.
pub fn answer(
    listener: &Listener,
    request: &libc::seccomp_notif,
    network: Option<&SupervisedNetwork>,
) -> Option<Waiting> {
    match decide(listener, request, network) {
        Ok(Decision::Answer(result)) => {
            listener.respond(request.id, result);
            None
        }
        Ok(Decision::Wait(socket)) => Some(Waiting {
            id: request.id,
            socket,
        }),
        Err(errno) => {
            listener.respond(request.id, Err(errno));
            None
        }
    }
}

enum Decision {
    Answer(Result<(), i32>),
    Wait(OwnedFd),
}

fn decide(
    listener: &Listener,
    request: &libc::seccomp_notif,
    network: Option<&SupervisedNetwork>,
) -> Result<Decision, i32> {
    let [fd, address, len, ..] = request.data.args;
    let Some(network) = network else {
        return Err(libc::ECONNREFUSED);
    };
    let len = len as usize;
    if !(2..=MAX_ADDRESS).contains(&len) {
        return Err(libc::EINVAL);
    }
    // 1. The address, then the check that the caller still waits (in `read_memory`).
    let destination = parse(&listener.read_memory(request, address, len)?);
    // 2. The caller's socket, as warden's own copy.
    let socket = listener
        .take_fd(request, fd as RawFd)
        .map_err(|why| match why {
            TakeFailure::Gone => libc::EINTR,
            TakeFailure::BadFd => libc::EBADF,
            TakeFailure::Denied => {
                tracing::warn!("warden may not take a jailed process's socket (pidfd_getfd)");
                libc::ECONNREFUSED
            }
        })?;
    let domain = socket_option(&socket, libc::SO_DOMAIN)?;
    let tcp = matches!(domain, libc::AF_INET | libc::AF_INET6)
        && socket_option(&socket, libc::SO_TYPE)? == libc::SOCK_STREAM
        && socket_option(&socket, libc::SO_PROTOCOL)? == libc::IPPROTO_TCP;
    // 3. Only the proxy, from warden's own copy of its address.
    if !tcp || !is_proxy(domain, &destination, network.proxy) {
        network.refuse(match tcp {
            true => destination.to_string(),
            false => format!("{destination} on a socket that is not TCP"),
        });
        return Err(libc::ECONNREFUSED);
    }
    connect_copy(&socket, domain, network.proxy)
}

/// Connect warden's copy of the socket to the proxy without blocking (see the module's
/// comment), restoring the caller's file flags after.
fn connect_copy(socket: &OwnedFd, domain: i32, proxy: SocketAddrV4) -> Result<Decision, i32> {
    let fd = socket.as_raw_fd();
    // SAFETY: fcntl on a descriptor we hold.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(super::fds::errno());
    }
    let blocking = flags & libc::O_NONBLOCK == 0;
    // SAFETY: as above.
    if blocking && unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(super::fds::errno());
    }
    let result = connect_to(fd, domain, proxy);
    if blocking {
        // SAFETY: as above; the caller's own flags again.
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
    }
    match result {
        // EALREADY: a blocking connect interrupted by a signal and restarted; the kernel
        // would go on waiting for the connection in progress, and so does warden.
        Err(libc::EINPROGRESS | libc::EALREADY) if blocking => match finished(socket) {
            Some(result) => Ok(Decision::Answer(result)),
            None => Ok(Decision::Wait(
                socket.try_clone().map_err(|_| libc::EAGAIN)?,
            )),
        },
        result => Ok(Decision::Answer(result)),
    }
}

fn connect_to(fd: RawFd, domain: i32, proxy: SocketAddrV4) -> Result<(), i32> {
    let r = match domain {
        libc::AF_INET => {
            // SAFETY: sockaddr_in is plain data.
            let mut a: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            a.sin_family = libc::AF_INET as libc::sa_family_t;
            a.sin_port = proxy.port().to_be();
            a.sin_addr.s_addr = u32::from(*proxy.ip()).to_be();
            // SAFETY: connect with a sockaddr we built and its size.
            unsafe {
                libc::connect(
                    fd,
                    (&a as *const libc::sockaddr_in).cast(),
                    std::mem::size_of_val(&a) as libc::socklen_t,
                )
            }
        }
        _ => {
            // SAFETY: sockaddr_in6 is plain data.
            let mut a: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            a.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            a.sin6_port = proxy.port().to_be();
            a.sin6_addr.s6_addr = proxy.ip().to_ipv6_mapped().octets();
            // SAFETY: as above.
            unsafe {
                libc::connect(
                    fd,
                    (&a as *const libc::sockaddr_in6).cast(),
                    std::mem::size_of_val(&a) as libc::socklen_t,
                )
            }
        }
    };
    match r {
        0 => Ok(()),
        _ => Err(super::fds::errno()),
    }
}

/// The connect's outcome once the socket is writable (or failed); `None` while in progress.
fn finished(socket: &OwnedFd) -> Option<Result<(), i32>> {
    let mut fds = [libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    }];
    // SAFETY: poll over one descriptor we hold, without waiting.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) };
    if r <= 0 || fds[0].revents == 0 {
        return None;
    }
    Some(match socket_option(socket, libc::SO_ERROR) {
        Ok(0) => Ok(()),
        Ok(e) | Err(e) => Err(e),
    })
}

/// Try a waiting connect again; `false` once it is answered or its caller stopped waiting.
pub fn retry(listener: &Listener, waiting: &Waiting) -> bool {
    if !listener.still_waiting(waiting.id) {
        return false;
    }
    match finished(&waiting.socket) {
        Some(result) => {
            listener.respond(waiting.id, result);
            false
        }
        None => true,
    }
}

fn socket_option(socket: &OwnedFd, name: libc::c_int) -> Result<libc::c_int, i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int of the size we pass.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    match r {
        0 => Ok(value),
        _ => Err(super::fds::errno()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{ExitStatus, JailSpec, ProcessSpec, Sandbox};
    use std::path::Path;

    fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut b = vec![0u8; 16];
        b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port.to_be_bytes());
        b[4..8].copy_from_slice(&ip);
        b
    }

    fn v6(ip: Ipv6Addr, port: u16) -> Vec<u8> {
        let mut b = vec![0u8; 28];
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port.to_be_bytes());
        b[8..24].copy_from_slice(&ip.octets());
        b
    }

    #[test]
    fn only_the_proxys_address_in_the_sockets_family_is_the_proxy() {
        let proxy = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4000);
        let inet = libc::AF_INET;
        let inet6 = libc::AF_INET6;
        assert!(is_proxy(inet, &parse(&v4([127, 0, 0, 1], 4000)), proxy));
        assert!(!is_proxy(inet, &parse(&v4([127, 0, 0, 1], 4001)), proxy));
        assert!(!is_proxy(inet, &parse(&v4([127, 0, 0, 2], 4000)), proxy));
        // v4-mapped on an AF_INET6 socket, never `::1` or the v4 form there.
        let mapped = Ipv4Addr::LOCALHOST.to_ipv6_mapped();
        assert!(is_proxy(inet6, &parse(&v6(mapped, 4000)), proxy));
        assert!(!is_proxy(
            inet6,
            &parse(&v6(Ipv6Addr::LOCALHOST, 4000)),
            proxy
        ));
        assert!(!is_proxy(inet6, &parse(&v4([127, 0, 0, 1], 4000)), proxy));
        assert!(!is_proxy(inet, &parse(&v6(mapped, 4000)), proxy));
        // Too short for its family, or another family.
        assert_eq!(
            parse(&v4([127, 0, 0, 1], 4000)[..8]),
            Destination::Other(libc::AF_INET as u16)
        );
        let mut unix = vec![0u8; 110];
        unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert!(!is_proxy(inet, &parse(&unix), proxy));
        assert_eq!(parse(&v6(Ipv6Addr::LOCALHOST, 80)).to_string(), "[::1]:80");
    }

    #[test]
    fn refusals_are_counted_and_the_first_few_named() {
        let network = SupervisedNetwork::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4000));
        assert_eq!(network.refused().describe(), None);
        for port in [1, 2, 2, 3, 4, 5, 6, 7] {
            network.refuse(format!("127.0.0.1:{port}"));
        }
        let refused = network.refused();
        assert_eq!(refused.count, 8);
        assert_eq!(refused.first.len(), FIRST_FEW);
        let line = refused.describe().unwrap();
        assert!(line.contains("refused 8 connect(s)"), "{line}");
        assert!(
            line.contains("127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3"),
            "{line}"
        );
        assert!(line.ends_with(", …)"), "{line}");
    }

    #[tokio::test]
    async fn a_connect_waiting_on_a_full_backlog_does_not_stall_other_jails_flock() {
        if !Path::new("/usr/bin/flock").exists() || !Path::new("/usr/bin/python3").exists() {
            eprintln!("skipped: flock(1) and python3 are needed");
            return;
        }
        if let Err(why) = super::super::kernel::connect_supervision_available() {
            eprintln!("skipped: {why}");
            return;
        }
        // A "proxy" that never accepts, its backlog filled from outside: a connect to it stays
        // in progress (SYN retries) for as long as the caller waits.
        let listener = raw_tcp_socket(0);
        let mut addr = sockaddr(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::LOCALHOST,
            0,
        ));
        let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: bind, listen and getsockname on our socket with a sockaddr_in of `size`.
        unsafe {
            assert_eq!(
                libc::bind(
                    listener.as_raw_fd(),
                    (&addr as *const libc::sockaddr_in).cast(),
                    size
                ),
                0
            );
            assert_eq!(libc::listen(listener.as_raw_fd(), 0), 0);
            let mut len = size;
            libc::getsockname(
                listener.as_raw_fd(),
                (&mut addr as *mut libc::sockaddr_in).cast(),
                &mut len,
            );
        }
        let proxy =
            std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, u16::from_be(addr.sin_port));
        let filling: Vec<_> = (0..4)
            .filter_map(|_| {
                let s = connect_from_outside(proxy);
                std::thread::sleep(std::time::Duration::from_millis(20));
                s
            })
            .collect();
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let mut jail = JailSpec::new(ws.clone());
        jail.egress_proxy = Some(std::net::SocketAddr::V4(proxy));
        jail.supervised_network = Some(std::sync::Arc::new(SupervisedNetwork::new(proxy)));
        let sandbox = super::super::HostSandbox::new(jail).unwrap();
        let code = format!(
            "import socket; socket.create_connection(('127.0.0.1', {}))",
            proxy.port()
        );
        let mut waiting = sandbox
            .spawn(ProcessSpec::silent(&["python3", "-c", &code], &ws))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let started = std::time::Instant::now();
        let mut locker = sandbox
            .spawn(ProcessSpec::silent(&["flock", "build.lock", "true"], &ws))
            .await
            .unwrap();
        let status = tokio::time::timeout(std::time::Duration::from_secs(10), locker.wait())
            .await
            .expect("flock was stalled behind the connect")
            .unwrap();
        assert_eq!(status, ExitStatus::Code(0));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // The connect was still waiting all along (killed, not failed).
        waiting.kill().await;
        assert_eq!(
            waiting.wait().await.unwrap(),
            ExitStatus::Signal(libc::SIGKILL)
        );
        drop((filling, listener));
    }

    fn raw_tcp_socket(flags: libc::c_int) -> OwnedFd {
        // SAFETY: a new socket we own.
        unsafe {
            let fd = libc::socket(
                libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags,
                0,
            );
            assert!(fd >= 0);
            std::os::fd::FromRawFd::from_raw_fd(fd)
        }
    }

    fn sockaddr(a: std::net::SocketAddrV4) -> libc::sockaddr_in {
        // SAFETY: plain data.
        let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        s.sin_family = libc::AF_INET as libc::sa_family_t;
        s.sin_port = a.port().to_be();
        s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
        s
    }

    /// A non-blocking connect from the test itself (outside any jail), kept open.
    fn connect_from_outside(to: std::net::SocketAddrV4) -> Option<OwnedFd> {
        let s = raw_tcp_socket(libc::SOCK_NONBLOCK);
        let addr = sockaddr(to);
        // SAFETY: connect with a sockaddr_in we built.
        unsafe {
            libc::connect(
                s.as_raw_fd(),
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        Some(s)
    }
}
