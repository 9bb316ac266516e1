//! The bearer token a provider sends: the stored access token, refreshed first when it
//! expires within a minute. One refresh at a time: in this process behind a mutex, across
//! processes behind the store's advisory lock — and whoever gets the lock second reads the
//! file again and finds the new token instead of spending the refresh token twice.

use super::exchange;
use super::tokens::{TokenStore, Tokens};
use super::OAuthConfig;
use tokio::sync::Mutex;

/// A token expiring within this many seconds is refreshed before it is used.
pub const REFRESH_MARGIN_SECS: i64 = 60;

pub struct Credential {
    provider: String,
    config: OAuthConfig,
    store: TokenStore,
    cached: Mutex<Option<Tokens>>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens.
        f.debug_struct("Credential")
            .field("provider", &self.provider)
            .field("store", &self.store.path())
            .finish()
    }
}

impl Credential {
    pub fn new(provider: &str, config: OAuthConfig, store: TokenStore) -> Credential {
        Credential {
            provider: provider.to_string(),
            config,
            store,
            cached: Mutex::new(None),
        }
    }

    /// Whether tokens are stored (a login was made and not logged out of).
    pub fn signed_in(&self) -> bool {
        self.store.path().exists()
    }

    /// The access token to send now. Errors are one line that says what to do.
    pub async fn bearer(&self) -> Result<String, String> {
        let mut cached = self.cached.lock().await;
        if cached.is_none() {
            *cached = self.store.load()?;
        }
        let Some(tokens) = cached.as_ref() else {
            return Err(self.login_again("not signed in"));
        };
        if !tokens.expires_within(now(), REFRESH_MARGIN_SECS) {
            return Ok(tokens.access_token.clone());
        }
        let store = self.store.clone();
        let _lock = tokio::task::spawn_blocking(move || store.lock())
            .await
            .map_err(|e| e.to_string())??;
        // Another process may have refreshed while we waited for the lock.
        let stored = self.store.load()?;
        if let Some(fresh) = stored
            .as_ref()
            .filter(|t| !t.expires_within(now(), REFRESH_MARGIN_SECS))
        {
            *cached = Some(fresh.clone());
            return Ok(fresh.access_token.clone());
        }
        let Some(refresh) = stored.and_then(|t| t.refresh_token) else {
            *cached = None;
            return Err(self.login_again("the sign-in has expired and cannot be refreshed"));
        };
        match exchange::refresh(&self.config, &refresh).await {
            Ok(tokens) => {
                self.store.save(&tokens)?;
                let access = tokens.access_token.clone();
                *cached = Some(tokens);
                tracing::info!(provider = %self.provider, "refreshed the OAuth token");
                Ok(access)
            }
            Err(e) if e.needs_login() => {
                *cached = None;
                Err(self.login_again(&format!("the sign-in was revoked or has expired ({e})")))
            }
            Err(e) => Err(format!("could not refresh the sign-in: {e}")),
        }
    }

    /// `what` happened, and the one thing that helps.
    fn login_again(&self, what: &str) -> String {
        format!("{what}; run `warden login {}`", self.provider)
    }
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}
