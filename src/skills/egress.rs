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
//! Every decision is recorded as an [`EgressEvent`] for the run's report and audit row.

use crate::skills::manifest::{parse_domain, Domain};
use crate::tools::web_fetch::forbidden_reason;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Longest request head read.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Time a client has to send its request head, and to connect upstream.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections handled at once.
const MAX_CONNECTIONS: usize = 64;

/// A fixed address for a declared name (`[skills] hosts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostTarget {
    /// Always this address and port.
    Addr(SocketAddr),
    /// This address, on the port the client asked for.
    Ip(IpAddr),
}

impl HostTarget {
    pub fn parse(text: &str) -> Result<HostTarget, String> {
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(HostTarget::Addr(addr));
        }
        text.parse::<IpAddr>()
            .map(HostTarget::Ip)
            .map_err(|_| format!("{text:?} is not an address (1.2.3.4, 1.2.3.4:8080, [::1]:80)"))
    }

    fn addr(self, port: u16) -> SocketAddr {
        match self {
            HostTarget::Addr(addr) => addr,
            HostTarget::Ip(ip) => SocketAddr::new(ip, port),
        }
    }
}

/// Check `[skills] hosts`: every key a domain name, every value an address.
pub fn parse_hosts(
    hosts: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, HostTarget>, String> {
    hosts
        .iter()
        .map(|(name, value)| {
            let domain = parse_domain(name).map_err(|e| format!("skills.hosts: {e}"))?;
            if domain.port.is_some() {
                return Err(format!(
                    "skills.hosts: {name:?}: map the name without a port"
                ));
            }
            let target =
                HostTarget::parse(value).map_err(|e| format!("skills.hosts.{name}: {e}"))?;
            Ok((domain.name, target))
        })
        .collect()
}

/// What the proxy lets through.
#[derive(Clone, Debug, Default)]
pub struct EgressRules {
    pub domains: Vec<Domain>,
    pub hosts: BTreeMap<String, HostTarget>,
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

/// A running proxy; it stops (and drops every connection) when stopped or dropped.
pub struct EgressProxy {
    addr: SocketAddr,
    events: Arc<Mutex<Vec<EgressEvent>>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl EgressProxy {
    /// Listen on 127.0.0.1 (an ephemeral port) and serve until stopped.
    pub async fn start(rules: EgressRules) -> std::io::Result<EgressProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(serve(
            listener,
            Arc::new(rules),
            events.clone(),
            cancel.clone(),
        ));
        Ok(EgressProxy {
            addr,
            events,
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

async fn serve(
    listener: TcpListener,
    rules: Arc<EgressRules>,
    events: Arc<Mutex<Vec<EgressEvent>>>,
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
        let (rules, events) = (rules.clone(), events.clone());
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
            handle(client, &rules, record).await;
        });
    }
    connections.shutdown().await;
}

/// A parsed request head.
struct Head {
    method: String,
    host: String,
    port: u16,
    /// For plain HTTP: the head to send upstream.
    upstream_head: Option<Vec<u8>>,
    /// Bytes the client sent after the head.
    rest: Vec<u8>,
}

/// Serve one client connection, reporting its decision through `record` (nothing for a
/// client that sent no request at all).
async fn handle(mut client: TcpStream, rules: &EgressRules, record: impl FnOnce(EgressEvent)) {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) | Err(_) => return,
        Ok(Err(why)) => {
            respond(&mut client, 400, "Bad Request", &why).await;
            return record(refused("?".into(), why));
        }
    };
    let target = format!("{}:{}", head.host, head.port);
    let addr = match decide(rules, &head.host, head.port).await {
        Ok(addr) => addr,
        Err(why) => {
            respond(&mut client, 403, "Forbidden", &why).await;
            return record(refused(target, why));
        }
    };
    let upstream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            let why = format!("connecting to {addr} failed: {e}");
            respond(&mut client, 502, "Bad Gateway", &why).await;
            return record(refused(target, why));
        }
        Err(_) => {
            let why = format!("connecting to {addr} timed out");
            respond(&mut client, 504, "Gateway Timeout", &why).await;
            return record(refused(target, why));
        }
    };
    record(EgressEvent {
        target,
        allowed: true,
        detail: format!("{} via {addr}", head.method),
    });
    let _ = relay(client, upstream, head).await;
}

async fn relay(mut client: TcpStream, mut upstream: TcpStream, head: Head) -> std::io::Result<()> {
    match &head.upstream_head {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?
        }
        Some(bytes) => upstream.write_all(bytes).await?,
    }
    upstream.write_all(&head.rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

fn refused(target: String, why: String) -> EgressEvent {
    EgressEvent {
        target,
        allowed: false,
        detail: why,
    }
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
    if let Some(target) = rules.hosts.get(host) {
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
                "{host} resolves to {} ({why}); only [skills] hosts can map a name to such an \
                 address",
                addr.ip()
            ));
        }
    }
    Ok(*first)
}

/// Read and parse the request head; `Ok(None)` when the client closed without sending one.
async fn read_head(client: &mut TcpStream) -> Result<Option<Head>, String> {
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(pos) = find_head_end(&buf) {
            break pos;
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(format!("request head longer than {MAX_HEAD_BYTES} bytes"));
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
    let method = request.method.unwrap_or_default().to_string();
    let target = request.path.unwrap_or_default();
    let rest = buf[end..].to_vec();
    if method == "CONNECT" {
        let (host, port) = authority(target)?;
        return Ok(Some(Head {
            method,
            host,
            port,
            upstream_head: None,
            rest,
        }));
    }
    let url = url::Url::parse(target)
        .map_err(|_| format!("{method} {target}: a proxy request needs an absolute http:// URL"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "{}: only http:// is forwarded; https goes through CONNECT",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("URLs with credentials are not forwarded".into());
    }
    let host = match url.host() {
        Some(url::Host::Domain(d)) => normalize(d),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err("the URL has no host".into()),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let mut origin = url.path().to_string();
    if let Some(query) = url.query() {
        origin.push('?');
        origin.push_str(query);
    }
    let host_header = if port == 80 {
        host.clone()
    } else {
        format!("{host}:{port}")
    };
    let mut upstream =
        format!("{method} {origin} HTTP/1.1\r\nHost: {host_header}\r\n").into_bytes();
    for header in request.headers.iter() {
        let name = header.name.to_ascii_lowercase();
        let hop_by_hop = name.starts_with("proxy-")
            || matches!(
                name.as_str(),
                "host" | "connection" | "keep-alive" | "upgrade" | "te"
            );
        if !hop_by_hop {
            upstream.extend_from_slice(header.name.as_bytes());
            upstream.extend_from_slice(b": ");
            upstream.extend_from_slice(header.value);
            upstream.extend_from_slice(b"\r\n");
        }
    }
    upstream.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some(Head {
        method,
        host,
        port,
        upstream_head: Some(upstream),
        rest,
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

async fn respond(client: &mut TcpStream, status: u16, text: &str, why: &str) {
    let body = format!("warden egress proxy: {why}\n");
    let response = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         X-Warden-Egress: refused\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn rules(allowed: SocketAddr, other: SocketAddr) -> EgressRules {
        EgressRules {
            domains: vec![parse_domain("api.example.test").unwrap()],
            hosts: BTreeMap::from([
                ("api.example.test".to_string(), HostTarget::Addr(allowed)),
                ("other.example.test".to_string(), HostTarget::Addr(other)),
            ]),
        }
    }

    #[tokio::test]
    async fn declared_domains_pass_and_nothing_else() {
        let (allowed, allowed_seen) = upstream().await;
        let (other, other_seen) = upstream().await;
        let proxy = EgressProxy::start(rules(allowed, other)).await.unwrap();

        let ok = exchange(
            proxy.addr(),
            "GET http://API.example.test./data?q=1 HTTP/1.1\r\nHost: evil\r\nProxy-Authorization: x\r\n\r\n",
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
            let answer = exchange(proxy.addr(), request).await;
            assert!(
                answer.contains("X-Warden-Egress: refused"),
                "{request}: {answer}"
            );
        }
        let tunnel = exchange(
            proxy.addr(),
            "CONNECT api.example.test:443 HTTP/1.1\r\n\r\nGET /tunnelled HTTP/1.1\r\n\r\n",
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

    #[test]
    fn hosts_config_is_checked() {
        let ok = BTreeMap::from([
            ("a.example.test".to_string(), "127.0.0.1:80".to_string()),
            ("b.example.test".to_string(), "10.1.2.3".to_string()),
        ]);
        let parsed = parse_hosts(&ok).unwrap();
        assert_eq!(
            parsed["b.example.test"].addr(443),
            "10.1.2.3:443".parse::<SocketAddr>().unwrap()
        );
        for (name, value) in [
            ("a.example.test", "x"),
            ("*.test", "1.1.1.1"),
            ("a.test:80", "1.1.1.1"),
        ] {
            let bad = BTreeMap::from([(name.to_string(), value.to_string())]);
            assert!(parse_hosts(&bad).is_err(), "{name} = {value}");
        }
    }
}
