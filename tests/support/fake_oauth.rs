//! A fake OAuth 2.0 authorization server on 127.0.0.1:0: `GET /authorize` (checks the client,
//! the S256 challenge and the state, remembers the challenge and answers with a redirect
//! carrying a one-time code) and `POST /token` (the code grant checks the PKCE verifier against
//! the challenge and the redirect URI; the refresh grant rotates refresh tokens and refuses a
//! used or revoked one with `invalid_grant`). `GET /code` is the page a paste flow ends on.
//!
//! Tests act as the browser with [`FakeOAuth::authorize`], and inspect the token requests.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Form;
use base64::Engine;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub const CLIENT_ID: &str = "warden-test-client";

struct Code {
    challenge: String,
    redirect_uri: String,
}

#[derive(Default)]
struct Inner {
    next: u32,
    codes: HashMap<String, Code>,
    /// Refresh tokens that still work.
    live_refresh: Vec<String>,
    /// Every POST /token, as its form.
    token_requests: Vec<HashMap<String, String>>,
    /// `expires_in` of issued access tokens.
    expires_in: i64,
    /// How long a refresh takes to answer.
    refresh_delay: Duration,
    /// Refusals, for assertions: (grant, why).
    refused: Vec<(String, String)>,
}

#[derive(Clone)]
struct Shared(Arc<Mutex<Inner>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct FakeOAuth {
    addr: SocketAddr,
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOAuth {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeOAuth {
    pub async fn start() -> FakeOAuth {
        let shared = Shared(Arc::new(Mutex::new(Inner {
            expires_in: 3600,
            ..Inner::default()
        })));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .route("/authorize", axum::routing::get(authorize))
            .route("/token", axum::routing::post(token))
            .route("/code", axum::routing::get(code_page))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeOAuth {
            addr,
            shared,
            server,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The `[llm.<provider>.oauth]` block for this server.
    pub fn config_block(&self, provider: &str) -> String {
        format!(
            "[llm.{provider}.oauth]\nauthorize_url = \"{}\"\ntoken_url = \"{}\"\nclient_id = \
             \"{CLIENT_ID}\"\nscopes = [\"models\", \"offline_access\"]\nredirect_uri = \"{}\"\n",
            self.url("/authorize"),
            self.url("/token"),
            self.url("/code"),
        )
    }

    /// Issued access tokens expire after `secs`.
    pub fn set_expires_in(&self, secs: i64) {
        self.shared.lock().expires_in = secs;
    }

    /// A refresh takes this long to answer.
    pub fn set_refresh_delay(&self, delay: Duration) {
        self.shared.lock().refresh_delay = delay;
    }

    /// The user revokes warden's access: every refresh token stops working.
    pub fn revoke_refresh_tokens(&self) {
        self.shared.lock().live_refresh.clear();
    }

    /// Tokens issued without a login (as if one had been made): (access, refresh).
    pub fn issue_tokens(&self) -> (String, String) {
        let mut inner = self.shared.lock();
        inner.next += 1;
        let n = inner.next;
        let refresh = format!("refresh-secret-{n}");
        inner.live_refresh.push(refresh.clone());
        (format!("access-secret-{n}"), refresh)
    }

    pub fn token_requests(&self) -> Vec<HashMap<String, String>> {
        self.shared.lock().token_requests.clone()
    }

    pub fn refreshes(&self) -> usize {
        self.token_requests()
            .iter()
            .filter(|f| f.get("grant_type").map(String::as_str) == Some("refresh_token"))
            .count()
    }

    pub fn refused(&self) -> Vec<(String, String)> {
        self.shared.lock().refused.clone()
    }

    /// The browser's part: open `url` (warden's authorize URL) and return where the server
    /// sends it (the redirect, with `code` and `state`).
    pub async fn authorize(&self, url: &str) -> String {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let response = client.get(url).send().await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::FOUND,
            "{}",
            response.text().await.unwrap_or_default()
        );
        response.headers()["location"].to_str().unwrap().to_string()
    }
}

async fn authorize(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let get = |k: &str| query.get(k).cloned().unwrap_or_default();
    let bad = |why: &str| (StatusCode::BAD_REQUEST, why.to_string()).into_response();
    if get("response_type") != "code" {
        return bad("response_type must be code");
    }
    if get("client_id") != CLIENT_ID {
        return bad("unknown client");
    }
    if get("code_challenge_method") != "S256" || get("code_challenge").len() != 43 {
        return bad("PKCE with S256 is required");
    }
    if get("state").is_empty() {
        return bad("state is required");
    }
    let redirect_uri = get("redirect_uri");
    let mut inner = shared.lock();
    inner.next += 1;
    let code = format!("code-{}", inner.next);
    inner.codes.insert(
        code.clone(),
        Code {
            challenge: get("code_challenge"),
            redirect_uri: redirect_uri.clone(),
        },
    );
    let mut location = url::Url::parse(&redirect_uri).unwrap();
    location
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &get("state"));
    (StatusCode::FOUND, [("location", location.to_string())]).into_response()
}

async fn code_page(Query(query): Query<HashMap<String, String>>) -> String {
    format!(
        "Copy this code into warden: {}",
        query.get("code").cloned().unwrap_or_default()
    )
}

fn refuse(inner: &mut Inner, grant: &str, why: &str) -> Response {
    inner.refused.push((grant.to_string(), why.to_string()));
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": "invalid_grant", "error_description": why})),
    )
        .into_response()
}

async fn token(
    State(shared): State<Shared>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let get = |k: &str| form.get(k).cloned().unwrap_or_default();
    let grant = get("grant_type");
    let delay = {
        let mut inner = shared.lock();
        inner.token_requests.push(form.clone());
        inner.refresh_delay
    };
    if get("client_id") != CLIENT_ID {
        return refuse(&mut shared.lock(), &grant, "unknown client");
    }
    match grant.as_str() {
        "authorization_code" => {
            let mut inner = shared.lock();
            // A code is good once.
            let Some(code) = inner.codes.remove(&get("code")) else {
                return refuse(&mut inner, &grant, "unknown or used code");
            };
            if code.redirect_uri != get("redirect_uri") {
                return refuse(&mut inner, &grant, "redirect_uri differs");
            }
            let verifier = get("code_verifier");
            let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(verifier.as_bytes()));
            if verifier.len() < 43 || challenge != code.challenge {
                return refuse(&mut inner, &grant, "PKCE verifier does not match");
            }
            issue(&mut inner)
        }
        "refresh_token" => {
            tokio::time::sleep(delay).await;
            let mut inner = shared.lock();
            let old = get("refresh_token");
            let Some(at) = inner.live_refresh.iter().position(|t| *t == old) else {
                return refuse(&mut inner, &grant, "refresh token revoked or used");
            };
            // Rotation: the old refresh token is spent.
            inner.live_refresh.remove(at);
            issue(&mut inner)
        }
        _ => refuse(&mut shared.lock(), &grant, "unsupported grant"),
    }
}

fn issue(inner: &mut Inner) -> Response {
    inner.next += 1;
    let n = inner.next;
    let refresh = format!("refresh-secret-{n}");
    inner.live_refresh.push(refresh.clone());
    axum::Json(json!({
        "access_token": format!("access-secret-{n}"),
        "refresh_token": refresh,
        "token_type": "Bearer",
        "expires_in": inner.expires_in,
        "scope": "models offline_access",
    }))
    .into_response()
}
