//! Failover between real clients, and building providers from the config as `warden` does.

use crate::support::fake_llm::{Block, FakeLlm, Turn};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use warden::config::{Config, EnvSource};
use warden::llm::{
    from_config, ChatRequest, Failover, LlmError, Message, NoEvents, Provider, StreamEvent,
};

fn ask() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    }
}

async fn chat(provider: &dyn Provider) -> Result<warden::llm::ChatResponse, LlmError> {
    provider
        .chat(&ask(), &NoEvents, &CancellationToken::new())
        .await
}

#[tokio::test]
async fn the_second_provider_answers_when_the_first_is_overloaded() {
    let first =
        FakeLlm::anthropic(vec![Turn::error(529), Turn::error(529), Turn::error(529)]).await;
    let second = FakeLlm::openai(vec![Turn::text("from the backup")]).await;
    let failover = Failover::new(vec![first.provider(), second.provider()]);
    assert_eq!(failover.name(), "anthropic,openai");
    let resp = chat(&failover).await.unwrap();
    assert_eq!(resp.text(), "from the backup");
    assert_eq!(resp.provider, "openai");
    assert_eq!(
        first.request_count(),
        3,
        "the first provider used its retries"
    );
    assert_eq!(second.request_count(), 1);
}

#[tokio::test]
async fn an_error_event_before_any_output_fails_over() {
    let first = FakeLlm::anthropic(vec![
        Turn::blocks(vec![]).stream_error("overloaded_error", "Overloaded")
    ])
    .await;
    let second = FakeLlm::anthropic(vec![Turn::text("second")]).await;
    let failover = Failover::new(vec![first.provider(), second.provider()]);
    assert_eq!(chat(&failover).await.unwrap().text(), "second");
}

#[tokio::test]
async fn a_failure_after_output_is_not_failed_over() {
    let first = FakeLlm::anthropic(vec![Turn::blocks(vec![Block::text("I will start answ")])
        .stream_error("api_error", "Internal server error")])
    .await;
    let second = FakeLlm::openai(vec![Turn::text("a second, different answer")]).await;
    let failover = Failover::new(vec![first.provider(), second.provider()]);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let err = failover
        .chat(&ask(), &tx, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Stream { .. }), "{err:?}");
    assert_eq!(second.request_count(), 0);
    assert_eq!(
        rx.recv().await,
        Some(StreamEvent::TextDelta {
            text: "I will start answ".into()
        })
    );
}

#[tokio::test]
async fn when_all_fail_the_error_names_each_provider_and_cause() {
    let first = FakeLlm::anthropic(vec![Turn::error_message(401, "invalid x-api-key")]).await;
    let second = FakeLlm::openai(vec![Turn::error_message(404, "model `gpt-9` not found")]).await;
    let failover = Failover::new(vec![
        first.provider_with(
            first
                .settings()
                .with_api_key("fake-anthropic-key-do-not-print"),
        ),
        second.provider(),
    ]);
    let err = chat(&failover).await.unwrap_err();
    assert!(matches!(&err, LlmError::AllFailed(errors) if errors.len() == 2));
    let text = err.to_string();
    assert_eq!(
        text,
        "no LLM provider could answer: anthropic: HTTP 401 (1 attempt(s)): authentication_error: \
         invalid x-api-key; openai: HTTP 404 (1 attempt(s)): invalid_request_error: model \
         `gpt-9` not found"
    );
    assert!(!format!("{err:?}").contains("fake-anthropic-key-do-not-print"));
}

#[tokio::test]
async fn cancellation_is_never_failed_over() {
    let first = FakeLlm::anthropic(vec![Turn::text("slow").delay(Duration::from_secs(10))]).await;
    let second = FakeLlm::openai(vec![Turn::text("never")]).await;
    let failover = Failover::new(vec![first.provider(), second.provider()]);
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.cancel();
        })
    };
    let err = failover.chat(&ask(), &NoEvents, &cancel).await.unwrap_err();
    canceller.await.unwrap();
    assert!(err.is_cancelled());
    assert_eq!(second.request_count(), 0);
}

struct Env(HashMap<&'static str, String>);

impl EnvSource for Env {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

fn config_with(file: &str, env: &[(&'static str, String)]) -> Config {
    let mut config = Config::parse(file, Path::new("test.toml")).unwrap();
    config
        .apply_env(&Env(env.iter().cloned().collect()))
        .unwrap();
    config
}

#[tokio::test]
async fn providers_from_config_and_environment_fail_over_in_order() {
    let anthropic = FakeLlm::anthropic(vec![Turn::error_message(401, "invalid x-api-key")]).await;
    let local = FakeLlm::openai(vec![Turn::text("hello from a local model")]).await;
    let config = config_with(
        "[llm.openai]\nmodel = \"qwen2.5\"\n",
        &[
            ("ANTHROPIC_API_KEY", "fake-anthropic-key-from-env".into()),
            ("ANTHROPIC_BASE_URL", anthropic.base_url()),
            ("OPENAI_BASE_URL", local.base_url()),
        ],
    );
    let failover = from_config(&config.llm).unwrap();
    assert_eq!(failover.provider_names(), ["anthropic", "openai"]);
    let resp = chat(&failover).await.unwrap();
    assert_eq!(resp.text(), "hello from a local model");
    assert_eq!(
        anthropic.last_request().header("x-api-key"),
        Some("fake-anthropic-key-from-env")
    );
    let seen = local.last_request();
    assert_eq!(seen.body["model"], "qwen2.5");
    assert!(seen.header("authorization").is_none(), "no key configured");
}

#[tokio::test]
async fn provider_order_and_limits_come_from_the_config_file() {
    let anthropic = FakeLlm::anthropic(vec![Turn::text("claude")]).await;
    let openai = FakeLlm::openai(vec![Turn::text("gpt")]).await;
    let file = format!(
        "[llm]\nproviders = [\"openai\", \"anthropic\"]\n\
         [llm.anthropic]\napi_key = \"k1\"\nbase_url = \"{}\"\n\
         [llm.openai]\napi_key = \"k2\"\nbase_url = \"{}\"\nmax_tokens = 77\nmax_attempts = 1\n",
        anthropic.base_url(),
        openai.base_url()
    );
    let failover = from_config(&config_with(&file, &[]).llm).unwrap();
    assert_eq!(failover.provider_names(), ["openai", "anthropic"]);
    assert_eq!(chat(&failover).await.unwrap().text(), "gpt");
    let seen = openai.last_request();
    assert_eq!(seen.header("authorization"), Some("Bearer k2"));
    assert_eq!(seen.body["max_tokens"], 77);
    assert_eq!(anthropic.request_count(), 0);
}

#[test]
fn no_configured_provider_says_what_to_set() {
    let err = from_config(&config_with("", &[]).llm).err().unwrap();
    assert!(matches!(err, LlmError::NotConfigured(_)));
    assert_eq!(
        err.to_string(),
        "no LLM provider configured: set ANTHROPIC_API_KEY (llm.anthropic.api_key) or \
         OPENAI_API_KEY / OPENAI_BASE_URL (llm.openai.*) in ~/.warden/config.toml or the \
         environment"
    );
}
