//! `[scheduler]`: cron jobs and the heartbeat, checked into typed settings by
//! `scheduler::Settings`.

use serde::Deserialize;

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
