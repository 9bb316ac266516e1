//! `[network] confinement = "supervisor"`: the jail shares warden's network and warden makes
//! every `connect` itself, to the proxy only. The checks of `exec.rs` run again in this
//! confinement, as root and as uid 65534, plus what only this confinement refuses (`bind`,
//! `listen`: a port would be the host's), and that "auto" still picks the namespace where it
//! can be made.

use crate::common::*;
use crate::exec::{
    curl_reaches_only_allowed_hosts, git_clone_over_dumb_http, pip_installs_from_a_local_index,
    probe_reaches_nothing, Confinement, Net, PYTHON_RUNS_SCRIPTS,
};
use std::process::Command;

#[test]
fn pip_installs_from_a_local_index_under_the_supervisor() {
    pip_installs_from_a_local_index(Confinement::Supervisor, false);
}

#[test]
fn unprivileged_pip_installs_from_a_local_index_under_the_supervisor() {
    pip_installs_from_a_local_index(Confinement::Supervisor, true);
}

#[test]
fn curl_reaches_an_allowed_host_and_nothing_else_under_the_supervisor() {
    let net = Net::allowing_pkgs_confined(Confinement::Supervisor);
    curl_reaches_only_allowed_hosts(&net, false);
}

#[test]
fn unprivileged_curl_reaches_an_allowed_host_and_nothing_else_under_the_supervisor() {
    let net = Net::allowing_pkgs_confined(Confinement::Supervisor);
    curl_reaches_only_allowed_hosts(&net, true);
}

#[test]
fn git_clone_over_http_works_under_the_supervisor() {
    git_clone_over_dumb_http(&Net::allowing_pkgs_confined(Confinement::Supervisor), false);
}

#[test]
fn unprivileged_git_clone_over_http_works_under_the_supervisor() {
    git_clone_over_dumb_http(&Net::allowing_pkgs_confined(Confinement::Supervisor), true);
}

/// What went around the proxy is counted and named in the run's report.
fn refusals_reported(r: &Run) {
    assert!(
        r.stderr
            .contains("the jail tried to go around the egress proxy: warden refused"),
        "{r:?}"
    );
    assert!(r.stderr.contains("127.0.0.1:"), "{r:?}");
    assert!(r.stderr.contains("[::1]:"), "{r:?}");
}

#[test]
fn direct_connects_udp_raw_and_racing_threads_reach_nothing_under_the_supervisor() {
    if let Some(r) = probe_reaches_nothing(Confinement::Supervisor, false) {
        refusals_reported(&r);
    }
}

#[test]
fn unprivileged_direct_connects_udp_raw_and_racing_threads_reach_nothing_under_the_supervisor() {
    if let Some(r) = probe_reaches_nothing(Confinement::Supervisor, true) {
        refusals_reported(&r);
    }
}

/// `bind` and `listen` (which binds an unbound socket itself) are refused: in warden's network
/// a port of the jail's would be the host's. A blocking and a non-blocking connect to the
/// proxy both work, over IPv4 and as a v4-mapped IPv6 address.
const SOCKETS: &str = r#"
import os, select, socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, "refused", type(e).__name__)
attempt("bind", lambda: socket.socket().bind(("127.0.0.1", 0)))
attempt("listen", lambda: socket.socket().listen())
attempt("blocking", lambda: socket.create_connection(("127.0.0.1", proxy.port), timeout=5))
def mapped():
    s = socket.socket(socket.AF_INET6)
    s.connect(("::ffff:127.0.0.1", proxy.port))
attempt("mapped", mapped)
s = socket.socket()
s.setblocking(False)
try:
    s.connect(("127.0.0.1", proxy.port))
    print("nonblocking connected at once")
except BlockingIOError:
    select.select([], [s], [], 5)
    print("nonblocking in progress, then error", s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
"#;

fn sockets(as_nobody: bool) {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 runs the probe");
        return;
    }
    let net = Net::allowing_pkgs_confined(Confinement::Supervisor);
    let policy = net.env.outside("policy").join("policy.toml");
    std::fs::write(&policy, PYTHON_RUNS_SCRIPTS).unwrap();
    std::fs::write(net.env.ws.join("sockets.py"), SOCKETS).unwrap();
    let flags = ["--policy", policy.to_str().unwrap()];
    let Some(r) = net.exec_as(as_nobody, &flags, "python3 sockets.py") else {
        return;
    };
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("bind refused PermissionError"), "{r:?}");
    assert!(r.stdout.contains("listen refused PermissionError"), "{r:?}");
    assert!(r.stdout.contains("blocking ok"), "{r:?}");
    assert!(r.stdout.contains("mapped ok"), "{r:?}");
    assert!(
        r.stdout.contains("nonblocking connected at once")
            || r.stdout.contains("nonblocking in progress, then error 0"),
        "{r:?}"
    );
    assert!(
        !r.stderr.contains("go around the egress proxy"),
        "nothing was refused: {r:?}"
    );
}

#[test]
fn bind_and_listen_are_refused_and_the_proxy_connects_either_way() {
    sockets(false);
}

#[test]
fn unprivileged_bind_and_listen_are_refused_and_the_proxy_connects_either_way() {
    sockets(true);
}

#[test]
fn auto_picks_the_namespace_where_it_can() {
    if !is_root() {
        eprintln!("skipped: the namespace needs warden to run as root");
        return;
    }
    let net = Net::allowing_pkgs_confined(Confinement::Auto);
    let doctor = run({
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.arg("doctor")
            .env("WARDEN_CONFIG", &net.env.config)
            .stdin(std::process::Stdio::null());
        cmd
    });
    assert!(
        doctor.stdout.contains(
            "confinement: a network namespace of the jail's own, where only warden's egress \
             proxy listens ([network] confinement = \"auto\": warden can make a namespace here)"
        ),
        "{doctor:?}"
    );
    // In the namespace a connect around the proxy (its port, past Landlock's port rule, at
    // another address) reaches the kernel there, which counts it; warden's supervisor is not
    // asked.
    let policy = net.env.outside("policy").join("policy.toml");
    std::fs::write(&policy, PYTHON_RUNS_SCRIPTS).unwrap();
    std::fs::write(
        net.env.ws.join("around.py"),
        "import os, socket, urllib.parse\n\
         port = urllib.parse.urlsplit(os.environ['HTTP_PROXY']).port\n\
         socket.create_connection(('127.0.0.2', port), timeout=2)\n",
    )
    .unwrap();
    let flags = ["--policy", policy.to_str().unwrap()];
    let command = "python3 around.py";
    let r = net.exec(&flags, command);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(r.stderr.contains("counted by the kernel"), "{r:?}");
    assert!(!r.stderr.contains("warden refused"), "{r:?}");

    let supervised = Net::allowing_pkgs_confined(Confinement::Supervisor);
    let doctor = run({
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.arg("doctor")
            .env("WARDEN_CONFIG", &supervised.env.config)
            .stdin(std::process::Stdio::null());
        cmd
    });
    assert!(
        doctor
            .stdout
            .contains("confinement: warden's connect supervisor: the jail shares warden's network"),
        "{doctor:?}"
    );
}
