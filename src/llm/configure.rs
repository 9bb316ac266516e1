//! Building the providers named in `[llm]` of the config, in failover order. A provider takes
//! part when it is usable: Anthropic needs a key; an OpenAI-compatible server needs a key or a
//! base URL (local servers such as Ollama need no key).

use super::retry::HttpOptions;
use super::transport::ProviderSettings;
use super::{Anthropic, Failover, LlmError, OpenAi, Provider};
use crate::config::{LlmConfig, ProviderConfig, ProviderKind};
use std::sync::Arc;
use std::time::Duration;

/// The configured providers behind one [`Failover`] (which also serves a single provider).
pub fn from_config(config: &LlmConfig) -> Result<Failover, LlmError> {
    let mut providers: Vec<Box<dyn Provider>> = Vec::new();
    for chosen in chosen(config) {
        match chosen.kind {
            ProviderKind::Anthropic => providers.push(Box::new(Anthropic::new(chosen.settings)?)),
            ProviderKind::Openai => providers.push(Box::new(OpenAi::new(chosen.settings)?)),
        }
    }
    if providers.is_empty() {
        return Err(LlmError::NotConfigured(missing_message(&listed(config))));
    }
    Ok(Failover::new(providers))
}

/// A provider that takes part, with the settings it is built with.
pub struct Chosen {
    pub kind: ProviderKind,
    pub settings: ProviderSettings,
}

impl Chosen {
    /// The config key that names this provider's model (for hints).
    pub fn model_key(&self) -> String {
        format!("llm.{}.model", kind_name(self.kind))
    }
    /// The config key of its base URL.
    pub fn base_url_key(&self) -> String {
        format!("llm.{}.base_url", kind_name(self.kind))
    }
    /// Where the credential it sends comes from, for `warden doctor`.
    pub fn credential_source(&self) -> String {
        let (key, env) = self.api_key_names();
        if self.settings.oauth.is_some() {
            format!("OAuth sign-in (warden login {})", kind_name(self.kind))
        } else if self.settings.api_key.is_empty() {
            "no key (a local server)".into()
        } else if std::env::var_os(env).is_some() {
            format!("key from {env}")
        } else {
            format!("key from {key}")
        }
    }
    /// The config key of its key, and the environment variable that also sets it.
    pub fn api_key_names(&self) -> (String, &'static str) {
        let env = match self.kind {
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
            ProviderKind::Openai => "OPENAI_API_KEY",
        };
        (format!("llm.{}.api_key", kind_name(self.kind)), env)
    }
}

/// The name of a provider kind as the config spells it.
pub fn kind_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Openai => "openai",
    }
}

/// The usable providers of `llm.providers`, in order, each once; the first one gets
/// `model_override` (`-m`, `WARDEN_MODEL`) as its model.
pub fn chosen(config: &LlmConfig) -> Vec<Chosen> {
    let mut out: Vec<Chosen> = Vec::new();
    for kind in listed(config) {
        // Signed in: the token comes first (see [`crate::oauth`]).
        let oauth = signed_in(config, kind);
        let mut settings = match kind {
            ProviderKind::Anthropic if oauth.is_some() || !config.anthropic.api_key.is_empty() => {
                settings(config, &config.anthropic, Anthropic::default_settings())
            }
            ProviderKind::Openai
                if oauth.is_some()
                    || !config.openai.api_key.is_empty()
                    || has_base_url(&config.openai) =>
            {
                settings(config, &config.openai, OpenAi::default_settings())
            }
            _ => continue,
        };
        settings.oauth = oauth;
        out.push(Chosen { kind, settings });
    }
    let model = config
        .model_override
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty());
    if let (Some(first), Some(model)) = (out.first_mut(), model) {
        first.settings.model = model.to_string();
    }
    out
}

/// The provider's configuration.
pub fn provider_config(config: &LlmConfig, kind: ProviderKind) -> &ProviderConfig {
    match kind {
        ProviderKind::Anthropic => &config.anthropic,
        ProviderKind::Openai => &config.openai,
    }
}

/// The provider's OAuth store, when it has an `[llm.<name>.oauth]` block.
pub fn token_store(config: &LlmConfig, kind: ProviderKind) -> Option<crate::oauth::TokenStore> {
    provider_config(config, kind).oauth.as_ref()?;
    let dir = config.token_dir.as_deref()?;
    Some(crate::oauth::TokenStore::new(dir, kind_name(kind)))
}

/// The provider's sign-in, when it has an `[llm.<name>.oauth]` block and a stored login.
fn signed_in(config: &LlmConfig, kind: ProviderKind) -> Option<Arc<crate::oauth::Credential>> {
    let oauth = provider_config(config, kind).oauth.clone()?;
    let store = token_store(config, kind)?;
    let credential = crate::oauth::Credential::new(kind_name(kind), oauth, store);
    credential.signed_in().then(|| Arc::new(credential))
}

/// `llm.providers` without repeats.
fn listed(config: &LlmConfig) -> Vec<ProviderKind> {
    let mut seen = Vec::new();
    for &kind in &config.providers {
        if !seen.contains(&kind) {
            seen.push(kind);
        }
    }
    seen
}

fn has_base_url(config: &ProviderConfig) -> bool {
    config
        .base_url
        .as_deref()
        .is_some_and(|u| !u.trim().is_empty())
}

/// What to set, naming only the providers `llm.providers` lists.
fn missing_message(listed: &[ProviderKind]) -> String {
    if listed.is_empty() {
        return "no LLM provider configured: llm.providers is empty; list \"anthropic\" and/or \
                \"openai\" in ~/.warden/config.toml"
            .to_string();
    }
    let hints: Vec<&str> = listed
        .iter()
        .map(|kind| match kind {
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY (llm.anthropic.api_key)",
            ProviderKind::Openai => "OPENAI_API_KEY / OPENAI_BASE_URL (llm.openai.*)",
        })
        .collect();
    format!(
        "no LLM provider configured: set {} in ~/.warden/config.toml or the environment",
        hints.join(" or ")
    )
}

/// The config's values over the provider's defaults.
fn settings(
    llm: &LlmConfig,
    config: &ProviderConfig,
    defaults: ProviderSettings,
) -> ProviderSettings {
    let mut http = HttpOptions::default();
    http.retry.budget = Duration::from_secs(llm.retry_budget_secs);
    if let Some(secs) = config.timeout_secs {
        http.request_timeout = Duration::from_secs(secs.max(1));
    }
    if let Some(secs) = config.idle_timeout_secs {
        http.idle_timeout = Duration::from_secs(secs.max(1));
    }
    // A silence longer than the whole request could last is no limit at all.
    http.idle_timeout = http.idle_timeout.min(http.request_timeout);
    if let Some(attempts) = config.max_attempts {
        http.retry.max_attempts = attempts.max(1);
    }
    let non_empty = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    ProviderSettings {
        api_key: config.api_key.clone(),
        base_url: non_empty(&config.base_url).unwrap_or(defaults.base_url),
        model: non_empty(&config.model).unwrap_or(defaults.model),
        max_tokens: config.max_tokens.unwrap_or(defaults.max_tokens),
        http,
        oauth: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    #[test]
    fn nothing_configured_names_what_to_set() {
        let err = from_config(&LlmConfig::default())
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            err,
            "no LLM provider configured: set ANTHROPIC_API_KEY (llm.anthropic.api_key) or \
             OPENAI_API_KEY / OPENAI_BASE_URL (llm.openai.*) in ~/.warden/config.toml or the \
             environment"
        );
        let only_openai = LlmConfig {
            providers: vec![ProviderKind::Openai],
            ..LlmConfig::default()
        };
        let err = from_config(&only_openai).err().unwrap().to_string();
        assert!(!err.contains("ANTHROPIC"), "{err}");
        let none = LlmConfig {
            providers: vec![],
            ..LlmConfig::default()
        };
        let err = from_config(&none).err().unwrap().to_string();
        assert!(err.contains("llm.providers is empty"), "{err}");
    }

    #[test]
    fn configured_providers_follow_the_listed_order() {
        let mut config = LlmConfig {
            providers: vec![
                ProviderKind::Openai,
                ProviderKind::Anthropic,
                ProviderKind::Openai,
            ],
            ..LlmConfig::default()
        };
        config.anthropic.api_key = Secret::new("fake-anthropic-key-test");
        config.openai.base_url = Some("http://127.0.0.1:11434/v1".into());
        let failover = from_config(&config).unwrap();
        assert_eq!(failover.provider_names(), ["openai", "anthropic"]);

        config.openai.base_url = None;
        let failover = from_config(&config).unwrap();
        assert_eq!(failover.provider_names(), ["anthropic"]);
    }

    #[test]
    fn the_model_override_goes_to_the_first_usable_provider() {
        let mut config = LlmConfig {
            providers: vec![ProviderKind::Anthropic, ProviderKind::Openai],
            ..LlmConfig::default()
        };
        config.openai.base_url = Some("http://127.0.0.1:11434/v1".into());
        config.openai.model = Some("llama3.2".into());
        config.model_override = Some("qwen3:8b".into());
        let chosen = chosen(&config);
        assert_eq!(chosen.len(), 1, "anthropic has no key");
        assert_eq!(chosen[0].settings.model, "qwen3:8b");
        assert_eq!(chosen[0].model_key(), "llm.openai.model");

        config.anthropic.api_key = Secret::new("fake-anthropic-key-test");
        let chosen = super::chosen(&config);
        assert_eq!(chosen[0].settings.model, "qwen3:8b");
        assert_eq!(chosen[1].settings.model, "llama3.2");
    }

    #[test]
    fn a_stored_sign_in_comes_before_the_key_and_nothing_else_counts_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let oauth = crate::oauth::OAuthConfig {
            authorize_url: "https://auth.example/authorize".into(),
            token_url: "https://auth.example/token".into(),
            client_id: "warden".into(),
            ..Default::default()
        };
        let mut config = LlmConfig {
            providers: vec![ProviderKind::Openai, ProviderKind::Anthropic],
            token_dir: Some(dir.path().to_path_buf()),
            ..LlmConfig::default()
        };
        config.anthropic.api_key = Secret::new("k");
        config.openai.oauth = Some(oauth.clone());
        // An OAuth block without a login is no credential: OpenAI is skipped.
        let chosen = super::chosen(&config);
        assert_eq!(chosen.len(), 1);
        assert_eq!(chosen[0].kind, ProviderKind::Anthropic);
        crate::oauth::TokenStore::new(dir.path(), "openai")
            .save(&crate::oauth::Tokens {
                access_token: "at".into(),
                refresh_token: None,
                expires_at: None,
                scope: None,
            })
            .unwrap();
        let chosen = super::chosen(&config);
        assert_eq!(chosen[0].kind, ProviderKind::Openai);
        assert!(chosen[0].settings.oauth.is_some());
        assert!(chosen[0].credential_source().starts_with("OAuth sign-in"));
        assert!(chosen[1].settings.oauth.is_none());
        // Signed in and a key: the token is used, the key is not.
        config.openai.api_key = Secret::new("sk");
        config.anthropic.oauth = Some(oauth);
        let chosen = super::chosen(&config);
        assert!(chosen[0].settings.oauth.is_some());
        assert!(
            chosen[1].settings.oauth.is_none(),
            "anthropic is not signed in"
        );
        // Without a token directory (a config built in code), OAuth is off.
        config.token_dir = None;
        assert!(super::chosen(&config)[0].settings.oauth.is_none());
    }

    #[test]
    fn config_values_override_defaults() {
        let config = ProviderConfig {
            api_key: Secret::new("k"),
            base_url: Some(" ".into()),
            model: Some("claude-opus-4-1".into()),
            max_tokens: Some(1000),
            timeout_secs: Some(30),
            idle_timeout_secs: Some(300),
            max_attempts: Some(0),
            oauth: None,
        };
        let llm = LlmConfig {
            retry_budget_secs: 90,
            ..LlmConfig::default()
        };
        let s = settings(&llm, &config, Anthropic::default_settings());
        assert_eq!(s.base_url, Anthropic::DEFAULT_BASE_URL);
        assert_eq!(s.model, "claude-opus-4-1");
        assert_eq!(s.max_tokens, 1000);
        assert_eq!(s.http.request_timeout, Duration::from_secs(30));
        assert_eq!(s.http.idle_timeout, Duration::from_secs(30));
        assert_eq!(s.http.retry.max_attempts, 1);
        assert_eq!(s.http.retry.budget, Duration::from_secs(90));
    }

    #[test]
    fn bad_base_url_is_reported_without_the_key() {
        let mut config = LlmConfig::default();
        config.anthropic.api_key = Secret::new("fake-anthropic-key-secret-value");
        config.anthropic.base_url = Some("api.anthropic.com".into());
        let err = from_config(&config).err().unwrap().to_string();
        assert!(err.starts_with("anthropic: invalid settings"), "{err}");
        assert!(!err.contains("fake-anthropic-key-secret-value"), "{err}");
    }
}
