//! `[network]` in the Docker backend: the container (network none) reaches warden's egress
//! proxy through the listener warden puts in its namespace, and nothing else. The library
//! tests run on the runtime under test (runc, and runsc when `.ci/run` sets
//! `WARDEN_TEST_DOCKER_RUNTIME`); the CLI test drives `warden exec --backend docker`.

use crate::file_server::FileServer;
use crate::support::*;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use warden::egress::jailed::JailedNetwork;
use warden::egress::network::NetworkConfig;
use warden::sandbox::Backend;

/// A served folder with `hello.txt`, and `[network]` allowing `pkgs.test` (mapped to it) but
/// not `other.test` (mapped to it too).
struct Served {
    server: FileServer,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start() -> Served {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("hello.txt"), "hello through the proxy\n").unwrap();
        Served {
            server: FileServer::start(dir.path()),
            _dir: dir,
        }
    }

    fn rules(&self) -> String {
        format!(
            "[network.hosts]\n\"pkgs.test\" = \"allow\"\n[network.resolve]\n\
             \"pkgs.test\" = \"{0}\"\n\"other.test\" = \"{0}\"\n",
            self.server.addr
        )
    }

    fn network(&self) -> NetworkConfig {
        let table: toml::Table = toml::from_str(&self.rules()).unwrap();
        table["network"].clone().try_into().unwrap()
    }
}

/// A plain HTTP GET through `$HTTP_PROXY` with busybox `nc` (busybox `wget` fails on gVisor's
/// host network in Debian's runsc, whatever the proxy does).
fn fetch_script(url: &str) -> String {
    format!(
        "p=${{HTTP_PROXY#http://}}; hostport=${{p#*@}}; \
         auth=$(printf %s \"${{p%@*}}\" | base64); \
         printf 'GET {url} HTTP/1.0\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n' \"$auth\" \
         | nc -w 5 \"${{hostport%:*}}\" \"${{hostport#*:}}\""
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_container_reaches_an_allowed_host_through_the_proxy_and_nothing_else() {
    let Some(_) = daemon().await else { return };
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: the container's proxy listener needs warden to run as root");
        return;
    }
    let served = Served::start();
    let network = JailedNetwork::start(&served.network(), Backend::Docker, None, &|_| None)
        .unwrap()
        .expect("rules start a proxy");
    let ws = Workspace::new();
    let mut jail = ws.jail();
    network.apply(&mut jail);
    let sandbox = sandbox(jail, "egress").await;

    let out = run(
        &sandbox,
        &["sh", "-c", &fetch_script("http://pkgs.test/hello.txt")],
        &ws.path(),
    )
    .await;
    assert!(
        out.stdout.starts_with("HTTP/1.0 200") && out.stdout.ends_with("hello through the proxy\n"),
        "{out:?}"
    );
    let refused = run(
        &sandbox,
        &["sh", "-c", &fetch_script("http://other.test/hello.txt")],
        &ws.path(),
    )
    .await;
    assert!(refused.stdout.starts_with("HTTP/1.1 403"), "{refused:?}");
    assert!(
        refused
            .stdout
            .contains("no [network.hosts] rule names other.test"),
        "{refused:?}"
    );

    // Around the proxy (with the `nc` that just reached it): the test server itself, a listener
    // on every host address, the Docker bridge's gateway and ::1. None may see a byte. (busybox
    // has no UDP client; the namespace has no route for UDP either.)
    let wide = Listener::start("0.0.0.0:0");
    let probes = [
        format!("nc -w 2 127.0.0.1 {}", served.server.addr.port()),
        format!("nc -w 2 127.0.0.1 {}", wide.addr.port()),
        format!("nc -w 2 172.17.0.1 {}", wide.addr.port()),
        format!("nc -w 2 ::1 {}", wide.addr.port()),
    ];
    for probe in &probes {
        let out = run(
            &sandbox,
            &[
                "sh",
                "-c",
                &format!("echo escaped | {probe}; echo \"rc=$?\""),
            ],
            &ws.path(),
        )
        .await;
        assert!(!out.stdout.contains("HTTP/"), "{probe}: {out:?}");
    }
    assert_eq!(wide.reached(), 0, "a host listener was reached");
    let requests = served.server.requests();
    assert_eq!(
        requests,
        vec!["GET /hello.txt HTTP/1.1".to_string()],
        "only the proxy's one request reached the server"
    );
    sandbox.shutdown().await;
    let report = network.close().await;
    assert!(
        report.lines().iter().any(|l| l.contains("other.test")),
        "{:?}",
        report.lines()
    );
}

#[test]
fn warden_exec_in_docker_fetches_an_allowed_host_and_names_the_key_for_another() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if runtime.block_on(daemon()).is_none() {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: the container's proxy listener needs warden to run as root");
        return;
    }
    let served = Served::start();
    let ws = Workspace::new();
    let dir = tempfile::tempdir().unwrap();
    // The CLI path does not depend on the runtime; busybox wget needs runc (see fetch_script).
    let config = dir.path().join("config.toml");
    std::fs::write(&config, served.rules()).unwrap();
    // busybox wget has no --no-config (which the default's wget rule adds): a rule of its own.
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[programs.wget]\nunknown_flags = \"deny\"\nargs = \"value\"\n\
         [programs.wget.flags]\n\"-q\" = \"flag\"\n\"-O\" = \"write\"\n",
    )
    .unwrap();
    let exec = |url: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["exec", "--backend", "docker", "--policy"])
            .arg(&policy)
            .args(["--", &format!("wget -q -O - {url}")])
            .current_dir(ws.path())
            .env("WARDEN_CONFIG", &config)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (status, stdout, stderr) = exec("http://pkgs.test/hello.txt");
    assert_eq!(status, Some(0), "{stderr}");
    assert_eq!(stdout, "hello through the proxy\n");
    assert!(stderr.contains("network: pkgs.test:"), "{stderr}");
    let (status, stdout, stderr) = exec("http://other.test/hello.txt");
    assert_ne!(status, Some(0));
    assert_eq!(stdout, "");
    assert!(
        stderr.contains(
            "egress proxy refused other.test:80: no [network.hosts] rule names other.test"
        ),
        "{stderr}"
    );
}

/// A TCP listener counting what reaches it: the bytes, and at least one per connection.
struct Listener {
    addr: SocketAddr,
    received: Arc<AtomicUsize>,
}

impl Listener {
    fn start(at: &str) -> Listener {
        let listener = TcpListener::bind(at).unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(AtomicUsize::new(0));
        let count = received.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut buf = Vec::new();
                let _ = stream.read_to_end(&mut buf);
                count.fetch_add(buf.len().max(1), Ordering::SeqCst);
            }
        });
        Listener { addr, received }
    }

    fn reached(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }
}
