//! Embeddings from an OpenAI-compatible `POST {base_url}/embeddings` endpoint (OpenAI, Ollama,
//! llama.cpp, vLLM…), for the vector half of hybrid search. Vectors are stored normalized, so
//! cosine similarity is a dot product. The endpoint is optional and may fail: callers fall
//! back to keyword search, and after a failure it is left alone for a while instead of making
//! every search wait for it.

use crate::config::{EmbeddingsConfig, Secret};
use crate::sizes::read::{self, BodyError};
use crate::sizes::{caps, Cap};
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Texts per request.
const BATCH: usize = 64;
/// Longest text sent, in characters (chunks are far shorter; this bounds a long query).
const MAX_INPUT_CHARS: usize = 8000;
/// How long a failed endpoint is not asked again.
const BACKOFF: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embeddings endpoint: {0}")]
    Http(String),
    #[error("embeddings endpoint answered unexpectedly: {0}")]
    Response(String),
    #[error("embeddings endpoint failed recently; not asked again yet")]
    BackingOff,
}

pub struct Embedder {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Secret,
    failed_at: Mutex<Option<Instant>>,
}

impl Embedder {
    /// `None` when no endpoint is configured.
    pub fn from_config(config: &EmbeddingsConfig) -> Result<Option<Embedder>, EmbedError> {
        let Some(base) = config.base_url.as_deref().filter(|u| !u.trim().is_empty()) else {
            return Ok(None);
        };
        let client = reqwest::Client::builder()
            // Typically a local server: never through a proxy from the environment.
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(config.timeout_secs.max(1)))
            .build()
            .map_err(|e| EmbedError::Http(e.to_string()))?;
        Ok(Some(Embedder {
            client,
            url: format!("{}/embeddings", base.trim_end_matches('/')),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
            failed_at: Mutex::new(None),
        }))
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// One normalized vector per text, in order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.backing_off() {
            return Err(EmbedError::BackingOff);
        }
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            match self.request(batch).await {
                Ok(mut vectors) => out.append(&mut vectors),
                Err(e) => {
                    *self.failed_at.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(Instant::now());
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    fn backing_off(&self) -> bool {
        let failed_at = *self.failed_at.lock().unwrap_or_else(|p| p.into_inner());
        failed_at.is_some_and(|at| at.elapsed() < BACKOFF)
    }

    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let input: Vec<String> = texts
            .iter()
            .map(|t| t.chars().take(MAX_INPUT_CHARS).collect())
            .collect();
        let mut request = self
            .client
            .post(&self.url)
            .json(&json!({"model": self.model, "input": input}));
        if !self.api_key.is_empty() {
            request = request.bearer_auth(self.api_key.expose());
        }
        // reqwest's errors name the URL, never the headers: the key stays out of logs.
        let response = request
            .send()
            .await
            .map_err(|e| EmbedError::Http(e.without_url().to_string()))?;
        let status = response.status();
        let cap = Cap::new(caps().api_response_bytes, "api_response_bytes");
        let body = read::body(response, cap, "the embeddings API's answer")
            .await
            .map_err(|e| match e {
                BodyError::Exceeded(exceeded) => EmbedError::Response(exceeded.to_string()),
                BodyError::Transfer(e) => EmbedError::Http(e.without_url().to_string()),
            })?;
        let body: Value = serde_json::from_slice(&body)
            .map_err(|e| EmbedError::Response(format!("{status}: {e}")))?;
        if !status.is_success() {
            let message = body["error"]["message"]
                .as_str()
                .unwrap_or("no message")
                .to_string();
            return Err(EmbedError::Http(format!("{status}: {message}")));
        }
        let data = body["data"]
            .as_array()
            .ok_or_else(|| EmbedError::Response("no `data` array".into()))?;
        if data.len() != texts.len() {
            return Err(EmbedError::Response(format!(
                "{} vectors for {} inputs",
                data.len(),
                texts.len()
            )));
        }
        let mut vectors = vec![Vec::new(); texts.len()];
        for (position, item) in data.iter().enumerate() {
            let index = item["index"].as_u64().map_or(position, |i| i as usize);
            let values = item["embedding"]
                .as_array()
                .ok_or_else(|| EmbedError::Response("an item without `embedding`".into()))?;
            let vector: Vec<f32> = values
                .iter()
                .map(|v| v.as_f64().unwrap_or(0.0) as f32)
                .collect();
            let slot = vectors
                .get_mut(index)
                .ok_or_else(|| EmbedError::Response(format!("index {index} out of range")))?;
            *slot = normalized(vector);
        }
        if vectors.iter().any(Vec::is_empty) {
            return Err(EmbedError::Response("an empty vector".into()));
        }
        Ok(vectors)
    }
}

/// `v` scaled to length 1 (a zero vector stays zero).
pub fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Cosine similarity of two normalized vectors; 0 when their dimensions differ.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Little-endian f32s, as stored in the database.
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn from_blob(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_compare() {
        let a = normalized(vec![3.0, 4.0]);
        assert_eq!(a, vec![0.6, 0.8]);
        assert_eq!(from_blob(&to_blob(&a)), a);
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&a, &[1.0]), 0.0);
    }

    #[test]
    fn no_base_url_means_no_embedder() {
        assert!(Embedder::from_config(&EmbeddingsConfig::default())
            .unwrap()
            .is_none());
    }
}
