//! `warden exec` with HTTPS looked into: hosts with method rules or a `[network.secrets]`
//! binding are served through the run's CA, requests checked and the secret swapped in toward
//! its host only; the real value appears nowhere the jail can read; an upstream whose
//! certificate warden does not trust is refused. As root and as uid 65534.

use crate::common::*;
use crate::exec::{namespaces_available, Net};
use crate::support::tls_server::{TestCa, TlsServer};

const REAL: &str = "ghp_REALVALUE-7d1f0c-never-in-the-jail";

/// Servers: `api.test` (the secret's host), `get.test` and `asked.test` (an `ask` rule) share one; `other.test` (allowed,
/// with a method rule, no secret) and `tunnel.test` (allowed, no rules: a plain tunnel) their
/// own (the client checks its certificate itself, from the workspace); `forged.test` presents a certificate from a CA nobody trusts.
struct Https {
    net: Net,
    api: TlsServer,
    other: TlsServer,
    tunnel: TlsServer,
    forged: TlsServer,
}

fn https() -> Https {
    let net = Net::new("");
    let ca = TestCa::new("test upstream CA");
    let ca_file = net.env.outside("upstream").join("ca.pem");
    ca.write(&ca_file);
    ca.write(&net.env.ws.join("test-ca.pem"));
    let api = TlsServer::start(&ca, &["api.test", "get.test", "asked.test"]);
    let other = TlsServer::start(&ca, &["other.test"]);
    let tunnel = TlsServer::start(&ca, &["tunnel.test"]);
    let forged = TlsServer::start(&TestCa::new("a forger"), &["forged.test"]);
    let config = format!(
        "[network]\nupstream_ca = \"{ca}\"\n\
         [network.hosts]\n\
         \"api.test\" = \"allow\"\n\
         \"get.test\" = {{ rule = \"allow\", methods = [\"GET\", \"HEAD\"] }}\n\
         \"other.test\" = {{ rule = \"allow\", methods = [\"GET\"] }}\n\
         \"tunnel.test\" = \"allow\"\n\
         \"asked.test\" = {{ rule = \"ask\", methods = [\"GET\"] }}\n\
         \"forged.test\" = {{ rule = \"allow\", methods = [\"GET\"] }}\n\
         [network.resolve]\n\
         \"api.test\" = \"{api}\"\n\"get.test\" = \"{api}\"\n\"asked.test\" = \"{api}\"\n\"other.test\" = \"{other}\"\n\
         \"tunnel.test\" = \"{tunnel}\"\n\"forged.test\" = \"{forged}\"\n\
         [network.secrets.GH_TOKEN]\nhosts = [\"api.test\"]\n",
        ca = ca_file.display(),
        api = api.addr,
        other = other.addr,
        tunnel = tunnel.addr,
        forged = forged.addr,
    );
    std::fs::write(&net.env.config, config).unwrap();
    let mut net = net;
    // The secret comes from warden's own environment, the case /proc could leak.
    net.warden_env
        .push(("WARDEN_SECRET_GH_TOKEN".into(), REAL.into()));
    Https {
        net,
        api,
        other,
        tunnel,
        forged,
    }
}

/// The `Authorization` header of each request a server saw.
fn authorizations(server: &TlsServer) -> Vec<String> {
    server
        .heads()
        .iter()
        .flat_map(|head| {
            head.lines()
                .filter(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                .map(|l| l["authorization:".len()..].trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What a program in the jail does with the variable, as `gh`, git credential helpers and SDKs
/// read it from their environment (a command line's `$GH_TOKEN` is tested with curl below).
/// `request URL` sends a GET with
/// `Authorization: Bearer $GH_TOKEN` through the proxy; `leak` prints everything the jail can
/// read that might hold the secret: its environment, `/proc/self/environ`, every
/// `/proc/*/environ` and `cmdline` it can open, and every file under TMPDIR and the workspace.
const PROBE: &str = r#"
import glob, os, ssl, sys, urllib.request
if sys.argv[1] == "request":
    # With a third argument, trust only that CA file (a plain tunnel: the server's own cert).
    context = ssl.create_default_context(cafile=sys.argv[3]) if len(sys.argv) > 3 else None
    req = urllib.request.Request(sys.argv[2], headers={"Authorization": "Bearer " + os.environ["GH_TOKEN"]})
    print(urllib.request.urlopen(req, timeout=10, context=context).read().decode(), end="")
    sys.exit(0)
for k, v in os.environ.items():
    print(k + "=" + v)
opened = 0
parent = "/proc/%d/" % os.getppid()
for path in ["/proc/self/environ", parent + "environ", parent + "cmdline", "/proc/1/environ"] + glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        with open(path, "rb") as f:
            print(f.read().decode(errors="replace"))
            opened += 1
    except OSError:
        pass
for root in [os.environ["TMPDIR"], "."]:
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                with open(os.path.join(dirpath, name), "rb") as f:
                    print(f.read().decode(errors="replace"))
            except OSError:
                pass
print("probe-done, /proc files opened:", opened)
"#;

fn check(as_nobody: bool) {
    let h = https();
    let policy = h.net.env.outside("policy").join("policy.toml");
    std::fs::write(&policy, "[programs.python3]\nargs = \"read\"\n").unwrap();
    std::fs::write(h.net.env.ws.join("probe.py"), PROBE).unwrap();
    let flags = ["--policy", policy.to_str().unwrap()];
    let exec = |command: &str| match as_nobody {
        true => h.net.exec_as_nobody(&flags, command),
        false => Some(h.net.exec(&flags, command)),
    };
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 runs the probe");
        return;
    }
    if !as_nobody && !namespaces_available() {
        return;
    }
    let Some(ok) = exec("python3 probe.py request https://api.test/repos/x") else {
        return;
    };
    if ok.stderr.contains("jailed commands get no network here") {
        assert!(h.api.heads().is_empty());
        return;
    }
    assert_eq!(ok.status, 0, "{ok:?}");
    assert_eq!(ok.stdout, "hello over https\n", "{ok:?}");
    let to_api = authorizations(&h.api);
    assert_eq!(
        to_api,
        [format!("Bearer {REAL}")],
        "the value was swapped in"
    );

    // On a command line: the policy expands `$GH_TOKEN` to the placeholder the jail holds (not
    // to nothing), and the proxy swaps it as it does the environment's.
    let curl = exec("curl -sS -f -H \"Authorization: Bearer $GH_TOKEN\" https://api.test/repos/y")
        .unwrap();
    assert_eq!(curl.status, 0, "{curl:?}");
    assert_eq!(curl.stdout, "hello over https\n", "{curl:?}");
    assert_eq!(
        authorizations(&h.api),
        [format!("Bearer {REAL}"), format!("Bearer {REAL}")],
        "the value was swapped in for the command line's placeholder"
    );
    // What the line printed is the placeholder, never the value.
    let echo = exec("echo \"$GH_TOKEN\"").unwrap();
    assert_eq!(echo.status, 0, "{echo:?}");
    assert!(
        echo.stdout.starts_with("warden-placeholder-GH_TOKEN-"),
        "{echo:?}"
    );
    assert!(!echo.all().contains(REAL), "{echo:?}");

    // Another allowed host, looked into as well: the placeholder goes out unchanged.
    let other = exec("python3 probe.py request https://other.test/x").unwrap();
    assert_eq!(other.status, 0, "{other:?}");
    let to_other = authorizations(&h.other);
    assert_eq!(to_other.len(), 1, "{to_other:?}");
    assert!(
        to_other[0].starts_with("Bearer warden-placeholder-GH_TOKEN-"),
        "{to_other:?}"
    );
    // A plain tunnel (no rules, no secret): the client checks the server itself.
    let tunnel = exec("python3 probe.py request https://tunnel.test/x test-ca.pem").unwrap();
    assert_eq!(tunnel.status, 0, "{tunnel:?}");
    let to_tunnel = authorizations(&h.tunnel);
    assert!(
        to_tunnel.len() == 1 && to_tunnel[0].starts_with("Bearer warden-placeholder-GH_TOKEN-"),
        "{to_tunnel:?}"
    );

    // GET-only over HTTPS: GET passes, POST is refused naming the key; nothing POSTed arrives.
    let get = exec("curl -sS -f https://get.test/a").unwrap();
    assert_eq!(get.status, 0, "{get:?}");
    let post = exec("curl -sS -f -X POST https://get.test/a").unwrap();
    assert_ne!(post.status, 0, "{post:?}");
    assert!(
        post.stderr.contains(
            "refused get.test:443: get.test: method POST is not allowed here (allowed: GET, \
             HEAD), under [network.hosts] \"get.test\" = \"allow\""
        ),
        "{post:?}"
    );
    assert!(
        h.api.heads().iter().all(|head| !head.starts_with("POST")),
        "{:?}",
        h.api.heads()
    );

    // An upstream certificate warden does not trust is refused, and nothing is sent to it.
    let forged = exec("curl -sS -f https://forged.test/x").unwrap();
    assert_ne!(forged.status, 0, "{forged:?}");
    assert!(
        forged.stderr.contains("TLS with forged.test failed"),
        "{forged:?}"
    );
    assert!(h.forged.heads().is_empty(), "{:?}", h.forged.heads());

    // The real value is nowhere the jail can read; the placeholder is (the probe works).
    let probe = exec("python3 probe.py leak").unwrap();
    assert!(probe.stdout.contains("probe-done"), "{probe:?}");
    // Its own environ opens (the probe reads /proc); warden's and the others' do not.
    assert!(
        probe.stdout.contains("/proc files opened: 1\n"),
        "{probe:?}"
    );
    assert!(
        probe
            .stdout
            .contains("GH_TOKEN=warden-placeholder-GH_TOKEN-"),
        "{probe:?}"
    );
    assert!(!probe.all().contains(REAL), "{probe:?}");
    assert!(!probe.all().contains(SECRET_KEY), "{probe:?}");
}

#[test]
fn https_is_checked_and_the_secret_swapped_toward_its_host_only() {
    check(false);
}

#[test]
fn unprivileged_https_is_checked_and_the_secret_swapped_toward_its_host_only() {
    check(true);
}

#[test]
fn a_secret_warden_does_not_have_leaves_the_run_without_network_saying_where_to_set_it() {
    if !namespaces_available() {
        return;
    }
    let mut h = https();
    h.net.warden_env.clear();
    let r = h.net.exec(&[], "curl -sS -f https://api.test/x");
    assert_ne!(r.status, 0, "{r:?}");
    assert!(
        r.stderr.contains(
            "[network.secrets] GH_TOKEN needs the secret GH_TOKEN, which warden does not have: \
             set [skills.secrets] GH_TOKEN in the config or WARDEN_SECRET_GH_TOKEN"
        ),
        "{r:?}"
    );
    assert!(h.api.heads().is_empty(), "{:?}", h.api.heads());
}

#[test]
fn an_ask_rule_over_https_asks_about_each_request_with_its_method_and_path() {
    if !namespaces_available() {
        return;
    }
    let h = https();
    let refused = h.net.exec(&[], "curl -sS -f https://asked.test/a?q=1");
    assert_ne!(refused.status, 0, "{refused:?}");
    assert!(
        refused.stderr.contains(
            "send GET https://asked.test:443/a under [network.hosts] \"asked.test\" = \"ask\""
        ),
        "{refused:?}"
    );
    assert!(h.api.heads().is_empty(), "{:?}", h.api.heads());
    let approved = h.net.exec(&["--yes"], "curl -sS -f https://asked.test/a");
    assert_eq!(approved.status, 0, "{approved:?}");
    assert!(
        approved.stderr.contains(
            "approved with --yes: a jailed command wants to send GET https://asked.test:443/a"
        ),
        "{approved:?}"
    );
    assert_eq!(h.api.heads().len(), 1, "{:?}", h.api.heads());
}
