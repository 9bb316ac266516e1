//! The longest duration any setting or flag may name. Longer values are refused with the key's
//! name rather than overflowing a deadline.

/// 30 days, in seconds.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_one_second_to_thirty_days() {
        assert_eq!(parse_timeout("1"), Ok(1));
        assert_eq!(parse_timeout(&MAX_SECONDS.to_string()), Ok(MAX_SECONDS));
        assert!(parse_timeout("0").unwrap_err().contains("between 1 and"));
        assert!(parse_timeout("2592001").unwrap_err().contains("30 days"));
        assert!(parse_timeout("soon").unwrap_err().contains("not a number"));
    }
}
