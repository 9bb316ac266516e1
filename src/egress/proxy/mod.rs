//! The egress proxy: the only way out of a skill's jail (to the domains its granted manifest
//! declares) and of a jailed command's (to what `[network]` allows, `super::jailed`).
//!
//! One proxy per skill run, on 127.0.0.1 (an ephemeral port that the jail's Landlock and
//! seccomp rules let it connect to, and nothing else). It speaks the two forms HTTP clients use
//! through `HTTP_PROXY`/`HTTPS_PROXY`: `CONNECT host:port` (a tunnel, for HTTPS) and plain
//! HTTP with an absolute URL (`GET http://host/path`). For each request it:
//!
//! 1. takes the host the client named, lowercase, and refuses it unless it is exactly one of
//!    the declared domains, on a declared port (80 and 443 unless the domain names one);
//! 2. resolves it itself — the jail has no DNS — or takes the address `[skills] hosts` maps
//!    that exact name to (the only way to reach a private or loopback address);
//! 3. refuses a resolved address that is private, loopback, link-local (cloud metadata),
//!    CGNAT, multicast or reserved (`egress::addresses`), any one of them;
//! 4. connects, and then only copies bytes. A plain-HTTP request goes upstream rewritten to
//!    origin form with `Host` set to the checked name and `Connection: close`, so one
//!    connection carries one checked request.
//!
//! Every request must carry the run's token — as the password of `Proxy-Authorization` for
//! proxy requests, as the first path segment of a route request — so no other local process can
//! borrow the proxy. On the host backend the jail reaches the proxy inside a network namespace
//! where nothing else listens (`sandbox::host::netns`).
//!
//! A skill's domains with method/path rules are served over plain HTTP only (inside a CONNECT
//! tunnel the request cannot be seen). For jailed commands, a CONNECT to a host with such rules
//! or a `[network.secrets]` binding is answered by warden with the run's CA ([`intercept`]),
//! which checks each request and swaps the secret in ([`inject`], the same code that adds a
//! route's headers). Routes (`routes.rs`) are origin-form requests to the proxy itself,
//! `/<token>/<route>/path`: the proxy checks their rules, adds the route's headers (secrets the
//! skill never sees) and calls the upstream itself, over TLS for `https` routes. A forwarded
//! request carries exactly its `Content-Length` of body; nothing after it reaches upstream.
//!
//! Every decision is recorded as an [`EgressEvent`] for the run's report and audit row.

mod ca;
mod decide;
pub mod domain;
mod handle;
mod inject;
pub mod intercept;
mod plan;
mod relay;
mod request;
pub mod routes;
#[cfg(test)]
mod tests;

use crate::egress::fixed::HostTarget;
use crate::egress::network::NetworkAsker;
use crate::egress::network::NetworkRules;
use domain::Domain;
pub use relay::tls_connect;
use routes::{HttpRules, Route};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Time a client has to send its request head, and to connect upstream.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping proxy waits for its connections to end (and count their bytes).
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);
/// Connections handled at once.
const MAX_CONNECTIONS: usize = 64;

/// What the proxy lets through.
#[derive(Clone, Debug, Default)]
pub struct EgressRules {
    pub domains: Vec<Domain>,
    pub hosts: BTreeMap<String, HostTarget>,
    /// Method/path rules by declared domain name.
    pub rules: BTreeMap<String, HttpRules>,
    pub routes: Vec<Route>,
    /// The run's token; the proxy refuses everything while it is empty.
    pub token: String,
    /// For jailed commands: `[network]` decides instead of `domains` and `rules` (the
    /// fixed addresses of `[network.resolve]` join `hosts`).
    pub network: Option<Arc<NetworkRules>>,
    /// Who answers `[network.hosts]` rules that ask; without one they are refused.
    pub asker: Option<NetworkAsker>,
    /// For jailed commands: the run's CA and secrets, to look inside HTTPS to hosts with
    /// method/path rules or a secret. Skills never get it (such a CONNECT is refused).
    pub interception: Option<Arc<intercept::Interception>>,
}

/// A fresh random token for one run.
pub fn new_token() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One decision of the proxy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EgressEvent {
    /// `host:port` as the client asked.
    pub target: String,
    pub allowed: bool,
    /// Where it went, or why it was refused.
    pub detail: String,
}

impl EgressEvent {
    /// `egress proxy refused HOST: why` / `egress allowed: HOST`.
    pub fn describe(&self) -> String {
        if self.allowed {
            format!("egress allowed: {}", self.target)
        } else {
            format!("egress proxy refused {}: {}", self.target, self.detail)
        }
    }
}

/// Bytes relayed for one host, as the client sent and received them (after the request head).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Traffic {
    pub sent: u64,
    pub received: u64,
}

/// A running proxy; it stops (and drops every connection) when stopped or dropped.
pub struct EgressProxy {
    addr: SocketAddr,
    events: Arc<Mutex<Vec<EgressEvent>>>,
    traffic: Arc<Mutex<BTreeMap<String, Traffic>>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl EgressProxy {
    /// Listen on 127.0.0.1 (an ephemeral port) and serve until stopped.
    pub async fn start(rules: EgressRules) -> std::io::Result<EgressProxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        EgressProxy::serve_on(listener, rules)
    }

    /// Serve on a listener made elsewhere (inside a jail's network namespace).
    pub fn serve_on(
        listener: std::net::TcpListener,
        rules: EgressRules,
    ) -> std::io::Result<EgressProxy> {
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let addr = listener.local_addr()?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let traffic = Arc::new(Mutex::new(BTreeMap::new()));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(serve(
            listener,
            Arc::new(rules),
            Log {
                events: events.clone(),
                traffic: traffic.clone(),
            },
            cancel.clone(),
        ));
        Ok(EgressProxy {
            addr,
            events,
            traffic,
            cancel,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The decisions so far.
    pub fn events(&self) -> Vec<EgressEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Bytes relayed so far, by host.
    pub fn traffic(&self) -> BTreeMap<String, Traffic> {
        self.traffic
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Close the listener and every connection; all decisions, and the bytes by host.
    pub async fn finish(mut self) -> (Vec<EgressEvent>, BTreeMap<String, Traffic>) {
        self.cancel.cancel();
        let _ = (&mut self.task).await;
        (self.events(), self.traffic())
    }

    /// Close the listener and every connection; returns all decisions.
    pub async fn stop(mut self) -> Vec<EgressEvent> {
        self.cancel.cancel();
        let _ = (&mut self.task).await;
        self.events()
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Where the proxy's connections report.
#[derive(Clone)]
struct Log {
    events: Arc<Mutex<Vec<EgressEvent>>>,
    traffic: Arc<Mutex<BTreeMap<String, Traffic>>>,
}

async fn serve(
    listener: TcpListener,
    rules: Arc<EgressRules>,
    log: Log,
    cancel: CancellationToken,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        while connections.try_join_next().is_some() {}
        let Ok((client, _)) = accepted else { continue };
        if connections.len() >= MAX_CONNECTIONS {
            drop(client);
            continue;
        }
        let (rules, events, traffic) = (rules.clone(), log.events.clone(), log.traffic.clone());
        connections.spawn(async move {
            // The decision is recorded before any byte is relayed: a run that ends mid-transfer
            // still reports every connection it made.
            let record = move |event: EgressEvent| {
                if event.allowed {
                    tracing::debug!(target = %event.target, detail = %event.detail, "egress allowed");
                } else {
                    tracing::info!(target = %event.target, reason = %event.detail, "egress refused");
                }
                events.lock().unwrap_or_else(|p| p.into_inner()).push(event);
            };
            let count = move |host: &str, sent: u64, received: u64| {
                let mut traffic = traffic.lock().unwrap_or_else(|p| p.into_inner());
                let entry = traffic.entry(host.to_string()).or_default();
                entry.sent += sent;
                entry.received += received;
            };
            handle::handle(client, &rules, record, count).await;
        });
    }
    // The jail is gone when the proxy stops, so its connections are closing: let them finish
    // counting their bytes for a moment before the rest are dropped.
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    connections.shutdown().await;
}
