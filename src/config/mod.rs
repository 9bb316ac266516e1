//! warden's configuration: `~/.warden/config.toml` (or `--config` / `WARDEN_CONFIG`), with every
//! secret also readable from the environment. Secrets live only here, in the warden process:
//! they are never passed to a sandbox, logged or put into a prompt.
//!
//! Each section (`[sandbox]`, `[llm]`, `[memory]`…) is plain data with its own checks, in a file
//! of its own here or, for `[mcp]`, in `crate::mcp::config`; this file assembles them, reads the
//! environment and checks what spans sections (durations, warden's own files). It sits low in
//! the house: everything it calls to check a value (host rules, fixed addresses, trust lists,
//! secret placeholders) lives in a leaf below it, never in the rooms that use the config.

use crate::durations::MAX_SECONDS;
use crate::policy::OwnFile;
use serde::Deserialize;
use std::path::{Path, PathBuf};

pub use crate::secret::Secret;

mod egress;
mod llm;
mod memory;
mod sandbox;
mod scheduler;
mod search;
mod skills;
mod telegram;
mod trust;
mod voice;

pub use egress::EgressConfig;
pub use llm::{DelegateConfig, LlmConfig, ProviderConfig, ProviderKind};
pub use memory::{EmbeddingsConfig, MemoryConfig};
pub use sandbox::{BackgroundConfig, DockerConfig, SandboxConfig};
pub use scheduler::SchedulerConfig;
pub use search::{SearchConfig, SearchProvider, MAX_SEARCH_RESULTS};
pub use skills::SkillsConfig;
pub use telegram::TelegramConfig;
pub use trust::TrustConfig;
pub use voice::VoiceConfig;

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The agent's workspace: the only writable place in the sandbox.
    pub workspace: PathBuf,
    /// Where warden keeps its SQLite database and logs.
    pub data_dir: PathBuf,
    /// The file this config was read from (none when it came from defaults alone).
    #[serde(skip)]
    pub file: Option<PathBuf>,
    /// A policy file extending (or replacing) the embedded default policy.
    pub policy: Option<PathBuf>,
    pub sandbox: SandboxConfig,
    pub llm: LlmConfig,
    pub telegram: TelegramConfig,
    pub scheduler: SchedulerConfig,
    pub memory: MemoryConfig,
    pub skills: SkillsConfig,
    pub egress: EgressConfig,
    /// `[network]`: hosts jailed commands may reach through the egress proxy (see
    /// `crate::egress::network`).
    pub network: crate::egress::network::NetworkConfig,
    pub trust: TrustConfig,
    /// `[mcp]`: MCP servers warden connects (see `crate::mcp`).
    pub mcp: crate::mcp::config::McpConfig,
    pub search: SearchConfig,
    pub delegate: DelegateConfig,
    pub voice: VoiceConfig,
    /// The workspace is a project of the user's (`chat -C DIR`, `mcp serve --workspace DIR`),
    /// not warden's own: warden's convention files are not seeded into it.
    #[serde(skip)]
    pub project_workspace: bool,
    /// `[caps]`: how much warden reads of what comes from outside (see `crate::sizes`).
    pub caps: crate::sizes::Caps,
    /// `[http]`: the HTTP control API of `warden serve` (see `crate::channels::http`).
    pub http: crate::channels::http::config::HttpConfig,
    /// `[slack]`: the Slack channel of `warden bot` (see `crate::channels::slack`).
    pub slack: crate::channels::slack::config::SlackConfig,
}

impl Default for Config {
    fn default() -> Self {
        let base = home_dir().join(".warden");
        Config {
            workspace: base.join("workspace"),
            data_dir: base,
            file: None,
            policy: None,
            sandbox: SandboxConfig::default(),
            llm: LlmConfig::default(),
            telegram: TelegramConfig::default(),
            scheduler: SchedulerConfig::default(),
            memory: MemoryConfig::default(),
            skills: SkillsConfig::default(),
            egress: EgressConfig::default(),
            network: Default::default(),
            trust: TrustConfig::default(),
            mcp: Default::default(),
            search: SearchConfig::default(),
            delegate: DelegateConfig::default(),
            voice: VoiceConfig::default(),
            project_workspace: false,
            caps: crate::sizes::Caps::default(),
            http: Default::default(),
            slack: Default::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    // Not a `source` field: the message already names the error, and anyhow's `{:#}` would
    // print it twice.
    #[error("cannot read config file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid value in {name}: {message}")]
    Env { name: String, message: String },
}

/// Reads environment variables; a seam so tests need not touch the process environment.
pub trait EnvSource {
    fn var(&self, name: &str) -> Option<String>;
}

/// The real process environment.
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl Config {
    /// Load the config: an explicit path must exist; the default path may be absent.
    pub fn load(explicit: Option<&Path>, env: &dyn EnvSource) -> Result<Config, ConfigError> {
        let (path, must_exist) = match explicit {
            Some(p) => (p.to_path_buf(), true),
            None => match env.var("WARDEN_CONFIG") {
                Some(p) => (PathBuf::from(p), true),
                None => (home_dir().join(".warden/config.toml"), false),
            },
        };
        let mut config = match std::fs::read_to_string(&path) {
            Ok(text) => Config {
                file: Some(path.clone()),
                ..Config::parse(&text, &path)?
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => Config::default(),
            Err(error) => return Err(ConfigError::Read { path, error }),
        };
        config.apply_env(env)?;
        config.caps.install();
        config.llm.token_dir = Some(config.data_dir.join("oauth"));
        Ok(config)
    }

    /// Parse config text; `~` at the start of a path field means the home directory.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        config.workspace = expand_home(&config.workspace);
        config.data_dir = expand_home(&config.data_dir);
        config.policy = config.policy.as_deref().map(expand_home);
        for root in &mut config.sandbox.read {
            *root = expand_home(root);
        }
        config
            .memory
            .validate()
            .and_then(|()| config.voice.validate())
            .and_then(|()| config.check_durations())
            .and_then(|()| config.sandbox.background.validate())
            .and_then(|()| {
                crate::egress::proxy::domain::parse_hosts(&config.skills.hosts).map(|_| ())
            })
            .and_then(|()| crate::egress::rules::HostRules::parse(&config.egress.hosts).map(|_| ()))
            .and_then(|()| crate::egress::fixed::parse_fixed(&config.egress.resolve).map(|_| ()))
            .and_then(|()| config.network.check())
            .and_then(|()| config.trust.check())
            .and_then(|()| crate::mcp::config::check(&config.mcp))
            .and_then(|()| crate::channels::http::config::check(&config.http))
            .and_then(|()| crate::channels::slack::config::check(&config.slack))
            .and_then(|()| config.search.check())
            .and_then(|()| config.caps.check())
            .and_then(|()| match config.delegate.max_iterations {
                0 => Err("delegate.max_iterations must be at least 1".into()),
                _ => Ok(()),
            })
            .map_err(|message| ConfigError::Parse {
                path: path.to_path_buf(),
                message,
            })?;
        Ok(config)
    }

    /// Every duration must fit [`MAX_SECONDS`]: a deadline computed from a huge value would
    /// overflow (a panic) or never come.
    fn check_durations(&self) -> Result<(), String> {
        let llm = |name: &str, p: &ProviderConfig| {
            [
                (format!("llm.{name}.timeout_secs"), p.timeout_secs),
                (format!("llm.{name}.idle_timeout_secs"), p.idle_timeout_secs),
            ]
        };
        let mut all: Vec<(String, Option<u64>)> = vec![
            (
                "sandbox.timeout_secs".into(),
                Some(self.sandbox.timeout_secs),
            ),
            (
                "sandbox.docker.idle_secs".into(),
                Some(self.sandbox.docker.idle_secs),
            ),
            (
                "sandbox.background.timeout_secs".into(),
                Some(self.sandbox.background.timeout_secs),
            ),
            (
                "memory.embeddings.timeout_secs".into(),
                Some(self.memory.embeddings.timeout_secs),
            ),
            (
                "telegram.approval_timeout_secs".into(),
                Some(self.telegram.approval_timeout_secs),
            ),
            (
                "slack.approval_timeout_secs".into(),
                Some(self.slack.approval_timeout_secs),
            ),
            (
                "slack.shutdown_grace_secs".into(),
                Some(self.slack.shutdown_grace_secs),
            ),
            (
                "slack.request_timeout_secs".into(),
                Some(self.slack.request_timeout_secs),
            ),
            (
                "telegram.shutdown_grace_secs".into(),
                Some(self.telegram.shutdown_grace_secs),
            ),
            (
                "telegram.worker_idle_secs".into(),
                Some(self.telegram.worker_idle_secs),
            ),
            (
                "telegram.poll_timeout_secs".into(),
                Some(self.telegram.poll_timeout_secs.into()),
            ),
            (
                "telegram.request_timeout_secs".into(),
                Some(self.telegram.request_timeout_secs),
            ),
            ("voice.max_seconds".into(), Some(self.voice.max_seconds)),
            (
                "llm.retry_budget_secs".into(),
                Some(self.llm.retry_budget_secs),
            ),
            (
                "llm.scheduled_retry_budget_secs".into(),
                Some(self.llm.scheduled_retry_budget_secs),
            ),
            ("voice.timeout_secs".into(), Some(self.voice.timeout_secs)),
            (
                "scheduler.min_interval_secs".into(),
                Some(self.scheduler.min_interval_secs),
            ),
            (
                "scheduler.backoff_base_secs".into(),
                Some(self.scheduler.backoff_base_secs),
            ),
            (
                "scheduler.backoff_max_secs".into(),
                Some(self.scheduler.backoff_max_secs),
            ),
            (
                "scheduler.heartbeat_minutes".into(),
                Some(self.scheduler.heartbeat_minutes.saturating_mul(60)),
            ),
        ];
        all.extend(llm("anthropic", &self.llm.anthropic));
        all.extend(llm("openai", &self.llm.openai));
        for (key, value) in all {
            if let Some(v) = value.filter(|v| *v > MAX_SECONDS) {
                return Err(format!(
                    "{key} = {v} is longer than warden allows ({MAX_SECONDS} seconds, 30 days)"
                ));
            }
        }
        Ok(())
    }

    /// warden's own files, which no sandbox root may expose: the data directory (database,
    /// audit log, grants; by convention also `warden.env`) and the config file (keys, token)
    /// must stay unreadable, the command policy `policy` unwritable.
    pub fn own_files(&self, policy: Option<&Path>) -> Vec<OwnFile> {
        let mut own = vec![OwnFile {
            path: self.data_dir.clone(),
            what: "warden's data directory (its database, audit log and grants)",
            readable: false,
        }];
        if let Some(file) = &self.file {
            own.push(OwnFile {
                path: file.clone(),
                what: "warden's config file (API keys, the bot token)",
                readable: false,
            });
        }
        if let Some(policy) = policy {
            own.push(OwnFile {
                path: policy.to_path_buf(),
                what: "the command policy",
                readable: true,
            });
        }
        own
    }

    /// Every configured secret, so logs can redact them wherever they come from.
    pub fn secrets(&self) -> Vec<&Secret> {
        [
            &self.llm.anthropic.api_key,
            &self.llm.openai.api_key,
            &self.memory.embeddings.api_key,
            &self.voice.api_key,
            &self.telegram.token,
            &self.search.api_key,
            &self.http.token,
        ]
        .into_iter()
        .chain(self.skills.secrets.values())
        .chain(self.http.hooks.values().map(|hook| &hook.secret))
        .chain(self.slack.secrets())
        .filter(|s| !s.is_empty())
        .collect()
    }

    /// Environment variables override the file, so secrets need not be written to disk.
    pub fn apply_env(&mut self, env: &dyn EnvSource) -> Result<(), ConfigError> {
        if let Some(v) = env.var("ANTHROPIC_API_KEY") {
            self.llm.anthropic.api_key = Secret::new(v);
        }
        if let Some(v) = env.var("ANTHROPIC_BASE_URL") {
            self.llm.anthropic.base_url = Some(v);
        }
        if let Some(v) = env.var("OPENAI_API_KEY") {
            self.llm.openai.api_key = Secret::new(v);
        }
        if let Some(v) = env.var("OPENAI_BASE_URL") {
            self.llm.openai.base_url = Some(v);
        }
        if let Some(v) = env.var("WARDEN_EMBEDDINGS_API_KEY") {
            self.memory.embeddings.api_key = Secret::new(v);
        }
        if let Some(v) = env.var("BRAVE_API_KEY") {
            self.search.api_key = Secret::new(v);
        }
        if let Some(v) = env.var("WARDEN_VOICE_API_KEY") {
            self.voice.api_key = Secret::new(v);
        }
        if let Some(v) = env.var("WARDEN_MODEL") {
            self.llm.model_override = Some(v);
        }
        if let Some(v) = env.var("TELEGRAM_BOT_TOKEN") {
            self.telegram.token = Secret::new(v);
        }
        if let Some(v) = env.var("WARDEN_HTTP_TOKEN") {
            self.http.token = Secret::new(v);
        }
        self.slack.apply_env(|name| env.var(name));
        if let Some(v) = env.var("TELEGRAM_API_URL") {
            self.telegram.api_url = Some(v);
        }
        if let Some(v) = env.var("TELEGRAM_ALLOWED_USERS") {
            self.telegram.allowed_users =
                telegram::parse_user_ids(&v).map_err(|message| ConfigError::Env {
                    name: "TELEGRAM_ALLOWED_USERS".into(),
                    message,
                })?;
        }
        Ok(())
    }
}

pub use crate::policy::paths::{expand_home, home_dir};

#[cfg(test)]
mod tests;
