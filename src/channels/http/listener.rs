//! The socket: plain HTTP/1.1 or HTTPS (rustls with the ring provider, the crypto stack
//! reqwest already builds), one task per connection. A slow client cannot hold others up:
//! TLS handshakes run in the connection's task with a deadline, request heads must arrive
//! within [`HEAD_TIMEOUT`], and at most [`MAX_CONNECTIONS`] are served at once.

use super::config::{ListenPlan, Transport};
use super::Peer;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_CONNECTIONS: usize = 256;

/// A bound listener, ready to serve.
pub struct Bound {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
}

impl Bound {
    /// Bind `plan.addr` and load the TLS certificate and key, if any: everything that can
    /// fail at start fails here, before anything is served.
    pub async fn bind(plan: &ListenPlan) -> Result<Bound, String> {
        let tls = match &plan.transport {
            Transport::Plain => None,
            Transport::Tls { cert, key } => Some(acceptor(cert, key)?),
        };
        let listener = TcpListener::bind(plan.addr)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", plan.addr))?;
        Ok(Bound { listener, tls })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serve `router` until `shutdown`; open connections are then dropped.
    pub async fn serve(self, router: Router, shutdown: CancellationToken) {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let tasks = TaskTracker::new();
        loop {
            let permit = tokio::select! {
                permit = slots.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = shutdown.cancelled() => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: pause rather than spin.
                        tracing::warn!("HTTP API: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = shutdown.cancelled() => break,
            };
            let (router, tls, stop) = (router.clone(), self.tls.clone(), shutdown.clone());
            tasks.spawn(async move {
                tokio::select! {
                    _ = connection(stream, peer, router, tls) => {}
                    _ = stop.cancelled() => {}
                }
                drop(permit);
            });
        }
        tasks.close();
        // Connections notice the shutdown themselves; this waits for their tasks to end.
        tasks.wait().await;
    }
}

async fn connection(stream: TcpStream, peer: SocketAddr, router: Router, tls: Option<TlsAcceptor>) {
    let service = router.map_request(move |mut request: axum::http::Request<Incoming>| {
        request.extensions_mut().insert(Peer(peer));
        request
    });
    let service = TowerToHyperService::new(service);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT);
    let served = match tls {
        None => http.serve_connection(TokioIo::new(stream), service).await,
        Some(acceptor) => {
            let stream = match tokio::time::timeout(HEAD_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, "TLS handshake failed: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            http.serve_connection(TokioIo::new(stream), service).await
        }
    };
    if let Err(e) = served {
        tracing::debug!(%peer, "HTTP connection ended: {e}");
    }
}

/// Whether `cert` and `key` load as a TLS identity (for `warden doctor`).
pub fn tls_identity(cert: &Path, key: &Path) -> Result<(), String> {
    acceptor(cert, key).map(|_| ())
}

fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect())
        .map_err(|e| format!("http.tls_cert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "http.tls_cert {}: no certificate in it",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("http.tls_key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("http.tls_cert and http.tls_key do not make a TLS identity: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
