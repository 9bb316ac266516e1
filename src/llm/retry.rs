//! Sending one request until the server answers with success, with retries for transient
//! failures: an overloaded or rate-limited server (429, 5xx, Anthropic's 529) and connections
//! that fail before any byte of the answer. Waits follow `retry-after` when the server sends
//! it, else exponential backoff with jitter, for as long as the retry budget allows (a minute
//! by default; a request may bring its own, see [`crate::llm::ChatRequest::patience`]). The
//! first retry is announced once ([`StreamEvent::Retrying`]), so a person waiting is told that
//! the model is busy and that warden keeps trying. Only the request is retried: once a success
//! status arrived the answer streams and a failure after that is final, so no output is ever
//! shown twice. Cancellation drops the request at once.

use super::error::{describe_reqwest, redact, server_message};
use super::{EventSink, LlmError, StreamEvent};
use reqwest::header::HeaderMap;
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;

/// Time limits and retries for one provider's requests.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpOptions {
    /// Establishing the TCP/TLS connection.
    pub connect_timeout: Duration,
    /// The whole request, from sending it to the last byte of the answer.
    pub request_timeout: Duration,
    /// The longest silence between two chunks of a streaming answer.
    pub idle_timeout: Duration,
    pub retry: RetryPolicy,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
        }
    }
}

/// How often and how patiently to retry.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Tries in total, the first included (1 means never retry).
    pub max_attempts: u32,
    /// Backoff before the second try; doubles each time up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// The longest `retry-after` honored. A server asking for more gets no retry: the error is
    /// returned at once so a failover provider can answer instead.
    pub max_retry_after: Duration,
    /// How long, from the first try, a failing request is retried: no wait starts that would
    /// end later. A request's own patience replaces it.
    pub budget: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            // The budget is the limit; a configured `max_attempts` caps it further.
            max_attempts: u32::MAX,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
            budget: Duration::from_secs(60),
        }
    }
}

/// What a request brings to its retries: how long it may wait, and who hears that it does.
#[derive(Clone, Copy)]
pub(crate) struct Waiting<'a> {
    /// Replaces [`RetryPolicy::budget`] for this request.
    pub patience: Option<Duration>,
    pub events: &'a dyn EventSink,
}

/// Statuses that mean "try again later": timeout, rate limit, server trouble, overloaded.
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504 | 529)
}

/// The wait a server asked for: `retry-after-ms` (OpenAI), else `retry-after` as seconds or
/// an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some(
        SystemTime::from(date)
            .duration_since(now)
            .unwrap_or(Duration::ZERO),
    )
}

/// Backoff after failed attempt number `attempt` (1-based): exponential, capped, and
/// "equal jitter" (between half and all of it) so many clients do not retry in lockstep.
pub(crate) fn backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    use rand::Rng;
    let exp = policy
        .initial_backoff
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let capped = exp.min(policy.max_backoff);
    capped.mul_f64(rand::rng().random_range(0.5..=1.0))
}

/// The most of an error body read for its message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Send the request built by `make` until it succeeds, fails for good or runs out of tries or
/// budget. `secret` is redacted from any server message that echoes it.
pub(crate) async fn send(
    provider: &str,
    options: &HttpOptions,
    secret: &str,
    waiting: Waiting<'_>,
    cancel: &CancellationToken,
    make: impl Fn() -> reqwest::RequestBuilder,
) -> Result<reqwest::Response, LlmError> {
    let policy = &options.retry;
    let budget = waiting.patience.unwrap_or(policy.budget);
    let started = Instant::now();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let outcome = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            outcome = make().send() => outcome,
        };
        let (err, delay) = match outcome {
            Ok(resp) if resp.status().is_success() => return Ok(resp),
            Ok(resp) => {
                let status = resp.status().as_u16();
                let asked = retry_after(resp.headers(), SystemTime::now());
                let body = read_error_body(resp, cancel).await?;
                let err = LlmError::Http {
                    provider: provider.to_string(),
                    status,
                    attempts: attempt,
                    message: redact(server_message(&body), secret),
                };
                if !is_retryable_status(status) {
                    return Err(err);
                }
                match asked {
                    Some(wait) if wait > policy.max_retry_after => {
                        tracing::warn!(provider, status, ?wait, "server asks to wait too long");
                        return Err(err);
                    }
                    Some(wait) => (err, wait),
                    None => (err, backoff(policy, attempt)),
                }
            }
            // The whole-request limit ran out while waiting for the answer: retrying would
            // only double the wait, so a failover provider gets the turn instead.
            Err(e) if e.is_timeout() && !e.is_connect() => {
                return Err(LlmError::Timeout {
                    provider: provider.to_string(),
                    message: format!(
                        "no answer within {:?} (llm.*.timeout_secs)",
                        options.request_timeout
                    ),
                });
            }
            Err(e) if e.is_connect() || e.is_request() => {
                let err = LlmError::Connect {
                    provider: provider.to_string(),
                    attempts: attempt,
                    message: describe_reqwest(e),
                };
                (err, backoff(policy, attempt))
            }
            Err(e) => {
                return Err(LlmError::Connect {
                    provider: provider.to_string(),
                    attempts: attempt,
                    message: describe_reqwest(e),
                })
            }
        };
        if attempt >= policy.max_attempts || started.elapsed() + delay > budget {
            return Err(err);
        }
        tracing::warn!(provider, attempt, ?delay, error = %err, "retrying LLM request");
        if attempt == 1 {
            waiting.events.emit(StreamEvent::Retrying {
                provider: provider.to_string(),
                status: err.status(),
                budget_secs: budget.as_secs(),
            });
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// Read at most [`MAX_ERROR_BODY`] bytes; a body that breaks off still yields what came.
async fn read_error_body(
    mut resp: reqwest::Response,
    cancel: &CancellationToken,
) -> Result<Vec<u8>, LlmError> {
    let mut body = Vec::new();
    loop {
        let chunk = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            chunk = resp.chunk() => chunk,
        };
        match chunk {
            Ok(Some(bytes)) => {
                body.extend_from_slice(&bytes);
                if body.len() >= MAX_ERROR_BODY {
                    body.truncate(MAX_ERROR_BODY);
                    return Ok(body);
                }
            }
            Ok(None) | Err(_) => return Ok(body),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_seconds_milliseconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        let get = |pairs| retry_after(&headers(pairs), now);
        assert_eq!(get(&[("retry-after", "3")]), Some(Duration::from_secs(3)));
        assert_eq!(
            get(&[("retry-after", "0.5")]),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            get(&[("retry-after-ms", "250"), ("retry-after", "9")]),
            Some(Duration::from_millis(250))
        );
        // 1445412480 is Wed, 21 Oct 2015 07:28:00 GMT: ten seconds after `now`.
        assert_eq!(
            get(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            get(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(get(&[("retry-after", "soon")]), None);
        assert_eq!(get(&[("retry-after", "-1")]), None);
        assert_eq!(get(&[]), None);
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let policy = RetryPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(700),
            ..RetryPolicy::default()
        };
        for _ in 0..50 {
            let first = backoff(&policy, 1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = backoff(&policy, 3);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            let late = backoff(&policy, 40);
            assert!(late >= Duration::from_millis(350) && late <= Duration::from_millis(700));
        }
    }

    #[test]
    fn only_transient_statuses_are_retried() {
        for status in [429, 500, 502, 503, 529] {
            assert!(is_retryable_status(status), "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422] {
            assert!(!is_retryable_status(status), "{status}");
        }
    }
}
