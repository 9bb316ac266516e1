//! Network: no TCP, no unix-socket connections to anything outside; with an egress proxy, only
//! the proxy, in the jail's own network namespace or, without one, connected by warden's
//! supervisor. Every listener is the test's own, checked from outside for connections.

use crate::common;
use common::*;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::UnixListener;
use std::time::Duration;
use warden::exec::{run_script, ExecOptions};
use warden::policy::ir::Script;
use warden::policy::PathPolicy;
use warden::sandbox::host::connect::SupervisedNetwork;
use warden::sandbox::host::netns::JailNetwork;
use warden::sandbox::host::HostSandbox;
use warden::sandbox::JailSpec;

fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

/// A jailed python that connects to `host:port`, sends a word and says so.
fn connect_probe(ws: &std::path::Path, host: &str, port: u16) -> Script {
    Script::single(
        vec![
            "python3".into(),
            "-c".into(),
            format!(
                "import socket; s = socket.create_connection(('{host}', {port}), timeout=5); s.sendall(b'via-proxy'); print('connected')"
            ),
        ],
        ws.to_path_buf(),
    )
}

/// A jailed python that makes an AF_UNIX socket.
fn unix_socket_probe(ws: &std::path::Path) -> Script {
    Script::single(
        vec![
            "python3".into(),
            "-c".into(),
            "import socket; socket.socket(socket.AF_UNIX)".into(),
        ],
        ws.to_path_buf(),
    )
}

fn assert_no_tcp_connection(l: &TcpListener) {
    match l.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the listener saw a connection: {other:?}"),
    }
}

#[test]
fn tcp_connect_to_localhost_fails() {
    let env = Env::new();
    let (l, port) = listener();
    let r = env.jail(&[
        "bash",
        "-c",
        &format!("echo hello > /dev/tcp/127.0.0.1/{port}"),
    ]);
    assert_ne!(r.status, 0, "{r:?}");
    assert_no_tcp_connection(&l);
    if have_python() {
        let r = env.jail(&[
            "python3",
            "-c",
            &format!("import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"),
        ]);
        assert_ne!(r.status, 0, "{r:?}");
        assert!(r.stderr.contains("PermissionError"), "{r:?}");
        // UDP too.
        let r = env.jail(&[
            "python3",
            "-c",
            &format!("import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))"),
        ]);
        assert_ne!(r.status, 0, "{r:?}");
    }
    assert_no_tcp_connection(&l);
}

#[test]
fn unix_socket_connect_to_the_outside_fails() {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed to open unix sockets in the jail");
        return;
    }
    let env = Env::new();
    let outside = env.outside("sock");
    for path in [outside.join("s.sock"), env.ws.join("inside.sock")] {
        let l = UnixListener::bind(&path).unwrap();
        l.set_nonblocking(true).unwrap();
        let p = path.display().to_string();
        for kind in ["SOCK_STREAM", "SOCK_DGRAM", "SOCK_SEQPACKET"] {
            let r = env.jail(&[
                "python3",
                "-c",
                &format!(
                    "import socket; s = socket.socket(socket.AF_UNIX, socket.{kind}); s.connect('{p}'); s.send(b'x')"
                ),
            ]);
            assert_ne!(r.status, 0, "{kind} {p}: {r:?}");
            assert!(r.stderr.contains("PermissionError"), "{r:?}");
        }
        match l.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("the unix listener saw a connection: {other:?}"),
        }
    }
    // An abstract socket of a process outside.
    let name = format!("warden-test-{}", marker());
    let abs = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&abs).unwrap();
    l.set_nonblocking(true).unwrap();
    let r = env.jail(&[
        "python3",
        "-c",
        &format!("import socket; socket.socket(socket.AF_UNIX).connect('\\0{name}')"),
    ]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(l.accept().is_err());
}

#[test]
fn an_egress_proxy_without_its_network_namespace_is_refused() {
    // Landlock matches the proxy's port only: in warden's own namespace the jail could reach
    // any host on that port, so the sandbox refuses to start that way.
    let env = Env::new();
    let (proxy, _) = listener();
    let mut spec = JailSpec::new(env.ws.clone());
    spec.egress_proxy = Some(proxy.local_addr().unwrap());
    let err = HostSandbox::new(spec).err().expect("refused");
    assert!(err.to_string().contains("network namespace"), "{err}");
}

#[test]
fn egress_proxy_in_the_jails_namespace_is_the_only_way_out() {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed for the connect attempts");
        return;
    }
    let mut network = match JailNetwork::create() {
        Ok(network) => network,
        Err(why) => {
            eprintln!("skipped: no network namespace for the jail here: {why}");
            return;
        }
    };
    let env = Env::new();
    let proxy_addr = network.proxy_addr();
    let proxy = network.take_listener().unwrap();
    // Another listener in warden's namespace, on the same address as the proxy's.
    let (other, other_port) = listener();
    let mut spec = JailSpec::new(env.ws.clone());
    spec.egress_proxy = Some(proxy_addr);
    spec.network_namespace = Some(network.namespace());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let sandbox = HostSandbox::new(spec.clone()).unwrap();
        let paths = PathPolicy::new(&env.ws, &[], &[], std::path::Path::new("/root")).unwrap();
        let options = ExecOptions::capture(paths, Duration::from_secs(20));
        let connect = |host: &str, port: u16| connect_probe(&env.ws, host, port);
        let out = run_script(&sandbox, &connect("127.0.0.1", proxy_addr.port()), &options)
            .await
            .unwrap();
        assert_eq!(out.status, 0, "{out:?}");
        assert_eq!(out.stdout, "connected\n");
        // Another port: Landlock's port rule refuses it before any packet.
        let out = run_script(&sandbox, &connect("127.0.0.1", other_port), &options)
            .await
            .unwrap();
        assert_ne!(out.status, 0, "{out:?}");
        assert!(out.stderr.contains("PermissionError"), "{out:?}");
        // The proxy's port at another address: past Landlock, refused by the namespace, where
        // nothing else listens — and counted.
        let out = run_script(&sandbox, &connect("127.0.0.2", proxy_addr.port()), &options)
            .await
            .unwrap();
        assert_ne!(out.status, 0, "{out:?}");
        assert!(out.stderr.contains("ConnectionRefusedError"), "{out:?}");
        // With the proxy, AF_UNIX sockets cannot be created (connect is allowed then).
        let out = run_script(&sandbox, &unix_socket_probe(&env.ws), &options)
            .await
            .unwrap();
        assert_ne!(out.status, 0, "{out:?}");
    });
    let (mut conn, _) = proxy.accept().unwrap();
    assert_eq!(read_all(&mut conn), "via-proxy");
    assert_no_tcp_connection(&other);
    let bypasses = network.bypasses().unwrap();
    assert!(
        bypasses.refused == 1,
        "the attempt around the proxy was not counted: {bypasses:?}"
    );
}

#[test]
fn under_the_supervisor_warden_connects_only_the_proxy_and_counts_the_rest() {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed for the connect attempts");
        return;
    }
    if let Err(why) = warden::sandbox::host::kernel::connect_supervision_available() {
        eprintln!("skipped: {why}");
        return;
    }
    let env = Env::new();
    // The "proxy" and another listener, both in warden's own namespace, which the jail shares.
    let (proxy, proxy_port) = listener();
    let (other, other_port) = listener();
    let proxy_addr = std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, proxy_port);
    let supervised = std::sync::Arc::new(SupervisedNetwork::new(proxy_addr));
    let mut spec = JailSpec::new(env.ws.clone());
    spec.egress_proxy = Some(proxy_addr.into());
    spec.supervised_network = Some(supervised.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let sandbox = HostSandbox::new(spec).unwrap();
        let paths = PathPolicy::new(&env.ws, &[], &[], std::path::Path::new("/root")).unwrap();
        let options = ExecOptions::capture(paths, Duration::from_secs(20));
        let run = |script: Script| {
            let sandbox = &sandbox;
            let options = &options;
            async move { run_script(sandbox, &script, options).await.unwrap() }
        };
        let out = run(connect_probe(&env.ws, "127.0.0.1", proxy_port)).await;
        assert_eq!(out.status, 0, "{out:?}");
        assert_eq!(out.stdout, "connected\n");
        // Another port, and the proxy's port at another address: warden refuses both.
        for (host, port) in [("127.0.0.1", other_port), ("127.0.0.2", proxy_port)] {
            let out = run(connect_probe(&env.ws, host, port)).await;
            assert_ne!(out.status, 0, "{out:?}");
            assert!(out.stderr.contains("ConnectionRefusedError"), "{out:?}");
        }
        let out = run(unix_socket_probe(&env.ws)).await;
        assert_ne!(out.status, 0, "{out:?}");
    });
    proxy.set_nonblocking(false).unwrap();
    let (mut conn, _) = proxy.accept().unwrap();
    assert_eq!(read_all(&mut conn), "via-proxy");
    assert_no_tcp_connection(&other);
    let refused = supervised.refused();
    assert_eq!(refused.count, 2, "{refused:?}");
    assert_eq!(
        refused.first,
        [
            format!("127.0.0.1:{other_port}"),
            format!("127.0.0.2:{proxy_port}")
        ]
    );
}
