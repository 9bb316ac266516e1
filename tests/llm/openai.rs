//! The OpenAI-compatible client against the fake chat completions API.

use crate::support::fake_llm::{Block, FakeLlm, Turn};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use warden::llm::{
    ChatRequest, ChatResponse, ContentBlock, LlmError, Message, OpenAi, Provider, Role, StopReason,
    StreamEvent, ToolSpec,
};

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user(text)],
        ..ChatRequest::default()
    }
}

async fn chat(
    provider: &dyn Provider,
    req: &ChatRequest,
) -> (Result<ChatResponse, LlmError>, Vec<StreamEvent>) {
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
async fn streamed_text_and_usage_are_assembled() {
    let text = "Streaming from an OpenAI-compatible server, one small delta at a time.";
    let llm = FakeLlm::openai(vec![Turn::text(text).chunked(4).usage(40, 12)]).await;
    let (resp, events) = chat(llm.provider().as_ref(), &ask("hi")).await;
    let resp = resp.unwrap();
    assert_eq!(resp.text(), text);
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(
        (resp.usage.input_tokens, resp.usage.output_tokens),
        (40, 12)
    );
    assert_eq!(resp.provider, "openai");
    assert_eq!(resp.model, OpenAi::DEFAULT_MODEL);
    let deltas = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::TextDelta { .. }))
        .count();
    assert_eq!(deltas, text.len().div_ceil(4));

    let seen = llm.last_request();
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.header("authorization"), Some("Bearer test-key"));
    assert_eq!(seen.body["stream"], true);
    assert_eq!(seen.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(seen.body["max_tokens"], OpenAi::DEFAULT_MAX_TOKENS);
}

#[tokio::test]
async fn tool_call_deltas_across_chunks_become_ordered_tool_uses() {
    let first = json!({"path": "notes/todo.md"});
    let second = json!({"command": "grep -rn TODO src", "timeout_secs": 10});
    let llm = FakeLlm::openai(vec![Turn::blocks(vec![
        Block::text("Checking two things."),
        Block::tool_use("read", first.clone()),
        Block::tool_use("bash", second.clone()),
    ])
    .chunked(3)
    .usage(100, 33)])
    .await;
    let req = ChatRequest {
        system: "be careful".into(),
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
            input_schema: json!({"type": "object"}),
        }],
        ..ask("find the todos")
    };
    let (resp, events) = chat(llm.provider().as_ref(), &req).await;
    let resp = resp.unwrap();
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
    assert_eq!(resp.text(), "Checking two things.");
    let calls: Vec<_> = resp.tool_uses().collect();
    assert_eq!(
        calls,
        vec![("call_1", "read", &first), ("call_2", "bash", &second)]
    );
    assert_eq!(
        (resp.usage.input_tokens, resp.usage.output_tokens),
        (100, 33)
    );
    let fragments = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolInputDelta { .. }))
        .count();
    assert!(fragments >= 15, "only {fragments} fragments");
    let ends: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUseEnd { id } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ends, ["call_1", "call_2"]);

    let seen = llm.last_request();
    assert_eq!(seen.system().as_deref(), Some("be careful"));
    assert_eq!(seen.body["messages"][0]["role"], "system");
    assert_eq!(seen.tool_names(), ["read"]);
    assert_eq!(seen.body["tools"][0]["type"], "function");
}

#[tokio::test]
async fn tool_results_go_back_as_tool_messages() {
    let llm = FakeLlm::openai(vec![
        Turn::tool_use("bash", json!({"command": "rm -rf ~"})),
        Turn::text("I cannot do that."),
    ])
    .await;
    let provider = llm.provider();
    let mut req = ask("clean up");
    let resp = chat(provider.as_ref(), &req).await.0.unwrap();
    let (id, _, _) = resp.tool_uses().next().unwrap();
    let id = id.to_string();
    req.messages.push(resp.to_message());
    req.messages
        .push(Message::tool_results(vec![ContentBlock::tool_result(
            &id,
            "denied: paths outside the workspace",
            true,
        )]));
    let resp = chat(provider.as_ref(), &req).await.0.unwrap();
    assert_eq!(resp.text(), "I cannot do that.");

    let seen = &llm.requests()[1];
    let messages = seen.messages();
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["tool_calls"][0]["id"], id.as_str());
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"],
        "{\"command\":\"rm -rf ~\"}"
    );
    let results = seen.tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].tool_use_id, id);
    assert!(results[0].is_error);
    assert_eq!(
        results[0].content,
        "Error: denied: paths outside the workspace"
    );
}

#[tokio::test]
async fn images_are_sent_as_data_urls() {
    let llm = FakeLlm::openai(vec![Turn::text("a cat")]).await;
    let req = ChatRequest {
        messages: vec![Message {
            role: Role::User,
            content: vec![
                ContentBlock::text("describe"),
                ContentBlock::Image {
                    media_type: "image/jpeg".into(),
                    data_base64: "/9j/4AAQSkZJRg==".into(),
                },
            ],
        }],
        ..ChatRequest::default()
    };
    chat(llm.provider().as_ref(), &req).await.0.unwrap();
    let content = &llm.last_request().body["messages"][0]["content"];
    assert_eq!(content[0], json!({"type": "text", "text": "describe"}));
    assert_eq!(
        content[1],
        json!({"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQSkZJRg=="}})
    );
}

#[tokio::test]
async fn a_local_server_needs_no_key() {
    let llm = FakeLlm::openai(vec![Turn::text("hello from llama")]).await;
    let settings = llm.settings().with_api_key("").with_model("llama3.2");
    let provider = OpenAi::new(settings).unwrap().with_images(false);
    assert!(!provider.supports_images());
    let resp = chat(&provider, &ask("hi")).await.0.unwrap();
    assert_eq!(resp.text(), "hello from llama");
    let seen = llm.last_request();
    assert!(seen.header("authorization").is_none());
    assert_eq!(seen.body["model"], "llama3.2");
}

#[tokio::test]
async fn length_finish_reason_means_max_tokens() {
    let llm = FakeLlm::openai(vec![Turn::text("trunc").stop_reason("length")]).await;
    let resp = chat(llm.provider().as_ref(), &ask("hi")).await.0.unwrap();
    assert_eq!(resp.stop_reason, StopReason::MaxTokens);
}

#[tokio::test]
async fn an_error_chunk_mid_stream_is_reported() {
    let llm = FakeLlm::openai(vec![
        Turn::text("par").stream_error("server_error", "the model crashed")
    ])
    .await;
    let err = chat(llm.provider().as_ref(), &ask("hi"))
        .await
        .0
        .unwrap_err();
    assert!(err.to_string().contains("the model crashed"), "{err}");
}

#[tokio::test]
async fn byte_split_stream_is_reassembled() {
    let llm = FakeLlm::openai(vec![Turn::blocks(vec![
        Block::text("ünïcödé ✓ "),
        Block::tool_use("write", json!({"path": "ä.txt", "content": "😀"})),
    ])
    .chunked(1)
    .split_bytes(5)])
    .await;
    let resp = chat(llm.provider().as_ref(), &ask("hi")).await.0.unwrap();
    assert_eq!(resp.text(), "ünïcödé ✓ ");
    let (_, _, input) = resp.tool_uses().next().unwrap();
    assert_eq!(input, &json!({"path": "ä.txt", "content": "😀"}));
}
