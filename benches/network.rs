//! What warden's egress proxy adds to a jailed command's request: one small HTTP request over
//! a fresh connection, straight to a server on 127.0.0.1 and through the proxy (plain HTTP,
//! forwarded; and HTTPS-style, a CONNECT tunnel with one request inside), with `[network]`
//! deciding each. Then HTTPS: one request over a fresh TLS connection through a plain tunnel
//! (the client talks TLS with the server) and through the intercepting proxy (the client talks
//! TLS with warden's leaf for the host, warden with the server). Prints the median and p99.
//! Run: `cargo bench --bench network`.

#[path = "support/upstream.rs"]
mod support_upstream;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support_upstream::upstream;
use tokio_rustls::rustls;
use warden::egress::network::{NetworkConfig, NetworkRules};
use warden::egress::proxy::intercept::Interception;
use warden::egress::proxy::{EgressProxy, EgressRules};

const ROUNDS: usize = 2000;
const AUTH: &str = "Proxy-Authorization: Basic d2FyZGVuOmJlbmNo\r\n"; // warden:bench

/// Send `request` on a fresh connection to `addr`, read until the body `ok` arrives.
fn exchange(addr: SocketAddr, request: &[u8]) {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_nodelay(true).unwrap();
    conn.write_all(request).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.ends_with(b"ok") {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
}

/// An HTTPS server for `bench.test` and `tunnel.bench.test` with a certificate from a CA of
/// its own; the CA's certificate (PEM).
fn tls_upstream() -> (SocketAddr, String) {
    let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca_pem = params.self_signed(&ca_key).unwrap().pem();
    let issuer = rcgen::Issuer::new(params, ca_key);
    let leaf_params = rcgen::CertificateParams::new(vec![
        "bench.test".to_string(),
        "tunnel.bench.test".to_string(),
    ])
    .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = leaf_params.signed_by(&key, &issuer).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let config = config.clone();
            std::thread::spawn(move || {
                let tls = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(tls, conn);
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tls.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    (addr, ca_pem)
}

/// A TLS client config trusting the CA certificate `pem` only.
fn trusting(pem: &str) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(pem.as_bytes()).unwrap())
        .unwrap();
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

/// CONNECT `host:443` through the proxy, then one GET over TLS (trusting `client`).
fn https_exchange(proxy: SocketAddr, host: &str, client: &Arc<rustls::ClientConfig>) {
    let mut conn = TcpStream::connect(proxy).unwrap();
    conn.set_nodelay(true).unwrap();
    conn.write_all(format!("CONNECT {host}:443 HTTP/1.1\r\n{AUTH}\r\n").as_bytes())
        .unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        assert_eq!(conn.read(&mut byte).unwrap(), 1, "the proxy closed");
        seen.push(byte[0]);
    }
    assert!(
        seen.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).unwrap();
    let tls = rustls::ClientConnection::new(client.clone(), name).unwrap();
    let mut tls = rustls::StreamOwned::new(tls, conn);
    tls.write_all(format!("GET /x HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .unwrap();
    let mut body = Vec::new();
    let mut buf = [0u8; 1024];
    while !body.ends_with(b"ok") {
        let n = tls.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&body));
        body.extend_from_slice(&buf[..n]);
    }
}

fn measure(what: &str, once: impl FnMut()) {
    measure_n(what, ROUNDS, once)
}

fn measure_n(what: &str, rounds: usize, mut once: impl FnMut()) {
    for _ in 0..50 {
        once();
    }
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            once();
            start.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "{what:<44} median {:>8.1} µs   p99 {:>8.1} µs",
        times[rounds / 2].as_secs_f64() * 1e6,
        times[rounds * 99 / 100].as_secs_f64() * 1e6
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = upstream();
    let config: NetworkConfig = toml::from_str(&format!(
        "[hosts]\n\"bench.test\" = \"allow\"\n[resolve]\n\"bench.test\" = \"{server}\"\n"
    ))
    .unwrap();
    let rules = EgressRules {
        token: "bench".into(),
        network: Some(Arc::new(NetworkRules::parse(&config).unwrap())),
        ..EgressRules::default()
    };
    let proxy = runtime.block_on(async { EgressProxy::start(rules).await.unwrap() });
    let proxy_addr = proxy.addr();

    measure("direct to the server", || {
        exchange(server, b"GET /x HTTP/1.1\r\nHost: bench.test\r\n\r\n")
    });
    let forwarded = format!("GET http://bench.test/x HTTP/1.1\r\n{AUTH}Host: bench.test\r\n\r\n");
    measure("through the proxy, plain HTTP", || {
        exchange(proxy_addr, forwarded.as_bytes())
    });
    let tunnelled = format!(
        "CONNECT bench.test:443 HTTP/1.1\r\n{AUTH}\r\nGET /x HTTP/1.1\r\nHost: bench.test\r\n\r\n"
    );
    measure("through the proxy, CONNECT tunnel", || {
        exchange(proxy_addr, tunnelled.as_bytes())
    });
    drop(proxy);

    // HTTPS: `bench.test` has a method rule, so the proxy looks inside; `tunnel.bench.test`
    // has none and stays a tunnel.
    let (tls_server, upstream_ca) = tls_upstream();
    let ca_file = std::env::temp_dir().join(format!("warden-bench-ca-{}.pem", std::process::id()));
    std::fs::write(&ca_file, &upstream_ca).unwrap();
    let config: NetworkConfig = toml::from_str(&format!(
        "[hosts]\n\"bench.test\" = {{ rule = \"allow\", methods = [\"GET\"] }}\n\
         \"tunnel.bench.test\" = \"allow\"\n\
         [resolve]\n\"bench.test\" = \"{tls_server}\"\n\"tunnel.bench.test\" = \"{tls_server}\"\n"
    ))
    .unwrap();
    let interception = Arc::new(Interception::new(Vec::new(), Some(&ca_file)).unwrap());
    let run_ca = trusting(interception.ca_pem());
    let server_ca = trusting(&upstream_ca);
    let rules = EgressRules {
        token: "bench".into(),
        network: Some(Arc::new(NetworkRules::parse(&config).unwrap())),
        interception: Some(interception),
        ..EgressRules::default()
    };
    let proxy = runtime.block_on(async { EgressProxy::start(rules).await.unwrap() });
    let proxy_addr = proxy.addr();
    measure_n("HTTPS through a plain tunnel", 500, || {
        https_exchange(proxy_addr, "tunnel.bench.test", &server_ca)
    });
    measure_n("HTTPS through the intercepting proxy", 500, || {
        https_exchange(proxy_addr, "bench.test", &run_ca)
    });
    drop(proxy);
    let _ = std::fs::remove_file(ca_file);
}
