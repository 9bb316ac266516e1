//! The real `warden skill …` and `warden run` binaries over a throwaway HOME: a config file
//! (workspace, data dir, `[skills] hosts`), warden's secrets in its environment, a planted
//! `~/.ssh/id_rsa`, a copy of the skill fixtures, and small HTTP servers on 127.0.0.1 that
//! count who reached them.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use warden::audit::AuditRow;

/// Secrets warden holds; none may ever reach a skill.
pub const API_KEY: &str = "fake-anthropic-key-SKILLTEST-7d1f0c";
pub const BOT_TOKEN: &str = "fake-bot-token-SKILLTEST-4e2a";
pub const SSH_KEY: &str = "fake ssh identity: skilltest-ssh-material";

/// Whether this machine can make a network namespace for the jail (warden runs as root); when
/// not, prints why the calling test skips. Jails that need the network are then refused, which
/// `skills_egress::refused_without_a_namespace` covers instead.
pub fn namespaces_available() -> bool {
    match warden::sandbox::host::netns::JailNetwork::check_available() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("skipped: no network namespace for the jail here: {why}");
            false
        }
    }
}

pub struct SkillEnv {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub ws: PathBuf,
    pub data: PathBuf,
    pub config: PathBuf,
    /// A private copy of `tests/fixtures/skills`.
    pub fixtures: PathBuf,
    /// Extra environment for every command.
    pub env: Vec<(String, String)>,
}

/// What a command printed.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn of(out: std::process::Output) -> Out {
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

impl SkillEnv {
    /// `extra_config` is appended to the config file (e.g. `[skills]` hosts, a backend).
    pub fn new(extra_config: &str) -> SkillEnv {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), SSH_KEY).unwrap();
        let ws = root.join("ws");
        let data = root.join("data");
        let config = root.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "workspace = {:?}\ndata_dir = {:?}\n{extra_config}\n",
                ws.display().to_string(),
                data.display().to_string()
            ),
        )
        .unwrap();
        let fixtures = root.join("fixtures");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/skills"),
            &fixtures,
        );
        SkillEnv {
            _dir: dir,
            root,
            home,
            ws,
            data,
            config,
            fixtures,
            env: Vec::new(),
        }
    }

    /// `warden ARGS` with warden's secrets in its environment and no terminal.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("WARDEN_CONFIG", &self.config)
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env("TELEGRAM_BOT_TOKEN", BOT_TOKEN)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    pub fn warden(&self, args: &[&str]) -> Out {
        Out::of(self.command(args).output().unwrap())
    }

    /// `warden ARGS` from async tests (a fake server in the same runtime must keep answering),
    /// with `extra` environment (a model's base URL, a log level).
    pub async fn warden_async(&self, args: &[&str], extra: &[(&str, String)]) -> Out {
        let mut cmd = self.command(args);
        for (name, value) in extra {
            cmd.env(name, value);
        }
        tokio::task::spawn_blocking(move || Out::of(cmd.output().unwrap()))
            .await
            .unwrap()
    }

    /// [`Self::warden_async`] under an address-space limit, its resident size measured
    /// (`support::resources`).
    pub async fn warden_bounded(
        &self,
        args: &[&str],
        extra: &[(&str, String)],
    ) -> (Out, super::resources::Measured) {
        let mut cmd = self.command(args);
        for (name, value) in extra {
            cmd.env(name, value);
        }
        let measured = tokio::task::spawn_blocking(move || super::resources::run_bounded(cmd))
            .await
            .unwrap();
        (Out::of(measured.output.clone()), measured)
    }

    /// Append `text` to the config file.
    pub fn append_config(&self, text: &str) {
        use std::io::Write;
        let mut config = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.config)
            .unwrap();
        writeln!(config, "{text}").unwrap();
    }

    pub fn fixture(&self, name: &str) -> PathBuf {
        self.fixtures.join(name)
    }

    /// `warden skill install --yes FIXTURE`, which must succeed.
    pub fn install(&self, name: &str) -> Out {
        let path = self.fixture(name).display().to_string();
        let out = self.warden(&["skill", "install", "--yes", &path]);
        assert_eq!(out.code, 0, "installing {name}: {out:?}");
        out
    }

    /// The audit log, oldest first.
    pub fn audit(&self) -> Vec<AuditRow> {
        let db = warden::schema::open(&self.data.join("warden.db")).unwrap();
        warden::audit::recent(&db, 1000).unwrap()
    }

    /// The newest audit row of `tool`.
    pub fn last_audit(&self, tool: &str) -> AuditRow {
        self.audit()
            .into_iter()
            .rev()
            .find(|r| r.tool == tool)
            .unwrap_or_else(|| panic!("no audit row for {tool}: {:?}", self.audit()))
    }

    /// The newest audit row of `tool`, asserted to carry `decision` and a reason containing
    /// `because`.
    pub fn assert_audited(&self, tool: &str, decision: &str, because: &str) -> AuditRow {
        let row = self.last_audit(tool);
        assert_eq!(row.decision, decision, "{row:?}");
        assert!(row.reason.contains(because), "{because}: {}", row.reason);
        row
    }

    /// Assert that no secret warden holds appears in `text`.
    pub fn assert_no_secret(&self, text: &str) {
        for secret in [API_KEY, BOT_TOKEN, SSH_KEY, "skilltest-ssh-material"] {
            assert!(
                !text.contains(secret),
                "a secret leaked: {secret} in\n{text}"
            );
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// An HTTP server on 127.0.0.1 that answers `forecast for <path>` and records every request
/// (request line, Host and any Authorization) — also connections that never sent one.
pub struct Server {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
    connections: Arc<Mutex<usize>>,
}

impl Server {
    pub fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let (seen, count) = (requests.clone(), connections.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                *count.lock().unwrap() += 1;
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 2048];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut chunk) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).to_string();
                    let line = head.lines().next().unwrap_or("").to_string();
                    let host = head
                        .lines()
                        .find(|l| l.to_ascii_lowercase().starts_with("host:"))
                        .unwrap_or("")
                        .to_string();
                    // A key the proxy added is recorded (never echoed back to the skill).
                    let authorization = head
                        .lines()
                        .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                        .map(|l| format!(" | {l}"))
                        .unwrap_or_default();
                    seen.lock()
                        .unwrap()
                        .push(format!("{line} | {host}{authorization}"));
                    let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                    let body = format!("forecast for {path}: sunny");
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                });
            }
        });
        Server {
            addr,
            requests,
            connections,
        }
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    pub fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

/// `[skills] hosts` mapping the fixtures' domains to local servers.
pub fn hosts_config(allowed: &Server, other: &Server) -> String {
    format!(
        "[skills]\nhosts = {{ \"api.example.test\" = \"{}\", \"other.example.test\" = \"{}\" }}\n",
        allowed.addr, other.addr
    )
}
