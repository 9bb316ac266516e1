//! A streamable-HTTP MCP server, reached by warden itself: a fake server on 127.0.0.1 speaking
//! the wire format (JSON-RPC over POST, `Mcp-Session-Id`, 202 for notifications, 405 for the
//! optional GET stream) behind `warden mcp grant` and `warden run`. The header's secret comes
//! from warden's environment and reaches the server only; a redirect is not followed.

use crate::support::fake_llm::{FakeLlm, Turn};
use crate::support::skills::{Out, SkillEnv};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const TOKEN: &str = "mcp-http-token-HTTPTEST-5c1e";

#[derive(Clone, Default)]
struct Seen {
    /// (method, Authorization header, session header) per JSON-RPC message.
    calls: Arc<Mutex<Vec<(String, String, String)>>>,
}

async fn rpc(
    State(seen): State<Seen>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let method = message["method"].as_str().unwrap_or("").to_string();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    seen.calls.lock().unwrap().push((
        method.clone(),
        header("authorization"),
        header("mcp-session-id"),
    ));
    if message.get("id").is_none() {
        return StatusCode::ACCEPTED.into_response();
    }
    // `?list=flood`: the tool list is an event that never ends.
    if method == "tools/list" && query.get("list").map(String::as_str) == Some("flood") {
        return endless(true);
    }
    let result = match method.as_str() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "docs", "version": "1"}
        }),
        "tools/list" => json!({"tools": [{
            "name": "search",
            "description": "Search the docs.",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}
        }, {
            "name": "flood",
            "description": "Answer with a body or an event that never ends.",
            "inputSchema": {"type": "object", "properties": {"how": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}
        }]}),
        "tools/call" if message["params"]["name"] == "flood" => {
            return endless(message["params"]["arguments"]["how"].as_str() == Some("sse"));
        }
        "tools/call" => json!({"content": [{
            "type": "text",
            "text": format!("results for {}", message["params"]["arguments"]["q"].as_str().unwrap_or(""))
        }]}),
        _ => json!({}),
    };
    let body = json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
    (
        [
            ("content-type", "application/json"),
            ("mcp-session-id", "session-1"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// An answer that never ends: a JSON body, or one server-sent event, growing forever.
fn endless(sse: bool) -> Response {
    let (content_type, head) = match sse {
        true => (
            "text/event-stream",
            "event: message\ndata: {\"jsonrpc\": \"2.0\", \"x\": \"",
        ),
        false => ("application/json", "{\"jsonrpc\": \"2.0\", \"x\": \""),
    };
    let chunk = axum::body::Bytes::from(vec![b'x'; 64 * 1024]);
    let body = futures::stream::once(async move { axum::body::Bytes::from(head) })
        .chain(futures::stream::repeat(chunk))
        .map(Ok::<_, std::io::Error>);
    (
        [
            ("content-type", content_type),
            ("mcp-session-id", "session-1"),
        ],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

async fn start(seen: Seen) -> String {
    let app = axum::Router::new()
        .route(
            "/mcp",
            post(rpc)
                .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
                .delete(|| async { StatusCode::OK }),
        )
        .route(
            "/moved",
            post(|| async { (StatusCode::TEMPORARY_REDIRECT, [("location", "/mcp")]) }),
        )
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn env_with(url: &str) -> SkillEnv {
    let mut env = SkillEnv::new("");
    env.append_config(&format!(
        "[mcp.servers.docs]\nurl = \"{url}\"\nheaders = {{ Authorization = \"Bearer {{secret:DOCS_TOKEN}}\" }}"
    ));
    env.env
        .push(("WARDEN_SECRET_DOCS_TOKEN".into(), TOKEN.into()));
    env
}

async fn warden(env: &SkillEnv, llm: Option<&FakeLlm>, args: &[&str]) -> Out {
    let extra: Vec<(&str, String)> = llm
        .map(|llm| ("ANTHROPIC_BASE_URL", llm.base_url()))
        .into_iter()
        .collect();
    env.warden_async(args, &extra).await
}

#[tokio::test]
async fn an_http_server_is_granted_and_called_with_its_secret_header() {
    let seen = Seen::default();
    let base = start(seen.clone()).await;
    let env = env_with(&format!("{base}/mcp"));
    let grant = warden(&env, None, &["mcp", "grant", "docs", "--yes"]).await;
    assert_eq!(grant.code, 0, "{grant:?}");
    assert!(
        grant.stdout.contains("streamable HTTP: http://127.0.0.1"),
        "{}",
        grant.stdout
    );
    // The review shows the template, never the secret.
    assert!(
        grant.stdout.contains("Bearer {secret:DOCS_TOKEN}"),
        "{}",
        grant.stdout
    );
    assert!(!grant.all().contains(TOKEN));
    assert!(grant
        .stdout
        .contains("docs__search: allowed (marked read-only)"));

    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("docs__search", json!({"q": "landlock"})),
        Turn::text("found"),
    ])
    .await;
    let out = warden(&env, Some(&llm), &["run", "search the docs"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let result = &llm.requests()[1].tool_results()[0];
    assert_eq!(result.content, "results for landlock");
    assert!(!out.all().contains(TOKEN));

    let calls = seen.calls.lock().unwrap().clone();
    let methods: Vec<&str> = calls.iter().map(|(m, _, _)| m.as_str()).collect();
    assert!(
        methods.contains(&"initialize") && methods.contains(&"tools/call"),
        "{methods:?}"
    );
    assert!(
        calls
            .iter()
            .all(|(_, auth, _)| auth == &format!("Bearer {TOKEN}")),
        "{calls:?}"
    );
    let call = calls.iter().find(|(m, _, _)| m == "tools/call").unwrap();
    assert_eq!(call.2, "session-1");
    // The audit row does not carry the secret either.
    let rows = env.audit();
    assert!(rows
        .iter()
        .all(|r| !r.reason.contains(TOKEN) && !r.input.contains(TOKEN)));
}

#[tokio::test]
async fn a_missing_secret_or_a_redirect_is_refused() {
    let seen = Seen::default();
    let base = start(seen.clone()).await;
    let mut env = env_with(&format!("{base}/mcp"));
    env.env.clear();
    let out = warden(&env, None, &["mcp", "grant", "docs", "--yes"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("WARDEN_SECRET_DOCS_TOKEN"),
        "{}",
        out.stderr
    );
    assert!(seen.calls.lock().unwrap().is_empty());

    let env = env_with(&format!("{base}/moved"));
    let out = warden(&env, None, &["mcp", "grant", "docs", "--yes"]).await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        seen.calls.lock().unwrap().is_empty(),
        "the redirect was followed"
    );
    assert!(
        out.stderr.contains("does not follow redirects"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn an_endless_body_or_event_is_cut_at_its_cap_and_warden_stays_small() {
    let seen = Seen::default();
    let base = start(seen.clone()).await;
    let env = env_with(&format!("{base}/mcp"));
    env.append_config("[mcp]\ncall_timeout_secs = 30");
    let grant = warden(&env, None, &["mcp", "grant", "docs", "--yes"]).await;
    assert_eq!(grant.code, 0, "{grant:?}");
    for (how, what) in [
        ("json", "an answer from the MCP server docs"),
        ("sse", "an event from the MCP server docs"),
    ] {
        let llm = FakeLlm::anthropic(vec![
            Turn::tool_use("docs__flood", json!({"how": how})),
            Turn::tool_use("docs__search", json!({"q": "after"})),
            Turn::text("still here"),
        ])
        .await;
        let started = std::time::Instant::now();
        let extra = [("ANTHROPIC_BASE_URL", llm.base_url())];
        let (out, measured) = env.warden_bounded(&["run", "flood"], &extra).await;
        assert_eq!(out.code, 0, "{how}: {out:?}");
        assert_eq!(out.stdout.trim(), "still here");
        measured.assert_bounded();
        assert!(
            started.elapsed().as_secs() < 20,
            "{how}: {:?}",
            started.elapsed()
        );
        let results = llm.requests()[2].tool_results();
        assert!(results[0].is_error, "{how}: {:?}", results[0]);
        let expected = format!("{what} is larger than 8.0 MB (caps.mcp_message_bytes)");
        assert!(
            results[0].content.contains(&expected),
            "{how}: {}",
            results[0].content
        );
        // Reached again for the next call.
        assert_eq!(results[1].content, "results for after", "{how}");
    }
}

#[tokio::test]
async fn a_tool_list_that_never_ends_is_cut_at_grant() {
    let seen = Seen::default();
    let base = start(seen.clone()).await;
    let env = env_with(&format!("{base}/mcp?list=flood"));
    let started = std::time::Instant::now();
    let (out, measured) = env
        .warden_bounded(&["mcp", "grant", "docs", "--yes"], &[])
        .await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains(
            "an event from the MCP server docs is larger than 8.0 MB (caps.mcp_message_bytes)"
        ),
        "{}",
        out.stderr
    );
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    measured.assert_bounded();
}
