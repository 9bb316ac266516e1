//! Retries through the real client: which failures are retried, how long it waits, when it
//! gives up, and that nothing is retried once the answer has begun to stream.

mod support;

use std::time::{Duration, Instant};
use support::fake_llm::{quick_http, FakeLlm, Turn};
use tokio_util::sync::CancellationToken;
use warden::llm::{ChatRequest, LlmError, Message, NoEvents, OpenAi, Provider};

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
async fn overloaded_529_is_retried_until_it_answers() {
    let llm = FakeLlm::anthropic(vec![
        Turn::error(529),
        Turn::error(529),
        Turn::text("third time lucky"),
    ])
    .await;
    let resp = chat(llm.provider().as_ref()).await.unwrap();
    assert_eq!(resp.text(), "third time lucky");
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test]
async fn retries_stop_at_max_attempts_with_the_server_message() {
    let llm = FakeLlm::anthropic(vec![Turn::error(529), Turn::error(529), Turn::error(529)]).await;
    let err = chat(llm.provider().as_ref()).await.unwrap_err();
    assert_eq!(err.status(), Some(529));
    assert_eq!(
        err.to_string(),
        "anthropic: HTTP 529 (3 attempt(s)): overloaded_error: Overloaded"
    );
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test]
async fn rate_limit_retry_after_is_honored() {
    let llm = FakeLlm::openai(vec![
        Turn::error(429).retry_after("1"),
        Turn::text("after the wait"),
    ])
    .await;
    let resp = chat(llm.provider().as_ref()).await.unwrap();
    assert_eq!(resp.text(), "after the wait");
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at - requests[0].at;
    // quick_http's own backoff is at most 100 ms: only retry-after explains a 1 s wait.
    assert!(waited >= Duration::from_secs(1), "waited {waited:?}");
    assert!(waited < Duration::from_millis(1800), "waited {waited:?}");
}

#[tokio::test]
async fn retry_after_longer_than_the_cap_is_not_waited_for() {
    let llm = FakeLlm::anthropic(vec![
        Turn::error(429).retry_after("3600"),
        Turn::text("never"),
    ])
    .await;
    let started = Instant::now();
    let err = chat(llm.provider().as_ref()).await.unwrap_err();
    assert_eq!(err.status(), Some(429));
    assert_eq!(llm.request_count(), 1);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn client_errors_are_not_retried_and_never_show_the_key() {
    let llm = FakeLlm::anthropic(vec![
        Turn::error_message(400, "messages: text content blocks must be non-empty"),
        Turn::text("never"),
    ])
    .await;
    let provider = llm.provider_with(
        llm.settings()
            .with_api_key("fake-anthropic-key-very-secret"),
    );
    let err = chat(provider.as_ref()).await.unwrap_err();
    assert_eq!(err.status(), Some(400));
    assert_eq!(llm.request_count(), 1);
    let text = err.to_string();
    assert_eq!(
        text,
        "anthropic: HTTP 400 (1 attempt(s)): invalid_request_error: messages: text content \
         blocks must be non-empty"
    );
    assert!(!format!("{err:?}").contains("fake-anthropic-key-very-secret"));
}

#[tokio::test]
async fn a_key_echoed_by_the_server_is_redacted() {
    let llm = FakeLlm::openai(vec![Turn::error_message(
        401,
        "Incorrect API key provided: fake-openai-key-1234567890",
    )])
    .await;
    let provider = llm.provider_with(llm.settings().with_api_key("fake-openai-key-1234567890"));
    let err = chat(provider.as_ref()).await.unwrap_err().to_string();
    assert!(!err.contains("fake-openai-key-1234567890"), "{err}");
    assert!(
        err.contains("Incorrect API key provided: <redacted>"),
        "{err}"
    );
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let closed = support::refused::refused_addr();
    let settings = OpenAi::default_settings()
        .with_base_url(format!("http://{}/v1", closed.addr))
        .with_http(quick_http());
    let provider = OpenAi::new(settings).unwrap();
    let err = chat(&provider).await.unwrap_err();
    assert!(
        matches!(err, LlmError::Connect { attempts: 3, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("openai: cannot reach the server (3 attempt(s))"),
        "{text}"
    );
    assert!(!text.contains("127.0.0.1"), "the URL stays out: {text}");
}

#[tokio::test]
async fn nothing_is_retried_once_the_answer_streams() {
    let llm = FakeLlm::anthropic(vec![
        Turn::text("half an ans").stream_error("overloaded_error", "Overloaded"),
        Turn::text("a second answer would repeat output"),
    ])
    .await;
    let err = chat(llm.provider().as_ref()).await.unwrap_err();
    assert!(matches!(err, LlmError::Stream { .. }), "{err:?}");
    assert_eq!(llm.request_count(), 1);
    assert_eq!(llm.remaining(), 1);
}

#[tokio::test]
async fn cancelling_during_a_retry_wait_returns_at_once() {
    let llm = FakeLlm::anthropic(vec![Turn::error(503).retry_after("4"), Turn::text("late")]).await;
    let provider = llm.provider();
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel();
        })
    };
    let started = Instant::now();
    let err = provider.chat(&ask(), &NoEvents, &cancel).await.unwrap_err();
    canceller.await.unwrap();
    assert!(err.is_cancelled(), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(llm.request_count(), 1);
}
