//! `[llm]`: the model providers in failover order, their keys and limits; `[delegate]`: how far
//! a sub-agent may go.

use crate::secret::Secret;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Providers in failover order: the first that answers wins.
    pub providers: Vec<ProviderKind>,
    /// Tool-call iterations per run before the agent stops with a clear message.
    pub max_iterations: u32,
    /// Seconds a busy, rate-limited or unreachable model is retried (backoff with jitter,
    /// `retry-after` honored) before a model call fails; the chat is told once meanwhile.
    pub retry_budget_secs: u64,
    /// The same for a scheduled job's run, which nobody waits for.
    pub scheduled_retry_budget_secs: u64,
    pub anthropic: ProviderConfig,
    pub openai: ProviderConfig,
    /// The model of the first usable provider, over its `model`: `-m` or `WARDEN_MODEL`.
    #[serde(skip)]
    pub model_override: Option<String>,
    /// Where `warden login` keeps OAuth tokens (`<data_dir>/oauth`); `None`: OAuth is off.
    #[serde(skip)]
    pub token_dir: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Anthropic,
    Openai,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    pub api_key: Secret,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub max_tokens: Option<u32>,
    /// Seconds before one HTTP request is abandoned.
    pub timeout_secs: Option<u64>,
    /// Seconds of silence tolerated between chunks of a streaming answer.
    pub idle_timeout_secs: Option<u64>,
    /// Tries per request (the first included) on rate limits, overload and connection errors;
    /// by default only `llm.retry_budget_secs` limits them.
    pub max_attempts: Option<u32>,
    /// `[llm.<provider>.oauth]`: sign in with `warden login` instead of a key.
    pub oauth: Option<crate::oauth::OAuthConfig>,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            providers: vec![ProviderKind::Anthropic, ProviderKind::Openai],
            max_iterations: 25,
            retry_budget_secs: 60,
            scheduled_retry_budget_secs: 600,
            anthropic: ProviderConfig::default(),
            openai: ProviderConfig::default(),
            model_override: None,
            token_dir: None,
        }
    }
}

/// `[delegate]`: sub-agents (the `delegate` tool; see `crate::agent::delegate`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DelegateConfig {
    /// Offer the `delegate` tool.
    pub enabled: bool,
    /// Model calls a sub-agent may make; never more than `llm.max_iterations`.
    pub max_iterations: u32,
}

impl Default for DelegateConfig {
    fn default() -> Self {
        DelegateConfig {
            enabled: true,
            max_iterations: 10,
        }
    }
}
