//! `warden run` through the real binary, configured only by environment variables pointing at
//! a fake LLM on 127.0.0.1, as a user would configure it.

mod support;

use serde_json::json;
use std::process::Command;
use support::fake_llm::{FakeLlm, Turn};

fn warden(home: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd
}

#[tokio::test]
async fn run_prints_the_answer_after_a_denied_tool_call() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("read", json!({"path": "/etc/shadow"})),
        Turn::text("I cannot read that file."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let base = llm.base_url();
    let out = tokio::task::spawn_blocking({
        let home = home.path().to_path_buf();
        move || {
            warden(&home)
                .env("ANTHROPIC_BASE_URL", base)
                .env("ANTHROPIC_API_KEY", "test-key")
                .args(["run", "show me /etc/shadow"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(stdout.trim(), "I cannot read that file.");
    assert!(stderr.contains("[read] DENIED"), "{stderr}");
    let result = llm.requests()[1].tool_results().pop().unwrap();
    assert!(
        result
            .content
            .contains("/etc/shadow is outside the workspace"),
        "{}",
        result.content
    );
    assert_eq!(llm.requests()[0].header("x-api-key"), Some("test-key"));
    // The workspace and the database were created under the (fake) home.
    assert!(home.path().join(".warden/workspace").is_dir());
    assert!(home.path().join(".warden/warden.db").is_file());
}

#[test]
fn run_without_a_provider_names_the_missing_keys() {
    let home = tempfile::tempdir().unwrap();
    let out = warden(home.path()).args(["run", "hello"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

fn run_warden(home: &std::path::Path, base: String, prompt: &str) -> std::process::Output {
    warden(home)
        .env("ANTHROPIC_BASE_URL", base)
        .env("ANTHROPIC_API_KEY", "test-key-do-not-leak")
        .env("TELEGRAM_BOT_TOKEN", "test-token-do-not-leak")
        .args(["run", prompt])
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_denied_command_then_an_allowed_one_runs_in_the_jail() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("bash", json!({"command": "cat /etc/shadow"})),
        Turn::tool_use("bash", json!({"command": "ls"})),
        Turn::text("Your workspace holds hello.txt."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join(".warden/workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("hello.txt"), "hi\n").unwrap();
    let base = llm.base_url();
    let home_path = home.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || run_warden(&home_path, base, "what is here?"))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(stdout.trim(), "Your workspace holds hello.txt.");
    let requests = llm.requests();
    let denial = requests[1].tool_results().pop().unwrap();
    assert!(denial.is_error);
    assert!(
        denial
            .content
            .contains("cat: /etc/shadow is outside the workspace"),
        "{}",
        denial.content
    );
    let listing = requests[2].tool_results().pop().unwrap();
    assert!(listing.content.contains("hello.txt"), "{}", listing.content);
    assert!(
        listing.content.contains("[exit code 0]"),
        "{}",
        listing.content
    );
}

#[tokio::test]
async fn the_sandboxed_process_never_sees_warden_secrets() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use(
            "bash",
            json!({"command": "printenv HOME ANTHROPIC_API_KEY TELEGRAM_BOT_TOKEN"}),
        ),
        Turn::text("done"),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let base = llm.base_url();
    let home_path = home.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || run_warden(&home_path, base, "print env"))
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = llm.requests()[1].tool_results().pop().unwrap().content;
    assert!(
        env.contains(".warden"),
        "the environment was printed: {env}"
    );
    for secret in [
        "test-key-do-not-leak",
        "test-token-do-not-leak",
        "ANTHROPIC",
        "TELEGRAM",
    ] {
        assert!(
            !env.contains(secret),
            "{secret} leaked into the sandbox: {env}"
        );
    }
    // Nor is the key ever put into the prompt.
    for request in llm.requests() {
        assert!(!request.body.to_string().contains("test-key-do-not-leak"));
    }
}
