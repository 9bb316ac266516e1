//! Slack's Web API over reqwest (rustls): `POST {api_url}/{method}` with a JSON body and the
//! token as a Bearer header — never in a URL, so no request line can leak it, and every error
//! text is scrubbed of both tokens all the same. A 429 carries `Retry-After`: the caller
//! either waits it out ([`SlackApi::call`]) or learns it ([`ApiError::RateLimited`]).

use crate::secret::Secret;
use serde_json::{json, Value};
use std::time::Duration;

/// Slack's own words on how long a `Retry-After` may be is "a few seconds"; a longer one is
/// still honoured, up to this.
const LONGEST_WAIT: Duration = Duration::from_secs(120);
/// A download that takes longer than this is abandoned.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// How many rate-limit answers one patient call waits out before giving up.
const PATIENCE: usize = 5;

/// Which token a method takes.
#[derive(Clone, Copy, Debug)]
pub enum Token {
    /// `xapp-…`: `apps.connections.open`.
    App,
    /// `xoxb-…`: everything else.
    Bot,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("Slack asked to wait {0:?} (rate limited)")]
    RateLimited(Duration),
    /// `{"ok": false, "error": "…"}`.
    #[error("Slack refused {method}: {error}")]
    Refused { method: String, error: String },
    /// No answer, or one that is not Slack's: the request may have arrived.
    #[error("{0}")]
    Transport(String),
}

#[derive(Clone)]
pub struct SlackApi {
    http: reqwest::Client,
    base: String,
    app: Secret,
    bot: Secret,
}

/// Who the bot token belongs to (`auth.test`).
#[derive(Clone, Debug, Default)]
pub struct Identity {
    pub user_id: String,
    pub team: String,
}

impl SlackApi {
    pub fn new(
        base: &str,
        app: Secret,
        bot: Secret,
        timeout: Duration,
    ) -> Result<SlackApi, String> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("building the Slack client: {e}"))?;
        Ok(SlackApi {
            http,
            base: base.trim_end_matches('/').to_string(),
            app,
            bot,
        })
    }

    /// Call `method`, waiting out rate limits (a few times); the answer's JSON when `ok`.
    pub async fn call(&self, method: &str, token: Token, body: &Value) -> Result<Value, ApiError> {
        let mut waited = 0;
        loop {
            match self.call_once(method, token, body).await {
                Err(ApiError::RateLimited(wait)) if waited < PATIENCE => {
                    tracing::debug!("slack {method}: rate limited, waiting {wait:?}");
                    waited += 1;
                    tokio::time::sleep(wait).await;
                }
                other => return other,
            }
        }
    }

    /// Call `method` once: a rate limit comes back as [`ApiError::RateLimited`].
    pub async fn call_once(
        &self,
        method: &str,
        token: Token,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let secret = match token {
            Token::App => &self.app,
            Token::Bot => &self.bot,
        };
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .bearer_auth(secret.expose())
            .json(body)
            .send()
            .await
            .map_err(|e| ApiError::Transport(self.scrub(&format!("slack {method}: {e}"))))?;
        answer_of(method, response)
            .await
            .map_err(|e| self.scrub_error(e))
    }

    /// `text` without either token.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in [&self.app, &self.bot] {
            if !secret.is_empty() {
                text = text.replace(secret.expose(), "[redacted]");
            }
        }
        text
    }

    /// `auth.test` with the bot token: who warden is in the workspace.
    pub async fn identity(&self) -> Result<Identity, ApiError> {
        let answer = self.call("auth.test", Token::Bot, &json!({})).await?;
        Ok(Identity {
            user_id: answer["user_id"].as_str().unwrap_or_default().to_string(),
            team: answer["team"].as_str().unwrap_or_default().to_string(),
        })
    }

    /// `auth.test` with the app token (Slack accepts it there): whether it is valid.
    pub async fn check_app_token(&self) -> Result<(), ApiError> {
        self.call("auth.test", Token::App, &json!({}))
            .await
            .map(|_| ())
    }

    /// `apps.connections.open`: a fresh Socket Mode WebSocket address.
    pub async fn socket_url(&self) -> Result<String, ApiError> {
        let answer = self
            .call("apps.connections.open", Token::App, &json!({}))
            .await?;
        answer["url"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| ApiError::Transport("apps.connections.open gave no url".into()))
    }

    /// `chat.postMessage` (links and media never unfurled): the new message's `ts`.
    pub async fn post(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        patient: bool,
    ) -> Result<String, ApiError> {
        let mut body = json!({
            "channel": channel,
            "text": text,
            "unfurl_links": false,
            "unfurl_media": false,
        });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let answer = if patient {
            self.call("chat.postMessage", Token::Bot, &body).await?
        } else {
            self.call_once("chat.postMessage", Token::Bot, &body)
                .await?
        };
        answer["ts"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| ApiError::Transport("chat.postMessage gave no ts".into()))
    }

    /// `chat.postMessage` with Block Kit `blocks` (and `text` for notifications): its `ts`.
    pub async fn post_blocks(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        blocks: &Value,
    ) -> Result<String, ApiError> {
        let mut body = json!({
            "channel": channel,
            "text": text,
            "blocks": blocks,
            "unfurl_links": false,
            "unfurl_media": false,
        });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let answer = self.call("chat.postMessage", Token::Bot, &body).await?;
        answer["ts"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| ApiError::Transport("chat.postMessage gave no ts".into()))
    }

    /// `chat.update` of message `ts` to `text` and `blocks`.
    pub async fn update_blocks(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: &Value,
    ) -> Result<(), ApiError> {
        let body = json!({"channel": channel, "ts": ts, "text": text, "blocks": blocks});
        self.call("chat.update", Token::Bot, &body).await.map(drop)
    }

    /// Upload `data` as file `name` into the conversation, Slack's current way: ask for an
    /// upload address (`files.getUploadURLExternal`), send the bytes there (the address is
    /// signed: no token goes with them), then share it (`files.completeUploadExternal`).
    pub async fn upload(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        name: &str,
        data: Vec<u8>,
        comment: Option<&str>,
    ) -> Result<(), ApiError> {
        let length = data.len().to_string();
        let slot = self
            .call_form(
                "files.getUploadURLExternal",
                &[("filename", name), ("length", &length)],
            )
            .await?;
        let (Some(url), Some(file_id)) = (slot["upload_url"].as_str(), slot["file_id"].as_str())
        else {
            return Err(ApiError::Transport(
                "files.getUploadURLExternal gave no upload_url".into(),
            ));
        };
        let sent = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(data)
            .send()
            .await
            .map_err(|e| ApiError::Transport(self.scrub(&format!("uploading {name}: {e}"))))?;
        if !sent.status().is_success() {
            return Err(ApiError::Refused {
                method: "file upload".into(),
                error: format!("HTTP {}", sent.status()),
            });
        }
        let mut body = json!({
            "files": [{"id": file_id, "title": name}],
            "channel_id": channel,
        });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        if let Some(comment) = comment {
            body["initial_comment"] = json!(comment);
        }
        self.call("files.completeUploadExternal", Token::Bot, &body)
            .await
            .map(drop)
    }

    /// Download a file a person shared (`url_private_download`), at most `limit` bytes. The bot
    /// token goes only to Slack's file host (`https://files.slack.com`) or to the configured
    /// API's own address (a local fake), never to an address an event could name otherwise.
    pub async fn download(&self, url: &str, limit: u64) -> Result<Vec<u8>, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("a bad file address: {e}"))?;
        let api = url::Url::parse(&self.base).map_err(|e| format!("slack.api_url: {e}"))?;
        let slack_files =
            parsed.scheme() == "https" && parsed.host_str() == Some("files.slack.com");
        if !slack_files && parsed.origin() != api.origin() {
            return Err(format!(
                "the file is not on Slack's file host ({}), so the bot token is not sent there",
                parsed.host_str().unwrap_or("no host")
            ));
        }
        let fetch = async {
            let mut response = self
                .http
                .get(parsed)
                .bearer_auth(self.bot.expose())
                .send()
                .await
                .map_err(|e| self.scrub(&format!("downloading: {e}")))?;
            if !response.status().is_success() {
                return Err(format!("Slack answered HTTP {}", response.status()));
            }
            let mut data = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| self.scrub(&format!("downloading: {e}")))?
            {
                if (data.len() + chunk.len()) as u64 > limit {
                    return Err(format!("it is larger than {}", crate::sizes::human(limit)));
                }
                data.extend_from_slice(&chunk);
            }
            Ok(data)
        };
        tokio::time::timeout(DOWNLOAD_TIMEOUT, fetch)
            .await
            .unwrap_or_else(|_| Err("the download took too long".into()))
    }

    /// A method that takes form fields rather than JSON (`files.getUploadURLExternal`).
    async fn call_form(&self, method: &str, form: &[(&str, &str)]) -> Result<Value, ApiError> {
        let mut waited = 0;
        loop {
            let response = self
                .http
                .post(format!("{}/{method}", self.base))
                .bearer_auth(self.bot.expose())
                .form(form)
                .send()
                .await
                .map_err(|e| ApiError::Transport(self.scrub(&format!("slack {method}: {e}"))))?;
            match answer_of(method, response).await {
                Err(ApiError::RateLimited(wait)) if waited < PATIENCE => {
                    waited += 1;
                    tokio::time::sleep(wait).await;
                }
                other => return other.map_err(|e| self.scrub_error(e)),
            }
        }
    }

    fn scrub_error(&self, error: ApiError) -> ApiError {
        match error {
            ApiError::Refused { method, error } => ApiError::Refused {
                method,
                error: self.scrub(&error),
            },
            ApiError::Transport(why) => ApiError::Transport(self.scrub(&why)),
            limited => limited,
        }
    }

    /// `chat.update` of message `ts`.
    pub async fn update(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        patient: bool,
    ) -> Result<(), ApiError> {
        let body = json!({"channel": channel, "ts": ts, "text": text});
        if patient {
            self.call("chat.update", Token::Bot, &body).await?;
        } else {
            self.call_once("chat.update", Token::Bot, &body).await?;
        }
        Ok(())
    }

    /// `chat.postEphemeral`: a message only `user` sees.
    pub async fn tell(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<(), ApiError> {
        let mut body = json!({"channel": channel, "user": user, "text": text});
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        self.call("chat.postEphemeral", Token::Bot, &body).await?;
        Ok(())
    }
}

/// Slack's answer to `method`: its JSON when `ok`, a rate limit with its `Retry-After`, or
/// Slack's reason.
async fn answer_of(method: &str, response: reqwest::Response) -> Result<Value, ApiError> {
    if response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
        let secs = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(1);
        return Err(ApiError::RateLimited(
            Duration::from_secs(secs).min(LONGEST_WAIT),
        ));
    }
    let status = response.status();
    let answer: Value = response
        .json()
        .await
        .map_err(|e| ApiError::Transport(format!("slack {method}: HTTP {status}: {e}")))?;
    if answer["ok"].as_bool() == Some(true) {
        return Ok(answer);
    }
    Err(ApiError::Refused {
        method: method.to_string(),
        error: answer["error"]
            .as_str()
            .unwrap_or("no reason given")
            .to_string(),
    })
}

/// A message `ts` ("1700000000.000100") as the number the gateway stores for a draft, and back.
pub fn ts_to_id(ts: &str) -> Option<i64> {
    let (secs, micros) = ts.split_once('.')?;
    if micros.len() != 6 {
        return None;
    }
    let secs: i64 = secs.parse().ok()?;
    let micros: i64 = micros.parse().ok()?;
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

pub fn id_to_ts(id: i64) -> String {
    format!("{}.{:06}", id / 1_000_000, id % 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ts_survives_the_trip_through_a_number() {
        let id = ts_to_id("1700000000.000100").unwrap();
        assert_eq!(id_to_ts(id), "1700000000.000100");
        assert_eq!(ts_to_id("17.1"), None);
        assert_eq!(ts_to_id("x.000001"), None);
    }

    #[test]
    fn errors_never_show_a_token() {
        let api = SlackApi::new(
            "http://127.0.0.1:9",
            Secret::new("xapp-secret"),
            Secret::new("xoxb-secret"),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(
            api.scrub("bad xoxb-secret and xapp-secret"),
            "bad [redacted] and [redacted]"
        );
    }
}
