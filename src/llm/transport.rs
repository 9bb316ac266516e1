//! The HTTP side shared by both providers: one reqwest client per provider with its time
//! limits, a POST whose success answer is read as a stream of server-sent events, and the
//! between-chunks (idle) limit and cancellation while that stream is read.

use super::error::{describe_reqwest, server_message};
use super::retry::{self, HttpOptions};
use super::sse::{SseEvent, SseParser};
use super::LlmError;
use crate::config::Secret;
use crate::sizes::{caps, Cap};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use std::collections::VecDeque;
use std::pin::Pin;
use tokio_util::sync::CancellationToken;

/// Where and how to reach one provider. Each provider type has `default_settings()`.
#[derive(Clone, Debug)]
pub struct ProviderSettings {
    /// Empty means no key is sent (local OpenAI-compatible servers need none).
    pub api_key: Secret,
    /// The API root: `https://api.anthropic.com`, `https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1` for Ollama…
    pub base_url: String,
    pub model: String,
    /// Output token limit when the request sets none.
    pub max_tokens: u32,
    pub http: HttpOptions,
    /// Signed in with `warden login`: its token is sent instead of `api_key`.
    pub oauth: Option<std::sync::Arc<crate::oauth::Credential>>,
}

impl ProviderSettings {
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Secret::new(key);
        self
    }
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }
    pub fn with_http(mut self, http: HttpOptions) -> Self {
        self.http = http;
        self
    }
    pub fn with_oauth(mut self, credential: std::sync::Arc<crate::oauth::Credential>) -> Self {
        self.oauth = Some(credential);
        self
    }

    /// The secret to send now: the OAuth token (refreshed if it is about to expire), else the
    /// key. A failed sign-in is an error, never a silent switch to the key.
    pub(crate) async fn credential(&self, provider: &str) -> Result<Secret, LlmError> {
        match &self.oauth {
            None => Ok(self.api_key.clone()),
            Some(oauth) => {
                oauth
                    .bearer()
                    .await
                    .map(Secret::new)
                    .map_err(|message| LlmError::SignIn {
                        provider: provider.to_string(),
                        message,
                    })
            }
        }
    }

    /// `base_url` joined with an API path, without doubling the slash.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base_url.trim_end_matches('/'), path)
    }
}

/// A provider's HTTP client with its options.
pub(crate) struct Transport {
    provider: &'static str,
    client: reqwest::Client,
    options: HttpOptions,
    secret: Secret,
}

impl Transport {
    pub fn new(provider: &'static str, settings: &ProviderSettings) -> Result<Transport, LlmError> {
        let setup = |message: String| LlmError::Setup {
            provider: provider.to_string(),
            message,
        };
        let url = reqwest::Url::parse(&settings.base_url)
            .map_err(|e| setup(format!("base_url {:?}: {e}", settings.base_url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(setup(format!(
                "base_url {:?} must start with http:// or https://",
                settings.base_url
            )));
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(settings.http.connect_timeout)
            .user_agent(concat!("warden/", env!("CARGO_PKG_VERSION")));
        // A local model server must not be sent through a proxy from the environment.
        if is_loopback(&url) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| setup(describe_reqwest(e)))?;
        Ok(Transport {
            provider,
            client,
            options: settings.http.clone(),
            secret: settings.api_key.clone(),
        })
    }

    /// POST `body` as JSON (retrying per the policy, told by `waiting`) and open the answer
    /// as an event stream.
    pub async fn post_sse(
        &self,
        url: &str,
        mut headers: HeaderMap,
        body: &serde_json::Value,
        waiting: retry::Waiting<'_>,
        cancel: &CancellationToken,
    ) -> Result<SseStream, LlmError> {
        let body = Bytes::from(serde_json::to_vec(body).map_err(|e| {
            LlmError::stream(self.provider, format!("cannot encode the request: {e}"))
        })?);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let resp = retry::send(
            self.provider,
            &self.options,
            self.secret.expose(),
            waiting,
            cancel,
            || {
                self.client
                    .post(url)
                    .headers(headers.clone())
                    .timeout(self.options.request_timeout)
                    .body(body.clone())
            },
        )
        .await?;
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mut stream = SseStream {
            provider: self.provider,
            body: Box::pin(resp.bytes_stream()),
            parser: SseParser::new(),
            queue: VecDeque::new(),
            ended: false,
            options: self.options.clone(),
            received: 0,
            cap: Cap::new(caps().llm_response_bytes, "llm_response_bytes"),
        };
        if !content_type.is_empty() && !content_type.contains("event-stream") {
            let text = stream.read_rest(cancel).await?;
            return Err(LlmError::stream(
                self.provider,
                format!(
                    "expected an event stream, got {content_type}: {}",
                    server_message(&text)
                ),
            ));
        }
        Ok(stream)
    }
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// The events of one streaming answer. Dropping it closes the connection.
pub(crate) struct SseStream {
    provider: &'static str,
    body: ByteStream,
    parser: SseParser,
    queue: VecDeque<SseEvent>,
    ended: bool,
    options: HttpOptions,
    /// Bytes of the body so far, against `cap` (an answer that streams forever in small
    /// events).
    received: usize,
    cap: Cap,
}

impl SseStream {
    /// The next event, `None` at the end of the body.
    pub async fn next(&mut self, cancel: &CancellationToken) -> Result<Option<SseEvent>, LlmError> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            let mut out = Vec::new();
            match self.next_chunk(cancel).await? {
                Some(bytes) => {
                    self.received += bytes.len();
                    if self.received > self.cap.bytes {
                        let exceeded = self.cap.exceeded("the model's answer");
                        return Err(LlmError::stream(self.provider, exceeded.to_string()));
                    }
                    self.parser
                        .push(&bytes, &mut out)
                        .map_err(|e| LlmError::stream(self.provider, e))?
                }
                None => {
                    self.parser.finish(&mut out);
                    self.ended = true;
                }
            }
            self.queue.extend(out);
        }
    }

    async fn next_chunk(&mut self, cancel: &CancellationToken) -> Result<Option<Bytes>, LlmError> {
        let idle = self.options.idle_timeout;
        let chunk = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            chunk = tokio::time::timeout(idle, self.body.next()) => chunk,
        };
        match chunk {
            Err(_) => Err(LlmError::Timeout {
                provider: self.provider.to_string(),
                message: format!("no data for {idle:?} while the answer streamed"),
            }),
            Ok(None) => Ok(None),
            Ok(Some(Ok(bytes))) => Ok(Some(bytes)),
            Ok(Some(Err(e))) if e.is_timeout() => Err(LlmError::Timeout {
                provider: self.provider.to_string(),
                message: format!(
                    "the answer took longer than {:?} (llm.*.timeout_secs)",
                    self.options.request_timeout
                ),
            }),
            Ok(Some(Err(e))) => Err(LlmError::stream(
                self.provider,
                format!("the connection broke off: {}", describe_reqwest(e)),
            )),
        }
    }

    /// The rest of the body as bytes (bounded), for an answer that is not an event stream.
    async fn read_rest(&mut self, cancel: &CancellationToken) -> Result<Vec<u8>, LlmError> {
        let mut all = Vec::new();
        while let Some(bytes) = self.next_chunk(cancel).await? {
            all.extend_from_slice(&bytes);
            if all.len() > 64 * 1024 {
                break;
            }
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(base_url: &str) -> ProviderSettings {
        ProviderSettings {
            api_key: Secret::default(),
            base_url: base_url.into(),
            model: "m".into(),
            max_tokens: 100,
            http: HttpOptions::default(),
            oauth: None,
        }
    }

    #[test]
    fn urls_join_without_double_slashes() {
        assert_eq!(
            settings("http://h:1/v1/").url("chat/completions"),
            "http://h:1/v1/chat/completions"
        );
        assert_eq!(
            settings("https://api.anthropic.com").url("v1/messages"),
            "https://api.anthropic.com/v1/messages"
        );
    }

    #[test]
    fn bad_base_urls_are_setup_errors() {
        let err = Transport::new("openai", &settings("localhost:11434"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.starts_with("openai: invalid settings: base_url"),
            "{err}"
        );
        assert!(Transport::new("openai", &settings("ftp://x")).is_err());
        assert!(Transport::new("openai", &settings("http://127.0.0.1:1/v1")).is_ok());
    }

    #[test]
    fn loopback_hosts_are_recognized() {
        let check = |u: &str| is_loopback(&reqwest::Url::parse(u).unwrap());
        assert!(check("http://localhost:11434/v1"));
        assert!(check("http://127.0.0.1:8080"));
        assert!(check("http://[::1]:8080"));
        assert!(!check("https://api.openai.com/v1"));
    }
}
