//! The real `warden bot` binary as a child process: HOME in a temp dir, configured only by
//! environment variables pointing at the fake Telegram and fake LLM servers.

use super::capture::Capture;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The fake token: not token-shaped, so nothing but our own redaction hides it.
pub const TOKEN: &str = "test-token";
/// The allowed user (and, in private chats, the chat).
pub const OWNER: i64 = 4242;

pub struct BotEnv {
    pub home: PathBuf,
    pub api_url: String,
    pub llm_url: String,
    pub allowed: String,
    pub extra: Vec<(String, String)>,
    /// Configure Telegram (the default); off for a bot that serves only Slack.
    pub telegram: bool,
    /// The warden binary: this build's, unless a bench compares another.
    pub binary: PathBuf,
}

impl BotEnv {
    pub fn new(home: &Path, api_url: String, llm_url: String) -> BotEnv {
        BotEnv {
            home: home.to_path_buf(),
            api_url,
            llm_url,
            allowed: OWNER.to_string(),
            extra: vec![("RUST_LOG".into(), "warden=info".into())],
            telegram: true,
            binary: PathBuf::from(env!("CARGO_BIN_EXE_warden")),
        }
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("ANTHROPIC_BASE_URL", &self.llm_url)
            .env("ANTHROPIC_API_KEY", "test-key")
            .arg("bot");
        if self.telegram {
            cmd.env("TELEGRAM_BOT_TOKEN", TOKEN)
                .env("TELEGRAM_API_URL", &self.api_url)
                .env("TELEGRAM_ALLOWED_USERS", &self.allowed);
        }
        for (k, v) in &self.extra {
            cmd.env(k, v);
        }
        cmd
    }

    /// Write `~/.warden/config.toml`.
    pub fn write_config(&self, toml: &str) {
        let dir = self.home.join(".warden");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), toml).unwrap();
    }
}

pub struct BotProcess {
    child: Child,
    stderr: Capture,
}

impl BotProcess {
    pub fn start(env: &BotEnv) -> BotProcess {
        BotProcess::spawn(env.command())
    }

    /// Run `command` (a warden daemon: `bot`, `serve`), collecting its stderr.
    pub fn spawn(mut command: Command) -> BotProcess {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting warden");
        let stderr = Capture::start(child.stderr.take().unwrap());
        BotProcess { child, stderr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Wait until the log holds `needle` and return it: a line can come through the stderr
    /// pipe after the chat already heard what it records. Panics with the log after `timeout`.
    pub async fn wait_for_log(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.stderr();
            if log.contains(needle) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "the log never said {needle:?}:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait for the exit (panics after `timeout`).
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        self.wait(timeout)
    }

    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // So that `stderr()` holds the last lines.
                self.stderr.drain(Duration::from_secs(5));
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "warden bot did not exit in {timeout:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for BotProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
