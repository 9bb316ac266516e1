//! How long an "always" answer lasts: for an hour, for the rest of the day, or until someone
//! revokes it. A grant that ends by itself is the default people reach for when they only
//! want the prompts to stop for the task at hand; "until revoked" stays one press away.

use crate::clock::{Clock, SystemClock};
use chrono::{DateTime, Duration, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lasting {
    /// One hour from the press.
    Hour,
    /// Until the next midnight in the user's time zone.
    Today,
    /// Until `warden approvals rm` or `/approvals` revokes it.
    UntilRevoked,
}

/// The stored form of an expiry (UTC, seconds): its strings sort as its times do.
pub const STORED_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

impl Lasting {
    /// Every choice, in the order they are offered.
    pub const ALL: [Lasting; 3] = [Lasting::Hour, Lasting::Today, Lasting::UntilRevoked];

    /// When a grant made at `now` ends; `None`: when it is revoked. "Today" ends at the next
    /// midnight in `tz` (an hour from now at the least, so a press at 23:59 is not gone at once).
    pub fn expiry(self, now: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match self {
            Lasting::Hour => Some(now + Duration::hours(1)),
            Lasting::Today => {
                let tomorrow = now.with_timezone(&tz).date_naive().succ_opt()?;
                let midnight = tz
                    .from_local_datetime(&tomorrow.and_time(NaiveTime::MIN))
                    .earliest()
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or(now + Duration::hours(24));
                Some(midnight.max(now + Duration::hours(1)))
            }
            Lasting::UntilRevoked => None,
        }
    }

    /// For people, after "approved": "for 1 hour", "for today", "until revoked".
    pub fn label(self) -> &'static str {
        match self {
            Lasting::Hour => "for 1 hour",
            Lasting::Today => "for today",
            Lasting::UntilRevoked => "until revoked",
        }
    }

    /// One letter, for button data and the terminal's answer.
    pub fn code(self) -> char {
        match self {
            Lasting::Hour => 'h',
            Lasting::Today => 'd',
            Lasting::UntilRevoked => 'a',
        }
    }

    pub fn from_code(code: &str) -> Option<Lasting> {
        Lasting::ALL
            .into_iter()
            .find(|l| code.len() == 1 && code.starts_with(l.code()))
    }
}

/// Whose "now" decides when stored grants end (tests move it by hand), and the zone whose
/// midnight ends "today".
#[derive(Clone)]
pub struct GrantClock {
    clock: Arc<dyn Clock>,
    tz: Tz,
}

impl GrantClock {
    /// The system clock, "today" ending at midnight UTC.
    pub fn system() -> GrantClock {
        GrantClock::new(Arc::new(SystemClock), Tz::UTC)
    }

    pub fn new(clock: Arc<dyn Clock>, tz: Tz) -> GrantClock {
        GrantClock { clock, tz }
    }

    /// Now, as stored expiries are compared with it.
    pub fn now(&self) -> String {
        stored(self.clock.now())
    }

    /// The stored expiry of a grant made now that lasts `lasting`.
    pub fn expires_at(&self, lasting: Lasting) -> Option<String> {
        lasting.expiry(self.clock.now(), self.tz).map(stored)
    }
}

/// An expiry as stored.
pub fn stored(at: DateTime<Utc>) -> String {
    at.format(STORED_FORMAT).to_string()
}

/// A stored expiry for people: `until 2026-11-26 19:04 UTC`, or `until revoked`.
pub fn describe(expires_at: Option<&str>) -> String {
    match expires_at {
        None => "until revoked".into(),
        Some(at) => format!(
            "until {} UTC",
            at.trim_end_matches('Z').replacen('T', " ", 1)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn an_hour_today_and_until_revoked() {
        let now = at("2026-11-26T10:30:00Z");
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        assert_eq!(
            Lasting::Hour.expiry(now, berlin),
            Some(at("2026-11-26T11:30:00Z"))
        );
        // Midnight in Berlin is 23:00 UTC in winter.
        assert_eq!(
            Lasting::Today.expiry(now, berlin),
            Some(at("2026-11-26T23:00:00Z"))
        );
        assert_eq!(
            Lasting::Today.expiry(at("2026-11-26T22:50:00Z"), berlin),
            Some(at("2026-11-26T23:50:00Z")),
            "at least an hour"
        );
        assert_eq!(Lasting::UntilRevoked.expiry(now, berlin), None);
    }

    #[test]
    fn codes_round_trip_and_expiries_read_well() {
        for lasting in Lasting::ALL {
            assert_eq!(
                Lasting::from_code(&lasting.code().to_string()),
                Some(lasting)
            );
        }
        assert_eq!(Lasting::from_code("x"), None);
        assert_eq!(Lasting::from_code("ha"), None);
        let t = stored(at("2026-11-26T10:30:00.9Z"));
        assert_eq!(t, "2026-11-26T10:30:00Z");
        assert_eq!(describe(Some(&t)), "until 2026-11-26 10:30:00 UTC");
        assert_eq!(describe(None), "until revoked");
    }
}
