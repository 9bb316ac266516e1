//! Speech to text for voice messages and audio, through an OpenAI-compatible
//! `POST {base_url}/audio/transcriptions` endpoint (OpenAI, or a local whisper.cpp /
//! faster-whisper server): a multipart upload of the `file` and the `model`, answered with
//! `{"text": …}`.
//!
//! Only the agent worker calls the endpoint (it holds `[voice] api_key`); `warden bot`'s gateway
//! saves the audio into the workspace and asks the worker through [`Transcribe`]. The file is
//! taken from the workspace as every outgoing file is ([`crate::outgoing`]).

use crate::config::{Secret, VoiceConfig};
use crate::policy::PathPolicy;
use crate::redact::redact;
use crate::sizes::read::{self, BodyError};
use crate::sizes::{caps, Cap};
use async_trait::async_trait;
use serde_json::Value;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

/// Longest transcript taken (a voice message of the longest allowed length is far shorter).
const MAX_TRANSCRIPT_CHARS: usize = 50_000;

/// Turns a saved audio file into text.
#[async_trait]
pub trait Transcribe: Send + Sync {
    /// The words spoken in the audio file at `path` (relative to the workspace), or the reason
    /// there are none, for the user.
    async fn transcribe(&self, path: &str) -> Result<String, String>;
}

/// The endpoint's client.
pub struct Transcriber {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Secret,
    paths: Arc<PathPolicy>,
    max_bytes: u64,
}

impl Transcriber {
    /// `None` when no endpoint is configured (`[voice] base_url`).
    pub fn from_config(
        config: &VoiceConfig,
        paths: Arc<PathPolicy>,
    ) -> Result<Option<Transcriber>, String> {
        let Some(base) = config.endpoint() else {
            return Ok(None);
        };
        let client = reqwest::Client::builder()
            // Often a local server: never through a proxy from the environment.
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(config.timeout_secs.max(1)))
            .build()
            .map_err(|e| format!("building the voice.base_url client: {e}"))?;
        Ok(Some(Transcriber {
            client,
            url: format!("{}/audio/transcriptions", base.trim_end_matches('/')),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
            paths,
            max_bytes: config.max_bytes,
        }))
    }
}

#[async_trait]
impl Transcribe for Transcriber {
    async fn transcribe(&self, path: &str) -> Result<String, String> {
        let outgoing = crate::outgoing::open(&self.paths, path, self.max_bytes)?;
        let mut audio = Vec::with_capacity(outgoing.size as usize);
        outgoing
            .file
            .take(self.max_bytes)
            .read_to_end(&mut audio)
            .map_err(|e| format!("{}: {e}", outgoing.relative))?;
        let part = reqwest::multipart::Part::bytes(audio)
            .file_name(outgoing.name.clone())
            .mime_str(media_type(&outgoing.name))
            .map_err(|e| e.to_string())?;
        let form = reqwest::multipart::Form::new()
            .text("model", self.model.clone())
            .text("response_format", "json")
            .part("file", part);
        let mut request = self.client.post(&self.url).multipart(form);
        if !self.api_key.is_empty() {
            request = request.bearer_auth(self.api_key.expose());
        }
        // reqwest's errors name the URL, never the headers: the key stays out of the message.
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                "the speech-to-text endpoint took too long (voice.timeout_secs)".to_string()
            } else {
                format!("the speech-to-text endpoint: {}", e.without_url())
            }
        })?;
        let status = response.status();
        let cap = Cap::new(caps().api_response_bytes, "api_response_bytes");
        let body = read::body(response, cap, "the speech-to-text endpoint's answer")
            .await
            .map_err(|e| match e {
                BodyError::Exceeded(exceeded) => exceeded.to_string(),
                BodyError::Transfer(e) => {
                    format!("the speech-to-text endpoint: {}", e.without_url())
                }
            })?;
        let body = String::from_utf8_lossy(&body);
        let json: Option<Value> = serde_json::from_str(&body).ok();
        if !status.is_success() {
            let message = json
                .as_ref()
                .and_then(|j| j["error"]["message"].as_str().or(j["error"].as_str()))
                .map(str::to_string)
                .unwrap_or_else(|| body.chars().take(200).collect());
            return Err(redact(&format!(
                "the speech-to-text endpoint answered {status}: {message}"
            )));
        }
        let text = json
            .as_ref()
            .and_then(|j| j["text"].as_str())
            .ok_or("the speech-to-text endpoint answered without a `text` field")?;
        let text: String = text.trim().chars().take(MAX_TRANSCRIPT_CHARS).collect();
        if text.is_empty() {
            return Err("no words were recognized in it".into());
        }
        Ok(text)
    }
}

/// The media type endpoints expect for an audio file's extension.
fn media_type(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "ogg" | "oga" | "opus" => "audio/ogg",
        "mp3" | "mpga" | "mpeg" => "audio/mpeg",
        "m4a" | "mp4" => "audio/mp4",
        "wav" => "audio/wav",
        "webm" => "audio/webm",
        "flac" => "audio/flac",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_files_are_labelled_as_endpoints_expect() {
        assert_eq!(media_type("voice-12.ogg"), "audio/ogg");
        assert_eq!(media_type("Song.MP3"), "audio/mpeg");
        assert_eq!(media_type("memo.m4a"), "audio/mp4");
        assert_eq!(media_type("noext"), "application/octet-stream");
    }

    #[test]
    fn without_a_base_url_there_is_no_transcriber() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Arc::new(PathPolicy::new(dir.path(), &[], &[], dir.path()).unwrap());
        let config = VoiceConfig::default();
        assert!(Transcriber::from_config(&config, paths).unwrap().is_none());
    }
}
