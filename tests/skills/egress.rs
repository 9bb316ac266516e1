//! The egress proxy cannot be bypassed, and keys never enter the sandbox — through the real
//! `warden skill run` on the host backend, with fake upstreams on 127.0.0.1 under the fixtures'
//! names (`[skills] hosts`).

use crate::support::skills::{hosts_config, namespaces_available, Server, SkillEnv};
use std::net::{TcpListener, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

/// The key the `keyed` fixture's route adds; it must never be visible to the skill.
const API_TOKEN: &str = "route-key-EGRESSTEST-93c1f7a2";

/// Wait for `path` to appear (the skill writes it from inside its jail).
fn wait_for(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path) {
            if !text.is_empty() {
                return text;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

#[test]
fn only_the_proxy_is_reachable_and_every_way_around_it_fails_and_is_reported() {
    if !namespaces_available() {
        return;
    }
    let allowed = Server::start();
    let other = Server::start();
    let env = SkillEnv::new(&hosts_config(&allowed, &other));
    std::fs::create_dir_all(env.ws.join("handshake")).unwrap();
    env.install("around");
    let child = env
        .command(&["skill", "run", "around"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    // Listen where the skill will aim: the proxy's port at another loopback address, over
    // TCP and UDP — in warden's own namespace, where the hole used to be.
    let port: u16 = wait_for(&env.ws.join("handshake/port"))
        .trim()
        .parse()
        .unwrap();
    let tcp = TcpListener::bind(("127.0.0.2", port)).expect("a listener on 127.0.0.2");
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind(("127.0.0.2", port)).expect("a UDP socket on 127.0.0.2");
    udp.set_nonblocking(true).unwrap();
    let tcp6 = TcpListener::bind(("::1", port)).ok();
    std::fs::write(env.ws.join("handshake/ready"), "go").unwrap();

    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stdout.contains("REACHED"), "{stdout}");
    for (what, how) in [
        (
            "another loopback address on the proxy's port",
            "ConnectionRefusedError",
        ),
        ("a public address on the proxy's port", "OSError"),
        ("IPv6 loopback on the proxy's port", "PermissionError"),
        ("UDP", "PermissionError"),
        ("a raw socket", "PermissionError"),
        ("the proxy without this run's token", "407"),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{what}:")))
            .unwrap_or_else(|| panic!("no line for {what}: {stdout}"));
        assert!(line.contains("blocked") && line.contains(how), "{line}");
    }
    assert!(
        stdout.contains("the declared domain: forecast for /forecast?city=Lyon: sunny"),
        "{stdout}"
    );

    // Nothing arrived anywhere but through the proxy.
    assert!(
        tcp.accept().is_err(),
        "the listener on 127.0.0.2 was reached"
    );
    if let Some(tcp6) = &tcp6 {
        tcp6.set_nonblocking(true).unwrap();
        assert!(tcp6.accept().is_err(), "the listener on ::1 was reached");
    }
    let mut buf = [0u8; 64];
    assert!(udp.recv_from(&mut buf).is_err(), "a datagram arrived");
    assert_eq!(
        allowed.requests(),
        ["GET /forecast?city=Lyon HTTP/1.1 | Host: api.example.test"]
    );
    assert_eq!(other.connections(), 0);

    // The attempts are reported: the kernel's count of connections that went around the
    // proxy, and the proxy's refusal of the tokenless request, in the output and the audit.
    let row = env.last_audit("skill:around");
    for reported in [
        "egress proxy refused around the proxy: the jail tried to go around the egress proxy: 1 \
         connection(s) to addresses where only the proxy could have answered were refused, 1 to \
         addresses outside its network namespace had no route",
        "lacks its token (Proxy-Authorization)",
        "egress allowed: api.example.test:80",
    ] {
        assert!(row.reason.contains(reported), "{reported}: {}", row.reason);
        assert!(stderr.contains(reported), "{reported}: {stderr}");
    }
}

#[test]
fn a_route_adds_the_key_the_skill_never_sees_and_keeps_to_its_rules() {
    if !namespaces_available() {
        return;
    }
    let upstream = Server::start();
    let other = Server::start();
    let mut env = SkillEnv::new(&hosts_config(&upstream, &other));
    std::fs::create_dir_all(env.ws.join("out")).unwrap();

    // The review at install, and `skill show`, say which secret goes to which host.
    let install = env.install("keyed");
    let show = env.warden(&["skill", "show", "keyed"]);
    for review in [&install.stdout, &show.stdout] {
        assert!(
            review.contains(
                "warden adds your secret API_TOKEN to every request to api.example.test (header \
                 Authorization) without the skill seeing it"
            ),
            "{review}"
        );
    }

    // Without the secret the run is refused, naming where to put it.
    let out = env.warden(&["skill", "run", "keyed"]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(
        out.stderr.contains("WARDEN_SECRET_API_TOKEN"),
        "{}",
        out.stderr
    );
    assert!(upstream.requests().is_empty());

    env.env
        .push(("WARDEN_SECRET_API_TOKEN".into(), API_TOKEN.into()));
    let out = env.warden(&["skill", "run", "keyed"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("GET /repos/warden: 200 forecast for /v1/repos/warden: sunny"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "POST /repos/warden: 403 warden egress proxy: route api: method POST is not allowed"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("GET /user: 403 warden egress proxy: route api: path /user is not allowed"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("dumped"), "{}", out.stdout);
    // The upstream saw the key, on the one request the rules let through.
    assert_eq!(
        upstream.requests(),
        [format!(
            "GET /v1/repos/warden HTTP/1.1 | Host: api.example.test | Authorization: Bearer \
             {API_TOKEN}"
        )]
    );

    // Everything the skill could see: no trace of the key.
    let seen = std::fs::read_to_string(env.ws.join("out/seen.txt")).unwrap();
    for expected in [
        "env API_URL=http://127.0.0.1:",
        "/proc/self/environ",
        "/proc/self/cmdline",
        "argv:",
    ] {
        assert!(seen.contains(expected), "{expected} missing from the dump");
    }
    assert!(seen.contains("file "), "the dump walked no folder");
    assert!(
        !seen.contains(API_TOKEN),
        "the key was visible to the skill"
    );
    assert!(!seen.contains("EGRESSTEST"), "part of the key was visible");
    // Nor in warden's own output or audit row.
    assert!(!out.stderr.contains(API_TOKEN), "{}", out.stderr);
    let row = env.last_audit("skill:keyed");
    assert!(!row.reason.contains(API_TOKEN), "{}", row.reason);
    assert!(
        row.reason
            .contains("egress allowed: route api (api.example.test:80)"),
        "{}",
        row.reason
    );
    assert!(
        row.reason.contains("route api: method POST is not allowed"),
        "{}",
        row.reason
    );
}

#[test]
fn an_unprivileged_warden_confines_the_skill_in_a_user_namespace_or_refuses_it() {
    // warden as an unprivileged user makes the jail's network namespace inside a user
    // namespace of its own; where the kernel refuses those, a skill that needs the network is
    // refused with the reason, never run with the port-only confinement.
    if !nix::unistd::getuid().is_root() || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: switching to an unprivileged user needs root and setpriv");
        return;
    }
    let allowed = Server::start();
    let other = Server::start();
    let env = SkillEnv::new(&hosts_config(&allowed, &other));
    std::fs::create_dir_all(env.ws.join("handshake")).unwrap();
    env.install("around");
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&env.root)
        .status()
        .unwrap();
    assert!(chown.success());
    let child = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_warden"))
        .args(["skill", "run", "around"])
        .env_clear()
        .env("HOME", &env.home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("WARDEN_CONFIG", &env.config)
        .env("TMPDIR", "/tmp")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The skill waits for the test's listeners; a refused run never gets there.
    let port_file = env.ws.join("handshake/port");
    for _ in 0..200 {
        if port_file.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let tcp = port_file.exists().then(|| {
        let port: u16 = wait_for(&port_file).trim().parse().unwrap();
        let tcp = TcpListener::bind(("127.0.0.2", port)).expect("a listener on 127.0.0.2");
        tcp.set_nonblocking(true).unwrap();
        std::fs::write(env.ws.join("handshake/ready"), "go").unwrap();
        tcp
    });
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match tcp {
        None => {
            assert_eq!(out.status.code(), Some(126), "{stderr}");
            assert!(
                stderr.contains("network namespace of its own, which cannot be made here"),
                "{stderr}"
            );
            assert!(stderr.contains("user namespace"), "{stderr}");
            assert!(allowed.requests().is_empty());
        }
        Some(tcp) => {
            assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
            assert!(!stdout.contains("REACHED"), "{stdout}");
            assert!(
                stdout.contains("the declared domain: forecast for /forecast?city=Lyon: sunny"),
                "{stdout}"
            );
            assert!(
                tcp.accept().is_err(),
                "the listener on 127.0.0.2 was reached"
            );
            assert_eq!(other.connections(), 0);
        }
    }
}
