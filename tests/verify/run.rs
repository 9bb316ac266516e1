//! `warden run` with a scripted model: the command the model runs plants a hook through a
//! policy fooled about where `cp` writes; warden undoes it, the model is told the command was
//! refused (naming the file), and the user's own git runs nothing afterwards.

use crate::host_git as git;
use crate::support::command_model;
use crate::support::fake_llm::FakeLlm;
use crate::support::warden_run::{audit_all, warden_run, workspace, write_config};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_planted_in_warden_run_is_undone_and_the_model_is_told() {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("skipped: git is not installed on this machine");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = workspace(home.path());
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, outside.path(), &["init", "-q"]);
    git(
        &ws,
        outside.path(),
        &["commit", "-q", "--allow-empty", "-m", "init"],
    );
    let marker = outside.path().join("ran");
    std::fs::write(
        ws.join("hook.sh"),
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(ws.join("hook.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let policy = outside.path().join("fooled.toml");
    std::fs::write(&policy, "[programs.cp]\nargs = \"value\"\n").unwrap();
    write_config(
        home.path(),
        &format!("policy = {:?}\n", policy.display().to_string()),
    );
    let llm = FakeLlm::anthropic_with(command_model::script).await;

    let out = warden_run(home.path(), &llm, "run: cp hook.sh .git/hooks/pre-commit").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("refused after it ran"), "{out:?}");
    assert!(stdout.contains(".git/hooks/pre-commit: created"), "{out:?}");
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    let row = audit_all(home.path())
        .into_iter()
        .rev()
        .find(|r| r.tool == "bash")
        .expect("an audit row");
    assert_eq!(row.decision, "deny", "{row:?}");
    assert!(row.reason.contains(".git/hooks/pre-commit"), "{row:?}");
    git(
        &ws,
        outside.path(),
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    assert!(!marker.exists(), "the user's git ran the planted hook");
}
