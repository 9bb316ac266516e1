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
}

impl Confined {
    /// Make the confinement `wanted` asks for and the proxy's listener inside it.
    pub fn open(wanted: Confinement) -> Result<(Confined, TcpListener), String> {
        let namespace = || {
            let mut namespace = JailNetwork::create()?;
            let listener = namespace
                .take_listener()
                .ok_or_else(|| "the proxy's listener is gone".to_string())?;
            Ok::<_, String>((Confined::Namespace(namespace), listener))
        };
        match wanted {
            Confinement::Namespace => namespace().map_err(|why| {
                format!(
                    "[network] confinement = \"namespace\", but no namespace can be made: {why}"
                )
            }),
            Confinement::Supervisor => supervisor()
                .map_err(|why| format!("[network] confinement = \"supervisor\", but {why}")),
            Confinement::Auto => namespace().or_else(|namespace_why| {
                supervisor().map_err(|supervisor_why| {
                    format!(
                        "no network namespace can be made ({namespace_why}) and warden cannot \
                         supervise connects either ({supervisor_why})"
                    )
                })
            }),
        }
    }

    /// Which confinement `wanted` gives on this machine, and why, without making anything
    /// lasting (for `warden doctor`).
    pub fn probe(wanted: Confinement) -> Result<String, String> {
        let namespace = JailNetwork::check_available;
        let supervisor = kernel::connect_supervision_available;
        const NAMESPACE: &str = "a network namespace of the jail's own, where only warden's \
                                 egress proxy listens";
        const SUPERVISOR: &str = "warden's connect supervisor: the jail shares warden's \
                                  network, warden connects its sockets to the egress proxy \
                                  itself and refuses every other address";
        match wanted {
            Confinement::Namespace => namespace()
                .map(|()| format!("{NAMESPACE} ([network] confinement = \"namespace\")"))
                .map_err(|why| {
                    format!("[network] confinement = \"namespace\", but no namespace can be made: {why}")
                }),
            Confinement::Supervisor => supervisor()
                .map(|()| format!("{SUPERVISOR} ([network] confinement = \"supervisor\")"))
                .map_err(|why| format!("[network] confinement = \"supervisor\", but {why}")),
            Confinement::Auto => match namespace() {
                Ok(()) => Ok(format!(
                    "{NAMESPACE} (confinement \"auto\": warden can make one here)"
                )),
                Err(namespace_why) => supervisor()
                    .map(|()| {
                        format!(
                            "{SUPERVISOR} (confinement \"auto\": no network namespace here: \
                             {namespace_why})"
                        )
                    })
                    .map_err(|supervisor_why| {
                        format!(
                            "no network namespace can be made ({namespace_why}) and warden \
                             cannot supervise connects either ({supervisor_why})"
                        )
                    }),
            },
        }
    }

    /// "namespace" or "supervisor".
    pub fn name(&self) -> &'static str {
        match self {
            Confined::Namespace(_) => "namespace",
            Confined::Supervisor(_) => "supervisor",
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
        }
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
