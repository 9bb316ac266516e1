//! `warden cron` through the real binary, and the agent's `cron` tool in `warden run` against
//! the fake LLM: one store, one set of checks.

use crate::support::fake_llm::{FakeLlm, Turn};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

fn warden(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TELEGRAM_ALLOWED_USERS", "42");
    cmd
}

fn cron(home: &Path, args: &[&str]) -> Output {
    warden(home).arg("cron").args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn list(home: &Path) -> Vec<Value> {
    let out = cron(home, &["list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_str::<Value>(&stdout(&out))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn add_list_run_status_remove() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let out = cron(
        home,
        &[
            "add",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Europe/Berlin",
            "--name",
            "brief",
            "--",
            "Summarize",
            "my",
            "day",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out)
            .starts_with("Scheduled #1 \"brief\" cron 0 9 * * 1-5 (Europe/Berlin) → telegram:42"),
        "{}",
        stdout(&out)
    );
    let out = cron(
        home,
        &[
            "add",
            "--at",
            "+2h",
            "--new-session",
            "--keep",
            "call the dentist",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let jobs = list(home);
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0]["prompt"], "Summarize my day");
    assert_eq!(jobs[0]["timezone"], "Europe/Berlin");
    assert_eq!(jobs[0]["session"], "telegram:42");
    assert_eq!(jobs[1]["kind"], "at");
    assert_eq!(jobs[1]["fresh_session"], true);
    assert_eq!(jobs[1]["delete_after_run"], false);

    let out = cron(home, &["run", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("Job #2 is due now"));
    let due = chrono::DateTime::parse_from_rfc3339(list(home)[1]["next_run_at"].as_str().unwrap())
        .unwrap();
    assert!(due <= chrono::Utc::now());

    let out = cron(home, &["status", "1"]);
    assert!(
        stdout(&out).contains("Prompt: Summarize my day"),
        "{}",
        stdout(&out)
    );
    let out = cron(home, &["rm", "1"]);
    assert_eq!(stdout(&out).trim(), "Removed job #1 \"brief\".");
    assert_eq!(list(home).len(), 1);
}

#[test]
fn a_job_can_answer_in_a_topic_of_a_telegram_chat_only() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let out = cron(home, &["add", "--every", "1d", "--topic", "9", "water"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = cron(
        home,
        &[
            "add",
            "--every",
            "1d",
            "--session",
            "telegram:-1007",
            "--topic",
            "3",
            "--new-session",
            "feed",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let jobs = list(home);
    assert_eq!(jobs[0]["session"], "telegram:42:9");
    assert_eq!(jobs[1]["session"], "telegram:-1007:3");
    assert_eq!(jobs[1]["fresh_session"], true);
    for (args, why) in [
        (vec!["--topic", "0"], "a topic is a positive number"),
        (
            vec!["--session", "terminal:cron", "--topic", "3"],
            "needs a Telegram chat",
        ),
        (
            vec!["--session", "telegram:42:9", "--topic", "3"],
            "is a topic already",
        ),
    ] {
        let mut all = vec!["add", "--every", "1d"];
        all.extend(args);
        all.push("x");
        let out = cron(home, &all);
        assert_eq!(out.status.code(), Some(1), "{all:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(why), "{all:?}: {}", stderr(&out));
    }
    assert_eq!(list(home).len(), 2);
}

#[test]
fn refusals_exit_1_with_the_reason_and_config_errors_exit_2() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    for (args, reason) in [
        (vec!["add", "--cron", "0 9 * *", "x"], "has 4"),
        (
            vec!["add", "--at", "2020-01-01T00:00:00Z", "x"],
            "is not in the future",
        ),
        (vec!["add", "--every", "10s", "x"], "minimum interval of 1m"),
        (
            vec!["add", "--every", "1h", "--cron", "0 9 * * *", "x"],
            "not every and cron",
        ),
        (
            vec!["add", "--cron", "0 9 * * *", "--tz", "Berlin", "x"],
            "unknown time zone",
        ),
        (vec!["rm", "7"], "no job #7"),
        (vec!["run", "7"], "no job #7"),
    ] {
        let out = cron(home, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(reason), "{args:?}: {}", stderr(&out));
    }
    // No owner configured and no --session: the job is for `warden daemon` (terminal:cron).
    let out = warden(home)
        .env_remove("TELEGRAM_ALLOWED_USERS")
        .args(["cron", "add", "--every", "1h", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("terminal:cron"), "{}", stdout(&out));
    // A bad [scheduler] section is a config error.
    std::fs::create_dir_all(home.join(".warden")).unwrap();
    std::fs::write(
        home.join(".warden/config.toml"),
        "[scheduler]\nactive_hours = [\"8-22\"]\n",
    )
    .unwrap();
    let out = cron(home, &["list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("scheduler.active_hours"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn the_agent_schedules_with_the_cron_tool_and_the_cli_sees_it() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use(
            "cron",
            json!({"action": "add", "every": "1d", "prompt": "Check the backups.", "name": "backups"}),
        ),
        Turn::tool_use("cron", json!({"action": "add", "cron": "0 9 * *", "prompt": "x"})),
        Turn::text("Scheduled a daily backup check."),
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
                .args(["run", "check my backups every day"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The tool is offered to the model, and its results come back.
    let tools = llm.requests()[0].body["tools"].clone();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "cron"),
        "{tools}"
    );
    let added = llm.requests()[1].tool_results().pop().unwrap();
    assert!(!added.is_error, "{}", added.content);
    assert!(
        added.content.contains("Scheduled #1 \"backups\" every 1d"),
        "{}",
        added.content
    );
    let refused = llm.requests()[2].tool_results().pop().unwrap();
    assert!(
        refused.is_error && refused.content.contains("has 4"),
        "{}",
        refused.content
    );
    // The job targets the session the agent ran in, and the CLI reads the same store.
    let jobs = list(home.path());
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["name"], "backups");
    assert!(
        jobs[0]["session"].as_str().unwrap().starts_with("run:"),
        "{}",
        jobs[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_telegram_warden_daemon_runs_the_jobs_and_prints_their_answers() {
    let llm = FakeLlm::anthropic(vec![Turn::text("Good morning: the backups ran.")]).await;
    let home = tempfile::tempdir().unwrap();
    let add = warden(home.path())
        .env_remove("TELEGRAM_ALLOWED_USERS")
        .args([
            "cron",
            "add",
            "--every",
            "1h",
            "--name",
            "morning",
            "check the backups",
        ])
        .output()
        .unwrap();
    assert_eq!(add.status.code(), Some(0), "{}", stderr(&add));
    let jobs = list(home.path());
    assert_eq!(jobs[0]["session"], "terminal:cron", "{jobs:?}");
    let id = jobs[0]["id"].as_i64().unwrap().to_string();
    assert_eq!(cron(home.path(), &["run", &id]).status.code(), Some(0));

    let mut daemon = warden(home.path())
        .env_remove("TELEGRAM_ALLOWED_USERS")
        .env("ANTHROPIC_BASE_URL", llm.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .arg("daemon")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while llm.request_count() == 0 {
        assert!(std::time::Instant::now() < deadline, "the job never ran");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Let the answer be printed, then stop it as a service manager would.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let _ = &mut daemon;
        daemon.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = stdout(&out);
    assert!(printed.contains("job #1 \"morning\""), "{printed}");
    assert!(
        printed.contains("Good morning: the backups ran."),
        "{printed}"
    );
    assert!(llm.requests()[0]
        .last_user_text()
        .contains("check the backups"));
}
