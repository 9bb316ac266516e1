//! A fake Slack: the Web API (axum on 127.0.0.1:0, `POST /api/{method}` with a Bearer token
//! and a JSON body, answered as Slack answers) and the Socket Mode WebSocket (tokio-tungstenite
//! on another 127.0.0.1 port, the address `apps.connections.open` hands out).
//!
//! It records every call (`calls`) and keeps the messages the bot posted with their edits
//! (`messages`, `shown`). Tests deliver envelopes (`send_event`, `redeliver`), read what the
//! bot acknowledged (`acks`), make a method answer 429 with `Retry-After` (`rate_limit`) and
//! ask for a reconnect (`disconnect`), waiting with `wait_until`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::Message;

pub const APP_TOKEN: &str = "xapp-test-app-token";
pub const BOT_TOKEN: &str = "xoxb-test-bot-token";
/// warden's bot user.
pub const BOT_USER: &str = "UWARDEN";
/// The allowed user.
pub const OWNER: &str = "UOWNER1";
/// The owner's DM with the bot.
pub const DM: &str = "DOWNER1";

/// One Web API call the bot made.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    /// The Bearer token it carried.
    pub token: String,
    pub body: Value,
    pub at: Instant,
    /// The fake answered 429.
    pub limited: bool,
}

/// A message the bot posted.
#[derive(Clone, Debug)]
pub struct Posted {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    pub text: String,
    /// Later texts from `chat.update`, in order.
    pub edits: Vec<String>,
    /// The full `chat.postMessage` body.
    pub body: Value,
}

impl Posted {
    pub fn shown(&self) -> &str {
        self.edits.last().unwrap_or(&self.text)
    }
}

/// A file the bot uploaded (and shared, once `completed` is set).
#[derive(Clone, Debug)]
pub struct Upload {
    pub file_id: String,
    pub name: String,
    pub data: Vec<u8>,
    /// The `files.completeUploadExternal` body that shared it.
    pub completed: Option<Value>,
}

#[derive(Default)]
struct Inner {
    uploads: Vec<Upload>,
    /// Files people "shared", served at `/files/{id}` to the bot token only.
    shared: HashMap<String, Vec<u8>>,
    calls: Vec<Call>,
    messages: Vec<Posted>,
    ephemeral: Vec<Value>,
    acks: Vec<String>,
    next_ts: u64,
    next_envelope: u64,
    /// method → (answers left to limit, Retry-After seconds).
    limits: HashMap<String, (usize, u64)>,
    /// Writers of the open sockets, newest last.
    sockets: Vec<mpsc::UnboundedSender<Message>>,
    connections: usize,
}

struct Shared {
    inner: Mutex<Inner>,
    changed: Notify,
    socket_url: String,
    /// `http://127.0.0.1:PORT` of the Web API (upload addresses are here too).
    origin: Mutex<String>,
}

#[derive(Clone)]
pub struct FakeSlack {
    shared: Arc<Shared>,
    api_url: String,
}

impl FakeSlack {
    pub async fn start() -> FakeSlack {
        let ws = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let socket_url = format!("ws://{}/link/?ticket=1", ws.local_addr().unwrap());
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                next_ts: 1,
                ..Inner::default()
            }),
            changed: Notify::new(),
            socket_url,
            origin: Mutex::new(String::new()),
        });
        tokio::spawn(accept_sockets(ws, shared.clone()));
        let app = axum::Router::new()
            .route("/api/{method}", axum::routing::post(api))
            .route("/upload/{file_id}", axum::routing::post(upload))
            .route("/files/{file_id}", axum::routing::get(download))
            .with_state(shared.clone());
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", http.local_addr().unwrap());
        *shared.origin.lock().unwrap() = origin.clone();
        let api_url = format!("{origin}/api");
        tokio::spawn(async move { axum::serve(http, app).await.unwrap() });
        FakeSlack { shared, api_url }
    }

    pub fn api_url(&self) -> String {
        self.api_url.clone()
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.shared.inner.lock().unwrap()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.inner().calls.clone()
    }

    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    pub fn messages(&self) -> Vec<Posted> {
        self.inner().messages.clone()
    }

    pub fn messages_in(&self, channel: &str) -> Vec<Posted> {
        self.messages()
            .into_iter()
            .filter(|m| m.channel == channel)
            .collect()
    }

    /// `chat.postEphemeral` bodies.
    pub fn ephemeral(&self) -> Vec<Value> {
        self.inner().ephemeral.clone()
    }

    /// Envelope ids the bot acknowledged, in order.
    pub fn acks(&self) -> Vec<String> {
        self.inner().acks.clone()
    }

    /// How many Socket Mode connections the bot opened.
    pub fn connections(&self) -> usize {
        self.inner().connections
    }

    /// The next `times` calls of `method` answer 429 with `Retry-After: secs`.
    pub fn rate_limit(&self, method: &str, times: usize, secs: u64) {
        self.inner().limits.insert(method.into(), (times, secs));
    }

    /// Deliver an `events_api` envelope carrying `event`; returns (envelope id, event id).
    pub fn send_event(&self, event: Value) -> (String, String) {
        let mut inner = self.inner();
        inner.next_envelope += 1;
        let n = inner.next_envelope;
        let (envelope_id, event_id) = (format!("env-{n}"), format!("Ev{n:08}"));
        drop(inner);
        self.redeliver(&envelope_id, &event_id, event);
        (envelope_id, event_id)
    }

    /// Deliver `event` as event `event_id` in envelope `envelope_id` (Slack redelivers an
    /// event it saw no acknowledgement for, in a new envelope, with the same event id).
    pub fn redeliver(&self, envelope_id: &str, event_id: &str, event: Value) {
        let envelope = json!({
            "envelope_id": envelope_id,
            "type": "events_api",
            "accepts_response_payload": false,
            "retry_attempt": 0,
            "payload": {
                "type": "event_callback",
                "event_id": event_id,
                "event": event,
            },
        });
        self.push(envelope);
    }

    /// A press of the button whose value is `value` on message `message`, by `user`: an
    /// `interactive` envelope with a `block_actions` payload, as Slack sends it.
    pub fn press(&self, user: &str, message: &Posted, value: &str) -> String {
        let mut inner = self.inner();
        inner.next_envelope += 1;
        let envelope_id = format!("env-{}", inner.next_envelope);
        drop(inner);
        let mut container = json!({"type": "message", "message_ts": message.ts,
                                   "channel_id": message.channel, "is_ephemeral": false});
        if let Some(thread) = &message.thread_ts {
            container["thread_ts"] = json!(thread);
        }
        self.push(json!({
            "envelope_id": envelope_id,
            "type": "interactive",
            "accepts_response_payload": false,
            "payload": {
                "type": "block_actions",
                "user": {"id": user, "username": user.to_lowercase(), "name": user.to_lowercase()},
                "channel": {"id": message.channel},
                "container": container,
                "message": {"ts": message.ts, "text": message.text},
                "actions": [{"type": "button", "action_id": "x", "block_id": "b", "value": value}],
            },
        }));
        envelope_id
    }

    /// A file a person shares: the `files` entry of their message event (its content is
    /// served to the bot token at `url_private_download`).
    pub fn share_file(&self, name: &str, content: &[u8]) -> Value {
        let mut inner = self.inner();
        let id = format!("FIN{:04}", inner.shared.len() + 1);
        inner.shared.insert(id.clone(), content.to_vec());
        let origin = self.shared.origin.lock().unwrap().clone();
        json!({
            "id": id, "name": name, "title": name, "mimetype": "text/plain",
            "size": content.len(),
            "url_private": format!("{origin}/files/{id}"),
            "url_private_download": format!("{origin}/files/{id}?download=1"),
        })
    }

    /// `/warden TEXT` typed by `user` in `channel`: a `slash_commands` envelope.
    pub fn slash(&self, user: &str, channel: &str, text: &str) -> String {
        let mut inner = self.inner();
        inner.next_envelope += 1;
        let envelope_id = format!("env-{}", inner.next_envelope);
        drop(inner);
        self.push(json!({
            "envelope_id": envelope_id,
            "type": "slash_commands",
            "accepts_response_payload": true,
            "payload": {
                "command": "/warden", "text": text, "user_id": user, "channel_id": channel,
                "team_id": "T1", "trigger_id": "1.2.3",
            },
        }));
        envelope_id
    }

    /// Files the bot uploaded: (name, bytes, the `files.completeUploadExternal` body).
    pub fn uploads(&self) -> Vec<Upload> {
        self.inner().uploads.clone()
    }

    /// Send a frame on the newest socket (panics when none is open).
    pub fn push(&self, frame: Value) {
        let inner = self.inner();
        let socket = inner
            .sockets
            .last()
            .expect("no Socket Mode connection is open");
        // A closed socket's writer is gone: the frame is lost, as it would be on Slack's side.
        let _ = socket.send(Message::Text(frame.to_string().into()));
    }

    /// Ask the bot to open a new connection, as Slack does every few hours.
    pub fn disconnect(&self) {
        self.push(json!({"type": "disconnect", "reason": "refresh_requested"}));
    }

    pub async fn wait_until(&self, what: &str, timeout: Duration, cond: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let changed = self.shared.changed.notified();
            if cond(self) {
                return;
            }
            if Instant::now() >= deadline {
                let calls: Vec<(String, Value)> = self
                    .calls()
                    .into_iter()
                    .map(|c| (c.method, c.body))
                    .collect();
                panic!("timed out after {timeout:?} waiting until {what}; calls: {calls:#?}");
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), changed).await;
        }
    }
}

/// `warden bot` with only Slack, configured by environment to talk to `slack` and the model
/// at `llm_url`, with [`OWNER`] allowed and the channels in `channels` allowed.
pub fn bot_env(
    slack: &FakeSlack,
    home: &std::path::Path,
    llm_url: String,
    channels: &[&str],
) -> super::warden_bot::BotEnv {
    let mut env = super::warden_bot::BotEnv::new(home, String::new(), llm_url);
    env.telegram = false;
    for (key, value) in [
        ("SLACK_APP_TOKEN", APP_TOKEN),
        ("SLACK_BOT_TOKEN", BOT_TOKEN),
        ("SLACK_ALLOWED_USERS", OWNER),
        ("SLACK_API_URL", &slack.api_url()),
    ] {
        env.extra.push((key.into(), value.into()));
    }
    if !channels.is_empty() {
        let list: Vec<String> = channels.iter().map(|c| format!("{c:?}")).collect();
        env.write_config(&format!(
            "[slack]\nallowed_channels = [{}]\n",
            list.join(", ")
        ));
    }
    env
}

/// A direct message from `user` in the DM channel.
pub fn dm(user: &str, text: &str, ts: &str) -> Value {
    json!({"type": "message", "channel_type": "im", "channel": DM, "user": user,
           "text": text, "ts": ts})
}

/// A mention of warden in `channel` (in `thread` when given).
pub fn mention(channel: &str, user: &str, text: &str, ts: &str, thread: Option<&str>) -> Value {
    let mut event = json!({"type": "app_mention", "channel": channel, "user": user,
                           "text": format!("<@{BOT_USER}> {text}"), "ts": ts});
    if let Some(thread) = thread {
        event["thread_ts"] = json!(thread);
    }
    event
}

/// A plain message in `thread` of `channel`.
pub fn thread_reply(channel: &str, user: &str, text: &str, ts: &str, thread: &str) -> Value {
    json!({"type": "message", "channel_type": "channel", "channel": channel, "user": user,
           "text": text, "ts": ts, "thread_ts": thread})
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string()
}

async fn api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let token = bearer(&headers);
    // JSON, or form fields (files.getUploadURLExternal takes those).
    let body: Value = serde_json::from_str(&body).unwrap_or_else(|_| {
        let fields: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
            .into_owned()
            .collect();
        json!(fields)
    });
    let origin = shared.origin.lock().unwrap().clone();
    let answer = {
        let mut inner = shared.inner.lock().unwrap();
        let limited = match inner.limits.get_mut(&method) {
            Some((left, secs)) if *left > 0 => {
                *left -= 1;
                Some(*secs)
            }
            _ => None,
        };
        inner.calls.push(Call {
            method: method.clone(),
            token: token.clone(),
            body: body.clone(),
            at: Instant::now(),
            limited: limited.is_some(),
        });
        match limited {
            Some(secs) => Err(secs),
            None => Ok(answer(
                &mut inner,
                &shared.socket_url,
                &origin,
                &method,
                &token,
                &body,
            )),
        }
    };
    shared.changed.notify_waiters();
    match answer {
        Err(secs) => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", secs.to_string())],
            axum::Json(json!({"ok": false, "error": "ratelimited"})),
        )
            .into_response(),
        Ok(value) => axum::Json(value).into_response(),
    }
}

fn answer(
    inner: &mut Inner,
    socket_url: &str,
    origin: &str,
    method: &str,
    token: &str,
    body: &Value,
) -> Value {
    let wanted = match method {
        "apps.connections.open" => token == APP_TOKEN,
        "auth.test" => token == BOT_TOKEN || token == APP_TOKEN,
        _ => token == BOT_TOKEN,
    };
    if !wanted {
        return json!({"ok": false, "error": "invalid_auth"});
    }
    let text = body["text"].as_str().unwrap_or_default().to_string();
    let channel = body["channel"].as_str().unwrap_or_default().to_string();
    match method {
        "auth.test" => json!({"ok": true, "user_id": BOT_USER, "user": "warden",
                              "team": "Test Team", "team_id": "T1", "bot_id": "B1"}),
        "apps.connections.open" => json!({"ok": true, "url": socket_url}),
        "chat.postMessage" => {
            if text.chars().count() > 40_000 {
                return json!({"ok": false, "error": "msg_too_long"});
            }
            inner.next_ts += 1;
            let ts = format!("1800000000.{:06}", inner.next_ts);
            inner.messages.push(Posted {
                channel: channel.clone(),
                ts: ts.clone(),
                thread_ts: body["thread_ts"].as_str().map(String::from),
                text,
                edits: Vec::new(),
                body: body.clone(),
            });
            json!({"ok": true, "channel": channel, "ts": ts})
        }
        "chat.update" => {
            let ts = body["ts"].as_str().unwrap_or_default();
            match inner
                .messages
                .iter_mut()
                .find(|m| m.channel == channel && m.ts == ts)
            {
                Some(message) => {
                    message.edits.push(text);
                    json!({"ok": true, "channel": channel, "ts": ts})
                }
                None => json!({"ok": false, "error": "message_not_found"}),
            }
        }
        "files.getUploadURLExternal" => {
            let file_id = format!("F{:06}", inner.uploads.len() + 1);
            inner.uploads.push(Upload {
                file_id: file_id.clone(),
                name: body["filename"].as_str().unwrap_or_default().to_string(),
                data: Vec::new(),
                completed: None,
            });
            json!({"ok": true, "upload_url": format!("{origin}/upload/{file_id}"),
                   "file_id": file_id})
        }
        "files.completeUploadExternal" => {
            let id = body["files"][0]["id"].as_str().unwrap_or_default();
            match inner.uploads.iter_mut().find(|u| u.file_id == id) {
                Some(upload) => {
                    upload.completed = Some(body.clone());
                    json!({"ok": true, "files": [{"id": id}]})
                }
                None => json!({"ok": false, "error": "file_not_found"}),
            }
        }
        "chat.postEphemeral" => {
            inner.ephemeral.push(body.clone());
            json!({"ok": true, "message_ts": "1800000000.999999"})
        }
        _ => json!({"ok": false, "error": "unknown_method"}),
    }
}

/// A shared file, for the bot token only.
async fn download(
    State(shared): State<Arc<Shared>>,
    Path(file_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let token = bearer(&headers);
    let content = {
        let mut inner = shared.inner.lock().unwrap();
        inner.calls.push(Call {
            method: "download".into(),
            token: token.clone(),
            body: json!({"file_id": file_id}),
            at: Instant::now(),
            limited: false,
        });
        inner.shared.get(&file_id).cloned()
    };
    shared.changed.notify_waiters();
    match content {
        Some(content) if token == BOT_TOKEN => content.into_response(),
        Some(_) => StatusCode::FORBIDDEN.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The signed upload address: bytes in, no token needed.
async fn upload(
    State(shared): State<Arc<Shared>>,
    Path(file_id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let found = {
        let mut inner = shared.inner.lock().unwrap();
        let token = bearer(&headers);
        inner.calls.push(Call {
            method: "upload".into(),
            token,
            body: json!({"file_id": file_id, "bytes": body.len()}),
            at: Instant::now(),
            limited: false,
        });
        match inner.uploads.iter_mut().find(|u| u.file_id == file_id) {
            Some(upload) => {
                upload.data = body.to_vec();
                true
            }
            None => false,
        }
    };
    shared.changed.notify_waiters();
    if found {
        (StatusCode::OK, "OK - uploaded").into_response()
    } else {
        StatusCode::NOT_FOUND.into_response()
    }
}

async fn accept_sockets(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            let (mut sink, mut stream) = ws.split();
            let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
            tx.send(Message::Text(
                json!({"type": "hello", "num_connections": 1})
                    .to_string()
                    .into(),
            ))
            .unwrap();
            {
                let mut inner = shared.inner.lock().unwrap();
                inner.sockets.push(tx);
                inner.connections += 1;
            }
            shared.changed.notify_waiters();
            tokio::spawn(async move {
                while let Some(frame) = rx.recv().await {
                    if sink.send(frame).await.is_err() {
                        break;
                    }
                }
            });
            while let Some(Ok(frame)) = stream.next().await {
                if let Message::Text(text) = frame {
                    let value: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
                    if let Some(id) = value["envelope_id"].as_str() {
                        shared.inner.lock().unwrap().acks.push(id.to_string());
                        shared.changed.notify_waiters();
                    }
                }
            }
        });
    }
}
