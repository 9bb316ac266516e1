//! An LLM error as one line a person can act on: what failed, and the config key, flag or
//! environment variable that changes it ("model not found" names `llm.openai.model` and `-m`).

use super::configure::{kind_name, Chosen};
use super::LlmError;

/// `err` with the setting to change for each provider that failed.
pub fn advice(err: &LlmError, chosen: &[Chosen]) -> String {
    match err {
        LlmError::AllFailed(errors) if errors.len() == 1 => advice(&errors[0], chosen),
        LlmError::AllFailed(errors) => errors
            .iter()
            .map(|e| advice(e, chosen))
            .collect::<Vec<_>>()
            .join("; "),
        _ => {
            let provider = err
                .provider()
                .and_then(|name| chosen.iter().find(|c| kind_name(c.kind) == name));
            match provider {
                Some(provider) => one(err, provider),
                None => err.to_string(),
            }
        }
    }
}

fn one(err: &LlmError, provider: &Chosen) -> String {
    let name = kind_name(provider.kind);
    let url = &provider.settings.base_url;
    let model = &provider.settings.model;
    match err {
        LlmError::Http { status: 404, .. } => format!(
            "{err} — is {model:?} a model {url} serves? Set {} in the config, or pass -m MODEL \
             (WARDEN_MODEL); for Ollama, `ollama pull {model}` first",
            provider.model_key()
        ),
        LlmError::Http {
            status: 401 | 403, ..
        } => {
            let (key, env) = provider.api_key_names();
            format!("{err} — the key was refused: set {env} or {key}")
        }
        LlmError::Http { status: 400, .. } => format!(
            "{err} — the server refused the request; check {} = {model:?}",
            provider.model_key()
        ),
        LlmError::Connect { .. } => format!(
            "{err} — is the server at {url} running? ({} sets the address)",
            provider.base_url_key()
        ),
        LlmError::Timeout { .. } => format!(
            "{err} — raise llm.{name}.timeout_secs or llm.{name}.idle_timeout_secs for a slow \
             model"
        ),
        _ => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LlmConfig, ProviderKind};

    fn local() -> Vec<Chosen> {
        let mut config = LlmConfig {
            providers: vec![ProviderKind::Openai],
            ..LlmConfig::default()
        };
        config.openai.base_url = Some("http://127.0.0.1:11434/v1".into());
        config.openai.model = Some("llama9".into());
        super::super::chosen(&config)
    }

    #[test]
    fn model_not_found_names_the_key_and_the_flag() {
        let err = LlmError::AllFailed(vec![LlmError::Http {
            provider: "openai".into(),
            status: 404,
            attempts: 1,
            message: "model \"llama9\" not found, try pulling it first".into(),
        }]);
        let line = advice(&err, &local());
        assert!(line.contains("llm.openai.model"), "{line}");
        assert!(line.contains("-m MODEL"), "{line}");
        assert!(line.contains("ollama pull llama9"), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn refused_keys_and_unreachable_servers_name_their_setting() {
        let refused = LlmError::Http {
            provider: "openai".into(),
            status: 401,
            attempts: 1,
            message: "invalid key".into(),
        };
        assert!(advice(&refused, &local()).contains("OPENAI_API_KEY"));
        let down = LlmError::Connect {
            provider: "openai".into(),
            attempts: 3,
            message: "connection refused".into(),
        };
        let line = advice(&down, &local());
        assert!(line.contains("llm.openai.base_url"), "{line}");
        assert!(line.contains("http://127.0.0.1:11434/v1"), "{line}");
    }
}
