//! `[slack]`: the Slack app's two tokens, who may use it and where (see [`super`]).
//!
//! The app token (`xapp-…`) opens the Socket Mode connection, the bot token (`xoxb-…`) calls
//! the Web API. Both are secrets: they go only into the `Authorization` header of Slack's
//! API and are redacted from every log line and error.

use crate::secret::Secret;
use serde::Deserialize;

/// Slack's Web API.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlackConfig {
    /// The app-level token with `connections:write` (`xapp-…`); `SLACK_APP_TOKEN`.
    pub app_token: Secret,
    /// The bot user's token (`xoxb-…`); `SLACK_BOT_TOKEN`.
    pub bot_token: Secret,
    /// Slack user IDs (`U…`) whose messages start runs and who may press approval buttons;
    /// `SLACK_ALLOWED_USERS` (comma-separated).
    pub allowed_users: Vec<String>,
    /// Channel IDs (`C…`, `G…`) where a mention starts a thread session; direct messages
    /// need no entry. Empty: direct messages only.
    pub allowed_channels: Vec<String>,
    /// The Web API's base URL (tests point it at a local fake); `SLACK_API_URL`.
    pub api_url: Option<String>,
    /// Seconds an approval request waits for a press; no answer means deny.
    pub approval_timeout_secs: u64,
    /// Largest file a person shares that is downloaded into `attachments/`, in bytes.
    pub max_file_bytes: u64,
    /// Largest file `send_file` uploads, in bytes.
    pub max_send_bytes: u64,
    /// Messages that may wait in one session behind the running one.
    pub queue_depth: usize,
    /// Seconds a shutdown waits for running agents before recording them as interrupted.
    pub shutdown_grace_secs: u64,
    /// Seconds one Web API request may take.
    pub request_timeout_secs: u64,
}

impl Default for SlackConfig {
    fn default() -> Self {
        SlackConfig {
            app_token: Secret::default(),
            bot_token: Secret::default(),
            allowed_users: Vec::new(),
            allowed_channels: Vec::new(),
            api_url: None,
            approval_timeout_secs: 120,
            max_file_bytes: 20 * 1024 * 1024,
            max_send_bytes: 50 * 1024 * 1024,
            queue_depth: 5,
            shutdown_grace_secs: 30,
            request_timeout_secs: 30,
        }
    }
}

impl SlackConfig {
    /// Whether the user set Slack up at all (either token): `warden bot` then runs it, and
    /// refuses to start when the rest is missing rather than silently skip it.
    pub fn is_configured(&self) -> bool {
        !self.app_token.is_empty() || !self.bot_token.is_empty()
    }

    /// The Web API's base URL, without a trailing slash.
    pub fn api_url(&self) -> String {
        self.api_url
            .as_deref()
            .unwrap_or(DEFAULT_API_URL)
            .trim_end_matches('/')
            .to_string()
    }

    /// Take `SLACK_*` variables from `var` (the config's environment seam).
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) {
        if let Some(v) = var("SLACK_APP_TOKEN") {
            self.app_token = Secret::new(v);
        }
        if let Some(v) = var("SLACK_BOT_TOKEN") {
            self.bot_token = Secret::new(v);
        }
        if let Some(v) = var("SLACK_API_URL") {
            self.api_url = Some(v);
        }
        if let Some(v) = var("SLACK_ALLOWED_USERS") {
            self.allowed_users = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
    }

    pub fn secrets(&self) -> [&Secret; 2] {
        [&self.app_token, &self.bot_token]
    }
}

/// Checks when the config is read: IDs that cannot be Slack's, an API address that is not one.
pub fn check(config: &SlackConfig) -> Result<(), String> {
    for (key, ids) in [
        ("slack.allowed_users", &config.allowed_users),
        ("slack.allowed_channels", &config.allowed_channels),
    ] {
        if let Some(bad) = ids.iter().find(|id| !is_slack_id(id)) {
            return Err(format!(
                "{key}: {bad:?} is not a Slack ID (upper-case letters and digits, such as \
                 U0123ABCD or C0123ABCD)"
            ));
        }
    }
    if let Some(url) = &config.api_url {
        let parsed = url::Url::parse(url).map_err(|e| format!("slack.api_url = {url:?}: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("slack.api_url = {url:?} must be http or https"));
        }
    }
    if config.queue_depth == 0 {
        return Err("slack.queue_depth must be at least 1".into());
    }
    Ok(())
}

/// Why `warden bot` will not run Slack with this config (a message naming what to set).
pub fn check_ready(config: &SlackConfig) -> Result<(), String> {
    if config.app_token.is_empty() {
        return Err(
            "no Slack app token: set SLACK_APP_TOKEN (or slack.app_token) to the \
                    app-level token (xapp-…) with connections:write that Socket Mode needs"
                .into(),
        );
    }
    if config.bot_token.is_empty() {
        return Err(
            "no Slack bot token: set SLACK_BOT_TOKEN (or slack.bot_token) to the \
                    bot user OAuth token (xoxb-…)"
                .into(),
        );
    }
    if config.allowed_users.is_empty() {
        return Err(
            "no allowed Slack users: warden bot refuses to answer everyone. Set \
                    SLACK_ALLOWED_USERS (comma-separated user IDs such as U0123ABCD) or \
                    slack.allowed_users"
                .into(),
        );
    }
    Ok(())
}

fn is_slack_id(id: &str) -> bool {
    (2..=32).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_sets_tokens_users_and_url() {
        let mut config = SlackConfig::default();
        assert!(!config.is_configured());
        config.apply_env(|name| match name {
            "SLACK_APP_TOKEN" => Some("xapp-1".into()),
            "SLACK_BOT_TOKEN" => Some("xoxb-2".into()),
            "SLACK_ALLOWED_USERS" => Some("U1, U2,".into()),
            "SLACK_API_URL" => Some("http://127.0.0.1:9/api/".into()),
            _ => None,
        });
        assert!(config.is_configured());
        assert_eq!(config.allowed_users, ["U1", "U2"]);
        assert_eq!(config.api_url(), "http://127.0.0.1:9/api");
        assert_eq!(format!("{:?}", config.bot_token), "Secret(<redacted>)");
        assert!(check(&config).is_ok());
        assert!(check_ready(&config).is_ok());
    }

    #[test]
    fn a_half_setup_is_refused_with_what_to_set() {
        let mut config = SlackConfig {
            bot_token: Secret::new("xoxb-2"),
            ..SlackConfig::default()
        };
        assert!(check_ready(&config)
            .unwrap_err()
            .contains("SLACK_APP_TOKEN"));
        config.app_token = Secret::new("xapp-1");
        assert!(check_ready(&config)
            .unwrap_err()
            .contains("SLACK_ALLOWED_USERS"));
    }

    #[test]
    fn ids_and_addresses_are_checked() {
        let bad_user = SlackConfig {
            allowed_users: vec!["alice".into()],
            ..SlackConfig::default()
        };
        assert!(check(&bad_user).unwrap_err().contains("not a Slack ID"));
        let bad_url = SlackConfig {
            api_url: Some("ftp://x".into()),
            ..SlackConfig::default()
        };
        assert!(check(&bad_url).is_err());
    }
}
