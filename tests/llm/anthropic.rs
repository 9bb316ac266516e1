//! The Anthropic client against the fake Messages API: streaming, tool calls, what is sent.

use crate::support;

use crate::support::fake_llm::{Block, FakeLlm, Turn};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use warden::llm::{
    ChatRequest, ContentBlock, LlmError, Message, NoEvents, Role, StopReason, StreamEvent, ToolSpec,
};

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user(text)],
        ..ChatRequest::default()
    }
}

fn bash_tool() -> ToolSpec {
    ToolSpec {
        name: "bash".into(),
        description: "Run a command in the sandbox".into(),
        input_schema: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    }
}

/// Run one chat, collecting the streamed events.
async fn chat(
    provider: &dyn warden::llm::Provider,
    req: &ChatRequest,
) -> (
    Result<warden::llm::ChatResponse, LlmError>,
    Vec<StreamEvent>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let result = provider.chat(req, &tx, &CancellationToken::new()).await;
    drop(tx);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    (result, events)
}

#[tokio::test]
async fn streamed_text_is_assembled_and_progress_is_reported() {
    let text = "Hello from the fake Anthropic API, streamed three characters at a time.";
    let llm = FakeLlm::anthropic(vec![Turn::text(text).chunked(3).usage(21, 17)]).await;
    let provider = llm.provider();
    let (resp, events) = chat(provider.as_ref(), &ask("hi")).await;
    let resp = resp.unwrap();

    assert_eq!(resp.text(), text);
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(
        (resp.usage.input_tokens, resp.usage.output_tokens),
        (21, 17)
    );
    assert_eq!(resp.provider, "anthropic");
    assert_eq!(resp.model, "claude-sonnet-4-5");

    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), text.len().div_ceil(3));
    assert_eq!(deltas.concat(), text);
    assert_eq!(
        events[events.len() - 2..],
        [
            StreamEvent::Usage(resp.usage),
            StreamEvent::MessageStop {
                stop_reason: StopReason::EndTurn
            }
        ]
    );
}

#[tokio::test]
async fn request_carries_key_version_system_and_tools() {
    let llm = FakeLlm::anthropic(vec![Turn::text("ok")]).await;
    let req = ChatRequest {
        system: "You are warden.".into(),
        tools: vec![bash_tool()],
        max_tokens: Some(321),
        ..ask("list files")
    };
    chat(llm.provider().as_ref(), &req).await.0.unwrap();

    let seen = llm.last_request();
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.header("x-api-key"), Some("test-key"));
    assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert!(seen.header("authorization").is_none());
    assert_eq!(seen.system().as_deref(), Some("You are warden."));
    assert_eq!(seen.tool_names(), ["bash"]);
    assert_eq!(seen.body["stream"], true);
    assert_eq!(seen.body["max_tokens"], 321);
    assert_eq!(seen.body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(seen.last_user_text(), "list files");
}

#[tokio::test]
async fn tool_input_split_across_many_deltas_is_parsed_and_results_go_back() {
    let input = json!({"command": "ls -la /workspace | head -n 5", "timeout_secs": 30});
    let llm = FakeLlm::anthropic(vec![
        Turn::blocks(vec![
            Block::text("Let me look."),
            Block::tool_use("bash", input.clone()),
        ])
        .chunked(2),
        Turn::text("The workspace is empty."),
    ])
    .await;
    let provider = llm.provider();
    let mut req = ChatRequest {
        tools: vec![bash_tool()],
        ..ask("what is in my workspace?")
    };

    let (resp, events) = chat(provider.as_ref(), &req).await;
    let resp = resp.unwrap();
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
    assert_eq!(resp.text(), "Let me look.");
    let calls: Vec<_> = resp.tool_uses().collect();
    assert_eq!(calls, vec![("toolu_1", "bash", &input)]);
    let fragments = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolInputDelta { .. }))
        .count();
    assert!(fragments >= 20, "only {fragments} input fragments");
    assert!(events.contains(&StreamEvent::ToolUseStart {
        id: "toolu_1".into(),
        name: "bash".into()
    }));
    assert!(events.contains(&StreamEvent::ToolUseEnd {
        id: "toolu_1".into()
    }));

    // The agent feeds the (denied) result back; the server must see it paired with the call.
    req.messages.push(resp.to_message());
    req.messages
        .push(Message::tool_results(vec![ContentBlock::tool_result(
            "toolu_1",
            "denied: `head` is not allowed by the policy",
            true,
        )]));
    let (resp, _) = chat(provider.as_ref(), &req).await;
    assert_eq!(resp.unwrap().text(), "The workspace is empty.");

    let second = &llm.requests()[1];
    let results = second.tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].tool_use_id, "toolu_1");
    assert!(results[0].is_error);
    assert!(results[0].content.contains("not allowed by the policy"));
    let assistant = &second.messages()[1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(assistant["content"][1]["input"], input);
}

#[tokio::test]
async fn several_tool_calls_keep_their_order() {
    let llm = FakeLlm::anthropic(vec![Turn::tool_uses(vec![
        ("read", json!({"path": "a.txt"})),
        ("read", json!({"path": "b.txt"})),
        ("bash", json!({"command": "date"})),
    ])
    .chunked(4)])
    .await;
    let resp = chat(llm.provider().as_ref(), &ask("go")).await.0.unwrap();
    let ids: Vec<_> = resp.tool_uses().map(|(id, name, _)| (id, name)).collect();
    assert_eq!(
        ids,
        [
            ("toolu_1", "read"),
            ("toolu_2", "read"),
            ("toolu_3", "bash")
        ]
    );
}

#[tokio::test]
async fn image_blocks_are_sent_as_base64_sources() {
    let llm = FakeLlm::anthropic(vec![Turn::text("a red square")]).await;
    let req = ChatRequest {
        messages: vec![Message {
            role: Role::User,
            content: vec![
                ContentBlock::text("what is this?"),
                ContentBlock::Image {
                    media_type: "image/png".into(),
                    data_base64: "iVBORw0KGgoAAAANSUhEUg==".into(),
                },
            ],
        }],
        ..ChatRequest::default()
    };
    let provider = llm.provider();
    assert!(provider.supports_images());
    chat(provider.as_ref(), &req).await.0.unwrap();
    let body = llm.last_request().body;
    assert_eq!(
        body["messages"][0]["content"][1],
        json!({"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="}})
    );
}

#[tokio::test]
async fn network_chunks_that_split_events_and_characters_are_reassembled() {
    let text = "héllo wörld — ünïcödé 🎉 across every byte boundary";
    let llm = FakeLlm::anthropic(vec![Turn::text(text).chunked(2).split_bytes(3)]).await;
    let resp = chat(llm.provider().as_ref(), &ask("hi")).await.0.unwrap();
    assert_eq!(resp.text(), text);
}

#[tokio::test]
async fn an_error_event_mid_stream_is_reported() {
    let llm = FakeLlm::anthropic(vec![
        Turn::text("partial").stream_error("overloaded_error", "Overloaded")
    ])
    .await;
    let err = chat(llm.provider().as_ref(), &ask("hi"))
        .await
        .0
        .unwrap_err();
    assert!(matches!(err, LlmError::Stream { .. }), "{err:?}");
    assert!(
        err.to_string().contains("overloaded_error: Overloaded"),
        "{err}"
    );
}

#[tokio::test]
async fn max_tokens_stop_reason_is_passed_on() {
    let llm = FakeLlm::anthropic(vec![Turn::text("cut of").stop_reason("max_tokens")]).await;
    let resp = llm
        .provider()
        .chat(&ask("hi"), &NoEvents, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(resp.stop_reason, StopReason::MaxTokens);
}

#[tokio::test]
async fn a_success_that_is_not_an_event_stream_is_a_clear_error() {
    let llm = FakeLlm::anthropic(vec![Turn::raw(
        200,
        "text/html",
        "<html>captive portal</html>",
    )])
    .await;
    let err = chat(llm.provider().as_ref(), &ask("hi"))
        .await
        .0
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("expected an event stream, got text/html: <html>captive portal</html>"),
        "{err}"
    );
}

#[tokio::test]
async fn model_override_is_used() {
    let llm = FakeLlm::anthropic(vec![Turn::text("ok")]).await;
    let req = ChatRequest {
        model: Some("claude-haiku-4-5".into()),
        ..ask("hi")
    };
    let resp = chat(llm.provider().as_ref(), &req).await.0.unwrap();
    assert_eq!(llm.last_request().body["model"], "claude-haiku-4-5");
    assert_eq!(resp.model, "claude-haiku-4-5");
}

/// A Messages API whose answer streams forever, in small events.
async fn endless_model() -> String {
    use futures::StreamExt;
    let head = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",",
        "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],",
        "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,",
        "\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,",
        "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
    );
    let delta = format!(
        "event: content_block_delta\ndata: {}\n\n",
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "z".repeat(4096)}})
    );
    let app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move || {
            let delta = axum::body::Bytes::from(delta.clone());
            async move {
                let body = futures::stream::once(async move { axum::body::Bytes::from(head) })
                    .chain(futures::stream::repeat(delta))
                    .map(Ok::<_, std::io::Error>);
                (
                    [("content-type", "text/event-stream")],
                    axum::body::Body::from_stream(body),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test]
async fn an_answer_that_streams_forever_is_cut_at_its_cap() {
    let url = endless_model().await;
    let home = tempfile::tempdir().unwrap();
    support::warden_run::write_config(
        home.path(),
        "[caps]\nllm_response_bytes = 4194304\n[llm.anthropic]\nmax_attempts = 1\n",
    );
    let command = support::warden_run::warden_run_command(home.path(), &url, "hello");
    let started = std::time::Instant::now();
    let measured = tokio::task::spawn_blocking(move || support::resources::run_bounded(command))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&measured.output.stderr);
    assert_ne!(measured.output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("the model's answer is larger than 4.0 MB (caps.llm_response_bytes)"),
        "{}",
        &stderr[stderr.len().saturating_sub(2000)..]
    );
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
    measured.assert_bounded();
}
