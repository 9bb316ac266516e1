//! `warden exec` with `[network]`: curl, git clone and pip through the proxy to hosts a rule
//! allows; refusals that name the config key; nothing else reachable, as root (a network
//! namespace) and as an unprivileged user (the same, owned by a user namespace of warden's).
//! The checks are functions of the confinement, so `supervisor.rs` runs them again with
//! `[network] confinement = "supervisor"`.

use crate::common::*;
use crate::support::file_server::FileServer;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

const NOBODY: u32 = 65534;

/// `[network] confinement` as a test sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confinement {
    /// Left out: "auto".
    Auto,
    Supervisor,
}

/// A workspace, a folder served over HTTP as `pkgs.test`, and a config allowing that name.
pub struct Net {
    pub env: Env,
    server: FileServer,
    pub served: std::path::PathBuf,
    /// Variables in warden's own environment (`WARDEN_SECRET_…`).
    pub warden_env: Vec<(String, String)>,
}

impl Net {
    pub fn new(rules: &str) -> Net {
        Net::confined(rules, Confinement::Auto)
    }

    pub fn confined(rules: &str, confinement: Confinement) -> Net {
        let env = Env::new();
        let served = env.outside("served");
        std::fs::write(served.join("hello.txt"), "hello from the test server\n").unwrap();
        let server = FileServer::start(&served);
        // The audit log (a run with the network writes a row) stays in the test's folder.
        let data = env.outside("data");
        let mut config = format!(
            "data_dir = \"{}\"\n{rules}\n[network.resolve]\n\"pkgs.test\" = \"{}\"\n\"other.test\" = \"{}\"\n",
            data.display(),
            server.addr,
            server.addr
        );
        if confinement == Confinement::Supervisor {
            config.push_str("[network]\nconfinement = \"supervisor\"\n");
        }
        std::fs::write(&env.config, config).unwrap();
        Net {
            env,
            server,
            served,
            warden_env: Vec::new(),
        }
    }

    fn allowing_pkgs() -> Net {
        Net::new("[network.hosts]\n\"pkgs.test\" = \"allow\"")
    }

    pub fn allowing_pkgs_confined(confinement: Confinement) -> Net {
        Net::confined("[network.hosts]\n\"pkgs.test\" = \"allow\"", confinement)
    }

    /// `warden exec` as root, or as uid 65534 with `as_nobody`; None when that cannot run here.
    pub fn exec_as(&self, as_nobody: bool, flags: &[&str], command: &str) -> Option<Run> {
        match as_nobody {
            true => self.exec_as_nobody(flags, command),
            false => Some(self.exec(flags, command)),
        }
    }

    pub fn exec(&self, flags: &[&str], command: &str) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.arg("exec").args(flags).arg("--").arg(command);
        self.prepare(&mut cmd);
        run(cmd)
    }

    /// The same through `setpriv` as uid 65534, or None when that cannot run here.
    pub fn exec_as_nobody(&self, flags: &[&str], command: &str) -> Option<Run> {
        if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
            eprintln!("skipped: switching to uid {NOBODY} needs root and setpriv");
            return None;
        }
        self.env.chown_all(NOBODY);
        let mut cmd = Command::new("/usr/bin/setpriv");
        cmd.args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "--",
            env!("CARGO_BIN_EXE_warden"),
            "exec",
        ]);
        cmd.args(flags).arg("--").arg(command);
        self.prepare(&mut cmd);
        cmd.env("TMPDIR", "/tmp");
        Some(run(cmd))
    }

    fn prepare(&self, cmd: &mut Command) {
        cmd.current_dir(&self.env.ws)
            .env("WARDEN_CONFIG", &self.env.config)
            .env("ANTHROPIC_API_KEY", SECRET_KEY)
            .env("TELEGRAM_BOT_TOKEN", SECRET_TOKEN)
            .envs(self.warden_env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null());
    }

    pub fn requests(&self) -> Vec<String> {
        self.server.requests()
    }

    /// `warden exec` refuses `command` before it runs (exit 126), saying `why`.
    fn refuses(&self, command: &str, why: &str) {
        let r = self.exec(&[], command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
    }
}

/// Only where warden can give the jail a network namespace of its own.
pub(crate) fn namespaces_available() -> bool {
    if !is_root() {
        eprintln!("skipped: the jail's network namespace needs warden to run as root");
        return false;
    }
    true
}

#[test]
fn curl_reaches_an_allowed_host_and_a_host_without_a_rule_is_refused_naming_the_key() {
    if !namespaces_available() {
        return;
    }
    curl_reaches_only_allowed_hosts(&Net::allowing_pkgs(), false);
}

/// curl to an allowed host works, to a host without a rule (plain HTTP and HTTPS) is refused
/// naming the config key, and only the allowed request reaches the server.
pub fn curl_reaches_only_allowed_hosts(net: &Net, as_nobody: bool) -> Option<()> {
    let ok = net.exec_as(as_nobody, &[], "curl -sS -f http://pkgs.test/hello.txt")?;
    assert_eq!(ok.status, 0, "{ok:?}");
    assert_eq!(ok.stdout, "hello from the test server\n", "{ok:?}");
    assert!(
        ok.stderr.contains("network: pkgs.test: 0 bytes sent"),
        "the bytes by host are reported: {ok:?}"
    );

    let refused = net.exec_as(as_nobody, &[], "curl -sS -f http://other.test/hello.txt")?;
    assert_ne!(refused.status, 0, "{refused:?}");
    assert!(
        refused.stderr.contains(
            "egress proxy refused other.test:80: no [network.hosts] rule names other.test"
        ),
        "{refused:?}"
    );
    // HTTPS goes through CONNECT: refused the same way, before any lookup.
    let tunnel = net.exec_as(as_nobody, &[], "curl -sS -f https://other.test/hello.txt")?;
    assert_ne!(tunnel.status, 0, "{tunnel:?}");
    assert!(
        tunnel.stderr.contains("refused other.test:443"),
        "{tunnel:?}"
    );
    assert_eq!(
        net.requests(),
        ["GET /hello.txt HTTP/1.1"],
        "only the allowed request reached the server"
    );
    // Each run's audit row holds the proxy's decisions and the bytes by host.
    let audit = warden_in(&net.env, &["audit", "--json"]);
    let rows: Vec<serde_json::Value> = audit
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "{audit:?}");
    assert_eq!(rows[0]["tool"], "exec");
    assert_eq!(
        rows[0]["input"]["command"],
        "curl -sS -f http://pkgs.test/hello.txt"
    );
    assert_eq!(rows[0]["exit_code"], 0);
    assert_eq!(
        rows[0]["network"]["traffic"]["pkgs.test"]["received"]
            .as_u64()
            .map(|n| n > 26),
        Some(true),
        "{:?}",
        rows[0]
    );
    assert_eq!(rows[1]["network"]["events"][0]["allowed"], false);
    assert!(rows[2]["network"]["events"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("other.test"));
    Some(())
}

#[test]
fn without_network_rules_the_network_programs_stay_refused() {
    let net = Net::new("");
    let r = net.exec(&[], "curl -sS http://pkgs.test/hello.txt");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(
        r.stderr
            .contains("a network tool: the sandbox has no network"),
        "{r:?}"
    );
    let r = net.exec(&[], "git clone http://pkgs.test/repo.git");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(net.requests().is_empty());
}

#[test]
fn the_other_checks_of_network_programs_stay() {
    let net = Net::allowing_pkgs();
    for (command, why) in [
        ("curl -o /etc/x http://pkgs.test/hello.txt", "/etc/x"),
        ("curl -K cfg http://pkgs.test/", "reads options from a file"),
        (
            "curl -x http://1.2.3.4:8080 http://pkgs.test/",
            "warden's proxy only",
        ),
        (
            "git clone -u evil http://pkgs.test/r.git",
            "names a program",
        ),
        ("wget -e use_proxy=off http://pkgs.test/", "wgetrc command"),
    ] {
        net.refuses(command, why);
    }
    assert!(net.requests().is_empty());
}

#[test]
fn an_ask_rule_needs_an_approval_naming_host_method_and_path() {
    if !namespaces_available() {
        return;
    }
    let net = Net::new("[network.hosts]\n\"pkgs.test\" = \"ask\"");
    let refused = net.exec(&[], "curl -sS -f http://pkgs.test/hello.txt");
    assert_ne!(refused.status, 0, "{refused:?}");
    assert!(
        refused.stderr.contains(
            "send GET http://pkgs.test:80/hello.txt under [network.hosts] \"pkgs.test\" = \"ask\""
        ),
        "{refused:?}"
    );
    assert!(net.requests().is_empty());
    let approved = net.exec(&["--yes"], "curl -sS -f http://pkgs.test/hello.txt");
    assert_eq!(approved.status, 0, "{approved:?}");
    assert!(
        approved.stderr.contains("approved with --yes"),
        "{approved:?}"
    );
    assert_eq!(net.requests().len(), 1);
}

#[test]
fn git_clone_and_pull_over_http_work() {
    if !namespaces_available() {
        return;
    }
    git_clone_over_dumb_http(&Net::allowing_pkgs(), false);
}

/// A repository served over git's dumb HTTP is cloned through the proxy, and its remote read.
pub fn git_clone_over_dumb_http(net: &Net, as_nobody: bool) -> Option<()> {
    let source = net.env.outside("source");
    // The test's own git (outside the jail) works on folders chowned to uid 65534 too.
    let global = net.env.outside("gitconfig").join("config");
    std::fs::write(&global, "[safe]\n\tdirectory = *\n").unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", &global)
            .env("HOME", dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&source, &["init", "-q"]);
    std::fs::write(source.join("README"), "cloned through the proxy\n").unwrap();
    git(&source, &["add", "README"]);
    git(&source, &["commit", "-qm", "one"]);
    let bare = net.served.join("repo.git");
    git(
        &net.served,
        &[
            "clone",
            "-q",
            "--bare",
            source.to_str().unwrap(),
            "repo.git",
        ],
    );
    git(&bare, &["update-server-info"]);

    let r = net.exec_as(as_nobody, &[], "git clone http://pkgs.test/repo.git copy")?;
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(net.env.ws.join("copy/README")).unwrap(),
        "cloned through the proxy\n"
    );
    let r = net.exec_as(as_nobody, &[], "git -C copy ls-remote origin")?;
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("refs/heads/"), "{r:?}");

    // A new commit upstream arrives with pull, git's safety settings in front of it.
    std::fs::write(source.join("README"), "pulled through the proxy\n").unwrap();
    git(&source, &["commit", "-qam", "two"]);
    git(&source, &["push", "-q", bare.to_str().unwrap(), "HEAD"]);
    git(&bare, &["update-server-info"]);
    let r = net.exec_as(as_nobody, &[], "git -C copy pull -q --ff-only")?;
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(net.env.ws.join("copy/README")).unwrap(),
        "pulled through the proxy\n"
    );

    // A pulled tree that would plant attributes naming a filter driver is undone and refused
    // by the write verifier (what the merge brings is read by nobody before it runs).
    std::fs::write(source.join(".gitattributes"), "* filter=evil\n").unwrap();
    git(&source, &["add", ".gitattributes"]);
    git(&source, &["commit", "-qm", "three"]);
    git(&source, &["push", "-q", bare.to_str().unwrap(), "HEAD"]);
    git(&bare, &["update-server-info"]);
    let r = net.exec_as(as_nobody, &[], "git -C copy pull -q --ff-only")?;
    assert_eq!(r.status, 126, "{r:?}");
    assert!(
        r.stderr.contains("changed files warden protects") && r.stderr.contains(".gitattributes"),
        "{r:?}"
    );
    assert!(!net.env.ws.join("copy/.gitattributes").exists());
    Some(())
}

#[test]
fn pip_installs_from_a_local_simple_index() {
    if namespaces_available() {
        pip_installs_from_a_local_index(Confinement::Auto, false);
    }
}

#[test]
fn unprivileged_pip_installs_from_a_local_simple_index() {
    pip_installs_from_a_local_index(Confinement::Auto, true);
}

/// `pip install --index-url` from a simple index the test serves, through the proxy.
pub fn pip_installs_from_a_local_index(confinement: Confinement, as_nobody: bool) -> Option<()> {
    if !Path::new("/usr/bin/pip").exists() || !have_python() {
        eprintln!("skipped: pip is not installed on this machine (Debian's python3-pip)");
        return None;
    }
    // pip reads /etc/debian_version for its User-Agent.
    let net = Net::confined(
        "[sandbox]\nread = [\"/etc/debian_version\"]\n[network.hosts]\n\"pkgs.test\" = \"allow\"",
        confinement,
    );
    let wheel = "demo_pkg-1.0-py3-none-any.whl";
    let made = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(format!(
            "import zipfile\n\
             z = zipfile.ZipFile('{dir}/{wheel}', 'w')\n\
             z.writestr('demo_pkg/__init__.py', 'VALUE = 42\\n')\n\
             z.writestr('demo_pkg-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: demo-pkg\\nVersion: 1.0\\n')\n\
             z.writestr('demo_pkg-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
             z.writestr('demo_pkg-1.0.dist-info/RECORD', '')\n\
             z.close()\n",
            dir = net.served.display()
        ))
        .status()
        .unwrap();
    assert!(made.success());
    let project = net.served.join("simple/demo-pkg");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("index.html"),
        format!("<html><body><a href=\"/{wheel}\">{wheel}</a></body></html>"),
    )
    .unwrap();
    let r = net.exec_as(
        as_nobody,
        &["--yes"],
        "pip install --disable-pip-version-check --no-cache-dir --index-url http://pkgs.test/simple/ --trusted-host pkgs.test --target libs demo-pkg",
    )?;
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(net.env.ws.join("libs/demo_pkg/__init__.py")).unwrap(),
        "VALUE = 42\n"
    );
    Some(())
}

/// A probe the jail runs (through a policy file that lets python3 run it): direct connects to
/// another loopback port, to `::1`, a UDP datagram, a raw socket, a thread racing to rewrite
/// the address of a `connect` toward the proxy, and one racing to `dup2` another socket onto
/// the number being connected. It prints what connected.
const PROBE: &str = r#"
import ctypes, os, socket, struct, sys, threading, urllib.parse
target = int(sys.argv[1])
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
results = []
def attempt(name, f):
    try:
        f()
        results.append(name + " CONNECTED")
    except OSError as e:
        results.append(name + " refused " + type(e).__name__)
def tcp4():
    socket.create_connection(("127.0.0.1", target), timeout=2)
def tcp6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(("::1", target))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("127.0.0.1", target))
    s.sendto(b"x", ("10.0.0.1", 53))
def raw():
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    s.sendto(b"x", ("127.0.0.1", target))
attempt("tcp4", tcp4)
attempt("tcp6", tcp6)
attempt("udp", udp)
attempt("raw", raw)
# The race: one thread flips the port in the sockaddr buffer while another connects with it.
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(16)
def addr(port):
    return struct.pack("!HH4s8x", socket.AF_INET, port, socket.inet_aton("127.0.0.1"))
def host_order(raw):
    family = struct.unpack("!H", raw[:2])[0]
    return struct.pack("=H", family) + raw[2:]
good, bad = host_order(addr(proxy.port)), host_order(addr(target))
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, bad, 16)
        ctypes.memmove(buf, good, 16)
t = threading.Thread(target=flip)
t.start()
raced = 0
for _ in range(300):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if libc.connect(s.fileno(), buf, 16) == 0:
        raced += 1
    s.close()
stop = True
t.join()
ctypes.memmove(buf, good, 16)
# The other race: the target's address is never asked for, but while one thread connects
# number n toward the proxy, another keeps putting a fresh socket (or a unix socket) on n.
victim = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
n = victim.fileno()
spares = [socket.socket(socket.AF_INET, socket.SOCK_STREAM), socket.socketpair()[0]]
stop = False
def swap():
    while not stop:
        for spare in spares:
            os.dup2(spare.fileno(), n)
t = threading.Thread(target=swap)
t.start()
swapped = 0
for _ in range(300):
    if libc.connect(n, buf, 16) == 0:
        swapped += 1
stop = True
t.join()
print("\n".join(results))
print("race connects", raced)
print("dup2 race connects", swapped)
"#;

pub const PYTHON_RUNS_SCRIPTS: &str = "[programs.python3]\nargs = \"read\"\n";

/// Run the probe (as root, or as uid 65534 with `as_nobody`) and check that nothing but the
/// proxy was reached: the listeners on 127.0.0.1 and `::1` accepted nothing, the UDP socket
/// received nothing. None when it could not run here.
pub fn probe_reaches_nothing(confinement: Confinement, as_nobody: bool) -> Option<Run> {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 runs the probe");
        return None;
    }
    let net = Net::allowing_pkgs_confined(confinement);
    let policy = net.env.outside("policy").join("policy.toml");
    std::fs::write(&policy, PYTHON_RUNS_SCRIPTS).unwrap();
    std::fs::write(net.env.ws.join("probe.py"), PROBE).unwrap();
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    target.set_nonblocking(true).unwrap();
    let port = target.local_addr().unwrap().port();
    let target6 = TcpListener::bind(("::1", port)).ok();
    let udp = std::net::UdpSocket::bind(("127.0.0.1", port)).ok();
    let flags = ["--policy", policy.to_str().unwrap()];
    let command = format!("python3 probe.py {port}");
    if !as_nobody && confinement == Confinement::Auto && !namespaces_available() {
        return None;
    }
    let r = net.exec_as(as_nobody, &flags, &command)?;
    assert_eq!(r.status, 0, "{r:?}");
    assert!(!r.stdout.contains("CONNECTED"), "{r:?}");
    assert!(r.stdout.contains("tcp4 refused"), "{r:?}");
    assert!(r.stdout.contains("tcp6 refused"), "{r:?}");
    assert!(r.stdout.contains("udp refused"), "{r:?}");
    assert!(r.stdout.contains("raw refused"), "{r:?}");
    // The racing connects reached the proxy or nothing (the listeners below saw none).
    assert!(r.stdout.contains("race connects"), "{r:?}");
    assert!(r.stdout.contains("dup2 race connects"), "{r:?}");
    for listener in std::iter::once(&target).chain(target6.as_ref()) {
        listener.set_nonblocking(true).unwrap();
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("a host listener saw a connection: {other:?}"),
        }
    }
    if let Some(udp) = udp {
        udp.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 8];
        assert!(udp.recv_from(&mut byte).is_err(), "a datagram arrived");
    }
    Some(r)
}

#[test]
fn direct_connects_udp_and_a_racing_rewrite_reach_nothing() {
    probe_reaches_nothing(Confinement::Auto, false);
}

#[test]
fn unprivileged_direct_connects_udp_and_a_racing_rewrite_reach_nothing() {
    probe_reaches_nothing(Confinement::Auto, true);
}

#[test]
fn an_unprivileged_warden_reaches_allowed_hosts_through_a_user_namespace() {
    let net = Net::allowing_pkgs();
    let Some(r) = net.exec_as_nobody(&[], "curl -sS -f http://pkgs.test/hello.txt") else {
        return;
    };
    if r.stderr.contains("jailed commands get no network here") {
        // The kernel refuses unprivileged user namespaces: the network stays off, said why.
        assert_ne!(r.status, 0, "{r:?}");
        assert!(r.stderr.contains("user namespace"), "{r:?}");
        assert!(net.requests().is_empty(), "{:?}", net.requests());
        return;
    }
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "hello from the test server\n", "{r:?}");
    let refused = net
        .exec_as_nobody(&[], "curl -sS -f http://other.test/hello.txt")
        .unwrap();
    assert_ne!(refused.status, 0, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("no [network.hosts] rule names other.test"),
        "{refused:?}"
    );
    assert_eq!(net.requests(), ["GET /hello.txt HTTP/1.1"]);
}

/// wget names its output after the URL, so from inside `.git/hooks` it would write a hook the
/// user's own git runs later. The default rule refuses wget without `-O` (first layer). A
/// policy file of the user's own that lets it run anyway meets the second layer: the write
/// verifier compares the protected set before and after, undoes the new hook and refuses the
/// command (exit 126).
#[test]
fn wget_cannot_plant_a_git_hook_under_the_name_the_url_gives() {
    if !namespaces_available() {
        return;
    }
    let net = Net::allowing_pkgs();
    std::fs::write(
        net.served.join("pre-commit"),
        "#!/bin/sh\ntouch /tmp/warden-wget-hook-ran\n",
    )
    .unwrap();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&net.env.ws)
        .status()
        .unwrap();
    assert!(git.success());
    let hook = net.env.ws.join(".git/hooks/pre-commit");
    let command = "cd .git/hooks && wget -q http://pkgs.test/pre-commit";
    net.refuses(command, "wget names the file it writes after the URL");
    assert_eq!(net.requests(), Vec::<String>::new(), "nothing was fetched");
    // Named with -O, the same download runs and writes that file only.
    if Path::new("/usr/bin/wget").exists() {
        let fetched = net.exec(&[], "wget -q -O hook.txt http://pkgs.test/pre-commit");
        assert_eq!(fetched.status, 0, "{fetched:?}");
        let written = std::fs::read_to_string(net.env.ws.join("hook.txt")).unwrap();
        assert!(written.contains("warden-wget-hook-ran"), "{written}");
        let mut names: Vec<String> = std::fs::read_dir(&net.env.ws)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [".git", "hook.txt"], "{fetched:?}");
        std::fs::remove_file(net.env.ws.join("hook.txt")).unwrap();
    } else {
        eprintln!("skipped the download with -O: GNU wget is not installed (/usr/bin/wget)");
    }
    // The same wget rule without `needs_flag`, as a policy file of one's own may write it.
    let policy = net.env.outside("policy").join("wget.toml");
    std::fs::write(
        &policy,
        "[programs.wget]\nnetwork = true\nadded_args = [\"--no-config\"]\n\
         unknown_flags = \"deny\"\nargs = \"value\"\nflags = { \"-q\" = \"flag\" }\n",
    )
    .unwrap();
    let planted = net.exec(&["--policy", policy.to_str().unwrap()], command);
    assert_eq!(planted.status, 126, "{planted:?}");
    assert!(
        planted.stderr.contains("changed files warden protects")
            && planted.stderr.contains(".git/hooks/pre-commit: created"),
        "{planted:?}"
    );
    assert!(!hook.exists(), "a hook was left behind: {planted:?}");
}

/// `curl -H @FILE` would send a file's lines as headers, which no read check saw: refused
/// through the real binary before anything is sent, while a header given as text goes out.
#[test]
fn curl_sends_no_file_as_headers() {
    if !namespaces_available() {
        return;
    }
    let net = Net::allowing_pkgs();
    std::fs::write(net.env.ws.join("notes.txt"), "X-Leak: the notes\n").unwrap();
    for command in [
        "curl -sS -H @notes.txt http://pkgs.test/hello.txt",
        "cat notes.txt | curl -sS --header @- http://pkgs.test/hello.txt",
    ] {
        net.refuses(
            command,
            "takes the value from a file or standard input the policy did not read",
        );
    }
    assert_eq!(net.requests(), Vec::<String>::new(), "nothing was sent");
    let sent = net.exec(
        &[],
        "curl -sS -H 'X-Plain: text' http://pkgs.test/hello.txt",
    );
    assert_eq!(sent.status, 0, "{sent:?}");
    assert!(
        sent.stdout.contains("hello from the test server"),
        "{sent:?}"
    );
}

/// `warden policy check` answers as `warden exec` would check: with `[network]` rules in the
/// config, the network programs are allowed; without, refused saying why.
#[test]
fn policy_check_follows_the_configs_network_rules() {
    let net = Net::allowing_pkgs();
    let r = warden_in(
        &net.env,
        &["policy", "check", "--", "curl -sS http://pkgs.test/"],
    );
    assert_eq!(r.status, 0, "{r:?}");
    let plain = Net::new("");
    let r = warden_in(
        &plain.env,
        &["policy", "check", "--", "curl -sS http://pkgs.test/"],
    );
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.all().contains("the sandbox has no network"), "{r:?}");
    let r = warden_in(&net.env, &["policy", "check", "--", "git pull --rebase"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.all().contains("rebases local commits"), "{r:?}");
}
