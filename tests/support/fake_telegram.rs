//! A fake Telegram Bot API: axum on 127.0.0.1:0 answering what teloxide calls —
//! `getMe`, `getWebhookInfo`, `deleteWebhook`, `setMyCommands`, `getUpdates` (long poll that
//! honors `offset` and `timeout`), `sendMessage` and `editMessageText` (HTML checked as
//! Telegram checks it, 4096-character limit, "message is not modified"), `sendChatAction`,
//! `deleteMessage`, `answerCallbackQuery`, `getFile` and file downloads
//! (`/file/bot<token>/<path>`), `sendDocument` and `sendPhoto` (multipart uploads).
//!
//! Methods are matched case-insensitively (teloxide sends `/bot<token>/SendMessage`). Tests
//! push updates (`push_text`, `push_callback`…) and inspect what the bot sent (`messages`,
//! `uploads`, `calls`, `rejected`), waiting with `wait_until`. Edits can be answered with
//! flood control (`throttle_next_edit`: 429 with `retry_after`) or left hanging
//! (`stall_edits_containing`). Sent messages can be answered late (`stall_sends`: applied at
//! once, answered after a delay, as a Bot API under load does) or never
//! (`apply_sends_and_hang`: applied, then no answer — the moment to kill the bot). Idle
//! `getUpdates` calls are held for their whole `timeout`, as Telegram holds them.

mod html;
#[allow(unused_imports)]
pub use html::parse as check_html;
mod updates;
mod uploads;

#[allow(unused_imports)]
pub use updates::{
    audio_fields, callback, document_fields, message, photo_fields, text_fields, voice_fields,
    BOT_ID, BOT_USERNAME,
};
pub use uploads::Upload;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// One API call the bot made.
#[derive(Clone, Debug)]
pub struct Call {
    /// Lower-cased method name (`sendmessage`).
    pub method: String,
    pub body: Value,
    pub at: Instant,
}

/// A message the fake accepted from the bot.
#[derive(Clone, Debug)]
pub struct Sent {
    pub message_id: i64,
    pub chat_id: i64,
    /// The topic it was sent into (`message_thread_id`), if any.
    pub topic: Option<i64>,
    /// As sent (HTML when `html`).
    pub text: String,
    /// What a user sees (entities decoded, tags removed).
    pub visible: String,
    pub html: bool,
    pub reply_to: Option<i64>,
    pub keyboard: Option<Value>,
    /// Edits applied later, in order (visible text).
    pub edits: Vec<String>,
    pub deleted: bool,
    pub at: Instant,
}

impl Sent {
    /// What the message shows now: its last edit, or its text as sent.
    pub fn shown(&self) -> &str {
        self.edits.last().unwrap_or(&self.visible)
    }
}

#[derive(Default)]
struct Inner {
    next_update_id: i64,
    next_message_id: i64,
    /// Updates not yet confirmed by an offset.
    updates: Vec<Value>,
    calls: Vec<Call>,
    messages: Vec<Sent>,
    rejected: Vec<(String, String)>,
    files: HashMap<String, (String, Vec<u8>)>,
    /// Downloads that stall this long before answering, by file path.
    slow_files: HashMap<String, Duration>,
    /// When each update was first handed to the bot.
    served: HashMap<i64, Instant>,
    /// HTML containing this is refused as if Telegram could not parse it.
    refuse_html: Option<String>,
    uploads: Vec<Upload>,
    /// The next edit is answered with flood control: `retry_after` this many seconds.
    throttle_next_edit: Option<u64>,
    /// Edits before this instant are answered with flood control.
    throttled_until: Option<Instant>,
    /// When each request was answered with flood control, and its method.
    throttled: Vec<(String, Instant)>,
    /// Edits whose text contains this are never answered nor applied.
    stall_edits: Option<String>,
    /// Sent messages are answered this late (applied at once).
    stall_sends: Option<Duration>,
    /// Sent messages containing this are applied and never answered.
    hang_sends: Option<String>,
}

struct Shared {
    token: String,
    inner: Mutex<Inner>,
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeTelegram {
    pub async fn start(token: &str) -> FakeTelegram {
        let shared = Arc::new(Shared {
            token: token.to_string(),
            inner: Mutex::new(Inner {
                next_update_id: 500,
                next_message_id: 1000,
                ..Inner::default()
            }),
            changed: Notify::new(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Small responses go out at once (no Nagle delay), as from a real server's point of view.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let app = axum::Router::new()
            .route("/{bot}/{method}", axum::routing::any(api))
            .route("/file/{bot}/{*path}", axum::routing::get(file))
            .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeTelegram {
            addr,
            shared,
            server,
        }
    }

    /// For `TELEGRAM_API_URL`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn next_message_id(&self) -> i64 {
        let mut inner = self.shared.lock();
        inner.next_message_id += 1;
        inner.next_message_id
    }

    /// Queue an update (its `update_id` is assigned); returns the id.
    pub fn push_update(&self, mut body: Value) -> i64 {
        let id = {
            let mut inner = self.shared.lock();
            inner.next_update_id += 1;
            let id = inner.next_update_id;
            body["update_id"] = json!(id);
            inner.updates.push(body);
            id
        };
        self.shared.changed.notify_waiters();
        id
    }

    /// A message with `fields` (see `text_fields`…); returns (update id, message id).
    pub fn push_message(&self, chat_id: i64, from: i64, fields: Value) -> (i64, i64) {
        let message_id = self.next_message_id();
        let update = self.push_update(json!({
            "message": message(message_id, chat_id, from, fields)
        }));
        (update, message_id)
    }

    pub fn push_text(&self, chat_id: i64, from: i64, text: &str) -> (i64, i64) {
        self.push_message(chat_id, from, text_fields(text))
    }

    /// A text message in topic `topic` of the chat (a forum's, or a private chat's with
    /// topics): `message_thread_id` and `is_topic_message` set, as Telegram sends them.
    pub fn push_topic_text(&self, chat_id: i64, topic: i64, from: i64, text: &str) -> (i64, i64) {
        let mut fields = text_fields(text);
        fields["message_thread_id"] = json!(topic);
        fields["is_topic_message"] = json!(true);
        self.push_message(chat_id, from, fields)
    }

    /// Messages sent into `topic` of `chat_id` (`None`: outside any topic).
    pub fn messages_in(&self, chat_id: i64, topic: Option<i64>) -> Vec<Sent> {
        self.messages_to(chat_id)
            .into_iter()
            .filter(|m| m.topic == topic)
            .collect()
    }

    /// A button press with `data` on the bot's message.
    pub fn push_callback(&self, from: i64, chat_id: i64, message_id: i64, data: &str) -> i64 {
        self.push_callback_in(from, chat_id, None, message_id, data)
    }

    /// A button press with `data` on the bot's message in `topic` of the chat.
    pub fn push_callback_in(
        &self,
        from: i64,
        chat_id: i64,
        topic: Option<i64>,
        message_id: i64,
        data: &str,
    ) -> i64 {
        let id = format!("cb{}", self.next_message_id());
        let mut query = callback(&id, from, chat_id, message_id, data);
        if let Some(topic) = topic {
            query["message"]["message_thread_id"] = json!(topic);
            query["message"]["is_topic_message"] = json!(true);
        }
        self.push_update(json!({ "callback_query": query }))
    }

    /// Serve `bytes` for getFile(`file_id`).
    pub fn add_file(&self, file_id: &str, bytes: Vec<u8>) {
        let path = file_path(file_id);
        self.shared
            .lock()
            .files
            .insert(file_id.to_string(), (path, bytes));
    }

    /// Serve `bytes` for getFile(`file_id`), but stall the download for `delay` first (a big
    /// file on a slow link).
    pub fn add_slow_file(&self, file_id: &str, bytes: Vec<u8>, delay: Duration) {
        self.add_file(file_id, bytes);
        self.shared
            .lock()
            .slow_files
            .insert(file_path(file_id), delay);
    }

    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    pub fn count(&self, method: &str) -> usize {
        let method = method.to_ascii_lowercase();
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .count()
    }

    pub fn messages(&self) -> Vec<Sent> {
        self.shared.lock().messages.clone()
    }

    /// Messages sent to `chat_id`.
    pub fn messages_to(&self, chat_id: i64) -> Vec<Sent> {
        self.messages()
            .into_iter()
            .filter(|m| m.chat_id == chat_id)
            .collect()
    }

    /// Requests the fake refused, as (method, description).
    pub fn rejected(&self) -> Vec<(String, String)> {
        self.shared.lock().rejected.clone()
    }

    /// From now on, refuse HTML messages containing `fragment` with "can't parse entities"
    /// (Telegram has rules this fake does not model).
    pub fn refuse_html_containing(&self, fragment: &str) {
        self.shared.lock().refuse_html = Some(fragment.to_string());
    }

    /// The user deletes the bot's message `message_id` (edits of it fail from now on).
    pub fn user_deletes(&self, message_id: i64) {
        let mut inner = self.shared.lock();
        if let Some(m) = inner
            .messages
            .iter_mut()
            .find(|m| m.message_id == message_id)
        {
            m.deleted = true;
        }
    }

    /// Files the bot uploaded (sendDocument, sendPhoto), in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().uploads.clone()
    }

    /// Answer the next editMessageText with 429 `retry_after: secs`, and every edit within
    /// those seconds too.
    pub fn throttle_next_edit(&self, secs: u64) {
        self.shared.lock().throttle_next_edit = Some(secs);
    }

    /// When requests were answered with flood control: (method, when).
    pub fn throttled(&self) -> Vec<(String, Instant)> {
        self.shared.lock().throttled.clone()
    }

    /// From now on, never answer (nor apply) an edit whose text contains `fragment`; `None`
    /// stops that.
    pub fn stall_edits_containing(&self, fragment: Option<&str>) {
        self.shared.lock().stall_edits = fragment.map(str::to_string);
    }

    /// From now on, apply each sendMessage at once but answer it only after `delay` (`None`:
    /// answer at once again).
    pub fn stall_sends(&self, delay: Option<Duration>) {
        self.shared.lock().stall_sends = delay;
    }

    /// From now on, apply a sendMessage whose text contains `fragment` and never answer it
    /// (`None` stops that).
    pub fn apply_sends_and_hang(&self, fragment: Option<&str>) {
        self.shared.lock().hang_sends = fragment.map(str::to_string);
    }

    /// When `update_id` was first returned by getUpdates.
    pub fn served_at(&self, update_id: i64) -> Option<Instant> {
        self.shared.lock().served.get(&update_id).copied()
    }

    /// Updates served but not yet confirmed by a later offset.
    pub fn unconfirmed(&self) -> usize {
        self.shared.lock().updates.len()
    }

    /// Wait until `cond` holds (checked at every change and every 50 ms).
    pub async fn wait_until(&self, what: &str, timeout: Duration, cond: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let changed = self.shared.changed.notified();
            if cond(self) {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out after {timeout:?} waiting until {what}; sent: {:#?}; rejected: {:?}",
                    self.messages()
                        .iter()
                        .map(|m| (m.chat_id, m.visible.clone()))
                        .collect::<Vec<_>>(),
                    self.rejected()
                );
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), changed).await;
        }
    }

    /// warden's approval requests in `chat_id`, oldest first.
    pub fn approvals_to(&self, chat_id: i64) -> Vec<Sent> {
        self.messages_to(chat_id)
            .into_iter()
            .filter(|m| m.visible.starts_with("🔐 Approval needed"))
            .collect()
    }

    /// Wait for the `n`-th approval request in `chat_id` (from 1) and return it.
    pub async fn approval(&self, chat_id: i64, n: usize, timeout: Duration) -> Sent {
        let what = format!("approval request #{n}");
        self.wait_until(&what, timeout, |t| t.approvals_to(chat_id).len() >= n)
            .await;
        self.approvals_to(chat_id)[n - 1].clone()
    }

    /// `from` presses the button at (`row`, `index`) of the bot's message `request`.
    pub fn press(&self, from: i64, request: &Sent, row: usize, index: usize) {
        let data = request.keyboard.as_ref().expect("buttons")["inline_keyboard"][row][index]
            ["callback_data"]
            .as_str()
            .expect("callback data")
            .to_string();
        self.push_callback_in(
            from,
            request.chat_id,
            request.topic,
            request.message_id,
            &data,
        );
    }

    /// Wait for the bot's `n`-th call of `method` (counting from 1).
    pub async fn wait_for_calls(&self, method: &str, n: usize, timeout: Duration) {
        let what = format!("{n} {method} calls");
        self.wait_until(&what, timeout, |t| t.count(method) >= n)
            .await;
    }
}

fn ok(result: Value) -> Response {
    respond(200, json!({"ok": true, "result": result}))
}

fn error(status: u16, description: &str) -> Response {
    respond(
        status,
        json!({"ok": false, "error_code": status, "description": description}),
    )
}

fn respond(status: u16, body: Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn me() -> Value {
    let mut me = updates::bot_user();
    for (k, v) in [
        ("can_join_groups", true),
        ("can_read_all_group_messages", false),
        ("supports_inline_queries", false),
        ("can_connect_to_business", false),
        ("has_main_web_app", false),
    ] {
        me[k] = json!(v);
    }
    me
}

fn too_many_requests(secs: u64) -> Response {
    respond(
        429,
        json!({
            "ok": false, "error_code": 429,
            "description": format!("Too Many Requests: retry after {secs}"),
            "parameters": {"retry_after": secs},
        }),
    )
}

async fn api(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    request: Request,
) -> Response {
    let method = method.to_ascii_lowercase();
    if bot != format!("bot{}", shared.token) {
        return error(401, "Unauthorized");
    }
    let (form, body) = if uploads::is_multipart(&request) {
        match uploads::read(request).await {
            Ok(form) => {
                let params = form.params.clone();
                (Some(form), params)
            }
            Err(e) => return error(400, &format!("Bad Request: {e}")),
        }
    } else {
        let bytes = axum::body::to_bytes(request.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        (None, serde_json::from_slice(&bytes).unwrap_or(json!({})))
    };
    // Whether an edit stalls is decided as it is recorded: a test that saw the call knows.
    let stalled = {
        let mut inner = shared.lock();
        inner.calls.push(Call {
            method: method.clone(),
            body: body.clone(),
            at: Instant::now(),
        });
        method == "editmessagetext"
            && inner
                .stall_edits
                .as_ref()
                .is_some_and(|f| body["text"].as_str().unwrap_or("").contains(f.as_str()))
    };
    shared.changed.notify_waiters();
    let response = match method.as_str() {
        "getme" => ok(me()),
        "getwebhookinfo" => ok(json!({
            "url": "", "has_custom_certificate": false, "pending_update_count": 0
        })),
        "deletewebhook" | "setmycommands" | "sendchataction" | "answercallbackquery" => {
            ok(json!(true))
        }
        "getupdates" => get_updates(&shared, &body).await,
        "sendmessage" => {
            let response = send_message(&shared, &body);
            shared.changed.notify_waiters();
            let (stall, hang) = {
                let inner = shared.lock();
                let text = body["text"].as_str().unwrap_or("");
                let hang = inner
                    .hang_sends
                    .as_ref()
                    .is_some_and(|f| text.contains(f.as_str()));
                (inner.stall_sends, hang)
            };
            if hang {
                std::future::pending::<()>().await;
            }
            if let Some(delay) = stall {
                tokio::time::sleep(delay).await;
            }
            response
        }
        "editmessagetext" => {
            if stalled {
                std::future::pending::<()>().await;
            }
            if let Some(response) = throttle_edit(&shared) {
                return response;
            }
            edit_message(&shared, &body)
        }
        "senddocument" | "sendphoto" => match &form {
            Some(form) => upload(&shared, &method, form),
            None => error(400, "Bad Request: there is no file in the request"),
        },
        "deletemessage" => {
            let id = body["message_id"].as_i64();
            let mut inner = shared.lock();
            match inner.messages.iter_mut().find(|m| Some(m.message_id) == id) {
                Some(m) => {
                    m.deleted = true;
                    ok(json!(true))
                }
                None => error(400, "Bad Request: message to delete not found"),
            }
        }
        "getfile" => {
            let id = body["file_id"].as_str().unwrap_or("");
            match shared.lock().files.get(id) {
                Some((path, bytes)) => ok(json!({
                    "file_id": id, "file_unique_id": format!("u-{id}"),
                    "file_size": bytes.len(), "file_path": path,
                })),
                None => error(400, "Bad Request: invalid file_id"),
            }
        }
        _ => error(404, "Not Found"),
    };
    shared.changed.notify_waiters();
    response
}

async fn get_updates(shared: &Arc<Shared>, body: &Value) -> Response {
    let offset = body["offset"].as_i64().unwrap_or(0);
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0).min(60));
    let limit = body["limit"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let changed = shared.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        {
            let mut inner = shared.lock();
            // An offset confirms every update below it: Telegram forgets them.
            inner
                .updates
                .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            let batch: Vec<Value> = inner.updates.iter().take(limit).cloned().collect();
            let now = Instant::now();
            for update in &batch {
                let id = update["update_id"].as_i64().unwrap_or(0);
                inner.served.entry(id).or_insert(now);
            }
            if !batch.is_empty() {
                return ok(Value::Array(batch));
            }
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            return ok(json!([]));
        }
    }
}

fn chat_json(chat_id: i64) -> Value {
    updates::chat(chat_id)
}

/// Flood control for an edit, if it is due.
fn throttle_edit(shared: &Shared) -> Option<Response> {
    let mut inner = shared.lock();
    let now = Instant::now();
    let secs = match (inner.throttle_next_edit.take(), inner.throttled_until) {
        (Some(secs), _) => {
            inner.throttled_until = Some(now + Duration::from_secs(secs));
            secs
        }
        (None, Some(until)) if until > now => (until - now).as_secs_f64().ceil() as u64,
        _ => return None,
    };
    inner.throttled.push(("editmessagetext".into(), now));
    drop(inner);
    shared.changed.notify_waiters();
    Some(too_many_requests(secs))
}

/// sendDocument / sendPhoto: the file, its caption checked like a message's HTML.
fn upload(shared: &Shared, method: &str, form: &uploads::Form) -> Response {
    let param = if method == "sendphoto" {
        "photo"
    } else {
        "document"
    };
    let Some((file_name, bytes)) = form.file(param) else {
        return error(
            400,
            &format!("Bad Request: there is no {param} in the request"),
        );
    };
    let body = &form.params;
    let caption = body["caption"].as_str().map(str::to_string);
    let parse_mode = body["parse_mode"].as_str().map(str::to_string);
    if let (Some(caption), Some("HTML")) = (&caption, parse_mode.as_deref()) {
        if let Err(e) = html::parse(caption) {
            let description = format!("Bad Request: can't parse entities: {e}");
            shared
                .lock()
                .rejected
                .push((method.to_string(), description.clone()));
            return error(400, &description);
        }
    }
    let chat_id = body["chat_id"].as_i64().unwrap_or(0);
    let mut inner = shared.lock();
    inner.next_message_id += 1;
    let upload = Upload {
        method: method.to_string(),
        chat_id,
        message_id: inner.next_message_id,
        file_name: file_name.clone(),
        bytes: bytes.clone(),
        caption,
        parse_mode,
    };
    let message = uploads::message_json(
        &upload,
        chat_json(chat_id),
        updates::bot_user(),
        updates::now(),
    );
    inner.uploads.push(upload);
    ok(message)
}

/// Check text as Telegram would: returns (as sent, visible) or the error response.
fn check_text(
    shared: &Shared,
    method: &str,
    body: &Value,
) -> Result<(String, String, bool), Box<Response>> {
    let text = body["text"].as_str().unwrap_or("").to_string();
    let html = body["parse_mode"].as_str() == Some("HTML");
    let reject = |description: String| {
        shared
            .lock()
            .rejected
            .push((method.to_string(), description.clone()));
        Box::new(error(400, &description))
    };
    let refused = shared.lock().refuse_html.clone();
    if html && refused.is_some_and(|f| text.contains(&f)) {
        return Err(reject(
            "Bad Request: can't parse entities: unsupported nesting at byte offset 0".into(),
        ));
    }
    let visible = if html {
        html::parse(&text).map_err(|e| reject(format!("Bad Request: can't parse entities: {e}")))?
    } else {
        text.clone()
    };
    if visible.trim().is_empty() {
        return Err(reject("Bad Request: message text is empty".into()));
    }
    if html::utf16_len(&visible) > 4096 {
        return Err(reject("Bad Request: message is too long".into()));
    }
    Ok((text, visible, html))
}

fn send_message(shared: &Arc<Shared>, body: &Value) -> Response {
    let (text, visible, html) = match check_text(shared, "sendmessage", body) {
        Ok(t) => t,
        Err(response) => return *response,
    };
    let chat_id = body["chat_id"].as_i64().unwrap_or(0);
    let mut inner = shared.lock();
    inner.next_message_id += 1;
    let message_id = inner.next_message_id;
    let topic = body["message_thread_id"].as_i64();
    inner.messages.push(Sent {
        message_id,
        chat_id,
        topic,
        text,
        visible: visible.clone(),
        html,
        reply_to: body["reply_parameters"]["message_id"].as_i64(),
        keyboard: body.get("reply_markup").cloned(),
        edits: Vec::new(),
        deleted: false,
        at: Instant::now(),
    });
    let mut sent = json!({
        "message_id": message_id,
        "date": updates::now(),
        "chat": chat_json(chat_id),
        "from": updates::bot_user(),
        "text": visible,
    });
    if let Some(topic) = topic {
        sent["message_thread_id"] = json!(topic);
        sent["is_topic_message"] = json!(true);
    }
    ok(sent)
}

fn edit_message(shared: &Arc<Shared>, body: &Value) -> Response {
    let (_, visible, _) = match check_text(shared, "editmessagetext", body) {
        Ok(t) => t,
        Err(response) => return *response,
    };
    let chat_id = body["chat_id"].as_i64().unwrap_or(0);
    let id = body["message_id"].as_i64();
    let mut inner = shared.lock();
    let Some(sent) = inner
        .messages
        .iter_mut()
        .find(|m| Some(m.message_id) == id && m.chat_id == chat_id && !m.deleted)
    else {
        return error(400, "Bad Request: message to edit not found");
    };
    if sent.edits.last().unwrap_or(&sent.visible) == &visible
        && body.get("reply_markup").is_none()
        && sent.keyboard.is_none()
    {
        // Telegram's exact words: clients recognize this error by them.
        return error(
            400,
            "Bad Request: message is not modified: specified new message content and reply \
             markup are exactly the same as a current content and reply markup of the message",
        );
    }
    sent.edits.push(visible.clone());
    sent.keyboard = body.get("reply_markup").cloned();
    ok(json!({
        "message_id": sent.message_id,
        "date": updates::now(),
        "edit_date": updates::now(),
        "chat": chat_json(chat_id),
        "from": updates::bot_user(),
        "text": visible,
    }))
}

/// Where getFile says `file_id` can be downloaded.
fn file_path(file_id: &str) -> String {
    format!("documents/{file_id}.bin")
}

async fn file(
    State(shared): State<Arc<Shared>>,
    Path((bot, path)): Path<(String, String)>,
) -> Response {
    if bot != format!("bot{}", shared.token) {
        return error(401, "Unauthorized");
    }
    let delay = shared.lock().slow_files.get(&path).copied();
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let inner = shared.lock();
    match inner.files.values().find(|(p, _)| *p == path) {
        Some((_, bytes)) => Response::builder()
            .status(200)
            .body(Body::from(bytes.clone()))
            .unwrap(),
        None => error(404, "Not Found"),
    }
}
