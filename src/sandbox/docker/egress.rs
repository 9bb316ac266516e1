//! The one way out of a session container whose run has `[network]` rules: a listener warden
//! puts inside the container's own network namespace, forwarding to warden's egress proxy.
//!
//! The container keeps `network_mode: none` (verified after start, as always): its namespace
//! has loopback and nothing else, so no address outside it is routable. Warden opens the
//! container's namespace (`/proc/<pid>/ns/net` of its first process), enters it on a
//! short-lived thread (`setns` affects that thread only), binds `127.0.0.1:<port>` there — the
//! same port the proxy has in warden's namespace, so the proxy URL the container's environment
//! carries is the one every backend uses — and comes back. A socket belongs to the namespace it
//! was created in for life, so warden then accepts on it from its own namespace and pipes each
//! connection to the proxy, which checks every request against `[network]` as for the host
//! jail. Inside the container nothing else listens: every other connect is refused by its own
//! empty loopback.
//!
//! Entering another process's namespace needs `CAP_SYS_ADMIN` (warden run as root); a warden in
//! the `docker` group without it keeps the container's network off and says why. gVisor
//! (`runsc`) brings a network stack of its own that never sees this namespace unless the
//! runtime is configured with `--network=host`: then its sockets are the namespace's, which
//! holds only loopback and this listener (see `runtime_reaches_namespace`).

use std::fs::File;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Connections waiting for the proxy at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 256;

/// A running forwarder; stops (and closes the listener) when dropped.
#[derive(Debug)]
pub struct Forwarder(JoinHandle<()>);

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Listen on the proxy's port inside the namespace of container process `pid` and forward
/// every connection to `proxy`. Must be called inside a tokio runtime.
pub fn start(pid: i64, proxy: SocketAddr) -> Result<Forwarder, String> {
    let listener = listen_in_namespace_of(pid, proxy)?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("making the container's proxy listener non-blocking failed: {e}"))?;
    let listener = TcpListener::from_std(listener)
        .map_err(|e| format!("serving the container's proxy listener failed: {e}"))?;
    Ok(Forwarder(tokio::spawn(forward(listener, proxy))))
}

/// Whether the Docker runtime's programs use the container's network namespace: runc always;
/// gVisor only when told `--network=host` (its own stack otherwise, which cannot reach the
/// listener). `Err` says what to configure.
pub fn runtime_reaches_namespace(runtime: &str, path: &str, args: &[String]) -> Result<(), String> {
    let gvisor = runtime.contains("runsc") || path.ends_with("runsc");
    if !gvisor || args.iter().any(|a| a == "--network=host") {
        return Ok(());
    }
    Err(format!(
        "the Docker runtime {runtime:?} is gVisor with its own network stack, which cannot \
         reach warden's egress proxy; give it `\"runtimeArgs\": [\"--network=host\"]` in the \
         daemon's runtimes (the container still has network none: its namespace holds only \
         loopback and the proxy's listener)"
    ))
}

fn listen_in_namespace_of(pid: i64, proxy: SocketAddr) -> Result<std::net::TcpListener, String> {
    let theirs = File::open(format!("/proc/{pid}/ns/net"))
        .map_err(|e| format!("opening the container's network namespace failed: {e}"))?;
    let ours = std::fs::metadata("/proc/self/ns/net")
        .map_err(|e| format!("reading warden's network namespace failed: {e}"))?;
    let same = theirs
        .metadata()
        .map(|m| m.ino() == ours.ino() && m.dev() == ours.dev())
        .map_err(|e| format!("reading the container's network namespace failed: {e}"))?;
    if same {
        // Never expected with network none; a listener here would serve warden's own network.
        return Err("the container shares warden's network namespace".into());
    }
    let bind_to = SocketAddr::from(([127, 0, 0, 1], proxy.port()));
    std::thread::Builder::new()
        .name("warden-container-netns".into())
        .spawn(move || {
            // SAFETY: setns on a namespace descriptor we own, for this thread only; the thread
            // ends right after, so no other work ever runs in the container's namespace.
            if unsafe { libc::setns(theirs.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                let err = std::io::Error::last_os_error();
                return Err(format!(
                    "entering the container's network namespace failed ({err}); it needs \
                     CAP_SYS_ADMIN, that is warden run as root"
                ));
            }
            std::net::TcpListener::bind(bind_to)
                .map_err(|e| format!("listening inside the container's namespace failed: {e}"))
        })
        .map_err(|e| format!("starting the namespace thread failed: {e}"))?
        .join()
        .map_err(|_| "the namespace thread panicked".to_string())?
}

async fn forward(listener: TcpListener, proxy: SocketAddr) {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let (mut inside, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::debug!("accepting in the container's namespace failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        tokio::spawn(async move {
            let _permit = permit;
            match TcpStream::connect(proxy).await {
                Ok(mut upstream) => {
                    let _ = tokio::io::copy_bidirectional(&mut inside, &mut upstream).await;
                }
                Err(e) => tracing::warn!("the egress proxy did not answer the container: {e}"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runc_reaches_the_namespace_and_gvisor_only_with_host_network() {
        assert!(runtime_reaches_namespace("runc", "runc", &[]).is_ok());
        assert!(runtime_reaches_namespace("io.containerd.runc.v2", "", &[]).is_ok());
        let refused = runtime_reaches_namespace("runsc", "/usr/bin/runsc", &[]).unwrap_err();
        assert!(refused.contains("--network=host"), "{refused}");
        assert!(runtime_reaches_namespace("gvisor", "/usr/bin/runsc", &[]).is_err());
        let host = vec!["--network=host".to_string()];
        assert!(runtime_reaches_namespace("runsc", "/usr/bin/runsc", &host).is_ok());
    }

    #[test]
    fn warden_own_namespace_is_refused() {
        let own = std::process::id() as i64;
        let proxy = SocketAddr::from(([127, 0, 0, 1], 9));
        let refused = listen_in_namespace_of(own, proxy).unwrap_err();
        assert!(refused.contains("shares warden's network"), "{refused}");
    }
}
