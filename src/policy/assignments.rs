//! `NAME=value` before a command: which names may be set, with which values, and which
//! variables a command string may read.
//!
//! An assignment changes the environment of the program it precedes, and many variables
//! change what a program runs or loads (`LD_PRELOAD`, `PATH`, `GIT_*`, `PAGER`, `*_PROXY`,
//! `PYTHONPATH`…). Only presentation settings are allowed — locale, time zone, colours, widths
//! — each with a value shape that cannot name a file outside the system's own tables.

use super::Denial;

/// What a value may look like.
#[derive(Clone, Copy)]
enum Shape {
    /// A locale name: `C`, `C.UTF-8`, `de_DE.UTF-8@euro` (a `/` would load locale files from a
    /// path).
    Locale,
    /// A time zone: `UTC`, `Europe/Berlin`, `UTC+3` (a leading `/` or `..` would name a file).
    TimeZone,
    /// Digits only.
    Number,
    /// Letters, digits and `._+-` (a terminal type: a `/` would name a terminfo file).
    Name,
    /// Anything printable without a `/` (on/off switches, colour specs, formats).
    Setting,
}

const ALLOWED: &[(&str, Shape)] = &[
    ("LANG", Shape::Locale),
    ("LANGUAGE", Shape::Locale),
    ("LC_ALL", Shape::Locale),
    ("LC_CTYPE", Shape::Locale),
    ("LC_COLLATE", Shape::Locale),
    ("LC_MESSAGES", Shape::Locale),
    ("LC_NUMERIC", Shape::Locale),
    ("LC_TIME", Shape::Locale),
    ("LC_MONETARY", Shape::Locale),
    ("LC_PAPER", Shape::Locale),
    ("LC_MEASUREMENT", Shape::Locale),
    ("TZ", Shape::TimeZone),
    ("NO_COLOR", Shape::Setting),
    ("CLICOLOR", Shape::Setting),
    ("CLICOLOR_FORCE", Shape::Setting),
    ("FORCE_COLOR", Shape::Setting),
    ("GREP_COLOR", Shape::Setting),
    ("GREP_COLORS", Shape::Setting),
    ("LS_COLORS", Shape::Setting),
    ("TIME_STYLE", Shape::Setting),
    ("QUOTING_STYLE", Shape::Name),
    ("BLOCK_SIZE", Shape::Setting),
    ("DU_BLOCK_SIZE", Shape::Setting),
    ("POSIXLY_CORRECT", Shape::Setting),
    ("SOURCE_DATE_EPOCH", Shape::Number),
    ("COLUMNS", Shape::Number),
    ("LINES", Shape::Number),
    ("TERM", Shape::Name),
];

/// The longest value accepted.
const MAX_VALUE: usize = 256;

/// Check `NAME=value`; the reason names what is wrong.
pub fn check(name: &str, value: &str) -> Result<(), Denial> {
    let Some((_, shape)) = ALLOWED.iter().find(|(n, _)| *n == name) else {
        return Err(Denial::new(format!(
            "the assignment {name}=… before a command is not allowed: only presentation \
             settings may be set ({}); variables such as LD_PRELOAD, PATH, GIT_*, *_PROXY or \
             PAGER change what a program runs or loads",
            ALLOWED
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| !n.starts_with("LC_") || *n == "LC_ALL")
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let printable = value.chars().all(|c| !c.is_control());
    let ok = value.len() <= MAX_VALUE
        && printable
        && match shape {
            Shape::Locale => value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c)),
            Shape::TimeZone => {
                !value.trim_start_matches(':').starts_with('/')
                    && !value.split('/').any(|part| part == "..")
                    && value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_+-/:.,<>".contains(c))
            }
            Shape::Number => !value.is_empty() && value.chars().all(|c| c.is_ascii_digit()),
            Shape::Name => value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c)),
            Shape::Setting => !value.contains('/'),
        };
    if !ok {
        return Err(Denial::new(format!(
            "the value of {name}={value:?} is not one the policy accepts for {name} (it could \
             name a file to load)"
        )));
    }
    Ok(())
}

/// The environment variables a command string may read, with the value the sandbox gives
/// them. `HOME` and `PWD` are handled by the expander itself (they are paths it checks).
pub fn readable(name: &str) -> Option<String> {
    match name {
        "PATH" => Some(crate::policy::SANDBOX_PATH.to_string()),
        "LANG" => Some("C.UTF-8".into()),
        "TERM" => Some("dumb".into()),
        "USER" | "LOGNAME" => Some(user_name()),
        _ => None,
    }
}

/// The name of the user warden runs as (the sandbox runs commands as that user).
pub fn user_name() -> String {
    // SAFETY-free lookup through nix.
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| nix::unistd::getuid().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presentation_settings_pass_and_loaders_do_not() {
        for (name, value) in [
            ("LANG", "C"),
            ("LC_ALL", "C.UTF-8"),
            ("TZ", "Europe/Berlin"),
            ("TZ", "UTC+3"),
            ("NO_COLOR", "1"),
            ("COLUMNS", "120"),
            ("TERM", "xterm-256color"),
        ] {
            assert!(check(name, value).is_ok(), "{name}={value}");
        }
        for (name, value) in [
            ("LD_PRELOAD", "/tmp/x.so"),
            ("PATH", "/tmp"),
            ("GIT_DIR", "x"),
            ("HTTPS_PROXY", "http://x"),
            ("PAGER", "sh"),
            ("PYTHONPATH", "."),
            ("LANG", "/tmp/locale"),
            ("TZ", "/etc/shadow"),
            ("TZ", ":/etc/shadow"),
            ("TZ", "../../etc/shadow"),
            ("COLUMNS", "80; ls"),
            ("TERM", "../x"),
            ("NO_COLOR", "a\nb"),
        ] {
            assert!(check(name, value).is_err(), "{name}={value}");
        }
    }
}
