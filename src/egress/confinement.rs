//! How a jail is kept to its egress proxy (`[network] confinement`):
//!
//! - **namespace**: a network namespace of the jail's own (`sandbox::host::netns`) holding only
//!   loopback, where only the proxy listens. Needs warden to run as root, or the kernel to let
//!   a normal user make a user + network namespace.
//! - **supervisor**: the jail stays in warden's network namespace; it may make TCP sockets but
//!   not connect them: warden's seccomp supervisor connects each to the proxy itself, and
//!   refuses every other address (`sandbox::host::connect`). Needs seccomp user notification
//!   and `pidfd_getfd` (Linux ≥ 5.6). The proxy then listens on 127.0.0.1 in warden's own
//!   namespace, where the run's token in the proxy URL keeps other local users out.
//! - **auto** (the default): the namespace where it can be made, else the supervisor.
//!
//! Where neither is possible the jail gets no network, and the reason says what to do.

use super::network::Confinement;
use crate::sandbox::host::connect::{RefusedConnects, SupervisedNetwork};
use crate::sandbox::host::kernel;
use crate::sandbox::host::netns::{Bypasses, JailNetwork};
use crate::sandbox::JailSpec;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

/// The confinement of one run, with the listener the proxy serves on.
#[derive(Debug)]
pub enum Confined {
    Namespace(JailNetwork),
    Supervisor(Arc<SupervisedNetwork>),
    /// A Docker container's own namespace (network none), where the Docker backend puts the
    /// listener that forwards to the proxy (`sandbox::docker::egress`).
    Container,
}

impl Confined {
    /// Make the confinement `wanted` asks for and the proxy's listener inside it.
    pub fn open(wanted: Confinement) -> Result<(Confined, TcpListener), String> {
        let namespace = || {
            let mut namespace = JailNetwork::create()?;
            let listener = namespace
                .take_listener()
                .ok_or_else(|| "the proxy's listener is gone".to_string())?;
            Ok((Confined::Namespace(namespace), listener))
        };
        let (made, why) = pick(wanted, namespace, supervisor)?;
        tracing::debug!(confinement = made.0.name(), %why, "the jail's network");
        Ok(made)
    }

    /// For a container: the proxy on 127.0.0.1 in warden's own namespace, where only the
    /// Docker backend's forwarder connects for the container (the run's token keeps other local
    /// users out).
    pub fn for_container() -> Result<(Confined, TcpListener), String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("the proxy cannot listen on 127.0.0.1: {e}"))?;
        Ok((Confined::Container, listener))
    }

    /// Which confinement `wanted` gives on this machine, and why, without making anything
    /// lasting (for `warden doctor`).
    pub fn probe(wanted: Confinement) -> Result<String, String> {
        const NAMESPACE: &str = "a network namespace of the jail's own, where only warden's \
                                 egress proxy listens";
        const SUPERVISOR: &str = "warden's connect supervisor: the jail shares warden's \
                                  network, warden connects its sockets to the egress proxy \
                                  itself and refuses every other address";
        let (how, why) = pick(
            wanted,
            || JailNetwork::check_available().map(|()| NAMESPACE),
            || kernel::connect_supervision_available().map(|()| SUPERVISOR),
        )?;
        Ok(format!("{how} ({why})"))
    }

    /// "namespace", "supervisor" or "container".
    pub fn name(&self) -> &'static str {
        match self {
            Confined::Namespace(_) => "namespace",
            Confined::Supervisor(_) => "supervisor",
            Confined::Container => "container",
        }
    }

    /// Put the jail into this confinement (the proxy's address is set by the caller).
    pub fn apply(&self, spec: &mut JailSpec) {
        match self {
            Confined::Namespace(namespace) => {
                spec.network_namespace = Some(namespace.namespace());
                spec.user_namespace = namespace.user_namespace();
            }
            Confined::Supervisor(supervised) => {
                spec.supervised_network = Some(supervised.clone());
            }
            Confined::Container => {}
        }
    }

    /// What went around the proxy: the namespace's kernel counters, or the supervisor's count.
    pub fn bypasses(&mut self) -> (Option<Bypasses>, Option<RefusedConnects>) {
        match self {
            Confined::Namespace(namespace) => (
                namespace
                    .bypasses()
                    .map_err(
                        |why| tracing::warn!(%why, "reading the jail's network counters failed"),
                    )
                    .ok(),
                None,
            ),
            Confined::Supervisor(supervised) => (None, Some(supervised.refused())),
            Confined::Container => (None, None),
        }
    }
}

/// The confinement `wanted` asks for, made by `namespace` or `supervisor`, with why it was
/// chosen; or why none can be, naming the config key.
fn pick<T>(
    wanted: Confinement,
    namespace: impl FnOnce() -> Result<T, String>,
    supervisor: impl FnOnce() -> Result<T, String>,
) -> Result<(T, String), String> {
    let asked = format!("[network] confinement = \"{}\"", wanted.as_str());
    match wanted {
        Confinement::Namespace => namespace()
            .map(|made| (made, asked.clone()))
            .map_err(|why| format!("{asked}, but no network namespace can be made: {why}")),
        Confinement::Supervisor => supervisor()
            .map(|made| (made, asked.clone()))
            .map_err(|why| format!("{asked}, but warden cannot supervise connects: {why}")),
        Confinement::Auto => match namespace() {
            Ok(made) => Ok((made, format!("{asked}: warden can make a namespace here"))),
            Err(namespace_why) => match supervisor() {
                Ok(made) => Ok((
                    made,
                    format!("{asked}: no network namespace here ({namespace_why})"),
                )),
                Err(supervisor_why) => Err(format!(
                    "{asked}, but no network namespace can be made ({namespace_why}) and \
                     warden cannot supervise connects either ({supervisor_why})"
                )),
            },
        },
    }
}

/// The supervisor's listener: 127.0.0.1, an ephemeral port, in warden's own namespace.
fn supervisor() -> Result<(Confined, TcpListener), String> {
    kernel::connect_supervision_available()?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("the proxy cannot listen on 127.0.0.1: {e}"))?;
    let addr = match listener.local_addr() {
        Ok(SocketAddr::V4(addr)) => addr,
        other => {
            return Err(format!(
                "the proxy's listener has no IPv4 address: {other:?}"
            ))
        }
    };
    Ok((
        Confined::Supervisor(Arc::new(SupervisedNetwork::new(addr))),
        listener,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(what: &'static str) -> impl FnOnce() -> Result<&'static str, String> {
        move || Ok(what)
    }

    fn refused(why: &'static str) -> impl FnOnce() -> Result<&'static str, String> {
        move || Err(why.to_string())
    }

    #[test]
    fn auto_prefers_the_namespace_and_falls_back_to_the_supervisor() {
        let (made, why) = pick(Confinement::Auto, ok("ns"), ok("sup")).unwrap();
        assert_eq!(made, "ns");
        assert!(why.contains("can make a namespace here"), "{why}");
        let (made, why) = pick(Confinement::Auto, refused("no userns"), ok("sup")).unwrap();
        assert_eq!(made, "sup");
        assert!(
            why.contains("no network namespace here (no userns)"),
            "{why}"
        );
        let why = pick(
            Confinement::Auto,
            refused("no userns"),
            refused("old kernel"),
        )
        .unwrap_err();
        assert!(why.contains("[network] confinement = \"auto\""), "{why}");
        assert!(
            why.contains("no userns") && why.contains("old kernel"),
            "{why}"
        );
    }

    #[test]
    fn an_explicit_choice_is_kept_or_refused_naming_the_key() {
        let (made, _) = pick(Confinement::Supervisor, ok("ns"), ok("sup")).unwrap();
        assert_eq!(made, "sup");
        let (made, _) = pick(Confinement::Namespace, ok("ns"), ok("sup")).unwrap();
        assert_eq!(made, "ns");
        // No silent fallback when the user chose.
        let why = pick(Confinement::Namespace, refused("not root"), ok("sup")).unwrap_err();
        assert!(
            why.contains("[network] confinement = \"namespace\", but no network namespace"),
            "{why}"
        );
        let why = pick(Confinement::Supervisor, ok("ns"), refused("yama")).unwrap_err();
        assert!(
            why.contains("[network] confinement = \"supervisor\", but warden cannot"),
            "{why}"
        );
    }
}
