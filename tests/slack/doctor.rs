//! `warden doctor` checks both Slack tokens with `auth.test` against the configured API.

use crate::support::fake_slack::{FakeSlack, APP_TOKEN, BOT_TOKEN, OWNER};
use std::process::Command;

/// `warden doctor --json --offline`-free run with `vars`; the `slack` check's (status, detail).
async fn slack_check(vars: Vec<(&'static str, String)>) -> (String, String) {
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_warden"))
            .args(["doctor", "--json"])
            .env_clear()
            .env("HOME", &home_path)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(vars)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let report: serde_json::Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        let check = report["setup"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "slack")
            .cloned()
            .unwrap_or_else(|| panic!("no slack check: {report}"));
        let text = |k: &str| check[k].as_str().unwrap_or_default().to_string();
        (
            text("status"),
            format!("{} {}", text("detail"), text("fix")),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_both_tokens() {
    let slack = FakeSlack::start().await;
    let vars = |app: &str, bot: &str| {
        vec![
            ("SLACK_APP_TOKEN", app.to_string()),
            ("SLACK_BOT_TOKEN", bot.to_string()),
            ("SLACK_ALLOWED_USERS", OWNER.to_string()),
            ("SLACK_API_URL", slack.api_url()),
        ]
    };
    let (status, detail) = slack_check(vars(APP_TOKEN, BOT_TOKEN)).await;
    assert_eq!(status, "ok", "{detail}");
    assert!(
        detail.contains("UWARDEN") && detail.contains("Test Team"),
        "{detail}"
    );
    let tokens: Vec<String> = slack
        .calls_of("auth.test")
        .into_iter()
        .map(|c| c.token)
        .collect();
    assert_eq!(tokens, [BOT_TOKEN, APP_TOKEN]);

    let (status, detail) = slack_check(vars("xapp-wrong", BOT_TOKEN)).await;
    assert_eq!(status, "fail");
    assert!(
        detail.contains("app token") && detail.contains("SLACK_APP_TOKEN"),
        "{detail}"
    );
    assert!(!detail.contains("xapp-wrong"), "{detail}");
    let (status, detail) = slack_check(vars(APP_TOKEN, "xoxb-wrong")).await;
    assert_eq!(status, "fail");
    assert!(
        detail.contains("bot token") && detail.contains("SLACK_BOT_TOKEN"),
        "{detail}"
    );

    let (status, _) = slack_check(Vec::new()).await;
    assert_eq!(status, "skip");
}
