//! Host rules: `[egress.hosts]` maps an exact host name, a `*.suffix` or `*` to `allow`, `ask`
//! or `deny`. The most specific rule wins: an exact name over any suffix, a longer suffix over
//! a shorter one, `*` last. `*.example.com` covers `a.example.com` and `a.b.example.com`, not
//! `example.com` itself (name that separately). Ports do not matter; IP literals are exact
//! names (`"203.0.113.7"`, `"[2001:db8::1]"`).

use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rule {
    /// Fetched without asking, whoever wrote the URL.
    Allow,
    /// Always asks (the exact URL is shown).
    Ask,
    /// Never fetched.
    Deny,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Allow => "allow",
            Rule::Ask => "ask",
            Rule::Deny => "deny",
        }
    }

    fn parse(text: &str) -> Option<Rule> {
        match text {
            "allow" => Some(Rule::Allow),
            "ask" => Some(Rule::Ask),
            "deny" => Some(Rule::Deny),
            _ => None,
        }
    }
}

/// The rule that decided, with the key it came from (for reasons and the audit log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matched {
    /// The key as the config spells it, normalized (`*.example.com`, `docs.rs`).
    pub key: String,
    pub rule: Rule,
    /// Where the rule lives: `[egress.hosts]`, or a chat's stored rule.
    pub origin: &'static str,
}

impl Matched {
    /// `[egress.hosts] "docs.rs" = "allow"`.
    pub fn describe(&self) -> String {
        format!(
            "{} \"{}\" = \"{}\"",
            self.origin,
            self.key,
            self.rule.as_str()
        )
    }
}

/// Checked `[egress.hosts]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostRules {
    exact: BTreeMap<String, Rule>,
    /// Keyed by the suffix without `*` (`.example.com`).
    suffixes: BTreeMap<String, Rule>,
    any: Option<Rule>,
    /// The config key the rules came from (`egress.hosts`, `network.hosts`).
    section: &'static str,
}

/// The form hosts are compared in: lowercase, IDNA (punycode), no trailing dot, IPv6 in
/// brackets — what `url::Url::host_str` gives, minus a trailing dot.
pub fn normalize_host(host: &str) -> String {
    let host = host.strip_suffix('.').unwrap_or(host);
    host.to_ascii_lowercase()
}

fn parse_name(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("an empty host name".into());
    }
    if name.contains('*') {
        return Err("a wildcard may only be `*` alone or lead as `*.` (`*.example.com`)".into());
    }
    match url::Host::parse(name) {
        Ok(url::Host::Domain(d)) => {
            let d = normalize_host(&d);
            if d.is_empty() || d.split('.').any(str::is_empty) {
                return Err("a host name with an empty label".into());
            }
            Ok(d)
        }
        Ok(ip) => Ok(ip.to_string()),
        Err(e) => Err(format!("not a host name ({e})")),
    }
}

impl HostRules {
    /// Check `[egress.hosts]`; an invalid entry is an error naming its key.
    pub fn parse(hosts: &BTreeMap<String, String>) -> Result<HostRules, String> {
        HostRules::parse_section(hosts, "egress.hosts")
    }

    /// Check host rules written under the config key `section` (`network.hosts`); errors and
    /// [`Matched::origin`] name it.
    pub fn parse_section(
        hosts: &BTreeMap<String, String>,
        section: &'static str,
    ) -> Result<HostRules, String> {
        let mut rules = HostRules {
            section,
            ..HostRules::default()
        };
        for (key, value) in hosts {
            let bad = |why: String| format!("{section}.{key:?}: {why}");
            let rule = Rule::parse(value).ok_or_else(|| {
                bad(format!(
                    "{value:?} is not a rule; use \"allow\", \"ask\" or \"deny\""
                ))
            })?;
            let previous = if key == "*" {
                rules.any.replace(rule)
            } else if let Some(suffix) = key.strip_prefix("*.") {
                let name = parse_name(suffix).map_err(bad)?;
                rules.suffixes.insert(format!(".{name}"), rule)
            } else {
                let name = parse_name(key).map_err(bad)?;
                rules.exact.insert(name, rule)
            };
            if previous.is_some() {
                return Err(bad("another key names the same hosts".into()));
            }
        }
        Ok(rules)
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.suffixes.is_empty() && self.any.is_none()
    }

    /// The most specific rule for `host` (as `Url::host_str` gives it), if any.
    pub fn lookup(&self, host: &str) -> Option<Matched> {
        let host = normalize_host(host);
        let matched = |key: String, rule: Rule| Matched {
            key,
            rule,
            origin: match self.section {
                "network.hosts" => "[network.hosts]",
                _ => "[egress.hosts]",
            },
        };
        if let Some(rule) = self.exact.get(&host) {
            return Some(matched(host, *rule));
        }
        // Longest suffix first: walk the name's dots from the left.
        if !host.starts_with('[') {
            for (i, _) in host.match_indices('.') {
                if let Some(rule) = self.suffixes.get(&host[i..]) {
                    return Some(matched(format!("*{}", &host[i..]), *rule));
                }
            }
        }
        self.any.map(|rule| matched("*".into(), rule))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(pairs: &[(&str, &str)]) -> Result<HostRules, String> {
        HostRules::parse(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn rule_of(r: &HostRules, host: &str) -> Option<(String, Rule)> {
        r.lookup(host).map(|m| (m.key, m.rule))
    }

    #[test]
    fn most_specific_rule_wins() {
        let r = rules(&[
            ("docs.rs", "allow"),
            ("*.example.com", "ask"),
            ("*.api.example.com", "allow"),
            ("bad.api.example.com", "deny"),
            ("pastebin.com", "deny"),
        ])
        .unwrap();
        assert_eq!(
            rule_of(&r, "docs.rs"),
            Some(("docs.rs".into(), Rule::Allow))
        );
        assert_eq!(rule_of(&r, "DOCS.rs."), rule_of(&r, "docs.rs"));
        assert_eq!(rule_of(&r, "sub.docs.rs"), None, "exact names only");
        assert_eq!(
            rule_of(&r, "a.example.com"),
            Some(("*.example.com".into(), Rule::Ask))
        );
        assert_eq!(
            rule_of(&r, "x.y.example.com"),
            Some(("*.example.com".into(), Rule::Ask))
        );
        assert_eq!(rule_of(&r, "example.com"), None, "a suffix is not the apex");
        assert_eq!(rule_of(&r, "evilexample.com"), None);
        assert_eq!(
            rule_of(&r, "v1.api.example.com"),
            Some(("*.api.example.com".into(), Rule::Allow)),
            "the longer suffix wins"
        );
        assert_eq!(
            rule_of(&r, "bad.api.example.com"),
            Some(("bad.api.example.com".into(), Rule::Deny)),
            "an exact name beats every suffix"
        );
        assert_eq!(rule_of(&r, "other.org"), None);
    }

    #[test]
    fn star_is_the_fallback() {
        let r = rules(&[("*", "deny"), ("docs.rs", "allow")]).unwrap();
        assert_eq!(rule_of(&r, "docs.rs").unwrap().1, Rule::Allow);
        assert_eq!(rule_of(&r, "x.org"), Some(("*".into(), Rule::Deny)));
        assert_eq!(rule_of(&r, "[::1]"), Some(("*".into(), Rule::Deny)));
    }

    #[test]
    fn names_are_normalized_like_urls() {
        let r = rules(&[
            ("Docs.RS.", "allow"),
            ("bücher.example", "deny"),
            ("203.0.113.7", "ask"),
            ("[2001:db8::1]", "deny"),
        ])
        .unwrap();
        assert_eq!(rule_of(&r, "docs.rs").unwrap().1, Rule::Allow);
        let host = url::Url::parse("https://bücher.example/").unwrap();
        assert_eq!(rule_of(&r, host.host_str().unwrap()).unwrap().1, Rule::Deny);
        assert_eq!(rule_of(&r, "203.0.113.7").unwrap().1, Rule::Ask);
        assert_eq!(rule_of(&r, "[2001:db8::1]").unwrap().1, Rule::Deny);
    }

    #[test]
    fn invalid_entries_name_their_key() {
        for (key, value, needle) in [
            ("docs.rs", "yes", "\"docs.rs\""),
            ("docs.rs", "Allow", "not a rule"),
            ("a.*.com", "allow", "\"a.*.com\""),
            ("**.com", "allow", "wildcard"),
            ("exa mple.com", "allow", "\"exa mple.com\""),
            ("example.com:443", "allow", "\"example.com:443\""),
            ("*.", "allow", "\"*.\""),
            ("a..b", "deny", "\"a..b\""),
            ("", "deny", "empty"),
        ] {
            let err = rules(&[(key, value)]).unwrap_err();
            assert!(err.starts_with("egress.hosts."), "{err}");
            assert!(err.contains(needle), "{key}: {err}");
        }
        let err = rules(&[("Docs.rs", "allow"), ("docs.rs", "deny")]).unwrap_err();
        assert!(err.contains("same hosts"), "{err}");
    }
}
