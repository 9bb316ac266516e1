//! A fake LLM server: axum on 127.0.0.1:0 answering the Anthropic Messages API
//! (`POST /v1/messages`) and OpenAI chat completions (`POST /v1/chat/completions`) in their real
//! wire formats — SSE when the request says `"stream": true`, plain JSON otherwise.
//!
//! Answers come from a script: a queue of [`Turn`]s, one per request, or a callback that picks
//! the turn from what the client sent. Every request is recorded (path, headers, JSON body,
//! arrival time) for assertions, and streams the client dropped early are counted.
//!
//! ```ignore
//! let llm = FakeLlm::anthropic(vec![
//!     Turn::tool_use("bash", json!({"command": "ls"})),
//!     Turn::text("done"),
//! ]).await;
//! let provider = llm.provider();              // a real warden client pointed at the fake
//! // … run the agent …
//! assert_eq!(llm.requests()[1].tool_results()[0].tool_use_id, "toolu_1");
//! ```
//!
//! Tool-call ids are `toolu_1`, `toolu_2`… (Anthropic) and `call_1`, `call_2`… (OpenAI),
//! counted across the server's life, unless a [`Block::ToolUse`] names one.

mod anthropic;
mod openai;
mod request;
mod turn;

// Part of the API for later suites even where a test binary does not use it.
#[allow(unused_imports)]
pub use request::{Request, SeenToolResult};
#[allow(unused_imports)]
pub use turn::{Block, Reply, Turn};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};
use warden::llm::{Anthropic, HttpOptions, OpenAi, Provider, ProviderSettings, RetryPolicy};

/// Which API a request or a fake speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAi,
}

type Callback = Arc<dyn Fn(&Request) -> Turn + Send + Sync>;

enum Script {
    Queue(VecDeque<Turn>),
    Callback(Callback),
}

struct Shared {
    script: Mutex<Script>,
    requests: Mutex<Vec<Request>>,
    tool_ids: AtomicUsize,
    disconnects: AtomicUsize,
    finished: AtomicUsize,
    changed: Notify,
}

impl Shared {
    fn next_tool_id(&self, wire: Wire) -> String {
        let n = self.tool_ids.fetch_add(1, Ordering::SeqCst) + 1;
        match wire {
            Wire::Anthropic => format!("toolu_{n}"),
            Wire::OpenAi => format!("call_{n}"),
        }
    }
}

/// A running fake; the server stops when this is dropped.
pub struct FakeLlm {
    wire: Wire,
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeLlm {
    pub async fn anthropic(turns: Vec<Turn>) -> FakeLlm {
        FakeLlm::start(Wire::Anthropic, Script::Queue(turns.into())).await
    }
    pub async fn openai(turns: Vec<Turn>) -> FakeLlm {
        FakeLlm::start(Wire::OpenAi, Script::Queue(turns.into())).await
    }
    /// Answer every request with `script(&request)`.
    pub async fn anthropic_with(
        script: impl Fn(&Request) -> Turn + Send + Sync + 'static,
    ) -> FakeLlm {
        FakeLlm::start(Wire::Anthropic, Script::Callback(Arc::new(script))).await
    }
    pub async fn openai_with(script: impl Fn(&Request) -> Turn + Send + Sync + 'static) -> FakeLlm {
        FakeLlm::start(Wire::OpenAi, Script::Callback(Arc::new(script))).await
    }

    async fn start(wire: Wire, script: Script) -> FakeLlm {
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            tool_ids: AtomicUsize::new(0),
            disconnects: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            changed: Notify::new(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Small responses go out at once (no Nagle delay), as from a real server's point of view.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let app = axum::Router::new()
            .route("/{*rest}", axum::routing::any(handle))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeLlm {
            wire,
            addr,
            shared,
            server,
        }
    }

    /// The base URL a client of this wire is configured with (`ANTHROPIC_BASE_URL` has no
    /// `/v1`, `OPENAI_BASE_URL` has it). The server answers both wires either way.
    pub fn base_url(&self) -> String {
        match self.wire {
            Wire::Anthropic => format!("http://{}", self.addr),
            Wire::OpenAi => format!("http://{}/v1", self.addr),
        }
    }

    /// Settings for a real warden client aimed at this fake: key `test-key`, quick retries.
    pub fn settings(&self) -> ProviderSettings {
        let defaults = match self.wire {
            Wire::Anthropic => Anthropic::default_settings(),
            Wire::OpenAi => OpenAi::default_settings(),
        };
        defaults
            .with_base_url(self.base_url())
            .with_api_key("test-key")
            .with_http(quick_http())
    }

    /// A real warden client for this fake's wire, using [`FakeLlm::settings`].
    pub fn provider(&self) -> Box<dyn Provider> {
        self.provider_with(self.settings())
    }

    pub fn provider_with(&self, settings: ProviderSettings) -> Box<dyn Provider> {
        match self.wire {
            Wire::Anthropic => Box::new(Anthropic::new(settings).unwrap()),
            Wire::OpenAi => Box::new(OpenAi::new(settings).unwrap()),
        }
    }

    /// Queue another turn (only for a queue script).
    pub fn push(&self, turn: Turn) {
        match &mut *self.shared.script.lock().unwrap() {
            Script::Queue(queue) => queue.push_back(turn),
            Script::Callback(_) => panic!("this fake answers with a callback"),
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }
    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }
    pub fn last_request(&self) -> Request {
        self.requests().pop().expect("the fake LLM got no request")
    }
    /// Turns not used yet (queue scripts).
    pub fn remaining(&self) -> usize {
        match &*self.shared.script.lock().unwrap() {
            Script::Queue(queue) => queue.len(),
            Script::Callback(_) => 0,
        }
    }
    /// Streams the client dropped before their end.
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects.load(Ordering::SeqCst)
    }
    /// Streams sent to their end.
    pub fn finished_streams(&self) -> usize {
        self.shared.finished.load(Ordering::SeqCst)
    }
    /// Wait until at least `n` streams were dropped by the client; false on timeout.
    pub async fn wait_for_disconnects(&self, n: usize, timeout: Duration) -> bool {
        self.wait_for(|| self.disconnects() >= n, timeout).await
    }
    /// Wait until at least `n` streams were sent to their end (a client may stop reading at
    /// the last event, before the fake counts it); false on timeout.
    pub async fn wait_for_finished(&self, n: usize, timeout: Duration) -> bool {
        self.wait_for(|| self.finished_streams() >= n, timeout)
            .await
    }

    async fn wait_for(&self, done: impl Fn() -> bool, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.shared.changed.notified();
            if done() {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return done();
            }
        }
    }
}

/// Fast retries so tests that exercise them stay quick; time limits stay generous.
pub fn quick_http() -> HttpOptions {
    HttpOptions {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(10),
        retry: RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(100),
            max_retry_after: Duration::from_secs(5),
            budget: Duration::from_secs(30),
        },
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let request = {
        let mut requests = shared.requests.lock().unwrap();
        let request = Request {
            index: requests.len(),
            method,
            path: uri.path().to_string(),
            headers,
            body,
            at: Instant::now(),
        };
        requests.push(request.clone());
        request
    };
    shared.changed.notify_waiters();
    let Some(wire) = request.wire() else {
        return json_response(
            404,
            &json!({"error": {"message": format!("fake LLM: no route {}", request.path)}}),
        );
    };
    let turn = {
        let mut script = shared.script.lock().unwrap();
        match &mut *script {
            Script::Queue(queue) => queue.pop_front(),
            Script::Callback(f) => {
                let f = f.clone();
                drop(script);
                Some(f(&request))
            }
        }
    };
    let Some(turn) = turn else {
        let message = format!(
            "fake LLM: no scripted turn left for request #{}",
            request.index
        );
        return json_response(
            500,
            &json!({"error": {"type": "api_error", "message": message}}),
        );
    };
    if !turn.delay.is_zero() {
        tokio::time::sleep(turn.delay).await;
    }
    respond(&shared, wire, &request, turn)
}

fn respond(shared: &Arc<Shared>, wire: Wire, request: &Request, turn: Turn) -> Response {
    let blocks = match &turn.reply {
        Reply::Raw {
            status,
            content_type,
            body,
        } => {
            return Response::builder()
                .status(*status)
                .header("content-type", content_type)
                .body(Body::from(body.clone()))
                .unwrap()
        }
        Reply::Error {
            status,
            message,
            retry_after,
        } => {
            let body = match wire {
                Wire::Anthropic => anthropic::error_body(*status, message),
                Wire::OpenAi => openai::error_body(*status, message),
            };
            let mut response = json_response(*status, &body);
            if let Some(value) = retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", value.parse().unwrap());
            }
            return response;
        }
        Reply::Answer(blocks) => blocks,
    };
    // Fill in generated tool ids now so both renderings agree.
    let blocks: Vec<Block> = blocks
        .iter()
        .map(|b| match b {
            Block::ToolUse {
                id: None,
                name,
                input,
            } => Block::ToolUse {
                id: Some(shared.next_tool_id(wire)),
                name: name.clone(),
                input: input.clone(),
            },
            other => other.clone(),
        })
        .collect();
    let answer = Answer {
        model: request.body["model"]
            .as_str()
            .unwrap_or("fake-model")
            .to_string(),
        usage: turn
            .usage
            .unwrap_or_else(|| estimate_usage(request, &blocks)),
        blocks,
        turn: &turn,
        index: request.index,
    };
    if request.body["stream"] != json!(true) {
        let body = match wire {
            Wire::Anthropic => anthropic::message_json(&answer),
            Wire::OpenAi => openai::completion_json(&answer),
        };
        return json_response(200, &body);
    }
    let events = match wire {
        Wire::Anthropic => anthropic::sse_events(&answer),
        Wire::OpenAi => {
            let usage = request.body["stream_options"]["include_usage"] == json!(true);
            openai::sse_events(&answer, usage)
        }
    };
    stream_response(shared.clone(), events, &turn)
}

/// Everything a wire renderer needs to write one answer.
pub(crate) struct Answer<'a> {
    pub model: String,
    pub blocks: Vec<Block>,
    pub usage: (u64, u64),
    pub turn: &'a Turn,
    pub index: usize,
}

impl Answer<'_> {
    pub fn has_tool_use(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. }))
    }
    /// `s` in pieces of the turn's `chunk_chars` (one piece when 0), on char boundaries.
    pub fn pieces(&self, s: &str) -> Vec<String> {
        let n = self.turn.chunk_chars;
        if n == 0 || s.is_empty() {
            return vec![s.to_string()];
        }
        let chars: Vec<char> = s.chars().collect();
        chars.chunks(n).map(|c| c.iter().collect()).collect()
    }
}

fn estimate_usage(request: &Request, blocks: &[Block]) -> (u64, u64) {
    let input = request.body.to_string().len() as u64 / 4 + 1;
    let output: usize = blocks
        .iter()
        .map(|b| match b {
            Block::Text(t) => t.len(),
            Block::ToolUse { input, .. } => input.to_string().len(),
        })
        .sum();
    (input, output as u64 / 4 + 1)
}

fn json_response(status: u16, body: &Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// Send `events` (already SSE-framed) as a streaming body, honoring the turn's gap, stall and
/// byte-splitting, and count whether the client stayed to the end.
fn stream_response(shared: Arc<Shared>, events: Vec<String>, turn: &Turn) -> Response {
    let mut frames: Vec<Bytes> = events.into_iter().map(Bytes::from).collect();
    let mut stall_at = turn.stall_after.map(|n| n.min(frames.len()));
    if let Some(size) = turn.split_bytes {
        let joined: Vec<u8> = frames.concat();
        // A stall point counts events; translate it to the byte position of that event.
        let stall_byte = stall_at.map(|n| frames[..n].iter().map(Bytes::len).sum::<usize>());
        frames = joined.chunks(size).map(Bytes::copy_from_slice).collect();
        stall_at = stall_byte.map(|b| b.div_ceil(size));
    }
    let gap = turn.gap;
    let (tx, mut rx) = mpsc::channel::<Bytes>(1);
    tokio::spawn(async move {
        for (i, frame) in frames.into_iter().enumerate() {
            if stall_at == Some(i) {
                break;
            }
            if i > 0 && !gap.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(gap) => {}
                    _ = tx.closed() => break,
                }
            }
            if tx.send(frame).await.is_err() {
                break;
            }
        }
        if stall_at.is_some() {
            tx.closed().await;
        }
        if tx.is_closed() {
            shared.disconnects.fetch_add(1, Ordering::SeqCst);
        } else {
            shared.finished.fetch_add(1, Ordering::SeqCst);
        }
        shared.changed.notify_waiters();
    });
    let body =
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|f| f.map(Ok::<_, Infallible>)));
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(body))
        .unwrap()
}
