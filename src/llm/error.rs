//! What can go wrong talking to a model. Messages name the provider and say what the server
//! answered (status and its own error text, shortened); they never contain request headers.

/// The longest piece of a server's error text kept in an error message.
const MAX_SERVER_MESSAGE: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// No provider could be built from the configuration; the text says what to set.
    #[error("{0}")]
    NotConfigured(String),

    /// The caller's cancellation token fired; the request was dropped.
    #[error("the LLM request was cancelled")]
    Cancelled,

    /// A provider's settings cannot work (bad base URL, HTTP client setup).
    #[error("{provider}: invalid settings: {message}")]
    Setup { provider: String, message: String },

    /// The OAuth sign-in cannot give a token (expired, revoked, never made); the message says
    /// to log in again. Never answered by falling back to another credential.
    #[error("{provider}: {message}")]
    SignIn { provider: String, message: String },

    /// No connection (refused, DNS, TLS, reset before the answer began).
    #[error("{provider}: cannot reach the server ({attempts} attempt(s)): {message}")]
    Connect {
        provider: String,
        attempts: u32,
        message: String,
    },

    /// The server answered with an error status.
    #[error("{provider}: HTTP {status} ({attempts} attempt(s)): {message}")]
    Http {
        provider: String,
        status: u16,
        attempts: u32,
        message: String,
    },

    /// The connect, whole-request or between-chunks time limit ran out.
    #[error("{provider}: timed out: {message}")]
    Timeout { provider: String, message: String },

    /// The answer broke off or could not be understood (includes error events mid-stream).
    #[error("{provider}: bad or interrupted answer: {message}")]
    Stream { provider: String, message: String },

    /// Every provider behind a [`crate::llm::Failover`] failed; one error per provider, in order.
    #[error("no LLM provider could answer: {}", join_errors(.0))]
    AllFailed(Vec<LlmError>),
}

impl LlmError {
    /// The provider this error came from, if it is about one provider.
    pub fn provider(&self) -> Option<&str> {
        match self {
            LlmError::Setup { provider, .. }
            | LlmError::SignIn { provider, .. }
            | LlmError::Connect { provider, .. }
            | LlmError::Http { provider, .. }
            | LlmError::Timeout { provider, .. }
            | LlmError::Stream { provider, .. } => Some(provider),
            LlmError::NotConfigured(_) | LlmError::Cancelled | LlmError::AllFailed(_) => None,
        }
    }

    /// The HTTP status, for errors the server answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    pub fn is_cancelled(&self) -> bool {
        matches!(self, LlmError::Cancelled)
    }

    pub(crate) fn stream(provider: &str, message: impl Into<String>) -> LlmError {
        LlmError::Stream {
            provider: provider.to_string(),
            message: message.into(),
        }
    }
}

fn join_errors(errors: &[LlmError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The human part of an error body: `error.message` (with Anthropic's `error.type`) from the
/// JSON both APIs use, else the raw text; whitespace collapsed, shortened.
pub(crate) fn server_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let from_json = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            let err = v.get("error").unwrap_or(&v);
            if let Some(s) = err.as_str() {
                return Some(s.to_string());
            }
            let message = err.get("message")?.as_str()?;
            Some(match err.get("type").and_then(|t| t.as_str()) {
                Some(kind) if !message.contains(kind) => format!("{kind}: {message}"),
                _ => message.to_string(),
            })
        });
    let message = from_json.unwrap_or_else(|| text.into_owned());
    let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if message.is_empty() {
        return "(empty response body)".into();
    }
    truncate(&message, MAX_SERVER_MESSAGE)
}

/// Cut `s` to at most `max` bytes on a character boundary, marking the cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Replace a secret a server echoed back (some do, in "invalid key" messages).
pub(crate) fn redact(message: String, secret: &str) -> String {
    if secret.len() < 4 || !message.contains(secret) {
        return message;
    }
    message.replace(secret, "<redacted>")
}

/// A transport error as text without the URL (it could carry credentials a user put there)
/// and with its causes, which is where reqwest keeps the useful part.
pub(crate) fn describe_reqwest(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_error_body_gives_type_and_message() {
        let body =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(server_message(body), "overloaded_error: Overloaded");
    }

    #[test]
    fn openai_error_body_gives_message() {
        let body = br#"{"error":{"message":"Rate limit reached","type":"requests","code":null}}"#;
        assert_eq!(server_message(body), "requests: Rate limit reached");
        let body = br#"{"error":"model not found"}"#;
        assert_eq!(server_message(body), "model not found");
    }

    #[test]
    fn plain_bodies_are_collapsed_and_truncated() {
        let body = format!("<html>\n  {}\n</html>", "é".repeat(400));
        let message = server_message(body.as_bytes());
        assert!(message.starts_with("<html> é"));
        assert!(message.ends_with('…'));
        assert!(message.len() <= MAX_SERVER_MESSAGE + '…'.len_utf8());
        assert_eq!(server_message(b"  "), "(empty response body)");
    }

    #[test]
    fn echoed_secrets_are_redacted() {
        let message = redact(
            "invalid x-api-key fake-anthropic-key-123456".into(),
            "fake-anthropic-key-123456",
        );
        assert_eq!(message, "invalid x-api-key <redacted>");
    }

    #[test]
    fn failover_errors_list_every_provider() {
        let err = LlmError::AllFailed(vec![
            LlmError::Http {
                provider: "anthropic".into(),
                status: 529,
                attempts: 3,
                message: "overloaded_error: Overloaded".into(),
            },
            LlmError::Connect {
                provider: "openai".into(),
                attempts: 1,
                message: "connection refused".into(),
            },
        ]);
        assert_eq!(
            err.to_string(),
            "no LLM provider could answer: anthropic: HTTP 529 (3 attempt(s)): overloaded_error: \
             Overloaded; openai: cannot reach the server (1 attempt(s)): connection refused"
        );
    }
}
