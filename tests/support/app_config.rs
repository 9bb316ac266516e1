//! A warden [`App`] for library-level tests: workspace and database under a temp dir, the
//! Anthropic provider aimed at a fake LLM, no retries (a scripted failure fails at once).

use std::path::Path;
use std::sync::Arc;
use warden::agent::{RunControl, RunOutcome, RunRequest};
use warden::app::App;
use warden::config::{Config, ProviderKind, Secret};
use warden::llm::ContentBlock;
use warden::tools::approval::NoApprover;

pub fn config(dir: &Path, llm_base_url: &str) -> Config {
    let mut config = Config {
        workspace: dir.join("ws"),
        data_dir: dir.join("data"),
        ..Config::default()
    };
    config.llm.providers = vec![ProviderKind::Anthropic];
    config.llm.anthropic.api_key = Secret::new("test-key");
    config.llm.anthropic.base_url = Some(llm_base_url.to_string());
    config.llm.anthropic.max_attempts = Some(1);
    config
}

/// One user message through the agent, nobody to approve `ask` commands.
pub async fn say(app: &App, session: &str, text: &str) -> RunOutcome {
    app.agent
        .run(RunRequest {
            session: session.to_string(),
            input: vec![ContentBlock::text(text)],
            approver: Arc::new(NoApprover),
            outbox: Arc::new(warden::tools::outbox::Nowhere::TERMINAL),
            events: Arc::new(|_| {}),
            control: RunControl::new(),
            background: warden::tools::background::ignore_background(),
            patience: None,
        })
        .await
        .expect("the run failed")
}
