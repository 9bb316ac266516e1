//! The fake LLM server's own contract, which later suites (agent, Telegram, memory) rely on:
//! answers chosen by a callback from what the client sent, plain-JSON answers when the
//! client does not stream, and loud failures for unscripted or misrouted requests.

use crate::support::fake_llm::{FakeLlm, Turn};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use warden::llm::{ChatRequest, ContentBlock, Message, NoEvents};

async fn post(url: String, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

#[tokio::test]
async fn a_callback_answers_from_what_the_client_sent() {
    let llm = FakeLlm::anthropic_with(|req| match req.tool_results().first() {
        None => Turn::tool_use("bash", json!({"command": "cat secrets.txt"})),
        Some(result) if result.is_error => Turn::text(format!("Blocked: {}", result.content)),
        Some(_) => Turn::text("done"),
    })
    .await;
    let provider = llm.provider();
    let cancel = CancellationToken::new();
    let mut req = ChatRequest {
        messages: vec![Message::user("read my secrets")],
        ..ChatRequest::default()
    };
    let first = provider.chat(&req, &NoEvents, &cancel).await.unwrap();
    let (id, _, _) = first.tool_uses().next().unwrap();
    let id = id.to_string();
    req.messages.push(first.to_message());
    req.messages
        .push(Message::tool_results(vec![ContentBlock::tool_result(
            id,
            "denied: secrets.txt is outside the readable roots",
            true,
        )]));
    let second = provider.chat(&req, &NoEvents, &cancel).await.unwrap();
    assert_eq!(
        second.text(),
        "Blocked: denied: secrets.txt is outside the readable roots"
    );
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test]
async fn non_streaming_requests_get_the_json_forms() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("read", json!({"path": "a"})).usage(9, 4),
        Turn::text("plain").usage(5, 2),
    ])
    .await;
    let body = json!({"model": "m", "max_tokens": 10, "messages": []});
    let (status, message) = post(format!("{}/v1/messages", llm.base_url()), body).await;
    assert_eq!(status, 200);
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][0],
        json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}})
    );
    assert_eq!(
        message["usage"],
        json!({"input_tokens": 9, "output_tokens": 4})
    );

    // The same server also speaks the OpenAI wire, by path.
    let url = format!("{}/v1/chat/completions", llm.base_url());
    let (status, completion) = post(url, json!({"model": "m", "messages": []})).await;
    assert_eq!(status, 200);
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(completion["choices"][0]["message"]["content"], "plain");
    assert_eq!(completion["choices"][0]["finish_reason"], "stop");
    assert_eq!(completion["usage"]["total_tokens"], 7);
}

#[tokio::test]
async fn unscripted_and_misrouted_requests_fail_loudly() {
    let llm = FakeLlm::openai(vec![]).await;
    let (status, body) = post(format!("{}/chat/completions", llm.base_url()), json!({})).await;
    assert_eq!(status, 500);
    assert_eq!(
        body["error"]["message"],
        "fake LLM: no scripted turn left for request #0"
    );
    let (status, body) = post(format!("{}/v1/completions", llm.base_url()), json!({})).await;
    assert_eq!(status, 404);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no route /v1/v1/completions"));
    assert_eq!(
        llm.request_count(),
        2,
        "misrouted requests are recorded too"
    );
}

#[tokio::test]
async fn turns_can_be_queued_after_start() {
    let llm = FakeLlm::openai(vec![]).await;
    llm.push(Turn::text("queued later"));
    assert_eq!(llm.remaining(), 1);
    let req = ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    };
    let resp = llm
        .provider()
        .chat(&req, &NoEvents, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(resp.text(), "queued later");
    assert!(llm.wait_for_finished(1, Duration::from_secs(2)).await);
    assert_eq!(llm.disconnects(), 0);
}
