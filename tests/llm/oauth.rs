//! Signing in with OAuth through the real binary: `warden login` against a fake authorization
//! server on 127.0.0.1 (loopback and paste flows, PKCE checked by the server, a forged state
//! refused), then `warden run` against the fake LLM: the bearer token goes first, an expiring
//! one is refreshed before the request, two processes refresh once, a revoked sign-in is one
//! clear line, and the token reaches neither the logs nor a sandbox.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::fake_oauth::FakeOAuth;
use crate::support::warden_run::write_config;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn warden(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd
}

/// A config whose only provider is Anthropic at the fake LLM, signed in through the fake
/// server, and no API key anywhere.
fn configure(home: &Path, llm: &FakeLlm, oauth: &FakeOAuth) {
    write_config(
        home,
        &format!(
            "[llm]\nproviders = [\"anthropic\"]\n\n[llm.anthropic]\nbase_url = \"{}\"\n\n{}",
            llm.base_url(),
            oauth.config_block("anthropic")
        ),
    );
}

fn token_file(home: &Path) -> PathBuf {
    home.join(".warden/oauth/anthropic.json")
}

fn stored_access(home: &Path) -> String {
    let text = std::fs::read_to_string(token_file(home)).unwrap();
    let tokens: serde_json::Value = serde_json::from_str(&text).unwrap();
    tokens["access_token"].as_str().unwrap().to_string()
}

/// `warden login anthropic FLAG` started, and the URL it asks the user to open.
struct Login {
    child: Child,
    url: String,
    stderr: mpsc::Receiver<String>,
}

fn start_login(home: &Path, flag: &str) -> Login {
    let mut child = warden(home)
        .args(["login", "anthropic", flag])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let url = loop {
        let line = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no URL from warden login: {seen:?}"));
        if let Some(url) = line.trim().strip_prefix("http") {
            break format!("http{url}");
        }
        seen.push(line);
    };
    Login {
        child,
        url,
        stderr: rx,
    }
}

impl Login {
    fn finish(self) -> (Output, String) {
        let output = self.child.wait_with_output().unwrap();
        // The reader thread may still hold the last lines: take them until the pipe's end
        // closes the channel.
        let mut rest = Vec::new();
        let deadline = std::time::Instant::now() + WAIT;
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) => rest.push(line),
                Err(_) => break,
            }
        }
        (output, rest.join("\n"))
    }
}

/// The browser goes to `location` (warden's loopback listener); returns status and page.
async fn browse(location: &str) -> (u16, String) {
    let response = reqwest::get(location).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn login_by_paste(home: &Path, oauth: &FakeOAuth) {
    let mut login = start_login(home, "--paste");
    let location = oauth.authorize(&login.url).await;
    let mut stdin = login.child.stdin.take().unwrap();
    writeln!(stdin, "{location}").unwrap();
    drop(stdin);
    let (out, rest) = tokio::task::spawn_blocking(move || login.finish())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{rest}");
}

async fn run(home: &Path, prompt: &str) -> Output {
    let mut cmd = warden(home);
    cmd.env("RUST_LOG", "trace").args(["run", prompt]);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn bearer(request: &Request) -> String {
    request.header("authorization").unwrap_or("").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_login_stores_the_tokens_and_the_model_gets_the_bearer_token() {
    let oauth = FakeOAuth::start().await;
    let llm = FakeLlm::anthropic(vec![Turn::text("hello from the model")]).await;
    let home = tempfile::tempdir().unwrap();
    configure(home.path(), &llm, &oauth);

    let login = start_login(home.path(), "--loopback");
    let location = oauth.authorize(&login.url).await;
    assert!(
        location.starts_with("http://127.0.0.1:") && location.contains("/callback?code="),
        "{location}"
    );
    let (status, page) = browse(&location).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("signed in"), "{page}");
    let (out, rest) = tokio::task::spawn_blocking(move || login.finish())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{rest}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Signed in to anthropic"));
    // The server saw the verifier (it checks it against the challenge) and the same redirect.
    let exchange = &oauth.token_requests()[0];
    assert_eq!(exchange["grant_type"], "authorization_code");
    assert_eq!(exchange["code_verifier"].len(), 43);
    assert!(oauth.refused().is_empty(), "{:?}", oauth.refused());
    let mode = std::fs::metadata(token_file(home.path()))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let access = stored_access(home.path());

    let out = run(home.path(), "hi").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "hello from the model"
    );
    let request = &llm.requests()[0];
    assert_eq!(bearer(request), format!("Bearer {access}"));
    assert!(request.header("x-api-key").is_none());
    assert!(!stderr.contains("access-secret") && !stderr.contains("refresh-secret"));

    let status = warden(home.path())
        .args(["login", "--status"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(
        shown.starts_with("anthropic: signed in, token valid until "),
        "{shown}"
    );
    let doctor = warden(home.path())
        .args(["doctor", "--offline"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        shown.contains("anthropic: OAuth sign-in (warden login anthropic)"),
        "{shown}"
    );
    let out = warden(home.path())
        .args(["logout", "anthropic"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Signed out of anthropic"));
    assert!(!token_file(home.path()).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_with_another_state_is_refused() {
    let oauth = FakeOAuth::start().await;
    let llm = FakeLlm::anthropic(vec![]).await;
    let home = tempfile::tempdir().unwrap();
    configure(home.path(), &llm, &oauth);
    let login = start_login(home.path(), "--loopback");
    let location = oauth.authorize(&login.url).await;
    let mut forged = url::Url::parse(&location).unwrap();
    let pairs: Vec<(String, String)> = forged
        .query_pairs()
        .into_owned()
        .map(|(k, v)| {
            if k == "state" {
                (k, "forged".into())
            } else {
                (k, v)
            }
        })
        .collect();
    forged.query_pairs_mut().clear().extend_pairs(pairs);
    let (status, _) = browse(forged.as_str()).await;
    assert_eq!(status, 400);
    let (out, rest) = tokio::task::spawn_blocking(move || login.finish())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{rest}");
    assert!(rest.contains("state does not match"), "{rest}");
    assert!(
        oauth.token_requests().is_empty(),
        "the code was not exchanged"
    );
    assert!(!token_file(home.path()).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paste_login_then_an_expiring_token_is_refreshed_before_the_request() {
    let oauth = FakeOAuth::start().await;
    let llm = FakeLlm::anthropic(vec![Turn::text("fresh")]).await;
    let home = tempfile::tempdir().unwrap();
    configure(home.path(), &llm, &oauth);
    // The first token expires within the minute warden refreshes ahead of.
    oauth.set_expires_in(30);
    login_by_paste(home.path(), &oauth).await;
    let old = stored_access(home.path());
    oauth.set_expires_in(3600);

    let out = run(home.path(), "hi").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(oauth.refreshes(), 1);
    let new = stored_access(home.path());
    assert_ne!(new, old);
    assert_eq!(bearer(&llm.requests()[0]), format!("Bearer {new}"));
    assert!(stderr.contains("refreshed the OAuth token"), "{stderr}");
    for secret in [&old, &new] {
        assert!(!stderr.contains(secret.as_str()), "a token in the log");
    }
    assert!(
        !stderr.contains("refresh-secret"),
        "a refresh token in the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_that_need_a_refresh_make_one_token_request() {
    let oauth = FakeOAuth::start().await;
    let llm = FakeLlm::anthropic_with(|_: &Request| Turn::text("ok")).await;
    let home = tempfile::tempdir().unwrap();
    configure(home.path(), &llm, &oauth);
    oauth.set_expires_in(30);
    login_by_paste(home.path(), &oauth).await;
    oauth.set_expires_in(3600);
    // A slow refresh: the second process waits on the lock while the first one refreshes.
    oauth.set_refresh_delay(Duration::from_millis(1500));
    let (a, b) = tokio::join!(run(home.path(), "one"), run(home.path(), "two"));
    for out in [&a, &b] {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // One refresh (a second one would have spent a rotated token and failed).
    assert_eq!(oauth.refreshes(), 1, "{:?}", oauth.token_requests());
    assert!(oauth.refused().is_empty(), "{:?}", oauth.refused());
    let new = format!("Bearer {}", stored_access(home.path()));
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| bearer(r) == new));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_sign_in_is_one_line_saying_to_log_in_again() {
    let oauth = FakeOAuth::start().await;
    let llm = FakeLlm::anthropic(vec![Turn::text("never")]).await;
    let home = tempfile::tempdir().unwrap();
    configure(home.path(), &llm, &oauth);
    oauth.set_expires_in(30);
    login_by_paste(home.path(), &oauth).await;
    oauth.revoke_refresh_tokens();
    // A key in the environment is not used instead of the failed sign-in.
    let mut cmd = warden(home.path());
    cmd.env("ANTHROPIC_API_KEY", "sk-fallback-key")
        .args(["run", "hi"]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("warden login anthropic"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("anthropic: the sign-in was revoked or has expired"),
        "{stderr}"
    );
    assert_eq!(llm.request_count(), 0, "no request with another credential");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_never_reaches_a_sandbox() {
    let oauth = FakeOAuth::start().await;
    let home = tempfile::tempdir().unwrap();
    let file = token_file(home.path());
    let llm = FakeLlm::anthropic(vec![
        // (A whole-environment dump is refused by the policy itself; these are the names a
        // token would go by.)
        Turn::tool_use(
            "bash",
            json!({"command": "printenv HOME ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN OPENAI_API_KEY"}),
        ),
        Turn::tool_use(
            "bash",
            json!({"command": format!("cat {}", file.display())}),
        ),
        Turn::text("done"),
    ])
    .await;
    configure(home.path(), &llm, &oauth);
    login_by_paste(home.path(), &oauth).await;
    let access = stored_access(home.path());
    let out = run(home.path(), "look around").await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let env = requests[1].tool_results().pop().unwrap().content;
    assert!(
        env.contains(".warden"),
        "the environment was printed: {env}"
    );
    let cat = requests[2].tool_results().pop().unwrap().content;
    eprintln!("reading the token file from the sandbox: {cat}");
    for seen in [&env, &cat] {
        assert!(
            !seen.contains(&access),
            "the token reached the sandbox: {seen}"
        );
        assert!(!seen.contains("refresh-secret"), "{seen}");
    }
    // Past the policy, the jail alone keeps the file out of reach too.
    let workspace = home.path().join(".warden/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let jailed = warden(home.path())
        .arg("jail")
        .arg("--workspace")
        .arg(&workspace)
        .arg("--")
        .arg("/bin/cat")
        .arg(&file)
        .output()
        .unwrap();
    assert_ne!(jailed.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&jailed.stdout).contains(&access));
}
