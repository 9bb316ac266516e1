//! A fake OpenAI-compatible embeddings server on 127.0.0.1 (`POST /v1/embeddings`). Vectors
//! are bags of "concepts": words of one concept (cat, kitten, feline…) share a dimension, so
//! texts without a common word can still be similar, as with a real model. It can be switched
//! to failing with 500, and records what it was sent.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const CONCEPTS: &[&[&str]] = &[
    &["cat", "cats", "kitten", "kittens", "feline", "felines"],
    &["dog", "dogs", "puppy", "canine"],
    &["boat", "boats", "ferry", "ship"],
];
const DIMENSIONS: usize = 8;

#[derive(Default)]
struct Shared {
    failing: AtomicBool,
    /// (authorization header, request body)
    requests: Mutex<Vec<(Option<String>, Value)>>,
}

pub struct FakeEmbeddings {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeEmbeddings {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeEmbeddings {
    pub async fn start() -> FakeEmbeddings {
        let shared = Arc::new(Shared::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .route("/v1/embeddings", axum::routing::post(embeddings))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeEmbeddings {
            addr,
            shared,
            server,
        }
    }

    /// The base URL to configure (with `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn set_failing(&self, failing: bool) {
        self.shared.failing.store(failing, Ordering::SeqCst);
    }

    pub fn requests(&self) -> Vec<(Option<String>, Value)> {
        self.shared.requests.lock().unwrap().clone()
    }
}

/// The fake's vector for a text (not normalized).
pub fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIMENSIONS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        // Concept words carry the meaning, as in a real model; the rest is background.
        match CONCEPTS.iter().position(|c| c.contains(&word.as_str())) {
            Some(dim) => v[dim] += 4.0,
            None => {
                let sum: usize = word.bytes().map(usize::from).sum();
                v[CONCEPTS.len() + sum % (DIMENSIONS - CONCEPTS.len())] += 1.0;
            }
        }
    }
    v
}

async fn embeddings(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    shared.requests.lock().unwrap().push((auth, body.clone()));
    if shared.failing.load(Ordering::SeqCst) {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": {"message": "the fake embeddings server is down"}})),
        );
    }
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_string())
            .collect(),
        _ => Vec::new(),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": vector(text)}))
        .collect();
    (
        StatusCode::OK,
        Json(json!({"object": "list", "data": data, "model": body["model"]})),
    )
}
