//! Looking inside HTTPS, for jailed commands only: a CONNECT to a host whose `[network]` rule
//! has methods or paths, or that a `[network.secrets]` binding names, is answered by warden
//! itself. It terminates TLS with a leaf for that host signed by the run's CA (`super::ca`,
//! which only the jail trusts), reads one request, checks its method and path, swaps in the
//! secrets that apply (`super::inject`), and sends it over warden's own TLS connection to the
//! real host, verified against the bundled web roots (plus `[network] upstream_ca`). One
//! request per connection, as for plain HTTP. Every other CONNECT stays an opaque tunnel.

use super::ca::RunCa;
use super::decide::approve;
use super::inject::Injection;
use super::relay::forward;
use super::request::{body_length, read_head, respond, upstream_head};
use super::EgressEvent;
use crate::egress::http_rules::HttpRules;
use crate::egress::network_secrets::BoundSecret;
use std::path::Path;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

/// Time for the client's TLS handshake and request head.
const CLIENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the proxy needs to look inside HTTPS for one run.
pub struct Interception {
    ca: RunCa,
    secrets: Vec<BoundSecret>,
    upstream: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Interception {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.secrets.iter().map(|s| s.name.as_str()).collect();
        write!(f, "Interception(secrets: {names:?})")
    }
}

impl Interception {
    /// A fresh CA, the bound secrets, and the upstream trust: the bundled web roots plus the
    /// certificates of `extra_ca` (`[network] upstream_ca`).
    pub fn new(secrets: Vec<BoundSecret>, extra_ca: Option<&Path>) -> Result<Interception, String> {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        if let Some(path) = extra_ca {
            let what = format!("[network] upstream_ca {}", path.display());
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("{what}: {e}"))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{what}: {e}"))?;
            if certs.is_empty() {
                return Err(format!("{what}: no PEM certificate in it"));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| format!("{what}: {e}"))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut upstream = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup failed: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Interception {
            ca: RunCa::new()?,
            secrets,
            upstream: Arc::new(upstream),
        })
    }

    /// The run CA's certificate (PEM), for the jail's trust store.
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// The placeholder each secret's variable holds inside the jail.
    pub fn placeholders(&self) -> impl Iterator<Item = (&str, &str)> {
        self.secrets
            .iter()
            .map(|s| (s.name.as_str(), s.placeholder.as_str()))
    }

    /// Whether a CONNECT to `host` is looked inside: it has method/path rules or a secret.
    pub fn wants(&self, host: &str, http: &HttpRules) -> bool {
        !http.is_empty() || self.secrets.iter().any(|s| s.binds_host(host))
    }

    fn injections(&self, host: &str, method: &str, path: &str) -> Vec<Injection> {
        self.secrets
            .iter()
            .filter(|s| s.applies(host, method, path))
            .map(|s| Injection::Swap {
                name: s.header.clone(),
                placeholder: s.placeholder.clone(),
                value: s.value.clone(),
            })
            .collect()
    }
}

/// An admitted CONNECT to look inside.
pub(super) struct Inspected<'a> {
    pub host: &'a str,
    pub port: u16,
    /// The rule's methods and paths.
    pub http: &'a HttpRules,
    /// The rule that admitted the host, as the config writes it, for refusals.
    pub under: &'a str,
    /// For an `ask` rule: who answers, about each request.
    pub rules: &'a super::EgressRules,
}

/// One intercepted CONNECT, already admitted and connected (`upstream`). Records the request's
/// own decision; returns the body bytes sent and the response bytes received.
pub(super) async fn serve(
    mut client: TcpStream,
    upstream: TcpStream,
    inspected: Inspected<'_>,
    interception: &Interception,
    record: &impl Fn(EgressEvent),
) -> std::io::Result<(u64, u64)> {
    let Inspected {
        host,
        port,
        http,
        under,
        rules,
    } = inspected;
    let target = format!("{host}:{port}");
    let refuse = |why: String| EgressEvent {
        target: target.clone(),
        allowed: false,
        detail: why,
    };
    let config = match interception.ca.server_config(host) {
        Ok(config) => config,
        Err(why) => {
            respond(&mut client, 502, &why).await;
            record(refuse(why));
            return Ok((0, 0));
        }
    };
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    let accept = tokio_rustls::TlsAcceptor::from(config).accept(client);
    let Ok(Ok(mut tls)) = tokio::time::timeout(CLIENT_TIMEOUT, accept).await else {
        // The client did not trust the run's CA, or went away: nothing was asked.
        return Ok((0, 0));
    };
    let request = match tokio::time::timeout(CLIENT_TIMEOUT, read_head(&mut tls)).await {
        Ok(Ok(Some(request))) => request,
        Ok(Ok(None)) | Err(_) => return Ok((0, 0)),
        Ok(Err(why)) => {
            respond(&mut tls, 400, &why).await;
            record(refuse(why));
            return Ok((0, 0));
        }
    };
    let method = request.method.clone();
    // The path that is checked is the one sent: parsed, dot segments resolved.
    let url = match request
        .target
        .starts_with('/')
        .then(|| url::Url::parse(&format!("https://{target}{}", request.target)).ok())
        .flatten()
    {
        Some(url) => url,
        None => {
            let why = format!(
                "{method} {}: expected an origin-form target",
                request.target
            );
            respond(&mut tls, 400, &why).await;
            record(refuse(why));
            return Ok((0, 0));
        }
    };
    let path = url.path().to_string();
    if let Err(why) = http.check(&method, &path) {
        let why = format!("{host}: {why}, under {under}");
        respond(&mut tls, 403, &why).await;
        record(refuse(why));
        return Ok((0, 0));
    }
    if let Err(why) = approve(rules, host, port, &method, &path).await {
        respond(&mut tls, 403, &why).await;
        record(refuse(why));
        return Ok((0, 0));
    }
    let body_len = match body_length(&request) {
        Ok(len) => len,
        Err((status, why)) => {
            respond(&mut tls, status, &why).await;
            record(refuse(why));
            return Ok((0, 0));
        }
    };
    let mut origin = path.clone();
    if let Some(query) = url.query() {
        origin.push('?');
        origin.push_str(query);
    }
    let host_header = match port {
        443 => host.to_string(),
        _ => target.clone(),
    };
    let injections = interception.injections(host, &method, &path);
    let head = upstream_head(&request, &origin, &host_header, &injections, body_len);
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| std::io::Error::other(format!("{host}: not a TLS server name: {e}")))?;
    let connector = tokio_rustls::TlsConnector::from(interception.upstream.clone());
    let upstream = match connector.connect(name, upstream).await {
        Ok(upstream) => upstream,
        Err(e) => {
            let why = format!("TLS with {host} failed (its certificate is not trusted): {e}");
            respond(&mut tls, 502, &why).await;
            record(refuse(why));
            return Ok((0, 0));
        }
    };
    let swapped: Vec<&str> = interception
        .secrets
        .iter()
        .filter(|s| s.applies(host, &method, &path))
        .map(|s| s.name.as_str())
        .collect();
    let mut detail = format!("{method} {path} (HTTPS, inspected)");
    if !swapped.is_empty() {
        detail.push_str(&format!("; secret {} added", swapped.join(", ")));
    }
    record(EgressEvent {
        target: target.clone(),
        allowed: true,
        detail,
    });
    forward(tls, upstream, &head, &request.rest, body_len).await
}
