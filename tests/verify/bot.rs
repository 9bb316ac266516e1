//! `warden bot` (fake Bot API, scripted model): a command the model runs plants a hook, in the
//! foreground and in the background; warden stops it, undoes it and says so in the chat.

use crate::host_git as git;
use crate::support::command_model;
use crate::support::fake_llm::FakeLlm;
use crate::support::fake_telegram::FakeTelegram;
use crate::support::procs::descendants;
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use crate::support::warden_run::audit_all;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

struct Bot {
    tg: FakeTelegram,
    _llm: FakeLlm,
    bot: BotProcess,
    home: tempfile::TempDir,
    _outside: tempfile::TempDir,
    marker: PathBuf,
}

async fn start() -> Option<Bot> {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("skipped: git is not installed on this machine");
        return None;
    }
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::anthropic_with(command_model::script).await;
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = home.path().join(".warden/workspace");
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, outside.path(), &["init", "-q"]);
    std::fs::write(ws.join("data.txt"), "one\n").unwrap();
    git(&ws, outside.path(), &["add", "data.txt"]);
    git(&ws, outside.path(), &["commit", "-qm", "init"]);
    let marker = outside.path().join("ran");
    std::fs::write(
        ws.join("hook.sh"),
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(ws.join("hook.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A policy blind to where cp writes, as a program may blind the real one.
    let policy = outside.path().join("fooled.toml");
    std::fs::write(&policy, "[programs.cp]\nargs = \"value\"\n").unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    env.write_config(&format!("policy = {:?}\n", policy.display().to_string()));
    let bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    Some(Bot {
        tg,
        _llm: llm,
        bot,
        home,
        _outside: outside,
        marker,
    })
}

impl Bot {
    fn ws(&self) -> PathBuf {
        self.home.path().join(".warden/workspace")
    }

    fn results(&self) -> Vec<String> {
        self.tg
            .messages_to(OWNER)
            .into_iter()
            .filter(|m| m.visible.starts_with("result:"))
            .map(|m| m.visible)
            .collect()
    }

    async fn next_result(&self, before: usize) -> String {
        self.tg
            .wait_until("a result", WAIT, |t| {
                t.messages_to(OWNER)
                    .iter()
                    .filter(|m| m.visible.starts_with("result:"))
                    .count()
                    > before
            })
            .await;
        self.results()[before].clone()
    }

    async fn ask(&self, text: &str) -> String {
        let before = self.results().len();
        self.tg.push_text(OWNER, OWNER, text);
        self.next_result(before).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_planted_by_the_model_is_undone_refused_and_audited() {
    let Some(b) = start().await else { return };
    let result = b.ask("run: cp hook.sh .git/hooks/pre-commit").await;
    assert!(result.contains("refused after it ran"), "{result}");
    assert!(
        result.contains(".git/hooks/pre-commit: created"),
        "{result}"
    );
    assert!(!b.ws().join(".git/hooks/pre-commit").exists());
    let row = audit_all(b.home.path())
        .into_iter()
        .rev()
        .find(|r| r.tool == "bash")
        .expect("an audit row");
    assert_eq!(row.decision, "deny", "{row:?}");
    assert!(row.reason.contains(".git/hooks/pre-commit"), "{row:?}");
    git(
        &b.ws(),
        b._outside.path(),
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    assert!(!b.marker.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_command_is_killed_when_it_plants_a_hook_and_the_chat_is_told() {
    let Some(b) = start().await else { return };
    let started = b
        .ask("bg: cp hook.sh .git/hooks/pre-commit; sleep 120")
        .await;
    assert!(started.contains("Started background command"), "{started}");
    let before = b.results().len();
    let notice = b.next_result(before).await;
    assert!(notice.contains("refused after it ran"), "{notice}");
    assert!(notice.contains(".git/hooks/pre-commit"), "{notice}");
    assert!(!b.ws().join(".git/hooks/pre-commit").exists());
    // Killed at once, not at the end of its two minutes.
    let sleeping = descendants(b.bot.pid())
        .into_iter()
        .filter(|(_, c)| c == "sleep")
        .count();
    assert_eq!(sleeping, 0, "the command still runs");
    git(
        &b.ws(),
        b._outside.path(),
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    assert!(!b.marker.exists());
}
