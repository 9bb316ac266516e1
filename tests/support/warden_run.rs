//! The real `warden` binary with HOME in a temporary folder: `warden run` against a scripted
//! model, other subcommands, the config file, and the audit log it leaves.

use super::fake_llm::FakeLlm;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use warden::audit;

/// `warden run PROMPT` with HOME in `home`, the model at `llm` (nobody to approve).
pub async fn warden_run(home: &Path, llm: &FakeLlm, prompt: &str) -> Output {
    warden_run_with(home, llm, prompt, &[]).await
}

/// [`warden_run`] with more environment variables.
pub async fn warden_run_with(
    home: &Path,
    llm: &FakeLlm,
    prompt: &str,
    env: &[(&str, &str)],
) -> Output {
    let mut command = warden_run_command(home, &llm.base_url(), prompt);
    command.envs(env.iter().copied());
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// The command [`warden_run`] runs, for a test that starts it itself (to signal it, or bound
/// its memory).
pub fn warden_run_command(home: &Path, llm_url: &str, prompt: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ANTHROPIC_BASE_URL", llm_url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("RUST_LOG", "warden=debug")
        .args(["run", prompt]);
    command
}

/// `warden chat` with HOME in `home` and the model at `llm` (the caller sets its stdio).
pub fn warden_chat(home: &Path, llm: &FakeLlm) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ANTHROPIC_BASE_URL", llm.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .arg("chat");
    command
}

/// `warden ARGS…` with HOME in `home`.
pub fn warden(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(args)
        .output()
        .unwrap()
}

/// Write `~/.warden/config.toml`.
pub fn write_config(home: &Path, toml: &str) {
    std::fs::create_dir_all(home.join(".warden")).unwrap();
    std::fs::write(home.join(".warden/config.toml"), toml).unwrap();
}

/// The default workspace under `home`.
pub fn workspace(home: &Path) -> PathBuf {
    home.join(".warden/workspace")
}

/// The audit rows of `tool` (oldest first): (decision, input as JSON).
pub fn audit_rows(home: &Path, tool: &str) -> Vec<(String, Value)> {
    let db = warden::schema::open(&home.join(".warden/warden.db")).unwrap();
    audit::recent(&db, 500)
        .unwrap()
        .into_iter()
        .filter(|r| r.tool == tool)
        .map(|r| (r.decision, serde_json::from_str(&r.input).unwrap()))
        .collect()
}

/// Every audit row (oldest first).
pub fn audit_all(home: &Path) -> Vec<audit::AuditRow> {
    let db = warden::schema::open(&home.join(".warden/warden.db")).unwrap();
    audit::recent(&db, 500).unwrap()
}

/// Lines of `warden`'s log (at debug level) that show a name being resolved for egress.
pub fn lookups(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("web_fetch: resolving"))
        .collect()
}
