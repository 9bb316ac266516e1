//! Signing in to a model provider with OAuth 2.0 instead of pasting a long-lived key.
//!
//! `warden login PROVIDER` runs the authorization-code flow with PKCE (S256) for a provider
//! configured with an `[llm.<provider>.oauth]` block: the browser comes back to a listener on
//! 127.0.0.1 (`loopback`), or, on a headless server, the user opens the URL elsewhere and pastes
//! the code (`paste`). `state` is checked either way. The tokens are stored in the data dir
//! (`oauth/<provider>.json`, 0600) and refreshed before a request when they expire within a
//! minute — one refresh at a time across processes, under an advisory lock, so the bot's
//! worker and a terminal run never spend the same refresh token twice. A refresh that fails
//! asks for a new login in one line; it never falls back to another credential.
//!
//! The order of a provider's credentials: its OAuth token (when signed in), then its key.
//! Tokens follow the key rules: read by the process that calls the model (the agent worker,
//! never the Telegram gateway), never put into a sandbox's environment, redacted from logs.
//! warden sends its own client id and user agent: it never poses as another provider's app.

mod credential;
mod exchange;
mod login;
mod pkce;
mod tokens;

pub use credential::Credential;
pub use exchange::ExchangeError;
pub use login::{authorize_url, login, read_pasted, Flow, LoginError};
pub use pkce::Pkce;
pub use tokens::{TokenStore, Tokens};

use serde::Deserialize;

/// `[llm.<provider>.oauth]`: the provider's OAuth 2.0 endpoints and warden's registration.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct OAuthConfig {
    /// Where the user signs in (the browser opens it).
    pub authorize_url: String,
    /// Where codes and refresh tokens are exchanged for tokens.
    pub token_url: String,
    /// The client id the provider gave warden's registration (public: PKCE, no secret).
    pub client_id: String,
    pub scopes: Vec<String>,
    /// For the paste flow: the page the provider sends the browser to, which shows the code.
    /// Empty: only the loopback flow works.
    pub redirect_uri: String,
    /// The loopback listener's port (0: any free port; some providers register a fixed one).
    pub loopback_port: u16,
}

impl OAuthConfig {
    /// What is missing for a login, naming the keys.
    pub fn check(&self, provider: &str) -> Result<(), String> {
        let missing: Vec<&str> = [
            ("authorize_url", &self.authorize_url),
            ("token_url", &self.token_url),
            ("client_id", &self.client_id),
        ]
        .into_iter()
        .filter(|(_, v)| v.trim().is_empty())
        .map(|(k, _)| k)
        .collect();
        if !missing.is_empty() {
            return Err(format!(
                "[llm.{provider}.oauth] needs {}",
                missing.join(", ")
            ));
        }
        for (key, url) in [
            ("authorize_url", &self.authorize_url),
            ("token_url", &self.token_url),
        ] {
            let parsed = url::Url::parse(url)
                .map_err(|e| format!("llm.{provider}.oauth.{key} {url:?}: {e}"))?;
            // A token endpoint over plain HTTP would show the refresh token to the network;
            // only a loopback one (a local gateway, the tests) may be.
            let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
            if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
                return Err(format!(
                    "llm.{provider}.oauth.{key} must be an https:// URL (http:// only on \
                     127.0.0.1)"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_needs_its_endpoints_over_https() {
        let good = OAuthConfig {
            authorize_url: "https://auth.example/authorize".into(),
            token_url: "https://auth.example/token".into(),
            client_id: "warden".into(),
            ..OAuthConfig::default()
        };
        assert_eq!(good.check("openai"), Ok(()));
        let err = OAuthConfig::default().check("openai").unwrap_err();
        assert_eq!(
            err,
            "[llm.openai.oauth] needs authorize_url, token_url, client_id"
        );
        let plain = OAuthConfig {
            token_url: "http://auth.example/token".into(),
            ..good.clone()
        };
        assert!(plain.check("openai").unwrap_err().contains("https://"));
        let local = OAuthConfig {
            token_url: "http://127.0.0.1:8080/token".into(),
            ..good
        };
        assert_eq!(local.check("openai"), Ok(()));
    }
}
