//! The token endpoint (RFC 6749 §4.1.3, §6): a code and its PKCE verifier for tokens, or a
//! refresh token for new ones. Form-encoded POSTs; the answer's error codes are kept so a
//! revoked refresh token can be told apart from a network failure.

use super::tokens::Tokens;
use super::OAuthConfig;
use serde::Deserialize;
use std::time::Duration;

/// How long one token request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// The server refused the grant (`invalid_grant`: the code or refresh token is expired,
    /// used or revoked).
    #[error("the token endpoint refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        error: String,
        description: Option<String>,
    },
    /// No answer, or one that is not a token response.
    #[error("{0}")]
    Failed(String),
}

impl ExchangeError {
    /// The grant itself is dead: only a new login helps.
    pub fn needs_login(&self) -> bool {
        matches!(self, ExchangeError::Refused { error, .. }
            if error == "invalid_grant" || error == "unauthorized_client")
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<i64>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

pub(super) fn client() -> Result<reqwest::Client, ExchangeError> {
    reqwest::Client::builder()
        .timeout(TIMEOUT)
        .user_agent(concat!("warden/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ExchangeError::Failed(e.to_string()))
}

/// Trade an authorization code (with its verifier) for tokens.
pub(super) async fn code(
    config: &OAuthConfig,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
) -> Result<Tokens, ExchangeError> {
    post(
        config,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", &config.client_id),
            ("code_verifier", verifier),
        ],
        None,
    )
    .await
}

/// New tokens for a refresh token. A server that sends no new refresh token keeps the old one
/// valid (RFC 6749 §6), so it is kept.
pub(super) async fn refresh(config: &OAuthConfig, refresh: &str) -> Result<Tokens, ExchangeError> {
    post(
        config,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", &config.client_id),
        ],
        Some(refresh),
    )
    .await
}

async fn post(
    config: &OAuthConfig,
    form: &[(&str, &str)],
    old_refresh: Option<&str>,
) -> Result<Tokens, ExchangeError> {
    let response = client()?
        .post(&config.token_url)
        .header(reqwest::header::ACCEPT, "application/json")
        .form(form)
        .send()
        .await
        .map_err(|e| {
            ExchangeError::Failed(format!(
                "cannot reach the token endpoint: {}",
                crate::redact::redact(&e.without_url().to_string())
            ))
        })?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| ExchangeError::Failed(format!("reading the token answer: {e}")))?;
    if !status.is_success() {
        return Err(match serde_json::from_slice::<ErrorResponse>(&body) {
            Ok(e) => ExchangeError::Refused {
                error: e.error,
                description: e.error_description.map(|d| crate::redact::redact(&d)),
            },
            Err(_) => ExchangeError::Failed(format!("the token endpoint answered HTTP {status}")),
        });
    }
    let answer: TokenResponse = serde_json::from_slice(&body).map_err(|e| {
        ExchangeError::Failed(format!("the token endpoint's answer is not a token: {e}"))
    })?;
    let now = chrono::Utc::now().timestamp();
    let tokens = Tokens {
        access_token: answer.access_token,
        refresh_token: answer
            .refresh_token
            .or_else(|| old_refresh.map(str::to_string)),
        expires_at: answer.expires_in.map(|secs| now + secs.max(0)),
        scope: answer.scope,
    };
    tokens.redact();
    Ok(tokens)
}
