//! `SKILL.md`: YAML frontmatter between two `---` lines, then Markdown instructions.
//!
//! The frontmatter is read with serde-saphyr into a closed struct, strictly: one document, no
//! duplicate keys, no anchors or aliases, no merge keys, no unknown tags, and no unquoted
//! value that some YAML reader would take for a number or boolean where a string is expected
//! (`name: no` or `description: 1.0` are refused, not coerced). Unknown keys are refused too, so a skill that
//! expects another agent's semantics (`allowed-tools`) is not silently misread.

use serde::Deserialize;
use std::collections::BTreeMap;

/// Longest `SKILL.md` read at all.
pub const MAX_SKILL_MD_BYTES: usize = 256 * 1024;
/// Longest frontmatter block.
const MAX_FRONTMATTER_BYTES: usize = 8 * 1024;
/// Longest name (also a folder name).
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description (it goes into the system prompt).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// The checked frontmatter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frontmatter {
    pub name: String,
    /// One line: runs of whitespace collapsed to single spaces.
    pub description: String,
    pub license: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    description: String,
    license: Option<String>,
    compatibility: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    /// Other agents' tool allowlist: refused with a pointer to `skill.toml`.
    #[serde(rename = "allowed-tools")]
    allowed_tools: Option<serde::de::IgnoredAny>,
    /// Permissions belong in `skill.toml`, never in two places.
    permissions: Option<serde::de::IgnoredAny>,
}

/// Parse the frontmatter of a `SKILL.md` text.
pub fn parse(text: &str) -> Result<Frontmatter, String> {
    if text.len() > MAX_SKILL_MD_BYTES {
        return Err(format!(
            "SKILL.md is {} bytes, more than the {MAX_SKILL_MD_BYTES}-byte limit",
            text.len()
        ));
    }
    let yaml = split(text)?;
    let raw: Raw = serde_saphyr::from_str_with_options(yaml, strict_options())
        .map_err(|e| format!("SKILL.md frontmatter: {}", first_line(&e.to_string())))?;
    if raw.allowed_tools.is_some() {
        return Err(
            "SKILL.md frontmatter: `allowed-tools` is not used by warden; declare \
                    commands, paths, network and limits in skill.toml beside SKILL.md"
                .into(),
        );
    }
    if raw.permissions.is_some() {
        return Err(
            "SKILL.md frontmatter: `permissions` belong in skill.toml beside SKILL.md \
                    (one place, so what is granted is unambiguous)"
                .into(),
        );
    }
    let _ = (raw.compatibility, raw.metadata);
    check_name(&raw.name)?;
    let description = check_description(&raw.description)?;
    Ok(Frontmatter {
        name: raw.name,
        description,
        license: raw.license,
    })
}

/// The YAML between the opening `---` (the very first line) and the next `---` line.
fn split(text: &str) -> Result<&str, String> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end_matches(['\r', '\n']) != "---" {
        return Err(
            "SKILL.md must start with a `---` line opening the YAML frontmatter (name, \
             description)"
                .into(),
        );
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            let yaml = &text[start..offset];
            if yaml.len() > MAX_FRONTMATTER_BYTES {
                return Err(format!(
                    "SKILL.md frontmatter is longer than {MAX_FRONTMATTER_BYTES} bytes"
                ));
            }
            return Ok(yaml);
        }
        offset += line.len();
    }
    Err("SKILL.md frontmatter has no closing `---` line".into())
}

fn strict_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 1;
    budget.max_anchors = 0;
    budget.max_aliases = 0;
    budget.max_depth = 4;
    budget.max_nodes = 256;
    budget.max_total_scalar_bytes = MAX_FRONTMATTER_BYTES;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.duplicate_keys = serde_saphyr::options::DuplicateKeyPolicy::Error;
    options.merge_keys = serde_saphyr::options::MergeKeyPolicy::Error;
    // YAML 1.1 booleans (`no`, `on`) are recognised as such so that `no_schema` refuses them
    // where a string is expected, instead of reading `name: no` as the name "no".
    options.strict_booleans = false;
    options.no_schema = true;
    options.reject_unsupported_tags = true;
    options.with_snippet = false;
    options
}

/// Lowercase letters, digits and single hyphens inside, at most 64 characters; it is also the
/// folder's name, a prompt entry and a database key.
pub fn check_name(name: &str) -> Result<(), String> {
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if name.is_empty()
        || name.len() > MAX_NAME_CHARS
        || !valid_chars
        || name.starts_with('-')
        || name.ends_with('-')
        || name.contains("--")
    {
        return Err(format!(
            "skill name {name:?} is invalid: use 1-{MAX_NAME_CHARS} lowercase letters, digits \
             and single hyphens (not at the start or end)"
        ));
    }
    Ok(())
}

fn check_description(description: &str) -> Result<String, String> {
    if description
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err("the description contains control characters".into());
    }
    let one_line = description.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return Err("the description is empty: say what the skill does and when to use it".into());
    }
    let chars = one_line.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "the description is {chars} characters, more than {MAX_DESCRIPTION_CHARS}"
        ));
    }
    Ok(one_line)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(front: &str) -> String {
        format!("---\n{front}---\n# Body\n")
    }

    #[test]
    fn a_plain_frontmatter_parses() {
        let f = parse(&md(
            "name: csv-stats\ndescription: >\n  Summarize a CSV\n  file.\nlicense: MIT\n",
        ))
        .unwrap();
        assert_eq!(f.name, "csv-stats");
        assert_eq!(f.description, "Summarize a CSV file.");
        assert_eq!(f.license.as_deref(), Some("MIT"));
        let crlf = "---\r\nname: a\r\ndescription: b\r\n---\r\nbody\r\n";
        assert_eq!(parse(crlf).unwrap().name, "a");
    }

    #[test]
    fn ambiguous_yaml_is_refused() {
        for (front, why) in [
            ("name: a\nname: b\ndescription: d\n", "duplicate"),
            ("name: &n a\ndescription: *n\n", ""),
            ("name: no\ndescription: d\n", ""),
            ("name: a\ndescription: 1.5\n", ""),
            ("name: a\ndescription: !shell d\n", ""),
            (
                "name: a\ndescription: d\nallowed-tools: Bash\n",
                "skill.toml",
            ),
            ("name: a\ndescription: d\npermissions: {}\n", "skill.toml"),
            ("name: a\ndescription: d\nversion: 2\n", "version"),
            ("name: a\n", "description"),
            (
                "name: a\ndescription: d\n...\nname: b\ndescription: e\n",
                "",
            ),
        ] {
            let err = parse(&md(front)).expect_err(front);
            assert!(err.contains(why), "{front:?}: {err}");
        }
    }

    #[test]
    fn the_delimiters_are_exact() {
        assert!(parse("name: a\ndescription: d\n")
            .unwrap_err()
            .contains("must start"));
        assert!(parse("---\nname: a\ndescription: d\n")
            .unwrap_err()
            .contains("closing"));
        assert!(parse(" ---\nname: a\n---\n").is_err());
    }

    #[test]
    fn names_and_descriptions_are_checked() {
        for bad in [
            "",
            "A",
            "a_b",
            "-a",
            "a-",
            "a--b",
            "a b",
            "ä",
            &"a".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["a", "csv-stats", "x9", &"a".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
        assert!(parse(&md("name: a\ndescription: \"  \"\n")).is_err());
        assert!(parse(&md("name: a\ndescription: \"a\\u0007b\"\n")).is_err());
        let long = format!("name: a\ndescription: {}\n", "x".repeat(1025));
        assert!(parse(&md(&long)).unwrap_err().contains("1025"));
    }
}
