//! The egress proxy: the only way out of a skill's jail, and only to the domains its granted
//! manifest declares.
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
//!    CGNAT, multicast or reserved (`web_fetch::forbidden_reason`), any one of them;
//! 4. connects, and then only copies bytes. A plain-HTTP request goes upstream rewritten to
//!    origin form with `Host` set to the checked name and `Connection: close`, so one
//!    connection carries one checked request.
//!
//! Every request must carry the run's token — as the password of `Proxy-Authorization` for
//! proxy requests, as the first path segment of a route request — so no other local process can
//! borrow the proxy. On the host backend the jail reaches the proxy inside a network namespace
//! where nothing else listens (`sandbox::host::netns`).
//!
//! Domains with method/path rules are served over plain HTTP only (inside a CONNECT tunnel the
//! request cannot be seen). Routes (`routes.rs`) are origin-form requests to the proxy itself,
//! `/<token>/<route>/path`: the proxy checks their rules, adds the route's headers (secrets the
//! skill never sees) and calls the upstream itself, over TLS for `https` routes. A forwarded
//! request carries exactly its `Content-Length` of body; nothing after it reaches upstream.
//!
//! Every decision is recorded as an [`EgressEvent`] for the run's report and audit row.

use crate::egress::fixed::HostTarget;
use crate::egress::network::{NetworkAsk, NetworkAsker, NetworkRules};
use crate::skills::domain::Domain;
use crate::skills::routes::{HttpRules, Route};
use crate::tools::web_fetch::forbidden_reason;
use base64::Engine;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
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
            handle(client, &rules, record, count).await;
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

/// A parsed request head.
struct Request {
    method: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    /// Bytes the client sent after the head.
    rest: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }
}

/// What a request becomes once checked.
enum Plan {
    /// CONNECT: a byte tunnel.
    Tunnel { host: String, port: u16 },
    /// One request sent upstream with exactly `body_len` bytes of body.
    Forward {
        host: String,
        port: u16,
        /// A route's upstream, which need not be a declared domain.
        route: bool,
        tls: bool,
        head: Vec<u8>,
        body_len: u64,
        /// `GET /path` for the record (no query: it may carry data).
        what: String,
    },
}

/// A refused request: the status the client sees and why.
struct Refusal {
    status: u16,
    target: String,
    why: String,
}

fn refusal(status: u16, target: impl Into<String>, why: impl Into<String>) -> Refusal {
    Refusal {
        status,
        target: target.into(),
        why: why.into(),
    }
}

/// Serve one client connection, reporting its decision through `record` (nothing for a
/// client that sent no request at all).
async fn handle(
    mut client: TcpStream,
    rules: &EgressRules,
    record: impl FnOnce(EgressEvent),
    count: impl FnOnce(&str, u64, u64),
) {
    let request = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(Some(request))) => request,
        Ok(Ok(None)) | Err(_) => return,
        Ok(Err(why)) => {
            respond(&mut client, 400, &why).await;
            return record(refused("?".into(), why));
        }
    };
    let (target, plan) = match plan(rules, &request) {
        Ok(planned) => planned,
        Err(r) => {
            respond(&mut client, r.status, &r.why).await;
            return record(refused(r.target, r.why));
        }
    };
    let (host, port, route, what) = match &plan {
        Plan::Tunnel { host, port } => (host, *port, false, "CONNECT"),
        Plan::Forward {
            host,
            port,
            route,
            what,
            ..
        } => (host, *port, *route, what.as_str()),
    };
    let addr = match (route, &rules.network) {
        (true, _) => resolve(rules, host, port).await,
        (false, Some(network)) => decide_network(rules, network, host, port, what).await,
        (false, None) => decide(rules, host, port).await,
    };
    let addr = match addr {
        Ok(addr) => addr,
        Err(why) => {
            respond(&mut client, 403, &why).await;
            return record(refused(target, why));
        }
    };
    let upstream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            let why = format!("connecting to {addr} failed: {e}");
            respond(&mut client, 502, &why).await;
            return record(refused(target, why));
        }
        Err(_) => {
            let why = format!("connecting to {addr} timed out");
            respond(&mut client, 504, &why).await;
            return record(refused(target, why));
        }
    };
    let detail = match &plan {
        Plan::Tunnel { .. } => format!("CONNECT via {addr}"),
        Plan::Forward { what, .. } => format!("{what} via {addr}"),
    };
    record(EgressEvent {
        target,
        allowed: true,
        detail,
    });
    let host = host.clone();
    let relayed = match plan {
        Plan::Tunnel { .. } => tunnel(client, upstream, &request.rest).await,
        Plan::Forward {
            host,
            tls: true,
            head,
            body_len,
            ..
        } => match tls_connect(&host, upstream).await {
            Ok(upstream) => forward(client, upstream, &head, &request.rest, body_len).await,
            Err(why) => {
                respond(&mut client, 502, &why).await;
                Ok((0, 0))
            }
        },
        Plan::Forward { head, body_len, .. } => {
            forward(client, upstream, &head, &request.rest, body_len).await
        }
    };
    let (sent, received) = relayed.unwrap_or((0, 0));
    count(&host, sent, received);
}

/// Check a request against the run's token, domains, rules and routes.
fn plan(rules: &EgressRules, request: &Request) -> Result<(String, Plan), Refusal> {
    if request.target.starts_with('/') {
        return plan_route(rules, request);
    }
    let target = request.target.as_str();
    if !proxy_token_matches(rules, request.header("proxy-authorization")) {
        return Err(refusal(
            407,
            target,
            "this proxy serves one run; the request lacks its token (Proxy-Authorization)",
        ));
    }
    if request.method == "CONNECT" {
        let (host, port) = authority(target).map_err(|why| refusal(400, target, why))?;
        let label = format!("{host}:{port}");
        let http = http_rules(rules, &host).map_err(|why| refusal(403, &label, why))?;
        if http.is_some_and(|r| !r.is_empty()) {
            let advice = match rules.network {
                Some(_) => "only plain http:// requests can reach it",
                None => "the skill must use plain HTTP or a route",
            };
            return Err(refusal(
                403,
                label,
                format!(
                    "{host} has method/path rules, which warden cannot check inside an encrypted \
                     tunnel; {advice}"
                ),
            ));
        }
        return Ok((label, Plan::Tunnel { host, port }));
    }
    let method = request.method.as_str();
    let url = url::Url::parse(target).map_err(|_| {
        refusal(
            400,
            "?",
            format!("{method} {target}: a proxy request needs an absolute http:// URL"),
        )
    })?;
    if url.scheme() != "http" {
        return Err(refusal(
            400,
            "?",
            format!(
                "{}: only http:// is forwarded; https goes through CONNECT",
                url.scheme()
            ),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refusal(400, "?", "URLs with credentials are not forwarded"));
    }
    let host = match url.host() {
        Some(url::Host::Domain(d)) => normalize(d),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(refusal(400, "?", "the URL has no host")),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let label = format!("{host}:{port}");
    // The parsed URL's path (dot segments resolved) is both what is checked and what is sent.
    let path = url.path();
    let http = http_rules(rules, &host).map_err(|why| refusal(403, &label, why))?;
    if let Some(domain_rules) = http {
        domain_rules
            .check(method, path)
            .map_err(|why| refusal(403, label.clone(), format!("{host}: {why}")))?;
    }
    let mut origin = path.to_string();
    if let Some(query) = url.query() {
        origin.push('?');
        origin.push_str(query);
    }
    let host_header = match port {
        80 => host.clone(),
        _ => label.clone(),
    };
    let body_len = body_length(request).map_err(|(status, why)| refusal(status, &label, why))?;
    let head = upstream_head(request, &origin, &host_header, &[], body_len);
    Ok((
        label,
        Plan::Forward {
            host,
            port,
            route: false,
            tls: false,
            head,
            body_len,
            what: format!("{method} {path}"),
        },
    ))
}

/// `/<token>/<route>/path?query`: a request the proxy makes for the skill.
fn plan_route(rules: &EgressRules, request: &Request) -> Result<(String, Plan), Refusal> {
    let method = request.method.as_str();
    let unmatched = || {
        refusal(
            403,
            "route",
            "not a route of this run (requests to the proxy itself are /<run token>/<route>/…)",
        )
    };
    let rest = &request.target[1..];
    let (token, rest) = rest.split_once('/').ok_or_else(unmatched)?;
    if rules.token.is_empty() || !same(token, &rules.token) {
        return Err(unmatched());
    }
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (name, rest) = rest.split_at(split);
    let route = rules
        .routes
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| {
            refusal(
                404,
                format!("route {name}"),
                format!("no route {name:?} was declared"),
            )
        })?;
    let label = format!(
        "route {name} ({}:{})",
        route.domain.name,
        route.domain.port.unwrap_or(443)
    );
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let path = if path.is_empty() { "/" } else { path };
    route
        .rules
        .check(method, path)
        .map_err(|why| refusal(403, label.clone(), format!("route {name}: {why}")))?;
    let mut origin = format!("{}{path}", route.base_path);
    if let Some(query) = query {
        origin.push('?');
        origin.push_str(query);
    }
    let port = route
        .domain
        .port
        .unwrap_or(if route.tls { 443 } else { 80 });
    let default_port = if route.tls { 443 } else { 80 };
    let host_header = match port == default_port {
        true => route.domain.name.clone(),
        false => format!("{}:{port}", route.domain.name),
    };
    let body_len = body_length(request).map_err(|(status, why)| refusal(status, &label, why))?;
    let head = upstream_head(request, &origin, &host_header, &route.headers, body_len);
    Ok((
        label,
        Plan::Forward {
            host: route.domain.name.clone(),
            port,
            route: true,
            tls: route.tls,
            head,
            body_len,
            what: format!("{method} {path}"),
        },
    ))
}

/// Whether `Proxy-Authorization: Basic base64(user:TOKEN)` carries this run's token.
fn proxy_token_matches(rules: &EgressRules, header: Option<&[u8]>) -> bool {
    let Some(value) = header.and_then(|h| std::str::from_utf8(h).ok()) else {
        return false;
    };
    let Some(encoded) = value.trim().strip_prefix("Basic ") else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
        return false;
    };
    let decoded = String::from_utf8_lossy(&decoded);
    let password = decoded.split_once(':').map_or("", |(_, p)| p);
    !rules.token.is_empty() && same(password, &rules.token)
}

/// Equal, in time independent of where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The body's length from `Content-Length`; chunked bodies are refused (their end would have
/// to be parsed to keep a second request from riding along).
fn body_length(request: &Request) -> Result<u64, (u16, String)> {
    if request.header("transfer-encoding").is_some() {
        return Err((
            411,
            "chunked request bodies are not forwarded; send a Content-Length".into(),
        ));
    }
    let lengths: Vec<&[u8]> = request
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.as_slice())
        .collect();
    match lengths.as_slice() {
        [] => Ok(0),
        [one] => std::str::from_utf8(one)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| (400, "an invalid Content-Length".to_string())),
        _ => Err((400, "more than one Content-Length".into())),
    }
}

/// The head sent upstream: origin form, the checked `Host`, the client's end-to-end headers
/// (never its `Proxy-*`, framing, or any header `added` sets), `added`, and `Connection: close`.
fn upstream_head(
    request: &Request,
    origin: &str,
    host: &str,
    added: &[(String, crate::config::Secret)],
    body_len: u64,
) -> Vec<u8> {
    let mut head = format!("{} {origin} HTTP/1.1\r\nHost: {host}\r\n", request.method).into_bytes();
    for (name, value) in &request.headers {
        let lower = name.to_ascii_lowercase();
        let dropped = lower.starts_with("proxy-")
            || matches!(
                lower.as_str(),
                "host"
                    | "connection"
                    | "keep-alive"
                    | "upgrade"
                    | "te"
                    | "trailer"
                    | "content-length"
                    | "transfer-encoding"
            )
            || added.iter().any(|(a, _)| a.eq_ignore_ascii_case(name));
        if !dropped {
            head.extend_from_slice(name.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value);
            head.extend_from_slice(b"\r\n");
        }
    }
    for (name, value) in added {
        head.extend_from_slice(format!("{name}: {}\r\n", value.expose()).as_bytes());
    }
    if body_len > 0 || request.header("content-length").is_some() {
        head.extend_from_slice(format!("Content-Length: {body_len}\r\n").as_bytes());
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// Relay a tunnel; the bytes sent and received.
async fn tunnel(
    mut client: TcpStream,
    mut upstream: TcpStream,
    rest: &[u8],
) -> std::io::Result<(u64, u64)> {
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    upstream.write_all(rest).await?;
    let (sent, received) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok((sent + rest.len() as u64, received))
}

/// Send the head and exactly `body_len` bytes of body, then relay the response to the client;
/// the body bytes sent and the response bytes received.
async fn forward<S>(
    client: TcpStream,
    mut upstream: S,
    head: &[u8],
    rest: &[u8],
    body_len: u64,
) -> std::io::Result<(u64, u64)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    upstream.write_all(head).await?;
    let early = rest
        .len()
        .min(usize::try_from(body_len).unwrap_or(usize::MAX));
    upstream.write_all(&rest[..early]).await?;
    let (mut from_client, mut to_client) = client.into_split();
    let remaining = body_len - early as u64;
    if remaining > 0 {
        let mut body = (&mut from_client).take(remaining);
        tokio::io::copy(&mut body, &mut upstream).await?;
    }
    upstream.flush().await?;
    let received = tokio::io::copy(&mut upstream, &mut to_client).await?;
    to_client.shutdown().await?;
    Ok((body_len, received))
}

/// TLS to a route's upstream, verified against the bundled web PKI roots.
pub(crate) async fn tls_connect(
    host: &str,
    upstream: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    use tokio_rustls::rustls;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host}: not a TLS server name: {e}"))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, upstream)
        .await
        .map_err(|e| format!("TLS with {host} failed: {e}"))
}

fn refused(target: String, why: String) -> EgressEvent {
    EgressEvent {
        target,
        allowed: false,
        detail: why,
    }
}

/// The method/path rules for `host`: a skill's declared ones, or for jailed commands the
/// `[network]` rule's (an error when no rule lets the host through).
fn http_rules(rules: &EgressRules, host: &str) -> Result<Option<HttpRules>, String> {
    match &rules.network {
        Some(network) => network.admit(host).map(|admitted| Some(admitted.http)),
        None => Ok(rules.rules.get(host).cloned()),
    }
}

/// For jailed commands: `[network]` decides (asking when its rule says so), on the web's ports.
async fn decide_network(
    rules: &EgressRules,
    network: &NetworkRules,
    host: &str,
    port: u16,
    what: &str,
) -> Result<SocketAddr, String> {
    let admitted = network.admit(host)?;
    if port != 80 && port != 443 {
        return Err(format!(
            "port {port} of {host}: jailed commands reach ports 80 and 443 only"
        ));
    }
    if admitted.asks() {
        let (method, path) = what.split_once(' ').unwrap_or((what, ""));
        let request = NetworkAsk {
            host: host.to_string(),
            port,
            method: method.to_string(),
            path: path.to_string(),
            rule: admitted.describe(),
        };
        let approved = match &rules.asker {
            Some(asker) => asker.ask(request).await,
            None => false,
        };
        if !approved {
            return Err(format!(
                "{host} needs approval ({}), and it was not given",
                admitted.describe()
            ));
        }
    }
    resolve(rules, host, port).await
}

/// The address to connect to for `host:port`, or why not.
async fn decide(rules: &EgressRules, host: &str, port: u16) -> Result<SocketAddr, String> {
    let domain = rules
        .domains
        .iter()
        .find(|d| d.name == host)
        .ok_or_else(|| {
            let declared: Vec<String> = rules.domains.iter().map(Domain::to_string).collect();
            format!(
                "{host} is not a declared domain of this skill (declared: {})",
                declared.join(", ")
            )
        })?;
    if !domain.allows_port(port) {
        let allowed = domain
            .port
            .map_or_else(|| "80 and 443".to_string(), |p| p.to_string());
        return Err(format!(
            "port {port} of {host} is not declared (allowed: {allowed})"
        ));
    }
    resolve(rules, host, port).await
}

/// `[skills] hosts`, or a lookup whose every address is public.
async fn resolve(rules: &EgressRules, host: &str, port: u16) -> Result<SocketAddr, String> {
    let fixed = rules
        .hosts
        .get(host)
        .copied()
        .or_else(|| rules.network.as_ref().and_then(|n| n.fixed(host)));
    if let Some(target) = fixed {
        return Ok(target.addr(port));
    }
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("{host} does not resolve: {e}"))?
        .collect();
    check_resolved(host, &resolved)
}

/// Every address must be public; the first one is used.
fn check_resolved(host: &str, addrs: &[SocketAddr]) -> Result<SocketAddr, String> {
    let first = addrs
        .first()
        .ok_or_else(|| format!("{host} resolves to no address"))?;
    for addr in addrs {
        if let Some(why) = forbidden_reason(addr.ip()) {
            return Err(format!(
                "{host} resolves to {} ({why}); only [skills] hosts or [network.resolve] can \
                 map a name to such an address",
                addr.ip()
            ));
        }
    }
    Ok(*first)
}

/// Read and parse the request head; `Ok(None)` when the client closed without sending one.
async fn read_head(client: &mut TcpStream) -> Result<Option<Request>, String> {
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(pos) = find_head_end(&buf) {
            break pos;
        }
        let cap = crate::sizes::Cap::new(crate::sizes::caps().proxy_head_bytes, "proxy_head_bytes");
        if buf.len() >= cap.bytes {
            return Err(cap.exceeded("the request head").to_string());
        }
        let mut chunk = [0u8; 4096];
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the request failed: {e}"))?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err("the request head ended early".into())
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(&buf[..end]) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("an incomplete request head".into()),
        Err(e) => return Err(format!("not an HTTP request: {e}")),
    }
    Ok(Some(Request {
        method: request.method.unwrap_or_default().to_string(),
        target: request.path.unwrap_or_default().to_string(),
        headers: request
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect(),
        rest: buf[end..].to_vec(),
    }))
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// `host:port` of a CONNECT request (`[::1]:443` for IPv6).
fn authority(target: &str) -> Result<(String, u16), String> {
    let bad = || format!("CONNECT {target}: expected host:port");
    let (host, port) = target.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok((normalize(host), port))
}

/// Lowercase, without a trailing dot (`Example.COM.` is `example.com`).
fn normalize(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

async fn respond(client: &mut TcpStream, status: u16, why: &str) {
    let text = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        407 => "Proxy Authentication Required",
        411 => "Length Required",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let challenge = match status {
        407 => "Proxy-Authenticate: Basic realm=\"warden\"\r\n",
        _ => "",
    };
    let body = format!("warden egress proxy: {why}\n");
    let response = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n{challenge}\
         X-Warden-Egress: refused\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::domain::parse_domain;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An upstream that counts connections and answers each with the request line it got.
    async fn upstream() -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = conn.read(&mut buf).await.unwrap_or(0);
                    let text = String::from_utf8_lossy(&buf[..n]).to_string();
                    let line = text.lines().next().unwrap_or("").to_string();
                    let host = text
                        .lines()
                        .find(|l| l.to_ascii_lowercase().starts_with("host:"))
                        .unwrap_or("")
                        .to_string();
                    let body = format!("{line}|{host}");
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(reply.as_bytes()).await;
                });
            }
        });
        (addr, seen)
    }

    async fn exchange(proxy: SocketAddr, request: &str) -> String {
        let mut conn = TcpStream::connect(proxy).await.unwrap();
        conn.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        conn.read_to_string(&mut out).await.unwrap();
        out
    }

    const AUTH: &str = "Proxy-Authorization: Basic d2FyZGVuOnQwaw==\r\n"; // warden:t0k

    fn rules(allowed: SocketAddr, other: SocketAddr) -> EgressRules {
        EgressRules {
            domains: vec![parse_domain("api.example.test").unwrap()],
            hosts: BTreeMap::from([
                ("api.example.test".to_string(), HostTarget::Addr(allowed)),
                ("other.example.test".to_string(), HostTarget::Addr(other)),
            ]),
            token: "t0k".into(),
            ..EgressRules::default()
        }
    }

    /// `request` with the run's token added after its first line.
    fn authorized(request: &str) -> String {
        let (line, rest) = request.split_once("\r\n").unwrap();
        format!("{line}\r\n{AUTH}{rest}")
    }

    #[tokio::test]
    async fn a_head_past_its_cap_is_refused_naming_the_key() {
        let (allowed, _) = upstream().await;
        let proxy = EgressProxy::start(rules(allowed, allowed)).await.unwrap();
        let huge = format!(
            "GET http://api.example.test/ HTTP/1.1\r\nX-Fill: {}\r\n",
            "a".repeat(40 * 1024)
        );
        let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
        // The proxy may answer and close before everything is written.
        let _ = conn.write_all(huge.as_bytes()).await;
        let mut out = Vec::new();
        let _ = conn.read_to_end(&mut out).await;
        let answer = String::from_utf8_lossy(&out);
        assert!(
            answer.contains("the request head is larger than 16.0 KB (caps.proxy_head_bytes)"),
            "{answer}"
        );
        let events = proxy.stop().await;
        assert!(events.iter().all(|e| !e.allowed), "{events:?}");
    }

    #[tokio::test]
    async fn declared_domains_pass_and_nothing_else() {
        let (allowed, allowed_seen) = upstream().await;
        let (other, other_seen) = upstream().await;
        let proxy = EgressProxy::start(rules(allowed, other)).await.unwrap();

        let ok = exchange(
            proxy.addr(),
            &authorized("GET http://API.example.test./data?q=1 HTTP/1.1\r\nHost: evil\r\n\r\n"),
        )
        .await;
        assert!(
            ok.contains("GET /data?q=1 HTTP/1.1|Host: api.example.test"),
            "{ok}"
        );

        for request in [
            "GET http://other.example.test/ HTTP/1.1\r\n\r\n",
            "CONNECT other.example.test:443 HTTP/1.1\r\n\r\n",
            "GET http://127.0.0.1/ HTTP/1.1\r\n\r\n",
            "CONNECT api.example.test:22 HTTP/1.1\r\n\r\n",
            "GET https://api.example.test/ HTTP/1.1\r\n\r\n",
            "GET /relative HTTP/1.1\r\n\r\n",
        ] {
            let answer = exchange(proxy.addr(), &authorized(request)).await;
            assert!(
                answer.contains("X-Warden-Egress: refused"),
                "{request}: {answer}"
            );
        }
        let tunnel = exchange(
            proxy.addr(),
            &authorized(
                "CONNECT api.example.test:443 HTTP/1.1\r\n\r\nGET /tunnelled HTTP/1.1\r\n\r\n",
            ),
        )
        .await;
        assert!(
            tunnel.starts_with("HTTP/1.1 200 Connection Established"),
            "{tunnel}"
        );
        assert!(tunnel.contains("GET /tunnelled HTTP/1.1"), "{tunnel}");

        let events = proxy.stop().await;
        assert_eq!(events.iter().filter(|e| e.allowed).count(), 2, "{events:?}");
        let refused: Vec<&EgressEvent> = events.iter().filter(|e| !e.allowed).collect();
        assert_eq!(refused.len(), 6, "{events:?}");
        assert!(refused
            .iter()
            .any(|e| e.target == "other.example.test:80" && e.detail.contains("not a declared")));
        assert!(refused.iter().any(|e| e.detail.contains("port 22")));
        assert_eq!(allowed_seen.load(Ordering::SeqCst), 2);
        assert_eq!(
            other_seen.load(Ordering::SeqCst),
            0,
            "the undeclared server saw a request"
        );
    }

    #[tokio::test]
    async fn the_token_routes_and_rules_decide_and_one_request_goes_up_per_connection() {
        let (allowed, allowed_seen) = upstream().await;
        let (other, _) = upstream().await;
        let mut rules = rules(allowed, other);
        rules.rules.insert(
            "api.example.test".into(),
            HttpRules {
                methods: vec!["GET".into()],
                paths: vec!["/v1/".into()],
            },
        );
        let route: crate::skills::routes::RouteSpec = toml::from_str(
            "url = \"http://api.example.test/base\"\nmethods = [\"GET\"]\n\
             headers = { Authorization = \"Bearer {secret:KEY}\" }",
        )
        .unwrap();
        rules.routes = vec![route
            .resolve("gh", &|_| Some(crate::config::Secret::new("sekret")))
            .unwrap()];
        let proxy = EgressProxy::start(rules).await.unwrap();
        let addr = proxy.addr();

        // No token, a wrong one, another run's route token: refused before any lookup.
        for request in [
            "GET http://api.example.test/v1/x HTTP/1.1\r\n\r\n".to_string(),
            "GET http://api.example.test/v1/x HTTP/1.1\r\nProxy-Authorization: Basic d2FyZGVuOng=\r\n\r\n".to_string(),
            "GET /other/gh/x HTTP/1.1\r\n\r\n".to_string(),
        ] {
            let answer = exchange(addr, &request).await;
            assert!(answer.starts_with("HTTP/1.1 40"), "{request}: {answer}");
        }
        assert!(
            exchange(addr, "CONNECT api.example.test:443 HTTP/1.1\r\n\r\n")
                .await
                .contains("407 Proxy Authentication Required")
        );

        // Domain rules: the method and the path, and no tunnel (it could not be checked).
        let ok = exchange(
            addr,
            &authorized("GET http://api.example.test/v1/a HTTP/1.1\r\n\r\n"),
        )
        .await;
        assert!(ok.contains("GET /v1/a HTTP/1.1"), "{ok}");
        for (request, why) in [
            (
                "POST http://api.example.test/v1/a HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
                "method POST",
            ),
            ("GET http://api.example.test/v2/a HTTP/1.1\r\n\r\n", "/v1/"),
            (
                "GET http://api.example.test/v1/../v2 HTTP/1.1\r\n\r\n",
                "/v1/",
            ),
            (
                "CONNECT api.example.test:443 HTTP/1.1\r\n\r\n",
                "encrypted tunnel",
            ),
        ] {
            let answer = exchange(addr, &authorized(request)).await;
            assert!(answer.contains(why), "{request}: {answer}");
        }

        // The route: the header is added (and the client's own replaced), the base path kept.
        let routed = exchange(
            addr,
            "GET /t0k/gh/repos?q=1 HTTP/1.1\r\nAuthorization: mine\r\n\r\n",
        )
        .await;
        assert!(routed.contains("GET /base/repos?q=1 HTTP/1.1"), "{routed}");
        assert!(exchange(
            addr,
            "POST /t0k/gh/repos HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
        )
        .await
        .contains("route gh: method POST is not allowed"));
        assert!(exchange(addr, "GET /t0k/nope/x HTTP/1.1\r\n\r\n")
            .await
            .contains("404"));
        // Chunked bodies are refused; a request riding after the body never goes up.
        assert!(exchange(
            addr,
            "GET /t0k/gh/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        .await
        .contains("411"));
        let before = allowed_seen.load(Ordering::SeqCst);
        let smuggled = exchange(
            addr,
            "GET /t0k/gh/a HTTP/1.1\r\nContent-Length: 0\r\n\r\nPOST /base/delete HTTP/1.1\r\n\r\n",
        )
        .await;
        assert!(smuggled.contains("GET /base/a"), "{smuggled}");
        assert!(!smuggled.contains("delete"), "{smuggled}");
        assert_eq!(allowed_seen.load(Ordering::SeqCst), before + 1);
        let events = proxy.stop().await;
        assert!(
            events
                .iter()
                .any(|e| e.allowed && e.target.starts_with("route gh")),
            "{events:?}"
        );
        assert!(!format!("{events:?}").contains("sekret"));
    }

    #[tokio::test]
    async fn the_header_reaches_the_upstream() {
        // An upstream that echoes the whole head, to see the injected header arrive.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = conn.read(&mut buf).await.unwrap();
            let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n");
            conn.write_all(reply.as_bytes()).await.unwrap();
            conn.write_all(&buf[..n]).await.unwrap();
        });
        let route: crate::skills::routes::RouteSpec = toml::from_str(
            "url = \"http://api.example.test\"\nheaders = { X-Key = \"k={secret:KEY}\" }",
        )
        .unwrap();
        let rules = EgressRules {
            hosts: BTreeMap::from([("api.example.test".to_string(), HostTarget::Addr(up))]),
            routes: vec![route
                .resolve("r", &|_| Some(crate::config::Secret::new("v4lue")))
                .unwrap()],
            token: "t".into(),
            ..EgressRules::default()
        };
        let proxy = EgressProxy::start(rules).await.unwrap();
        let answer = exchange(proxy.addr(), "GET /t/r/x HTTP/1.1\r\nX-Key: forged\r\n\r\n").await;
        assert!(answer.contains("X-Key: k=v4lue\r\n"), "{answer}");
        assert!(!answer.contains("forged"), "{answer}");
        assert!(answer.contains("Host: api.example.test\r\n"), "{answer}");
    }

    #[test]
    fn private_resolutions_are_refused() {
        let public: SocketAddr = "93.184.216.34:443".parse().unwrap();
        let private: SocketAddr = "10.0.0.7:443".parse().unwrap();
        let metadata: SocketAddr = "169.254.169.254:80".parse().unwrap();
        assert_eq!(check_resolved("a.test", &[public]), Ok(public));
        assert!(check_resolved("a.test", &[public, private])
            .unwrap_err()
            .contains("10.0.0.7 (private)"));
        assert!(check_resolved("a.test", &[metadata])
            .unwrap_err()
            .contains("link-local"));
        assert!(check_resolved("a.test", &[]).is_err());
    }
}
