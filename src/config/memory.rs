//! `[memory]`: when a conversation is compacted, the convention files in the prompt, and the
//! memory index with its optional embeddings endpoint.

use crate::secret::Secret;
use serde::Deserialize;

/// `[memory]`: when the conversation is compacted, the workspace files in the prompt, and
/// the memory index. Thresholds are fractions of `context_window`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// At this fraction, one flush turn asks the model to save what matters to memory files.
    pub soft_threshold: f64,
    /// At this fraction, the older part of the conversation is replaced by a summary.
    pub hard_threshold: f64,
    /// Fraction of the window kept verbatim (the newest messages) when compacting.
    pub keep_recent: f64,
    /// Run the flush turn before compaction.
    pub flush: bool,
    /// Output token limit of each summary the model writes.
    pub summary_max_tokens: u32,
    /// Longest convention file (SOUL.md, MEMORY.md…) put into the prompt, in characters.
    pub prompt_file_chars: usize,
    /// Daily notes (memory/YYYY-MM-DD.md) count half as much in search after this many days.
    pub half_life_days: f64,
    pub embeddings: EmbeddingsConfig,
}

impl MemoryConfig {
    /// Thresholds must be ordered fractions, or compaction would never (or always) run.
    pub fn validate(&self) -> Result<(), String> {
        let fraction = |name: &str, v: f64| {
            if v > 0.0 && v <= 1.0 {
                Ok(())
            } else {
                Err(format!("memory.{name} = {v} must be in (0, 1]"))
            }
        };
        fraction("soft_threshold", self.soft_threshold)?;
        fraction("hard_threshold", self.hard_threshold)?;
        fraction("keep_recent", self.keep_recent)?;
        if self.soft_threshold > self.hard_threshold {
            return Err("memory.soft_threshold must not exceed memory.hard_threshold".into());
        }
        if self.keep_recent >= self.hard_threshold {
            return Err("memory.keep_recent must be below memory.hard_threshold".into());
        }
        if self.context_window < 1000 {
            return Err("memory.context_window must be at least 1000 tokens".into());
        }
        if !(0.0..=1.0).contains(&self.embeddings.vector_weight) {
            return Err("memory.embeddings.vector_weight must be in [0, 1]".into());
        }
        if self.half_life_days.is_nan() || self.half_life_days <= 0.0 {
            return Err("memory.half_life_days must be positive".into());
        }
        Ok(())
    }
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            context_window: 200_000,
            soft_threshold: 0.6,
            hard_threshold: 0.8,
            keep_recent: 0.2,
            flush: true,
            summary_max_tokens: 2048,
            prompt_file_chars: 20_000,
            half_life_days: 30.0,
            embeddings: EmbeddingsConfig::default(),
        }
    }
}

/// An OpenAI-compatible `/v1/embeddings` endpoint for hybrid search; absent: keyword search.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// Base URL including `/v1` (e.g. `http://127.0.0.1:11434/v1`); empty disables embeddings.
    pub base_url: Option<String>,
    pub model: String,
    pub api_key: Secret,
    /// Weight of the cosine similarity against the keyword score (0..1).
    pub vector_weight: f64,
    /// Seconds before an embeddings request is abandoned (search then falls back to keywords).
    pub timeout_secs: u64,
}

impl Default for EmbeddingsConfig {
    fn default() -> Self {
        EmbeddingsConfig {
            base_url: None,
            model: "text-embedding-3-small".into(),
            api_key: Secret::default(),
            vector_weight: 0.7,
            timeout_secs: 10,
        }
    }
}
