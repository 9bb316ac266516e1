//! `[voice]`: the speech-to-text endpoint for voice messages and audio.

use crate::secret::Secret;
use serde::Deserialize;

/// `[voice]`: speech-to-text for Telegram voice messages and audio, through an OpenAI-compatible
/// `/v1/audio/transcriptions` endpoint (OpenAI, or a local whisper.cpp / faster-whisper
/// server). Called by the agent worker only, which holds the key; without `base_url` voice
/// messages get a reply saying so and start no run.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VoiceConfig {
    /// Base URL including `/v1` (e.g. `http://127.0.0.1:8080/v1`); empty: voice is off.
    pub base_url: Option<String>,
    pub model: String,
    /// Sent as `Authorization: Bearer` when set (also `WARDEN_VOICE_API_KEY`).
    pub api_key: Secret,
    /// Largest voice message or audio file taken, in bytes (the Bot API serves ≤ 20 MB).
    pub max_bytes: u64,
    /// Longest voice message or audio file taken, in seconds (Telegram gives its duration).
    pub max_seconds: u64,
    /// Seconds before a transcription request is abandoned.
    pub timeout_secs: u64,
}

impl VoiceConfig {
    /// The endpoint's base URL, when voice is on.
    pub fn endpoint(&self) -> Option<&str> {
        self.base_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
    }

    pub(super) fn validate(&self) -> Result<(), String> {
        if let Some(url) = self.endpoint() {
            let parsed = url::Url::parse(url)
                .map_err(|e| format!("voice.base_url = {url:?} is not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(format!("voice.base_url = {url:?} must be http or https"));
            }
        }
        if self.model.trim().is_empty() {
            return Err("voice.model must name the transcription model (e.g. whisper-1)".into());
        }
        if self.max_bytes == 0 {
            return Err("voice.max_bytes must be at least 1".into());
        }
        if self.max_seconds == 0 || self.timeout_secs == 0 {
            return Err("voice.max_seconds and voice.timeout_secs must be at least 1".into());
        }
        Ok(())
    }
}

impl Default for VoiceConfig {
    fn default() -> Self {
        VoiceConfig {
            base_url: None,
            model: "whisper-1".into(),
            api_key: Secret::default(),
            max_bytes: 20 * 1024 * 1024,
            max_seconds: 600,
            timeout_secs: 120,
        }
    }
}
