//! The embedded default policy, read lazily: one scan over its lines splits it into one TOML
//! text per program, and a program's text is parsed the first time the checker asks for that
//! program. Parsing the whole default was 88% of a single `warden policy check` (32 M of
//! 36.5 M instructions) though a command names one or two programs.
//!
//! The split knows only table headers and the one-line entries of the bare `[programs]` table,
//! which is all the default uses; `the_split_parses_to_exactly_the_whole_file` proves on every
//! build that the pieces parse to exactly what the whole file parses to. User policy files are
//! small and are parsed whole, as written.

use super::rules::ProgramRule;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The default's text cut apart, unparsed: slices of the embedded text, nothing copied.
pub(super) struct Split {
    /// Everything that is not a program's rule and not a `warden policy test` expectation:
    /// `[settings]`, `[paths]`, `[egress.hosts]`.
    pub rest: String,
    /// Each program's own tables, headers included, in pieces.
    pub programs: BTreeMap<String, Vec<&'static str>>,
}

/// The line `[programs]` that stands before each entry of the bare table taken out of it.
const PROGRAMS_TABLE: &str = "[programs]\n";

pub(super) fn split(text: &'static str) -> Split {
    let mut split = Split {
        rest: String::new(),
        programs: BTreeMap::new(),
    };
    // Each table runs from its header line to the next header line.
    let mut starts: Vec<usize> = vec![0];
    // memchr's vectorized search: core's substring search over the 160 kB default was 18% of
    // a single `warden policy check`'s instructions (callgrind); memchr's takes 6 us, not 51.
    starts.extend(memchr::memmem::find_iter(text.as_bytes(), "\n[").map(|at| at + 1));
    starts.push(text.len());
    for bounds in starts.windows(2) {
        let table = &text[bounds[0]..bounds[1]];
        let first_line = table.lines().next().unwrap_or("");
        let Some(path) = header_path(first_line) else {
            // Before the first header: comments only, or settings written at the top.
            split.rest.push_str(table);
            continue;
        };
        match program_name(path) {
            Some(name) if name.is_empty() => {
                for line in table.lines().skip(1) {
                    if let Some(name) = entry_key(line) {
                        let pieces = split.programs.entry(name).or_default();
                        pieces.push(PROGRAMS_TABLE);
                        pieces.push(line);
                        pieces.push("\n");
                    }
                }
            }
            Some(name) => split.programs.entry(name).or_default().push(table),
            None if is_expectation(path) => {}
            None => split.rest.push_str(table),
        }
    }
    split
}

/// `programs.git.subcommands.commit` for `[programs.git.subcommands.commit]` or
/// `[[programs.x.y]]`; `None` for any other line.
fn header_path(line: &str) -> Option<&str> {
    let inner = line.strip_prefix('[')?;
    let inner = inner.strip_prefix('[').unwrap_or(inner);
    let end = inner.rfind(']')?;
    let path = inner[..end].trim_end_matches(']').trim();
    (!path.is_empty()).then_some(path)
}

/// The program a header path belongs to: `Some("")` for the bare `programs` table.
fn program_name(path: &str) -> Option<String> {
    if path == "programs" {
        return Some(String::new());
    }
    let rest = path.strip_prefix("programs.")?;
    key_at_start(rest).map(|(name, _)| name)
}

fn is_expectation(path: &str) -> bool {
    let first = path.split('.').next().unwrap_or(path);
    first == "fixture" || first == "tests"
}

/// The key of a `NAME = …` line (blank lines and comments have none).
fn entry_key(line: &str) -> Option<String> {
    let line = line.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, rest) = key_at_start(line)?;
    rest.trim_start().starts_with('=').then_some(name)
}

/// A bare or basic-quoted key at the start of `text`, and what follows it.
fn key_at_start(text: &str) -> Option<(String, &str)> {
    if let Some(quoted) = text.strip_prefix('"') {
        let end = quoted.find('"')?;
        let name = &quoted[..end];
        // Escapes would need TOML's decoding; the default has none (the test would fail).
        return (!name.contains('\\')).then(|| (name.to_string(), &quoted[end + 1..]));
    }
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(text.len());
    (end > 0).then(|| (text[..end].to_string(), &text[end..]))
}

/// One program's rule: its text until first asked for, then its parsed rule, shared by every
/// copy of the policy.
#[derive(Debug)]
pub(super) struct LazyRule {
    name: String,
    pieces: Vec<&'static str>,
    rule: OnceLock<ProgramRule>,
}

#[derive(Deserialize)]
struct ProgramsOnly {
    programs: BTreeMap<String, ProgramRule>,
}

impl LazyRule {
    pub fn new(name: String, pieces: Vec<&'static str>) -> Arc<LazyRule> {
        Arc::new(LazyRule {
            name,
            pieces,
            rule: OnceLock::new(),
        })
    }

    #[expect(
        clippy::expect_used,
        reason = "only the embedded default is read lazily, and the_split_parses_to_exactly_the_\
                  whole_file parses every piece of it on every build"
    )]
    pub fn rule(&self) -> &ProgramRule {
        self.rule.get_or_init(|| {
            let mut only: ProgramsOnly = toml::from_str(&self.pieces.concat())
                .expect("each piece of the embedded default parses");
            only.programs
                .remove(&self.name)
                .expect("each piece of the embedded default holds its own program")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::rules::PolicyFile;

    #[test]
    fn the_split_parses_to_exactly_the_whole_file() {
        let whole: PolicyFile = toml::from_str(crate::policy::DEFAULT_POLICY).unwrap();
        let split = split(crate::policy::DEFAULT_POLICY);
        let names: Vec<&String> = split.programs.keys().collect();
        assert_eq!(names, whole.programs.keys().collect::<Vec<_>>());
        for (name, pieces) in &split.programs {
            let lazy = LazyRule::new(name.clone(), pieces.clone());
            assert_eq!(
                format!("{:?}", lazy.rule()),
                format!("{:?}", whole.programs[name]),
                "{name}"
            );
        }
        // The rest holds everything else but the expectations.
        let rest: PolicyFile = toml::from_str(&split.rest).unwrap();
        assert!(rest.programs.is_empty() && rest.tests.is_empty());
        assert_eq!(
            format!("{:?}", rest.settings),
            format!("{:?}", whole.settings)
        );
        assert_eq!(format!("{:?}", rest.paths), format!("{:?}", whole.paths));
        assert_eq!(rest.egress.hosts, whole.egress.hosts);
    }

    #[test]
    fn headers_and_keys_are_read_as_toml_writes_them() {
        assert_eq!(
            header_path("[programs.git.subcommands.commit]"),
            Some("programs.git.subcommands.commit")
        );
        assert_eq!(header_path("[[tests]]"), Some("tests"));
        assert_eq!(header_path("[programs.\"[\"]"), Some("programs.\"[\""));
        assert_eq!(program_name("programs.\"[\""), Some("[".to_string()));
        assert_eq!(
            program_name("programs.apt-get.subcommands.x"),
            Some("apt-get".to_string())
        );
        assert_eq!(program_name("settings"), None);
        assert_eq!(
            entry_key("  sh = { decision = \"deny\" }"),
            Some("sh".to_string())
        );
        assert_eq!(entry_key("# sh = 1"), None);
        assert_eq!(header_path("  x = 1"), None);
    }
}
