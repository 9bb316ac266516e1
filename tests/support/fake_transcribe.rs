//! A fake OpenAI-compatible speech-to-text endpoint: axum on 127.0.0.1:0 answering
//! `POST /v1/audio/transcriptions` as OpenAI does. It checks the multipart request as the
//! real endpoint would — a `file` part with a file name and a `model` field, else 400 with
//! OpenAI's error JSON — records every request, and answers `{"text": …}` with the scripted
//! transcript (or a scripted error status).

use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One request as received.
#[derive(Clone, Debug, Default)]
pub struct Heard {
    pub model: Option<String>,
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
    pub response_format: Option<String>,
    /// The `Authorization` header.
    pub authorization: Option<String>,
}

struct Shared {
    /// Ok(transcript) or Err(status).
    answer: Mutex<Result<String, u16>>,
    heard: Mutex<Vec<Heard>>,
}

pub struct FakeTranscriber {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeTranscriber {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeTranscriber {
    /// Answers every request with `transcript`.
    pub async fn start(transcript: &str) -> FakeTranscriber {
        let shared = Arc::new(Shared {
            answer: Mutex::new(Ok(transcript.to_string())),
            heard: Mutex::new(Vec::new()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .route("/v1/audio/transcriptions", axum::routing::post(transcribe))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeTranscriber {
            addr,
            shared,
            server,
        }
    }

    /// For `[voice] base_url` (with `/v1`, like OpenAI's).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// From now on answer with this error status.
    pub fn fail_with(&self, status: u16) {
        *self.shared.answer.lock().unwrap() = Err(status);
    }

    pub fn heard(&self) -> Vec<Heard> {
        self.shared.heard.lock().unwrap().clone()
    }
}

fn openai_error(status: u16, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": "invalid_request_error"}});
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

async fn transcribe(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let authorization = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut multipart = match Multipart::from_request(request, &()).await {
        Ok(m) => m,
        Err(e) => return openai_error(400, &format!("expected multipart/form-data: {e}")),
    };
    let mut heard = Heard {
        authorization,
        ..Heard::default()
    };
    while let Ok(Some(field)) = multipart.next_field().await {
        let name = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        let content_type = field.content_type().map(str::to_string);
        let bytes = field.bytes().await.unwrap_or_default().to_vec();
        match name.as_str() {
            "file" => {
                heard.file_name = file_name;
                heard.content_type = content_type;
                heard.bytes = bytes;
            }
            "model" => heard.model = Some(String::from_utf8_lossy(&bytes).into_owned()),
            "response_format" => {
                heard.response_format = Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => {}
        }
    }
    shared.heard.lock().unwrap().push(heard.clone());
    if heard.file_name.is_none() || heard.bytes.is_empty() {
        return openai_error(400, "you must provide a file");
    }
    if heard.model.as_deref().unwrap_or("").is_empty() {
        return openai_error(400, "you must provide a model parameter");
    }
    let answer = shared.answer.lock().unwrap().clone();
    match answer {
        Ok(text) => axum::Json(json!({ "text": text })).into_response(),
        Err(status) => openai_error(status, "the server had an error"),
    }
}
