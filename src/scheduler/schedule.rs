//! When a job runs next: the three kinds of schedule, durations (`30m`, `1h30m`), cron
//! expressions and the backoff after failures. Pure functions of their inputs, so every rule
//! here is tested without a clock.
//!
//! Daylight saving time, for cron expressions (evaluated on the wall clock of their zone, with
//! croner's OCPS rules):
//! - a wall-clock time that does not exist (spring forward, `30 2 * * *` in Europe/Berlin on
//!   the last Sunday of March) runs at the first instant after the gap (03:00 CEST), once;
//! - a wall-clock time that happens twice (fall back, 02:30 on the last Sunday of October) runs
//!   once, at the first of the two instants (02:30 CEST), when the hour field is fixed; patterns
//!   with a wildcard or step in the hour field (`*/15 * * * *`) run in both repeated hours.
//!
//! `every` intervals are absolute time (2 h apart stay 2 h apart across a DST change); `at` is
//! an instant.

use chrono::{DateTime, SubsecRound, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// Once, at this instant.
    At(DateTime<Utc>),
    /// Every `interval`, on a grid that starts at `anchor` (the job's creation), so slots stay
    /// put across restarts.
    Every {
        interval: Duration,
        anchor: DateTime<Utc>,
    },
    /// A 5-field (minute) or 6-field (second first) cron expression on `tz`'s wall clock.
    Cron { expr: String, tz: Tz },
}

impl Schedule {
    /// The kind as stored and shown: `at`, `every`, `cron`.
    pub fn kind(&self) -> &'static str {
        match self {
            Schedule::At(_) => "at",
            Schedule::Every { .. } => "every",
            Schedule::Cron { .. } => "cron",
        }
    }

    pub fn is_one_shot(&self) -> bool {
        matches!(self, Schedule::At(_))
    }

    /// The first slot strictly after `after`, or `None` when there is none (a past `at`, a
    /// cron expression that never matches again).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::At(at) => (*at > after).then_some(*at),
            Schedule::Every { interval, anchor } => Some(next_on_grid(*anchor, *interval, after)),
            Schedule::Cron { expr, tz } => {
                let cron = parse_cron(expr).ok()?;
                // croner walks whole seconds; a fractional `after` would otherwise let it
                // return the second that `after` is already inside.
                let from = after.trunc_subsecs(0).with_timezone(tz);
                cron.find_next_occurrence(&from, false)
                    .ok()
                    .map(|t| t.with_timezone(&Utc))
            }
        }
    }

    /// Human description: `at 2026-11-21 09:30 CET`, `every 2h`, `cron 0 9 * * 1-5 (Europe/Berlin)`.
    pub fn describe(&self, display_tz: Tz) -> String {
        match self {
            Schedule::At(at) => format!(
                "at {}",
                at.with_timezone(&display_tz).format("%Y-%m-%d %H:%M:%S %Z")
            ),
            Schedule::Every { interval, .. } => format!("every {}", format_duration(*interval)),
            Schedule::Cron { expr, tz } => format!("cron {expr} ({tz})"),
        }
    }
}

/// The first point `anchor + k·interval` (k ≥ 0) strictly after `after`.
fn next_on_grid(anchor: DateTime<Utc>, interval: Duration, after: DateTime<Utc>) -> DateTime<Utc> {
    if anchor > after {
        return anchor;
    }
    let step = interval.as_millis().max(1) as i64;
    let elapsed = (after - anchor).num_milliseconds();
    let k = elapsed / step + 1;
    anchor + chrono::Duration::milliseconds(k.saturating_mul(step))
}

/// Parse a 5- or 6-field cron expression (or an `@daily`-style nickname). Seven fields (a
/// year) are refused: one format, documented, instead of every dialect.
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    let trimmed = expr.trim();
    if !trimmed.starts_with('@') {
        let fields = trimmed.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(format!(
                "a cron expression has 5 fields (minute hour day-of-month month day-of-week) or \
                 6 (with seconds first); {trimmed:?} has {fields}"
            ));
        }
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(trimmed)
        .map_err(|e| format!("invalid cron expression {trimmed:?}: {e}"))
}

/// Parse a duration: a number and a unit (`s`, `m`, `h`, `d`, `w`), several summed
/// (`1h30m`, `1h 30m`). No unit is an error: `30` could mean seconds or minutes.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "invalid duration {text:?}: use a number with a unit s, m, h, d or w (30m, 2h, 1h30m)"
        )
    };
    let compact: String = text.split_whitespace().collect();
    if compact.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in compact.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(bad)?;
    }
    if !digits.is_empty() {
        return Err(bad());
    }
    if total == 0 {
        return Err(format!(
            "invalid duration {text:?}: it must be longer than zero"
        ));
    }
    // Far beyond any useful schedule; keeps instant arithmetic from overflowing.
    if total > 10 * 366 * 86_400 {
        return Err(format!("invalid duration {text:?}: at most 10 years"));
    }
    Ok(Duration::from_secs(total))
}

/// `1h30m`, `45s`, `2d` — the inverse of [`parse_duration`] for whole seconds.
pub fn format_duration(d: Duration) -> String {
    let mut secs = d.as_secs();
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

/// The wait before retrying after `failures` consecutive failures (1, 2, …): `base`, doubling
/// each time, never more than `max`.
pub fn backoff(failures: u32, base: Duration, max: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(30);
    base.saturating_mul(1u32 << doublings).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn berlin() -> Tz {
        "Europe/Berlin".parse().unwrap()
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn cron(expr: &str, tz: Tz) -> Schedule {
        Schedule::Cron {
            expr: expr.into(),
            tz,
        }
    }

    #[test]
    fn spring_forward_runs_a_skipped_time_once_right_after_the_gap() {
        // Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
        let job = cron("30 2 * * *", berlin());
        let day_before = job.next_after(utc("2026-03-28T00:00:00Z")).unwrap();
        assert_eq!(day_before, utc("2026-03-28T01:30:00Z")); // 02:30 CET
        let on_the_day = job.next_after(day_before).unwrap();
        assert_eq!(on_the_day, utc("2026-03-29T01:00:00Z")); // 03:00 CEST, first instant after the gap
        let day_after = job.next_after(on_the_day).unwrap();
        assert_eq!(day_after, utc("2026-03-30T00:30:00Z")); // 02:30 CEST
    }

    #[test]
    fn fall_back_runs_a_repeated_time_once_at_its_first_instant() {
        // Europe/Berlin, 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
        let job = cron("30 2 * * *", berlin());
        let first = job.next_after(utc("2026-10-24T12:00:00Z")).unwrap();
        assert_eq!(first, utc("2026-10-25T00:30:00Z")); // 02:30 CEST
        let next = job.next_after(first).unwrap();
        assert_eq!(next, utc("2026-10-26T01:30:00Z")); // not 02:30 CET that night: next day
    }

    #[test]
    fn wildcard_hours_run_in_both_repeated_hours_and_skip_the_missing_one() {
        let job = cron("0 * * * *", berlin());
        let mut t = utc("2026-10-24T23:30:00Z"); // 01:30 CEST
        let mut seen = Vec::new();
        for _ in 0..4 {
            t = job.next_after(t).unwrap();
            seen.push(t);
        }
        // 02:00 CEST, 02:00 CET, 03:00 CET: hourly in real time.
        assert_eq!(
            seen,
            vec![
                utc("2026-10-24T23:00:00Z") + chrono::Duration::hours(1),
                utc("2026-10-25T01:00:00Z"),
                utc("2026-10-25T02:00:00Z"),
                utc("2026-10-25T03:00:00Z"),
            ]
        );
        let spring = cron("0 * * * *", berlin());
        // 01:00 CET → 03:00 CEST: one real hour, the 02:00 slot does not exist.
        let after = spring.next_after(utc("2026-03-29T00:00:00Z")).unwrap();
        assert_eq!(after, utc("2026-03-29T01:00:00Z"));
        assert_eq!(
            berlin()
                .from_utc_datetime(&after.naive_utc())
                .format("%H:%M")
                .to_string(),
            "03:00"
        );
    }

    #[test]
    fn six_fields_have_seconds_and_seven_are_refused() {
        let job = cron("15 30 9 * * *", chrono_tz::UTC);
        assert_eq!(
            job.next_after(utc("2026-11-21T00:00:00Z")),
            Some(utc("2026-11-21T09:30:15Z"))
        );
        assert!(parse_cron("0 0 9 * * * 2027")
            .unwrap_err()
            .contains("has 7"));
        assert!(parse_cron("0 9 * *").unwrap_err().contains("has 4"));
        assert!(parse_cron("61 9 * * *").is_err());
        assert!(parse_cron("@daily").is_ok());
    }

    #[test]
    fn fractional_instants_never_return_the_current_second() {
        let job = cron("* * * * * *", chrono_tz::UTC);
        let after = utc("2026-11-21T09:00:00.500Z");
        assert_eq!(job.next_after(after), Some(utc("2026-11-21T09:00:01Z")));
    }

    #[test]
    fn every_stays_on_its_grid() {
        let anchor = utc("2026-11-21T09:00:00Z");
        let job = Schedule::Every {
            interval: Duration::from_secs(1800),
            anchor,
        };
        assert_eq!(job.next_after(utc("2026-11-21T08:00:00Z")), Some(anchor));
        assert_eq!(job.next_after(anchor), Some(utc("2026-11-21T09:30:00Z")));
        // Long after: the next slot on the grid, not one per missed slot.
        assert_eq!(
            job.next_after(utc("2026-11-23T17:45:10Z")),
            Some(utc("2026-11-23T18:00:00Z"))
        );
    }

    #[test]
    fn at_has_one_slot() {
        let at = utc("2026-11-21T09:00:00Z");
        assert_eq!(
            Schedule::At(at).next_after(utc("2026-11-21T08:00:00Z")),
            Some(at)
        );
        assert_eq!(Schedule::At(at).next_after(at), None);
    }

    #[test]
    fn durations_parse_and_print() {
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2H").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86_400));
        for bad in [
            "",
            "30",
            "m",
            "3x",
            "-5m",
            "0s",
            "99999999999999999999s",
            "11000d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} parsed");
        }
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(90_061)), "1d1h1m1s");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let base = Duration::from_secs(30);
        let max = Duration::from_secs(3600);
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n, base, max).as_secs()).collect();
        assert_eq!(waits, vec![30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert_eq!(backoff(u32::MAX, base, max), max);
    }
}
