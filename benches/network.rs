//! What warden's egress proxy adds to a jailed command's request: one small HTTP request over
//! a fresh connection, straight to a server on 127.0.0.1 and through the proxy (plain HTTP,
//! forwarded; and HTTPS-style, a CONNECT tunnel with one request inside), with `[network]`
//! deciding each. Prints the median and p99 per request.
//! Run: `cargo bench --bench network`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use warden::egress::network::{NetworkConfig, NetworkRules};
use warden::egress::proxy::{EgressProxy, EgressRules};

const ROUNDS: usize = 2000;
const AUTH: &str = "Proxy-Authorization: Basic d2FyZGVuOmJlbmNo\r\n"; // warden:bench

/// A server answering every request on a connection with a short body, then closing.
fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            });
        }
    });
    addr
}

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

fn measure(what: &str, mut once: impl FnMut()) {
    for _ in 0..50 {
        once();
    }
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            once();
            start.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "{what:<44} median {:>8.1} µs   p99 {:>8.1} µs",
        times[ROUNDS / 2].as_secs_f64() * 1e6,
        times[ROUNDS * 99 / 100].as_secs_f64() * 1e6
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
}
