//! The HTTP control API and the dashboard through the real binaries, against the fake LLM
//! (and the fake Bot API where Telegram shares the gateway). One module per topic.

#[path = "../support/mod.rs"]
mod support;

support::test_threads::waiting_suite!(6);

/// Only this suite drives a browser.
#[path = "../support/cdp.rs"]
mod cdp;

mod api;
mod bot;
mod dashboard;
mod grants;
mod jobs;

use std::time::Duration;
use support::command_model;
use support::fake_llm::{FakeLlm, Request, Turn};
use support::warden_bot::BotProcess;
use support::warden_serve::{Client, ServeEnv};

pub const WAIT: Duration = Duration::from_secs(30);

/// The command model (`run: CMD` calls bash), plus `slow…` prompts the model takes 30 s to
/// answer (a run that is surely still going) and anything else answered `answer: TEXT`.
pub async fn llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| {
        let (prompt, _) = req.prompt_and_step();
        if prompt.starts_with("run: ") || prompt.starts_with("bg: ") {
            return command_model::script(req);
        }
        let turn = Turn::text(format!("answer: {prompt}"));
        if prompt.starts_with("slow") {
            turn.delay(Duration::from_secs(30))
        } else {
            turn
        }
    })
    .await
}

pub struct Setup {
    pub llm: FakeLlm,
    pub env: ServeEnv,
    pub api: Client,
    pub serve: BotProcess,
    pub home: tempfile::TempDir,
}

pub async fn start(config: &str) -> Setup {
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join(".warden/workspace");
    for dir in ["somedir", "keepdir"] {
        std::fs::create_dir_all(workspace.join(dir)).unwrap();
        std::fs::write(workspace.join(dir).join("file.txt"), "x").unwrap();
    }
    let env = ServeEnv::new(home.path(), llm.base_url());
    if !config.is_empty() {
        env.write_config(config);
    }
    let serve = env.start();
    let api = env.client();
    api.wait_healthy(WAIT).await;
    Setup {
        llm,
        api,
        serve,
        env,
        home,
    }
}

impl Setup {
    pub fn workspace(&self) -> std::path::PathBuf {
        self.home.path().join(".warden/workspace")
    }

    /// How many model requests began a run of `prompt`.
    pub fn runs_of(&self, prompt: &str) -> usize {
        let firsts: Vec<(String, usize)> = self
            .llm
            .requests()
            .iter()
            .map(|r| r.prompt_and_step())
            .collect();
        eprintln!("model requests (prompt, step): {firsts:?}");
        firsts
            .iter()
            .filter(|(p, step)| p == prompt && *step == 0)
            .count()
    }
}
