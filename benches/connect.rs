//! What warden's connect supervisor (`[network] confinement = "supervisor"`) adds: the same
//! python loop, run outside any jail and inside a supervised host jail, times
//!
//! - one `connect` to a loopback listener (inside the jail that listener is the "proxy", so
//!   warden connects each socket itself);
//! - one small HTTP request on a fresh connection: straight to a server outside the jail, and
//!   through warden's egress proxy from outside and from inside the supervised jail.
//!
//! Prints the median and p99 of each. Run: `cargo bench --bench connect` (a debug build with
//! `cargo bench --profile dev --bench connect`).

#[path = "support/upstream.rs"]
mod support_upstream;
use std::net::{SocketAddr, SocketAddrV4, TcpListener};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use support_upstream::upstream;
use warden::egress::network::{NetworkConfig, NetworkRules};
use warden::egress::proxy::{EgressProxy, EgressRules};
use warden::exec::{run_script, ExecOptions};
use warden::policy::ir::Script;
use warden::policy::PathPolicy;
use warden::sandbox::host::connect::SupervisedNetwork;
use warden::sandbox::host::HostSandbox;
use warden::sandbox::JailSpec;

const ROUNDS: usize = 2000;

/// `python3 timing.py connect PORT N` or `python3 timing.py http PORT N REQUEST`: prints the
/// median and p99 in µs.
const TIMING: &str = r#"
import socket, sys, time
mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
request = sys.argv[4].encode().decode("unicode_escape").encode() if mode == "http" else b""
def once():
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = time.perf_counter_ns()
    s.connect(("127.0.0.1", port))
    if mode == "http":
        s.sendall(request)
        seen = b""
        while not seen.endswith(b"ok"):
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit("closed early: %r" % seen)
            seen += chunk
    spent = time.perf_counter_ns() - t
    s.close()
    return spent
for _ in range(50):
    once()
times = sorted(once() for _ in range(n))
print("median %8.1f us   p99 %8.1f us" % (times[n // 2] / 1e3, times[n * 99 // 100] / 1e3))
"#;

/// A listener that accepts and drops every connection.
fn sink() -> SocketAddrV4 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = match listener.local_addr().unwrap() {
        SocketAddr::V4(a) => a,
        other => panic!("{other}"),
    };
    std::thread::spawn(move || for _conn in listener.incoming() {});
    addr
}

fn args(mode: &str, port: u16, request: &str) -> Vec<String> {
    let mut argv = vec![
        "python3".to_string(),
        "timing.py".into(),
        mode.into(),
        port.to_string(),
        ROUNDS.to_string(),
    ];
    if mode == "http" {
        argv.push(request.into());
    }
    argv
}

fn outside(ws: &Path, what: &str, argv: &[String]) {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    print!("{what:<52} {}", String::from_utf8_lossy(&out.stdout));
}

fn jailed(
    runtime: &tokio::runtime::Runtime,
    ws: &Path,
    proxy: SocketAddrV4,
    what: &str,
    argv: Vec<String>,
) {
    let mut spec = JailSpec::new(ws.to_path_buf());
    spec.egress_proxy = Some(SocketAddr::V4(proxy));
    spec.supervised_network = Some(Arc::new(SupervisedNetwork::new(proxy)));
    runtime.block_on(async {
        let sandbox = HostSandbox::new(spec).unwrap();
        let paths = PathPolicy::new(ws, &[], &[], Path::new("/root")).unwrap();
        let options = ExecOptions::capture(paths, Duration::from_secs(300));
        let out = run_script(&sandbox, &Script::single(argv, ws.to_path_buf()), &options)
            .await
            .unwrap();
        assert_eq!(out.status, 0, "{out:?}");
        print!("{what:<52} {}", out.stdout);
    });
}

fn main() {
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: /usr/bin/python3 runs the timing loop");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    std::fs::write(ws.join("timing.py"), TIMING).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();

    let listener = sink();
    outside(
        &ws,
        "connect, no jail",
        &args("connect", listener.port(), ""),
    );
    jailed(
        &runtime,
        &ws,
        listener,
        "connect, supervised jail (warden connects)",
        args("connect", listener.port(), ""),
    );

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
    let proxy_addr = match proxy.addr() {
        SocketAddr::V4(a) => a,
        other => panic!("{other}"),
    };
    let direct = r"GET /x HTTP/1.1\r\nHost: bench.test\r\n\r\n";
    // warden:bench
    let forwarded = r"GET http://bench.test/x HTTP/1.1\r\nProxy-Authorization: Basic d2FyZGVuOmJlbmNo\r\nHost: bench.test\r\n\r\n";
    outside(
        &ws,
        "HTTP request, no jail, straight to the server",
        &args("http", server.port(), direct),
    );
    outside(
        &ws,
        "HTTP request, no jail, through the proxy",
        &args("http", proxy_addr.port(), forwarded),
    );
    jailed(
        &runtime,
        &ws,
        proxy_addr,
        "HTTP request, supervised jail, through the proxy",
        args("http", proxy_addr.port(), forwarded),
    );
    drop(proxy);
}
