//! Active hours: the wall-clock windows (in the configured zone) in which the heartbeat may
//! speak. `08:00-22:00`; a window may wrap midnight (`22:00-06:00`); `00:00-24:00` is all day;
//! no windows at all means always. Minute resolution; the end is exclusive.

use chrono::{DateTime, Days, NaiveTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

const DAY: u32 = 24 * 60;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveHours {
    /// (start, end) in minutes after midnight; start < DAY, end ≤ DAY, start ≠ end.
    windows: Vec<(u32, u32)>,
}

impl ActiveHours {
    /// Always active.
    pub fn always() -> ActiveHours {
        ActiveHours {
            windows: Vec::new(),
        }
    }

    /// Parse windows such as `["08:00-12:00", "22:00-06:00"]`.
    pub fn parse<S: AsRef<str>>(windows: &[S]) -> Result<ActiveHours, String> {
        let windows = windows
            .iter()
            .map(|w| parse_window(w.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(ActiveHours { windows })
    }

    pub fn contains(&self, at: DateTime<Utc>, tz: Tz) -> bool {
        if self.windows.is_empty() {
            return true;
        }
        let local = at.with_timezone(&tz);
        let minute = local.hour() * 60 + local.minute();
        self.windows.iter().any(|&(start, end)| {
            if start < end {
                (start..end).contains(&minute)
            } else {
                minute >= start || minute < end
            }
        })
    }

    /// The first instant at or after `at` inside a window.
    pub fn next_active(&self, at: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
        if self.contains(at, tz) {
            return at;
        }
        let today = at.with_timezone(&tz).date_naive();
        let mut best: Option<DateTime<Utc>> = None;
        for days in 0..=2 {
            let Some(date) = today.checked_add_days(Days::new(days)) else {
                continue;
            };
            for &(start, _) in &self.windows {
                let time = NaiveTime::from_hms_opt(start / 60, start % 60, 0).unwrap_or_default();
                let Some(begins) = first_instant_at_or_after(date.and_time(time), tz) else {
                    continue;
                };
                if begins > at && best.is_none_or(|b| begins < b) {
                    best = Some(begins);
                }
            }
        }
        // Every window starts within two days; the fallback only guards the arithmetic.
        best.unwrap_or(at + chrono::Duration::days(1))
    }
}

/// A local time as an instant: the first of two when the clock repeats it, the end of the
/// gap when the clock skips it.
fn first_instant_at_or_after(local: chrono::NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    (0..=12).find_map(|quarter| {
        let shifted = local + chrono::Duration::minutes(15 * quarter);
        tz.from_local_datetime(&shifted)
            .earliest()
            .map(|t| t.with_timezone(&Utc))
    })
}

fn parse_window(text: &str) -> Result<(u32, u32), String> {
    let bad = |why: &str| {
        format!("invalid active hours {text:?}: {why} (use HH:MM-HH:MM, e.g. 08:00-22:00)")
    };
    let (start, end) = text.trim().split_once('-').ok_or_else(|| bad("no `-`"))?;
    let start = parse_minute(start).ok_or_else(|| bad("bad start time"))?;
    let end = parse_minute(end).ok_or_else(|| bad("bad end time"))?;
    if start == DAY {
        return Err(bad("a window cannot start at 24:00"));
    }
    if start == end % DAY {
        return match (start, end) {
            (0, DAY) => Ok((0, DAY)),
            _ => Err(bad(
                "start and end are the same; use 00:00-24:00 for all day",
            )),
        };
    }
    Ok((start, end))
}

/// `HH:MM` as minutes after midnight; `24:00` allowed (as the end of a day).
fn parse_minute(text: &str) -> Option<u32> {
    let (h, m) = text.trim().split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let h: u32 = h.parse().ok()?;
    let m: u32 = m.parse().ok()?;
    match (h, m) {
        (24, 0) => Some(DAY),
        (0..=23, 0..=59) => Some(h * 60 + m),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn berlin() -> Tz {
        "Europe/Berlin".parse().unwrap()
    }

    /// A Berlin wall-clock time on 2026-11-21 (CET, UTC+1).
    fn local(hm: &str) -> DateTime<Utc> {
        let t = NaiveTime::parse_from_str(hm, "%H:%M").unwrap();
        let d = chrono::NaiveDate::from_ymd_opt(2026, 11, 21).unwrap();
        berlin()
            .from_local_datetime(&d.and_time(t))
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn a_day_window_holds_its_start_but_not_its_end() {
        let hours = ActiveHours::parse(&["08:00-22:00"]).unwrap();
        assert!(!hours.contains(local("07:59"), berlin()));
        assert!(hours.contains(local("08:00"), berlin()));
        assert!(hours.contains(local("21:59"), berlin()));
        assert!(!hours.contains(local("22:00"), berlin()));
        // Evaluated in the zone: 21:30 in Berlin is 05:30 the next morning in Tokyo.
        assert!(hours.contains(local("21:30"), berlin()));
        assert!(!hours.contains(local("21:30"), chrono_tz::Asia::Tokyo));
    }

    #[test]
    fn a_window_can_wrap_midnight() {
        let hours = ActiveHours::parse(&["22:00-06:00"]).unwrap();
        for inside in ["22:00", "23:59", "00:00", "03:00", "05:59"] {
            assert!(hours.contains(local(inside), berlin()), "{inside}");
        }
        for outside in ["06:00", "12:00", "21:59"] {
            assert!(!hours.contains(local(outside), berlin()), "{outside}");
        }
        // Outside at noon: the next active instant is 22:00 the same day.
        assert_eq!(hours.next_active(local("12:00"), berlin()), local("22:00"));
        assert_eq!(hours.next_active(local("23:00"), berlin()), local("23:00"));
    }

    #[test]
    fn next_active_finds_the_next_window_start() {
        let hours = ActiveHours::parse(&["08:00-12:00", "14:00-18:00"]).unwrap();
        assert_eq!(hours.next_active(local("12:30"), berlin()), local("14:00"));
        assert_eq!(
            hours.next_active(local("19:00"), berlin()),
            local("08:00") + chrono::Duration::days(1)
        );
        assert_eq!(hours.next_active(local("07:00"), berlin()), local("08:00"));
    }

    #[test]
    fn a_window_starting_in_a_dst_gap_starts_after_it() {
        // 2026-03-29 in Berlin: 02:00-03:00 does not exist.
        let hours = ActiveHours::parse(&["02:30-04:00"]).unwrap();
        let before = DateTime::parse_from_rfc3339("2026-03-29T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let begins = hours.next_active(before, berlin());
        assert_eq!(
            begins,
            DateTime::parse_from_rfc3339("2026-03-29T01:00:00Z").unwrap()
        ); // 03:00 CEST
    }

    #[test]
    fn all_day_empty_and_bad_windows() {
        let all = ActiveHours::parse(&["00:00-24:00"]).unwrap();
        assert!(all.contains(local("00:00"), berlin()) && all.contains(local("23:59"), berlin()));
        assert!(ActiveHours::always().contains(local("03:00"), berlin()));
        let none: [&str; 0] = [];
        assert_eq!(ActiveHours::parse(&none).unwrap(), ActiveHours::always());
        for bad in [
            "8-22",
            "08:00",
            "08:00-25:00",
            "24:00-08:00",
            "09:00-09:00",
            "08:60-09:00",
            "x",
        ] {
            let err = ActiveHours::parse(&[bad]).unwrap_err();
            assert!(err.contains("invalid active hours"), "{bad}: {err}");
        }
    }
}
