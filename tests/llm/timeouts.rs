//! Time limits and cancellation through the real client: a server that does not answer, a
//! stream that stalls, and a caller that gives up mid-stream.

use crate::support::fake_llm::{quick_http, FakeLlm, Turn};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use warden::llm::{ChatRequest, HttpOptions, LlmError, Message, NoEvents, StreamEvent};

fn ask() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    }
}

fn http(request: Duration, idle: Duration) -> HttpOptions {
    HttpOptions {
        request_timeout: request,
        idle_timeout: idle,
        ..quick_http()
    }
}

#[tokio::test]
async fn a_server_that_does_not_answer_hits_the_request_timeout() {
    let llm = FakeLlm::anthropic(vec![Turn::text("too late").delay(Duration::from_secs(10))]).await;
    let settings = llm
        .settings()
        .with_http(http(Duration::from_millis(400), Duration::from_secs(5)));
    let provider = llm.provider_with(settings);
    let started = Instant::now();
    let err = provider
        .chat(&ask(), &NoEvents, &CancellationToken::new())
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, LlmError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("no answer within 400ms"), "{err}");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(llm.request_count(), 1, "a timed-out request is not retried");
}

#[tokio::test]
async fn a_stream_that_goes_silent_hits_the_idle_timeout() {
    let llm = FakeLlm::openai(vec![Turn::text("abcdefghij").chunked(1).stall_after(4)]).await;
    let settings = llm
        .settings()
        .with_http(http(Duration::from_secs(20), Duration::from_millis(300)));
    let provider = llm.provider_with(settings);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let started = Instant::now();
    let err = provider
        .chat(&ask(), &tx, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("no data for 300ms"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
    // The text that did arrive was shown as progress.
    assert!(matches!(rx.try_recv(), Ok(StreamEvent::TextDelta { .. })));
    assert!(llm.wait_for_disconnects(1, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn a_slow_but_steady_stream_is_not_an_idle_timeout() {
    let llm = FakeLlm::anthropic(vec![Turn::text("steady")
        .chunked(1)
        .gap(Duration::from_millis(100))])
    .await;
    let settings = llm
        .settings()
        .with_http(http(Duration::from_secs(20), Duration::from_millis(400)));
    let resp = llm
        .provider_with(settings)
        .chat(&ask(), &NoEvents, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(resp.text(), "steady");
}

#[tokio::test]
async fn cancelling_mid_stream_returns_promptly_and_drops_the_connection() {
    for fake in [
        FakeLlm::anthropic(vec![Turn::text("x".repeat(50)).chunked(1).stall_after(8)]).await,
        FakeLlm::openai(vec![Turn::text("x".repeat(50)).chunked(1).stall_after(8)]).await,
    ] {
        let provider = fake.provider();
        let cancel = CancellationToken::new();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let chat = {
            let cancel = cancel.clone();
            tokio::spawn(async move { provider.chat(&ask(), &tx, &cancel).await })
        };
        // Wait for the first text so the stream has certainly begun.
        loop {
            match rx.recv().await {
                Some(StreamEvent::TextDelta { .. }) => break,
                Some(_) => continue,
                None => panic!("the stream ended before any text"),
            }
        }
        let cancelled_at = Instant::now();
        cancel.cancel();
        let result = chat.await.unwrap();
        let took = cancelled_at.elapsed();
        assert!(matches!(result, Err(LlmError::Cancelled)), "{result:?}");
        assert!(took < Duration::from_secs(2), "took {took:?}");
        assert!(
            fake.wait_for_disconnects(1, Duration::from_secs(2)).await,
            "the server never saw the connection drop"
        );
        assert_eq!(fake.finished_streams(), 0);
    }
}

#[tokio::test]
async fn cancelling_before_the_answer_starts_returns_promptly() {
    let llm = FakeLlm::anthropic(vec![Turn::text("late").delay(Duration::from_secs(10))]).await;
    let provider = llm.provider();
    let cancel = CancellationToken::new();
    let chat = {
        let cancel = cancel.clone();
        tokio::spawn(async move { provider.chat(&ask(), &NoEvents, &cancel).await })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let cancelled_at = Instant::now();
    cancel.cancel();
    let result = chat.await.unwrap();
    assert!(matches!(result, Err(LlmError::Cancelled)), "{result:?}");
    assert!(cancelled_at.elapsed() < Duration::from_secs(2));
    assert_eq!(llm.request_count(), 1);
}

#[tokio::test]
async fn an_already_cancelled_token_sends_nothing() {
    let llm = FakeLlm::openai(vec![Turn::text("never")]).await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = llm
        .provider()
        .chat(&ask(), &NoEvents, &cancel)
        .await
        .unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(llm.request_count(), 0);
}
