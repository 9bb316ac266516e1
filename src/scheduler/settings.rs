//! The `[scheduler]` config section, checked and turned into typed settings: the time zone,
//! job limits, retry policy, heartbeat interval and active hours.

use super::active_hours::ActiveHours;
use super::heartbeat::HeartbeatSettings;
use super::job::Limits;
use super::runner::RetryPolicy;
use crate::config::SchedulerConfig;
use chrono_tz::Tz;
use std::path::Path;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Settings {
    pub enabled: bool,
    pub tz: Tz,
    pub limits: Limits,
    pub retry: RetryPolicy,
    /// `None`: the heartbeat is off.
    pub heartbeat_every: Option<Duration>,
    pub active_hours: ActiveHours,
}

impl Settings {
    pub fn from_config(config: &SchedulerConfig) -> Result<Settings, String> {
        let tz = match config.timezone.as_deref().map(str::trim) {
            Some(name) if !name.is_empty() => name.parse::<Tz>().map_err(|_| {
                format!("scheduler.timezone: unknown time zone {name:?} (use an IANA name such as Europe/Berlin)")
            })?,
            _ => detect_timezone(),
        };
        if config.max_jobs == 0 {
            return Err("scheduler.max_jobs must be at least 1".into());
        }
        if config.backoff_base_secs == 0 || config.backoff_max_secs < config.backoff_base_secs {
            return Err(
                "scheduler: backoff_base_secs must be at least 1 and at most backoff_max_secs"
                    .into(),
            );
        }
        if config.one_shot_attempts == 0 {
            return Err("scheduler.one_shot_attempts must be at least 1".into());
        }
        let active_hours = ActiveHours::parse(&config.active_hours)
            .map_err(|e| format!("scheduler.active_hours: {e}"))?;
        Ok(Settings {
            enabled: config.enabled,
            tz,
            limits: Limits {
                default_tz: tz,
                min_interval: Duration::from_secs(config.min_interval_secs),
                max_jobs: config.max_jobs,
            },
            retry: RetryPolicy {
                backoff_base: Duration::from_secs(config.backoff_base_secs),
                backoff_max: Duration::from_secs(config.backoff_max_secs),
                one_shot_attempts: config.one_shot_attempts,
            },
            heartbeat_every: (config.heartbeat_minutes > 0)
                .then(|| Duration::from_secs(config.heartbeat_minutes * 60)),
            active_hours,
        })
    }

    /// The heartbeat's settings when it is on, delivering to `chat_session`.
    pub fn heartbeat(&self, chat_session: &str) -> Option<HeartbeatSettings> {
        Some(HeartbeatSettings {
            every: self.heartbeat_every?,
            active: self.active_hours.clone(),
            tz: self.tz,
            chat_session: chat_session.to_string(),
        })
    }
}

/// The owner's chat: the first allowed Telegram user. In a private chat the chat id is the
/// user id, and sessions are keyed `telegram:<chat>`.
pub fn owner_chat_session(allowed_users: &[i64]) -> Option<String> {
    allowed_users.first().map(|id| format!("telegram:{id}"))
}

/// The machine's zone as an IANA name: `$TZ`, the `/etc/localtime` link, `/etc/timezone`;
/// UTC when none names a known zone.
pub fn detect_timezone() -> Tz {
    let from_env = std::env::var("TZ")
        .ok()
        .and_then(|v| v.trim_start_matches(':').parse::<Tz>().ok());
    let from_link = || {
        let target = std::fs::read_link("/etc/localtime").ok()?;
        zone_from_path(&target)
    };
    let from_file = || {
        std::fs::read_to_string("/etc/timezone")
            .ok()?
            .trim()
            .parse::<Tz>()
            .ok()
    };
    from_env
        .or_else(from_link)
        .or_else(from_file)
        .unwrap_or(Tz::UTC)
}

/// `/usr/share/zoneinfo/Europe/Berlin` → Europe/Berlin.
fn zone_from_path(path: &Path) -> Option<Tz> {
    let text = path.to_str()?;
    let (_, name) = text.split_once("zoneinfo/")?;
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_errors_name_the_key() {
        let settings = Settings::from_config(&SchedulerConfig::default()).unwrap();
        assert_eq!(settings.heartbeat_every, Some(Duration::from_secs(30 * 60)));
        assert_eq!(settings.limits.max_jobs, 50);
        assert_eq!(settings.retry, RetryPolicy::default());
        let mut config = SchedulerConfig {
            timezone: Some("Europe/Berlin".into()),
            heartbeat_minutes: 0,
            ..Default::default()
        };
        let settings = Settings::from_config(&config).unwrap();
        assert_eq!(settings.tz, chrono_tz::Europe::Berlin);
        assert!(settings.heartbeat("telegram:1").is_none());
        config.timezone = Some("Berlin".into());
        let err = Settings::from_config(&config).unwrap_err();
        assert!(err.contains("scheduler.timezone"), "{err}");
        config.timezone = None;
        config.active_hours = vec!["8-22".into()];
        let err = Settings::from_config(&config).unwrap_err();
        assert!(err.contains("scheduler.active_hours"), "{err}");
    }

    #[test]
    fn the_section_parses_from_the_config_file() {
        let config = crate::config::Config::parse(
            "[scheduler]\ntimezone = \"America/New_York\"\nheartbeat_minutes = 15\n\
             active_hours = [\"22:00-06:00\", \"12:00-13:00\"]\nmax_jobs = 5\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let settings = Settings::from_config(&config.scheduler).unwrap();
        assert_eq!(settings.tz, chrono_tz::America::New_York);
        assert_eq!(settings.heartbeat_every, Some(Duration::from_secs(15 * 60)));
        assert_eq!(settings.limits.max_jobs, 5);
        let err = crate::config::Config::parse("[scheduler]\nheartbeat = 5\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("heartbeat"), "{err}");
    }

    #[test]
    fn zone_names_come_from_zoneinfo_paths() {
        assert_eq!(
            zone_from_path(Path::new("/usr/share/zoneinfo/Europe/Berlin")),
            Some(chrono_tz::Europe::Berlin)
        );
        assert_eq!(zone_from_path(Path::new("/etc/whatever")), None);
    }
}
