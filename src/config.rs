//! warden's configuration: `~/.warden/config.toml` (or `--config` / `WARDEN_CONFIG`), with every
//! secret also readable from the environment. Secrets live only here, in the warden process:
//! they are never passed to a sandbox, logged or put into a prompt.

use crate::policy::OwnFile;
use crate::sandbox::{Backend, Limits};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A secret value: its `Debug` and `Display` never show it.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

/// The longest duration any setting or flag may name: 30 days. Longer values are refused with
/// the key's name rather than overflowing a deadline.
pub const MAX_SECONDS: u64 = 30 * 24 * 3600;

/// clap's parser for `--timeout SECS` flags: 1 to [`MAX_SECONDS`].
pub fn parse_timeout(text: &str) -> Result<u64, String> {
    let secs: u64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if secs == 0 || secs > MAX_SECONDS {
        return Err(format!(
            "{secs} is not between 1 and {MAX_SECONDS} seconds (30 days)"
        ));
    }
    Ok(secs)
}

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The secret itself, for the one place that sends it (an HTTP header, the Bot API URL).
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "Secret(<empty>)"
        } else {
            "Secret(<redacted>)"
        })
    }
}

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
}

/// `[search]`: the `web_search` tool's provider (see `crate::tools::web_search`). Without a
/// provider the tool is not offered.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    pub provider: Option<SearchProvider>,
    /// SearXNG: the instance (required). Brave: the API's address (default
    /// `https://api.search.brave.com`).
    pub base_url: Option<String>,
    /// Brave's subscription token; `BRAVE_API_KEY` in the environment also sets it.
    pub api_key: Secret,
    /// Results shown to the model per search (1 to 20).
    pub max_results: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    Searxng,
    Brave,
}

/// Most results one search may show.
pub const MAX_SEARCH_RESULTS: usize = 20;

impl SearchConfig {
    /// The section's values, as far as they do not depend on the environment (Brave's key
    /// may come from there: it is checked where the tool is built).
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_SEARCH_RESULTS).contains(&self.max_results) {
            return Err(format!(
                "search.max_results = {} must be between 1 and {MAX_SEARCH_RESULTS}",
                self.max_results
            ));
        }
        if self.provider == Some(SearchProvider::Searxng) && self.base_url.is_none() {
            return Err(
                "search.provider = \"searxng\" needs search.base_url, the address of \
                        the instance (e.g. \"https://searx.example.org\")"
                    .into(),
            );
        }
        self.base_url().map(|_| ())
    }

    /// `base_url`, which must be an http(s) address without credentials, query or fragment.
    pub fn base_url(&self) -> Result<Option<url::Url>, String> {
        let Some(text) = self.base_url.as_deref() else {
            return Ok(None);
        };
        let url = url::Url::parse(text).map_err(|e| format!("search.base_url = {text:?}: {e}"))?;
        let bare = url.username().is_empty()
            && url.password().is_none()
            && url.query().is_none()
            && url.fragment().is_none();
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() || !bare {
            return Err(format!(
                "search.base_url = {text:?} must be an http(s) address without credentials, \
                 query or fragment"
            ));
        }
        Ok(Some(url))
    }
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            provider: None,
            base_url: None,
            api_key: Secret::default(),
            max_results: 5,
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

    fn validate(&self) -> Result<(), String> {
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

/// `[trust]`: the workspace files that steer the agent, and where untrusted files land (see
/// `crate::persistence`). Paths are relative to the workspace; `dir/**` is a whole folder.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrustConfig {
    /// Files that tell the agent how to behave: every model write to them asks, with a diff.
    pub instruction_files: Vec<String>,
    /// Memory that feeds later prompts: written freely, except after the run read untrusted
    /// content, when writes ask.
    pub memory_files: Vec<String>,
    /// Where files from others land: reading from them marks the run as untrusted.
    pub untrusted_paths: Vec<String>,
    /// More files no command may change unasked (a model write asks, like an instruction
    /// file; the write verifier undoes any other change). git's hooks and config files are
    /// always protected.
    pub protected_files: Vec<String>,
}

impl Default for TrustConfig {
    fn default() -> Self {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        TrustConfig {
            instruction_files: strings(&["AGENTS.md", "SOUL.md", "TOOLS.md"]),
            memory_files: strings(&["MEMORY.md", "USER.md", "HEARTBEAT.md", "memory/**"]),
            untrusted_paths: strings(&["attachments"]),
            protected_files: Vec::new(),
        }
    }
}

/// `[egress]`: what warden's own process may fetch (`web_fetch`; see `crate::egress`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressConfig {
    /// Host rules: an exact name, `*.suffix` or `*`, each `"allow"`, `"ask"` or `"deny"`. A
    /// host without a rule is fetched without asking only for a URL that appeared verbatim in
    /// the user's messages or in a page fetched in the same run.
    pub hosts: BTreeMap<String, String>,
    /// Fixed addresses for exact names (`"wiki.lan" = "192.168.1.5"`, `"docs.test" =
    /// "127.0.0.1:8080"`): LAN services and tests. The only way `web_fetch` reaches a private
    /// or loopback address, and only under that name.
    pub resolve: BTreeMap<String, String>,
}

/// `[skills]`: skill folders the agent may run in the sandbox (see `crate::skills`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SkillsConfig {
    /// Offer skills to the agent: the `skill` tool and the list in the system prompt.
    pub enabled: bool,
    /// Include the skills built into warden.
    pub bundled: bool,
    /// Fixed addresses for domains skills declare (`"api.example.test" = "127.0.0.1:8080"`, or
    /// an address without a port): for tests and LAN services. The only way a skill's traffic
    /// reaches a private or loopback address, and only under that exact name.
    pub hosts: BTreeMap<String, String>,
    /// Secrets the egress proxy adds to route requests (`{secret:NAME}` in a manifest's
    /// headers); `WARDEN_SECRET_NAME` in warden's environment also provides one. Never given
    /// to a skill itself.
    pub secrets: BTreeMap<String, Secret>,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        SkillsConfig {
            enabled: true,
            bundled: true,
            hosts: BTreeMap::new(),
            secrets: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    pub backend: Backend,
    /// Wall-clock limit for one command string, in seconds.
    pub timeout_secs: u64,
    /// Extra readable roots for the policy and the jail.
    pub read: Vec<PathBuf>,
    /// Run the host backend even when the kernel has no Landlock (much weaker: says so).
    pub allow_without_landlock: bool,
    pub limits: Limits,
    pub docker: DockerConfig,
    pub background: BackgroundConfig,
}

/// `[sandbox.background]`: commands the agent starts with `bash` `background: true` (same
/// policy, approvals and sandbox as any other; see `crate::tools::background`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackgroundConfig {
    /// Background commands that may run at once in the agent (all chats together); 0: none.
    pub max_running: usize,
    /// Wall-clock limit of one background command, in seconds.
    pub timeout_secs: u64,
    /// How much of its output is kept: the last bytes, stdout and stderr together.
    pub tail_bytes: usize,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        BackgroundConfig {
            max_running: 4,
            timeout_secs: 3600,
            tail_bytes: 16 * 1024,
        }
    }
}

impl BackgroundConfig {
    /// The largest tail a setting may ask for (it is kept in memory per command).
    pub const MAX_TAIL_BYTES: usize = 1 << 20;

    fn validate(&self) -> Result<(), String> {
        if self.timeout_secs == 0 {
            return Err("sandbox.background.timeout_secs must be at least 1".into());
        }
        if !(1024..=Self::MAX_TAIL_BYTES).contains(&self.tail_bytes) {
            return Err(format!(
                "sandbox.background.tail_bytes = {} must be between 1024 and {}",
                self.tail_bytes,
                Self::MAX_TAIL_BYTES
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DockerConfig {
    /// Image the session containers run.
    pub image: String,
    /// OCI runtime: `runc` (default) or `runsc` for gVisor.
    pub runtime: Option<String>,
    /// Remove a session's container after this many idle seconds.
    pub idle_secs: u64,
    /// Docker Engine socket.
    pub socket: PathBuf,
}

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

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelegramConfig {
    pub token: Secret,
    /// Telegram user IDs allowed to drive the bot. Empty: `warden bot` refuses to start.
    pub allowed_users: Vec<i64>,
    /// Bot API base URL (tests point it at a local fake server).
    pub api_url: Option<String>,
    /// Seconds an approval request waits for a button press; no answer means deny.
    pub approval_timeout_secs: u64,
    /// Prompts that may wait in one chat behind the running one; more get a "busy" reply.
    pub queue_depth: usize,
    /// Largest photo or document downloaded, in bytes (the Bot API itself serves ≤ 20 MB).
    pub max_file_bytes: u64,
    /// Largest workspace file the `send_file` tool uploads, in bytes. The Bot API's own limits
    /// apply on top: 50 MB for a document, 10 MB for a photo.
    pub max_send_bytes: u64,
    /// Seconds a shutdown waits for running agents before recording them as interrupted.
    pub shutdown_grace_secs: u64,
    /// Long-polling timeout of `getUpdates`, in seconds: Telegram holds an idle poll this long
    /// (the client waits 10 s more).
    pub poll_timeout_secs: u32,
    /// Seconds any other Bot API request may take. A message whose send timed out may have
    /// arrived all the same: it is sent once more, marked as possibly repeated.
    pub request_timeout_secs: u64,
    /// Seconds the agent worker process stays up after its last run (the next run starts a
    /// new one). While it is down the bot holds only the gateway in memory.
    pub worker_idle_secs: u64,
    /// Megabytes that must stay free on the database's disk: with less, new messages wait
    /// (kept by Telegram, the chat told once) so the runs already going have room to finish.
    pub min_free_mb: u64,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            token: Secret::default(),
            allowed_users: Vec::new(),
            api_url: None,
            approval_timeout_secs: 120,
            queue_depth: 5,
            max_file_bytes: 20 * 1024 * 1024,
            max_send_bytes: 50 * 1024 * 1024,
            shutdown_grace_secs: 20,
            poll_timeout_secs: 30,
            request_timeout_secs: 60,
            worker_idle_secs: 300,
            min_free_mb: 64,
        }
    }
}

/// Cron jobs and the heartbeat (checked into typed settings by `scheduler::Settings`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Run jobs and the heartbeat in `warden bot`.
    pub enabled: bool,
    /// IANA zone for cron expressions, local `at` times and active hours. Default: `$TZ`, the
    /// `/etc/localtime` link, else UTC.
    pub timezone: Option<String>,
    /// Jobs that may exist at once.
    pub max_jobs: usize,
    /// Recurring jobs may not run more often than this (each run is a model call).
    pub min_interval_secs: u64,
    /// First wait after a failed run; doubles per failure up to `backoff_max_secs`.
    pub backoff_base_secs: u64,
    pub backoff_max_secs: u64,
    /// Runs a one-shot (`at`) job gets before it is given up.
    pub one_shot_attempts: u32,
    /// Minutes between heartbeats; 0 turns the heartbeat off.
    pub heartbeat_minutes: u64,
    /// Windows (`HH:MM-HH:MM`, may wrap midnight) in which the heartbeat runs; empty: always.
    pub active_hours: Vec<String>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            enabled: true,
            timezone: None,
            max_jobs: 50,
            min_interval_secs: 60,
            backoff_base_secs: 30,
            backoff_max_secs: 3600,
            one_shot_attempts: 3,
            heartbeat_minutes: 30,
            active_hours: vec!["08:00-22:00".into()],
        }
    }
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
            trust: TrustConfig::default(),
            mcp: Default::default(),
            search: SearchConfig::default(),
            delegate: DelegateConfig::default(),
            voice: VoiceConfig::default(),
            project_workspace: false,
            caps: crate::sizes::Caps::default(),
            http: Default::default(),
        }
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            backend: Backend::Host,
            timeout_secs: 120,
            read: Vec::new(),
            allow_without_landlock: false,
            limits: Limits::default(),
            docker: DockerConfig::default(),
            background: BackgroundConfig::default(),
        }
    }
}

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            image: "warden-sandbox:minimal".into(),
            runtime: None,
            idle_secs: 600,
            socket: PathBuf::from("/var/run/docker.sock"),
        }
    }
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
            .and_then(|()| crate::skills::egress::parse_hosts(&config.skills.hosts).map(|_| ()))
            .and_then(|()| crate::egress::HostRules::parse(&config.egress.hosts).map(|_| ()))
            .and_then(|()| crate::tools::web_fetch::parse_fixed(&config.egress.resolve).map(|_| ()))
            .and_then(|()| crate::persistence::PromptFiles::check_config(&config.trust))
            .and_then(|()| crate::mcp::config::check(&config.mcp))
            .and_then(|()| crate::channels::http::config::check(&config.http))
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
        if let Some(v) = env.var("TELEGRAM_API_URL") {
            self.telegram.api_url = Some(v);
        }
        if let Some(v) = env.var("TELEGRAM_ALLOWED_USERS") {
            self.telegram.allowed_users =
                parse_user_ids(&v).map_err(|message| ConfigError::Env {
                    name: "TELEGRAM_ALLOWED_USERS".into(),
                    message,
                })?;
        }
        Ok(())
    }
}

fn parse_user_ids(list: &str) -> Result<Vec<i64>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| format!("{s:?} is not a numeric Telegram user ID"))
        })
        .collect()
}

pub use crate::policy::paths::{expand_home, home_dir};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct FakeEnv(HashMap<&'static str, &'static str>);
    impl EnvSource for FakeEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| v.to_string())
        }
    }

    /// Why `text` is not a valid config.
    fn rejected(text: &str) -> String {
        Config::parse(text, Path::new("c.toml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let mut config = Config::default();
        config.telegram.token = Secret::new("fake-bot-token-very-secret");
        let shown = format!("{config:?}");
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn env_overrides_file_values() {
        let mut config = Config::parse(
            "[llm.anthropic]\nbase_url = \"http://file\"\n[telegram]\nallowed_users = [1]\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let env = FakeEnv(HashMap::from([
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
            ("TELEGRAM_ALLOWED_USERS", "42, 7"),
        ]));
        config.apply_env(&env).unwrap();
        assert_eq!(
            config.llm.anthropic.base_url.as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(config.telegram.allowed_users, vec![42, 7]);
    }

    #[test]
    fn bad_user_ids_are_a_clear_error() {
        let mut config = Config::default();
        let env = FakeEnv(HashMap::from([("TELEGRAM_ALLOWED_USERS", "42,alice")]));
        let err = config.apply_env(&env).unwrap_err().to_string();
        assert!(err.contains("\"alice\" is not a numeric"), "{err}");
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = Config::parse("workspce = \"/x\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("workspce"), "{err}");
    }

    #[test]
    fn memory_defaults_and_bad_thresholds() {
        let config =
            Config::parse("[memory]\ncontext_window = 8000\n", Path::new("c.toml")).unwrap();
        assert_eq!(config.memory.context_window, 8000);
        assert_eq!(config.memory.soft_threshold, 0.6);
        assert_eq!(config.memory.hard_threshold, 0.8);
        assert!(config.memory.embeddings.base_url.is_none());
        let err = Config::parse(
            "[memory]\nsoft_threshold = 0.9\nhard_threshold = 0.5\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("soft_threshold must not exceed"), "{err}");
    }

    #[test]
    fn skills_hosts_are_checked() {
        let config = Config::parse(
            "[skills]\nhosts = { \"api.example.test\" = \"127.0.0.1:8080\" }\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert!(config.skills.enabled && config.skills.bundled);
        assert_eq!(config.skills.hosts.len(), 1);
        let err = Config::parse(
            "[skills]\nhosts = { \"api.example.test\" = \"nowhere\" }\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("api.example.test"), "{err}");
    }

    #[test]
    fn egress_entries_are_checked_and_name_their_key() {
        let config = Config::parse(
            "[egress.hosts]\n\"docs.rs\" = \"allow\"\n\"*.example.com\" = \"ask\"\n\
             \"pastebin.com\" = \"deny\"\n[egress.resolve]\n\"docs.test\" = \"127.0.0.1:8080\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(config.egress.hosts.len(), 3);
        assert_eq!(config.egress.resolve.len(), 1);
        for (text, key) in [
            ("[egress.hosts]\n\"docs.rs\" = \"always\"\n", "docs.rs"),
            ("[egress.hosts]\n\"a.*.com\" = \"allow\"\n", "a.*.com"),
            (
                "[egress.resolve]\n\"docs.test\" = \"nowhere\"\n",
                "docs.test",
            ),
        ] {
            let err = rejected(text);
            assert!(err.contains(key), "{err}");
        }
    }

    #[test]
    fn search_and_delegate_settings_are_checked_and_name_their_key() {
        let config = Config::default();
        assert!(config.search.provider.is_none());
        assert!(config.delegate.enabled);
        let mut config = Config::parse(
            "[search]\nprovider = \"brave\"\napi_key = \"from-file\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(config.search.provider, Some(SearchProvider::Brave));
        assert!(!format!("{config:?}").contains("from-file"));
        config
            .apply_env(&FakeEnv(HashMap::from([("BRAVE_API_KEY", "from-env")])))
            .unwrap();
        assert_eq!(config.search.api_key.expose(), "from-env");
        assert!(config.secrets().iter().any(|s| s.expose() == "from-env"));
        for (text, key) in [
            ("[search]\nprovider = \"searxng\"\n", "search.base_url"),
            (
                "[search]\nprovider = \"searxng\"\nbase_url = \"searx.lan\"\n",
                "search.base_url",
            ),
            ("[search]\nmax_results = 0\n", "search.max_results"),
            ("[search]\nmax_results = 21\n", "search.max_results"),
            ("[search]\nprovider = \"google\"\n", "provider"),
            (
                "[delegate]\nmax_iterations = 0\n",
                "delegate.max_iterations",
            ),
        ] {
            let err = rejected(text);
            assert!(err.contains(key), "{text}: {err}");
        }
    }

    #[test]
    fn background_settings_have_defaults_and_errors_name_the_key() {
        let config = Config::parse("", Path::new("c.toml")).unwrap();
        assert_eq!(config.sandbox.background.max_running, 4);
        assert_eq!(config.sandbox.background.timeout_secs, 3600);
        for (text, key) in [
            (
                "[sandbox.background]\ntimeout_secs = 0\n",
                "sandbox.background.timeout_secs",
            ),
            (
                "[sandbox.background]\ntimeout_secs = 99999999\n",
                "sandbox.background.timeout_secs",
            ),
            (
                "[sandbox.background]\ntail_bytes = 10\n",
                "sandbox.background.tail_bytes",
            ),
            ("[sandbox.background]\nmax = 1\n", "max"),
        ] {
            let err = Config::parse(text, Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{err}");
        }
    }

    #[test]
    fn voice_is_off_by_default_and_its_keys_are_checked() {
        let config = Config::default();
        assert_eq!(config.voice.endpoint(), None);
        let config = Config::parse(
            "[voice]\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"small\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(config.voice.endpoint(), Some("http://127.0.0.1:8080/v1"));
        for (text, key) in [
            ("[voice]\nbase_url = \"nowhere\"\n", "voice.base_url"),
            ("[voice]\nbase_url = \"ftp://x/v1\"\n", "voice.base_url"),
            ("[voice]\nmodel = \"\"\n", "voice.model"),
            ("[voice]\nmax_bytes = 0\n", "voice.max_bytes"),
            ("[voice]\nmax_seconds = 99999999\n", "voice.max_seconds"),
        ] {
            let err = Config::parse(text, Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        let mut config = Config::default();
        let env = FakeEnv(HashMap::from([("WARDEN_VOICE_API_KEY", "sk-voice")]));
        config.apply_env(&env).unwrap();
        assert_eq!(config.voice.api_key.expose(), "sk-voice");
        assert!(config.secrets().iter().any(|s| s.expose() == "sk-voice"));
    }

    #[test]
    fn explicit_missing_file_is_an_error_default_is_not() {
        let env = FakeEnv(HashMap::new());
        assert!(Config::load(Some(Path::new("/nonexistent/warden.toml")), &env).is_err());
    }
}
