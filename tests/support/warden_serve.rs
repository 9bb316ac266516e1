//! The real `warden serve` as a child process (HOME in a temp dir, the model a fake, the API
//! token from the environment, a fixed free port on 127.0.0.1 so a restart listens on the
//! same one), and a small JSON client for its API.

use super::warden_bot::BotProcess;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const API_TOKEN: &str = "test-http-token-0123456789";

pub struct ServeEnv {
    pub home: PathBuf,
    pub llm_url: String,
    pub port: u16,
    pub extra: Vec<(String, String)>,
}

/// A port nothing listens on now (the kernel's choice, released at once).
pub fn free_port() -> u16 {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap().port()
}

impl ServeEnv {
    pub fn new(home: &Path, llm_url: String) -> ServeEnv {
        ServeEnv {
            home: home.to_path_buf(),
            llm_url,
            port: free_port(),
            extra: vec![
                ("RUST_LOG".into(), "warden=info".into()),
                ("WARDEN_HTTP_TOKEN".into(), API_TOKEN.into()),
            ],
        }
    }

    /// `warden serve --listen 127.0.0.1:PORT` with no Telegram in its environment.
    pub fn command(&self) -> Command {
        self.command_on(&format!("127.0.0.1:{}", self.port))
    }

    /// `warden serve --listen ADDR`.
    pub fn command_on(&self, listen: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("ANTHROPIC_BASE_URL", &self.llm_url)
            .env("ANTHROPIC_API_KEY", "test-key")
            .args(["serve", "--listen", listen]);
        for (k, v) in &self.extra {
            cmd.env(k, v);
        }
        cmd
    }

    pub fn start(&self) -> BotProcess {
        BotProcess::spawn(self.command())
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> Client {
        Client::new(&self.base_url(), Some(API_TOKEN))
    }

    /// Write `~/.warden/config.toml`.
    pub fn write_config(&self, toml: &str) {
        let dir = self.home.join(".warden");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), toml).unwrap();
    }
}

/// A JSON client for the API; `token` goes in `Authorization: Bearer`.
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub token: Option<String>,
}

/// A response: status, headers, the body parsed as JSON (`Null` when it is not JSON).
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Client {
    pub fn new(base: &str, token: Option<&str>) -> Client {
        Client {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            base: base.to_string(),
            token: token.map(str::to_string),
        }
    }

    pub fn with_token(&self, token: Option<&str>) -> Client {
        Client {
            http: self.http.clone(),
            base: self.base.clone(),
            token: token.map(str::to_string),
        }
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request.send().await.expect("the API answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        Reply {
            status,
            headers,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    /// A body that is not JSON (`/metrics`), with the token; panics unless 200.
    pub async fn get_text(&self, path: &str) -> String {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the API answers");
        assert_eq!(response.status(), 200, "{path}");
        response.text().await.unwrap()
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body))
            .await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(self.http.delete(format!("{}{path}", self.base)))
            .await
    }

    /// Poll `GET /v1/runs?thread=` until a run of `thread` passes `done`; that run.
    pub async fn wait_thread_run(
        &self,
        thread: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let list = self.get(&format!("/v1/runs?thread={thread}")).await.body;
            if let Some(run) = list["runs"]
                .as_array()
                .and_then(|runs| runs.iter().find(|r| done(r)))
            {
                return run.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no such run on thread {thread}: {list}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait until `/healthz` answers (the process has bound its port and recovered).
    pub async fn wait_healthy(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let tried = self.http.get(format!("{}/healthz", self.base)).send().await;
            if tried.as_ref().is_ok_and(|r| r.status().is_success()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "warden serve did not come up: {tried:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Post `text` on `thread`; the run's id.
    pub async fn message(&self, thread: &str, text: &str) -> String {
        let reply = self
            .post(
                "/v1/messages",
                serde_json::json!({ "thread": thread, "text": text }),
            )
            .await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        reply.body["run_id"].as_str().unwrap().to_string()
    }

    /// Poll run `id` until `done` holds for it; the run.
    pub async fn wait_run(
        &self,
        id: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let run = self.get(&format!("/v1/runs/{id}")).await.body;
            if done(&run) {
                return run;
            }
            assert!(Instant::now() < deadline, "run {id} stayed {run}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Poll until run `id` has status `status`.
    pub async fn wait_status(&self, id: &str, status: &str, timeout: Duration) -> Value {
        self.wait_run(id, timeout, |run| run["status"] == status)
            .await
    }

    /// Read `GET /v1/runs/{id}/events` to its end: each event's name and JSON data.
    pub async fn events(&self, id: &str) -> Vec<(String, Value)> {
        use futures::StreamExt;
        let response = self
            .http
            .get(format!("{}/v1/runs/{id}/events", self.base))
            .bearer_auth(self.token.as_deref().unwrap_or_default())
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .expect("the event stream opens");
        assert_eq!(response.status(), 200);
        let mut stream = response.bytes_stream();
        let mut text = String::new();
        while let Some(chunk) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.expect("the stream reads")));
        }
        text.split("\n\n")
            .filter_map(|block| {
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim_start().to_string())
                };
                let name = field("event:")?;
                let data = field("data:").unwrap_or_default();
                Some((name, serde_json::from_str(&data).unwrap_or(Value::Null)))
            })
            .collect()
    }

    /// Wait for the approval request of run `id`.
    pub async fn wait_approval(&self, run_id: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let list = self.get("/v1/approvals").await.body;
            if let Some(found) = list["approvals"]
                .as_array()
                .and_then(|all| all.iter().find(|a| a["run_id"] == run_id))
            {
                return found.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no approval for run {run_id}: {list}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Parse the Prometheus / OpenMetrics text format strictly enough to catch a malformed
/// exposition: every sample line is `name{label="value",…} number`, comments are `# HELP`,
/// `# TYPE`, `# UNIT` or the final `# EOF`. Samples are keyed by their line's text before the
/// value (`warden_runs{status="queued"}`).
pub fn parse_metrics(text: &str) -> std::collections::HashMap<String, f64> {
    let mut samples = std::collections::HashMap::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.last(),
        Some(&"# EOF"),
        "the exposition ends with # EOF"
    );
    for line in &lines[..lines.len() - 1] {
        if let Some(comment) = line.strip_prefix("# ") {
            let kind = comment.split(' ').next().unwrap_or("");
            assert!(["HELP", "TYPE", "UNIT"].contains(&kind), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}: a number"));
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line}: a metric name"
        );
        if name_end < series.len() {
            let labels = series[name_end..]
                .strip_prefix('{')
                .and_then(|l| l.strip_suffix('}'))
                .unwrap_or_else(|| panic!("{line}: labels in braces"));
            for pair in labels.split(',') {
                let (key, value) = pair.split_once('=').expect("label=value");
                assert!(key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
                assert!(value.starts_with('"') && value.ends_with('"'), "{line}");
            }
        }
        samples.insert(series.to_string(), value);
    }
    samples
}
