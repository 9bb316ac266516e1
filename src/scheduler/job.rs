//! Jobs: a prompt, a [`Schedule`], and where the run happens. A [`JobRequest`] (from the cron
//! tool or `warden cron add`) becomes a [`NewJob`] only through [`validate`], so both paths
//! refuse the same things with the same words.

use super::schedule::{parse_cron, parse_duration, Schedule};
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use std::time::Duration;

pub type JobId = i64;

/// Longest prompt a job may carry (characters).
pub const MAX_PROMPT_CHARS: usize = 4000;
/// Longest job name (characters).
pub const MAX_NAME_CHARS: usize = 80;

/// Where a job's run happens and where its answer goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Run inside this session (its history is the context) and answer in its chat:
    /// `telegram:<chat>`.
    Session(String),
    /// Run in a fresh session each time (no history, nothing added to the chat's context);
    /// the answer goes to `reply_to`'s chat.
    Fresh { reply_to: String },
}

impl Target {
    /// The session whose chat receives the answer (and whose queue the run waits in).
    pub fn chat_session(&self) -> &str {
        match self {
            Target::Session(s) => s,
            Target::Fresh { reply_to } => reply_to,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Target::Session(s) => s.clone(),
            Target::Fresh { reply_to } => format!("new session, answer to {reply_to}"),
        }
    }
}

/// A stored job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub id: JobId,
    pub name: String,
    pub schedule: Schedule,
    pub prompt: String,
    pub target: Target,
    /// One-shot jobs only: delete the job after a successful run.
    pub delete_after_run: bool,
    /// False once a one-shot job is done or gave up.
    pub enabled: bool,
    /// The slot the job runs at next; `None` when it will not run again.
    pub next_run_at: Option<DateTime<Utc>>,
    /// Consecutive failed runs (0 after a success).
    pub failures: u32,
    /// A run of this job is in progress.
    pub running: bool,
    pub created_at: DateTime<Utc>,
    /// The session (or `cli`) that created the job.
    pub created_by: String,
    /// What had tainted the run that created it; its runs start with that taint.
    pub untrusted: Vec<String>,
}

impl Job {
    /// One line for lists: `#3 "standup" every 1d → telegram:42, next 2026-11-22 09:00 CET`.
    pub fn summary(&self, display_tz: Tz) -> String {
        let next = match (self.running, self.next_run_at) {
            (true, _) => "running now".to_string(),
            (false, Some(t)) if self.enabled => format!(
                "next {}",
                t.with_timezone(&display_tz).format("%Y-%m-%d %H:%M:%S %Z")
            ),
            _ => "finished".to_string(),
        };
        let failing = if self.failures > 0 {
            format!(", {} failed run(s) in a row", self.failures)
        } else {
            String::new()
        };
        format!(
            "#{} {:?} {} → {}, {next}{failing}",
            self.id,
            self.name,
            self.schedule.describe(display_tz),
            self.target.describe(),
        )
    }
}

/// What a caller asks for; every field is checked by [`validate`].
#[derive(Clone, Debug, Default)]
pub struct JobRequest {
    pub name: Option<String>,
    /// An instant (`2026-11-21T09:30:00+01:00`, `…Z`), a local time in the job's zone
    /// (`2026-11-21 09:30`), or a delay from now (`+20m`, `in 20m`).
    pub at: Option<String>,
    /// A duration: `30m`, `2h`, `1h30m`.
    pub every: Option<String>,
    /// A 5- or 6-field cron expression.
    pub cron: Option<String>,
    /// IANA zone for `cron` and local `at` times; default: the configured one.
    pub timezone: Option<String>,
    pub prompt: String,
    pub target: Option<Target>,
    /// Default: true for `at` jobs; refused for recurring ones.
    pub delete_after_run: Option<bool>,
    pub created_by: String,
    /// What had tainted the run that created it (its prompt may carry someone else's words):
    /// every run of the job starts with that taint.
    pub untrusted: Vec<String>,
}

/// A validated job, ready to store.
#[derive(Clone, Debug, PartialEq)]
pub struct NewJob {
    pub name: String,
    pub schedule: Schedule,
    pub prompt: String,
    pub target: Target,
    pub delete_after_run: bool,
    pub first_run: DateTime<Utc>,
    pub created_by: String,
    pub untrusted: Vec<String>,
}

/// Bounds a new job is checked against.
#[derive(Clone, Debug)]
pub struct Limits {
    pub default_tz: Tz,
    /// Recurring jobs may not run more often than this (each run is a model call).
    pub min_interval: Duration,
    pub max_jobs: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JobError {
    #[error(
        "give exactly one schedule: `at` (a time), `every` (a duration) or `cron` (an expression)"
    )]
    NoSchedule,
    #[error("give only one schedule, not {0}")]
    TwoSchedules(String),
    #[error("{0}")]
    BadSchedule(String),
    #[error("the time {at} is not in the future (now is {now}); give a later time")]
    PastTime { at: String, now: String },
    #[error("unknown time zone {0:?}: use an IANA name such as Europe/Berlin or UTC")]
    UnknownTimezone(String),
    #[error("{0} runs more often than the minimum interval of {1}")]
    TooFrequent(String, String),
    #[error("the prompt is empty: say what the job should do")]
    EmptyPrompt,
    #[error("the prompt is {0} characters long; at most {MAX_PROMPT_CHARS}")]
    PromptTooLong(usize),
    #[error("the name is {0} characters long; at most {MAX_NAME_CHARS}")]
    NameTooLong(usize),
    #[error("delete_after_run applies to one-shot `at` jobs only")]
    DeleteRecurring,
    #[error("no session to deliver to: give one")]
    NoTarget,
    #[error("there are already {0} jobs (the maximum); remove one first")]
    TooManyJobs(usize),
    #[error("no job #{0}; list the jobs to see their ids")]
    UnknownJob(JobId),
    #[error("job #{0} is running now; try again when it has finished")]
    Running(JobId),
    #[error("{0}")]
    Store(String),
}

/// Check a request against `limits` at `now` and resolve its times.
pub fn validate(req: JobRequest, now: DateTime<Utc>, limits: &Limits) -> Result<NewJob, JobError> {
    let prompt = req.prompt.trim().to_string();
    if prompt.is_empty() {
        return Err(JobError::EmptyPrompt);
    }
    let prompt_chars = prompt.chars().count();
    if prompt_chars > MAX_PROMPT_CHARS {
        return Err(JobError::PromptTooLong(prompt_chars));
    }
    let tz = match req.timezone.as_deref().map(str::trim) {
        None | Some("") => limits.default_tz,
        Some(name) => name
            .parse::<Tz>()
            .map_err(|_| JobError::UnknownTimezone(name.to_string()))?,
    };
    let given: Vec<&str> = [("at", &req.at), ("every", &req.every), ("cron", &req.cron)]
        .iter()
        .filter(|(_, v)| v.as_deref().is_some_and(|s| !s.trim().is_empty()))
        .map(|(k, _)| *k)
        .collect();
    let schedule = match given.as_slice() {
        [] => return Err(JobError::NoSchedule),
        ["at"] => Schedule::At(parse_at(req.at.as_deref().unwrap_or(""), tz, now)?),
        ["every"] => {
            let text = req.every.as_deref().unwrap_or("");
            let interval = parse_duration(text).map_err(JobError::BadSchedule)?;
            if interval < limits.min_interval {
                return Err(too_frequent(&format!("every {}", text.trim()), limits));
            }
            Schedule::Every {
                interval,
                anchor: now,
            }
        }
        ["cron"] => {
            let expr = req.cron.as_deref().unwrap_or("").trim().to_string();
            parse_cron(&expr).map_err(JobError::BadSchedule)?;
            let schedule = Schedule::Cron { expr, tz };
            check_cron_spacing(&schedule, now, limits)?;
            schedule
        }
        many => return Err(JobError::TwoSchedules(many.join(" and "))),
    };
    let first_run = match &schedule {
        Schedule::At(at) => *at,
        other => other.next_after(now).ok_or_else(|| {
            JobError::BadSchedule("the cron expression never matches a future time".into())
        })?,
    };
    let delete_after_run = match (req.delete_after_run, schedule.is_one_shot()) {
        (Some(true), false) => return Err(JobError::DeleteRecurring),
        (Some(flag), true) => flag,
        (None, one_shot) => one_shot,
        (Some(false), false) => false,
    };
    let target = match req.target {
        Some(Target::Session(s)) if s.trim().is_empty() => return Err(JobError::NoTarget),
        Some(Target::Fresh { reply_to }) if reply_to.trim().is_empty() => {
            return Err(JobError::NoTarget)
        }
        Some(target) => target,
        None => return Err(JobError::NoTarget),
    };
    let name = match req.name.map(|n| n.trim().to_string()) {
        Some(n) if !n.is_empty() => n,
        _ => default_name(&prompt),
    };
    let name_chars = name.chars().count();
    if name_chars > MAX_NAME_CHARS {
        return Err(JobError::NameTooLong(name_chars));
    }
    Ok(NewJob {
        name,
        schedule,
        prompt,
        target,
        delete_after_run,
        first_run,
        created_by: req.created_by,
        untrusted: req.untrusted,
    })
}

/// The first words of the prompt, for jobs given no name.
fn default_name(prompt: &str) -> String {
    let words: Vec<&str> = prompt.split_whitespace().take(6).collect();
    let name = words.join(" ");
    if name.chars().count() > 40 {
        format!("{}…", name.chars().take(40).collect::<String>())
    } else {
        name
    }
}

fn too_frequent(what: &str, limits: &Limits) -> JobError {
    JobError::TooFrequent(
        what.to_string(),
        super::schedule::format_duration(limits.min_interval),
    )
}

/// A cron expression may not fire more often than the minimum interval. Checked over its
/// next occurrences: enough to catch `* * * * * *` and `*/10 * * * *`.
fn check_cron_spacing(
    schedule: &Schedule,
    now: DateTime<Utc>,
    limits: &Limits,
) -> Result<(), JobError> {
    let min = chrono::Duration::from_std(limits.min_interval).unwrap_or(chrono::Duration::MAX);
    let Some(mut prev) = schedule.next_after(now) else {
        return Err(JobError::BadSchedule(
            "the cron expression never matches a future time".into(),
        ));
    };
    for _ in 0..16 {
        let Some(next) = schedule.next_after(prev) else {
            break;
        };
        if next - prev < min {
            let Schedule::Cron { expr, .. } = schedule else {
                break;
            };
            return Err(too_frequent(&format!("cron {expr}"), limits));
        }
        prev = next;
    }
    Ok(())
}

/// An `at` value: RFC 3339 with an offset, a local date-time in `tz`, or `+20m` / `in 20m`.
fn parse_at(text: &str, tz: Tz, now: DateTime<Utc>) -> Result<DateTime<Utc>, JobError> {
    let text = text.trim();
    let relative = text
        .strip_prefix('+')
        .or_else(|| text.strip_prefix("in "))
        .map(str::trim);
    let at = if let Some(delay) = relative {
        let d = parse_duration(delay).map_err(JobError::BadSchedule)?;
        now + chrono::Duration::from_std(d).map_err(|e| JobError::BadSchedule(e.to_string()))?
    } else if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        t.with_timezone(&Utc)
    } else {
        let local = [
            "%Y-%m-%dT%H:%M:%S",
            "%Y-%m-%d %H:%M:%S",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M",
        ]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
        .ok_or_else(|| {
            JobError::BadSchedule(format!(
                "invalid time {text:?}: use 2026-11-21T09:30:00+01:00, 2026-11-21 09:30 \
                     (in the job's time zone) or a delay such as +20m"
            ))
        })?;
        // A repeated local time takes its first instant; a skipped one is refused, because
        // "09:30" that does not exist has no honest meaning.
        tz.from_local_datetime(&local)
            .earliest()
            .ok_or_else(|| {
                JobError::BadSchedule(format!(
                    "{text} does not exist in {tz} (the clocks skip it for daylight saving time)"
                ))
            })?
            .with_timezone(&Utc)
    };
    if at <= now {
        return Err(JobError::PastTime {
            at: at
                .with_timezone(&tz)
                .format("%Y-%m-%d %H:%M:%S %Z")
                .to_string(),
            now: now
                .with_timezone(&tz)
                .format("%Y-%m-%d %H:%M:%S %Z")
                .to_string(),
        });
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            default_tz: "Europe/Berlin".parse().unwrap(),
            min_interval: Duration::from_secs(60),
            max_jobs: 10,
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-21T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn req(f: impl FnOnce(&mut JobRequest)) -> JobRequest {
        let mut r = JobRequest {
            prompt: "water the plants".into(),
            target: Some(Target::Session("telegram:42".into())),
            created_by: "test".into(),
            untrusted: Vec::new(),
            ..Default::default()
        };
        f(&mut r);
        r
    }

    #[test]
    fn at_accepts_offsets_local_times_and_delays() {
        let job = validate(
            req(|r| r.at = Some("2026-11-21T10:00:00+01:00".into())),
            now(),
            &limits(),
        )
        .unwrap();
        assert_eq!(job.first_run, now() + chrono::Duration::hours(1));
        assert!(
            job.delete_after_run,
            "one-shot jobs delete themselves by default"
        );
        // Local time in the default zone (CET, +01:00).
        let job = validate(
            req(|r| r.at = Some("2026-11-21 10:00".into())),
            now(),
            &limits(),
        )
        .unwrap();
        assert_eq!(job.first_run, now() + chrono::Duration::hours(1));
        let job = validate(req(|r| r.at = Some("+2s".into())), now(), &limits()).unwrap();
        assert_eq!(job.first_run, now() + chrono::Duration::seconds(2));
        let job = validate(
            req(|r| {
                r.at = Some("2026-11-21 10:00".into());
                r.timezone = Some("UTC".into())
            }),
            now(),
            &limits(),
        )
        .unwrap();
        assert_eq!(job.first_run, now() + chrono::Duration::hours(2));
        assert_eq!(job.name, "water the plants");
    }

    #[test]
    fn past_and_nonexistent_times_are_refused_with_the_current_time() {
        let err = validate(
            req(|r| r.at = Some("2026-11-21T08:59:00+01:00".into())),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert!(matches!(err, JobError::PastTime { .. }));
        let text = err.to_string();
        assert!(text.contains("now is 2026-11-21 09:00:00 CET"), "{text}");
        let err = validate(
            req(|r| r.at = Some("2027-03-28 02:30".into())),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("does not exist in Europe/Berlin"),
            "{err}"
        );
        let err = validate(req(|r| r.at = Some("tomorrow".into())), now(), &limits()).unwrap_err();
        assert!(err.to_string().contains("invalid time"), "{err}");
    }

    #[test]
    fn schedules_are_checked() {
        assert_eq!(
            validate(req(|_| {}), now(), &limits()).unwrap_err(),
            JobError::NoSchedule
        );
        let err = validate(
            req(|r| {
                r.at = Some("+1h".into());
                r.cron = Some("0 9 * * *".into())
            }),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert_eq!(err, JobError::TwoSchedules("at and cron".into()));
        let err = validate(
            req(|r| r.cron = Some("0 25 * * *".into())),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("invalid cron expression"), "{err}");
        let err = validate(
            req(|r| r.cron = Some("* * * * * *".into())),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert!(matches!(err, JobError::TooFrequent(..)), "{err}");
        let err = validate(req(|r| r.every = Some("30s".into())), now(), &limits()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "every 30s runs more often than the minimum interval of 1m"
        );
        let err = validate(
            req(|r| r.cron = Some("0 0 30 2 *".into())),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("never matches"), "{err}");
        let err = validate(
            req(|r| {
                r.cron = Some("0 9 * * *".into());
                r.timezone = Some("Mars/Olympus".into())
            }),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("IANA name"), "{err}");
    }

    #[test]
    fn cron_defaults_to_the_configured_zone() {
        let job = validate(req(|r| r.cron = Some("0 9 * * *".into())), now(), &limits()).unwrap();
        // 09:00 CET is 08:00 UTC, which is `now`: the next one is tomorrow.
        assert_eq!(job.first_run, now() + chrono::Duration::days(1));
        assert!(!job.delete_after_run);
        let err = validate(
            req(|r| {
                r.cron = Some("0 9 * * *".into());
                r.delete_after_run = Some(true)
            }),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert_eq!(err, JobError::DeleteRecurring);
    }

    #[test]
    fn prompt_name_and_target_are_checked() {
        let err = validate(
            req(|r| {
                r.at = Some("+1h".into());
                r.prompt = "  ".into()
            }),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert_eq!(err, JobError::EmptyPrompt);
        let err = validate(
            req(|r| {
                r.at = Some("+1h".into());
                r.prompt = "x".repeat(MAX_PROMPT_CHARS + 1)
            }),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert!(matches!(err, JobError::PromptTooLong(_)));
        let err = validate(
            req(|r| {
                r.at = Some("+1h".into());
                r.name = Some("n".repeat(MAX_NAME_CHARS + 1))
            }),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert!(matches!(err, JobError::NameTooLong(_)));
        let err = validate(
            req(|r| {
                r.at = Some("+1h".into());
                r.target = None
            }),
            now(),
            &limits(),
        )
        .unwrap_err();
        assert_eq!(err, JobError::NoTarget);
    }
}
