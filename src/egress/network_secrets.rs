//! `[network.secrets]`: credentials a jailed command uses without ever holding them.
//!
//! ```toml
//! [network.secrets.GITHUB_TOKEN]
//! hosts = ["api.github.com", "github.com"]   # exact names or `*.suffix`
//! methods = ["GET"]                          # optional: only these requests get the value
//! paths = ["/repos/"]                        # optional
//! header = "Authorization"                   # the default
//! ```
//!
//! Inside the jail `GITHUB_TOKEN` holds a placeholder, random and the same for every run of the
//! warden process ([`placeholder`]); `$GITHUB_TOKEN` on a command line expands to it as well.
//! The egress proxy, which looks inside HTTPS to the bound hosts (`proxy::intercept`), swaps
//! the real value for the placeholder in that one header (also inside `Basic` credentials, as
//! git sends them) of a request that matches; toward every other host, and over plain HTTP, the
//! placeholder goes out unchanged. The value comes from warden's secret store, as a skill
//! route's does: `[skills.secrets] NAME` in the config or `WARDEN_SECRET_NAME` in warden's
//! environment.

use super::http_rules::HttpRules;
use super::jail_trust::{BUNDLE_VARIABLES, EXTRA_CA_VARIABLE};
use super::rules::normalize_host;
use crate::secret::Secret;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One `[network.secrets.NAME]` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SecretBinding {
    pub hosts: Vec<String>,
    #[serde(default)]
    pub methods: Vec<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    /// The header the value goes into (default `Authorization`).
    pub header: Option<String>,
}

/// Names the jail's environment already uses (the proxy's, the loader's, the jail's own).
const RESERVED: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "TERM",
    "PWD",
    "SHELL",
    "USER",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "GIT_ALLOW_PROTOCOL",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_TERMINAL_PROMPT",
    "GIT_NO_LAZY_FETCH",
    "PAGER",
    "GIT_PAGER",
];

/// Headers that frame the request or address the proxy: the proxy writes those itself.
const UNSWAPPABLE_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

impl SecretBinding {
    pub fn header_name(&self) -> &str {
        self.header.as_deref().unwrap_or("Authorization")
    }

    fn http(&self) -> HttpRules {
        HttpRules {
            methods: self.methods.clone(),
            paths: self.paths.clone(),
        }
    }

    /// Check the binding of `name`; the error names the key.
    pub fn check(&self, name: &str) -> Result<(), String> {
        let key = format!("network.secrets.{name}");
        let name_ok = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !name_ok
            || RESERVED.contains(&name)
            || BUNDLE_VARIABLES.contains(&name)
            || name == EXTRA_CA_VARIABLE
            || name.starts_with("WARDEN_")
            || name.to_ascii_lowercase().ends_with("_proxy")
        {
            return Err(format!(
                "{key}: the name is the jail's variable: upper-case letters, digits and _, not \
                 one the jail or the proxy already uses"
            ));
        }
        if self.hosts.is_empty() {
            return Err(format!(
                "{key}: hosts is empty; name the hosts the secret is for"
            ));
        }
        for host in &self.hosts {
            let bare = host.strip_prefix("*.").unwrap_or(host);
            let ok = !bare.is_empty()
                && !bare.contains(['*', '/', ':', ' '])
                && bare.parse::<std::net::IpAddr>().is_err();
            if !ok {
                return Err(format!(
                    "{key}: host {host:?} must be a name or *.suffix (no scheme, port or address)"
                ));
            }
        }
        let header = self.header_name();
        let header_ok = !header.is_empty()
            && header
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !header_ok
            || UNSWAPPABLE_HEADERS.contains(&header.to_ascii_lowercase().as_str())
            || header.to_ascii_lowercase().starts_with("proxy-")
        {
            return Err(format!("{key}: header {header:?} cannot carry a secret"));
        }
        self.http().validate(&key)
    }
}

/// Check every binding (for config loading).
pub fn check_secrets(secrets: &BTreeMap<String, SecretBinding>) -> Result<(), String> {
    secrets
        .iter()
        .try_for_each(|(name, binding)| binding.check(name))
}

/// The placeholder `name`'s variable holds in a jail: random, and the same for every run of
/// this warden process. The policy expands `$NAME` on a command line when it checks the line,
/// before the line's proxy exists, so the value must be known then: what was checked (the
/// placeholder in the text) is what runs, and the proxy swaps that same text.
pub fn placeholder(name: &str) -> String {
    static TAIL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let tail = TAIL.get_or_init(|| {
        let mut random = [0u8; 12];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut random);
        random.iter().map(|b| format!("{b:02x}")).collect()
    });
    format!("warden-placeholder-{name}-{tail}")
}

/// The variables `[network.secrets]` sets in a jail that has the network, with their
/// placeholders: what the policy expands `$NAME` to.
pub fn jail_variables(secrets: &BTreeMap<String, SecretBinding>) -> Vec<(String, String)> {
    secrets
        .keys()
        .map(|name| (name.clone(), placeholder(name)))
        .collect()
}

/// A binding ready for the proxy: the placeholder the jail sees and the value it stands for.
#[derive(Clone, Debug)]
pub struct BoundSecret {
    pub name: String,
    pub placeholder: String,
    pub value: Secret,
    pub header: String,
    hosts: Vec<String>,
    http: HttpRules,
}

impl BoundSecret {
    /// Fill `binding` with its value from `lookup` (a missing secret is an error naming where
    /// to set it) and a fresh placeholder.
    pub fn resolve(
        name: &str,
        binding: &SecretBinding,
        lookup: &dyn Fn(&str) -> Option<Secret>,
    ) -> Result<BoundSecret, String> {
        binding.check(name)?;
        let value = crate::secret::fill_secrets(
            &format!("{{secret:{name}}}"),
            &format!("[network.secrets] {name}"),
            lookup,
        )?;
        Ok(BoundSecret {
            name: name.to_string(),
            placeholder: placeholder(name),
            value,
            header: binding.header_name().to_string(),
            hosts: binding
                .hosts
                .iter()
                .map(|h| match h.strip_prefix("*.") {
                    Some(suffix) => format!("*.{}", normalize_host(suffix)),
                    None => normalize_host(h),
                })
                .collect(),
            http: binding.http(),
        })
    }

    /// Whether the binding names `host` (exact, or under a `*.suffix`).
    pub fn binds_host(&self, host: &str) -> bool {
        let host = normalize_host(host);
        self.hosts
            .iter()
            .any(|bound| match bound.strip_prefix("*.") {
                Some(suffix) => host
                    .strip_suffix(suffix)
                    .is_some_and(|head| head.ends_with('.')),
                None => *bound == host,
            })
    }

    /// Whether a request of `method` to `path` on `host` gets the real value.
    pub fn applies(&self, host: &str, method: &str, path: &str) -> bool {
        self.binds_host(host) && self.http.check(method, path).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(text: &str) -> SecretBinding {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn bindings_match_their_hosts_methods_and_paths_only() {
        let b = binding("hosts = [\"api.github.com\", \"*.example.com\"]\nmethods = [\"GET\"]\npaths = [\"/repos/\"]");
        let bound = BoundSecret::resolve("GH_TOKEN", &b, &|_| Some(Secret::new("real"))).unwrap();
        assert!(bound
            .placeholder
            .starts_with("warden-placeholder-GH_TOKEN-"));
        assert_eq!(bound.header, "Authorization");
        assert!(bound.applies("API.github.com.", "GET", "/repos/x"));
        assert!(bound.applies("a.example.com", "GET", "/repos/x"));
        assert!(!bound.applies("example.com", "GET", "/repos/x"));
        assert!(!bound.applies("notexample.com", "GET", "/repos/x"));
        assert!(!bound.applies("github.com", "GET", "/repos/x"));
        assert!(!bound.applies("api.github.com", "POST", "/repos/x"));
        assert!(!bound.applies("api.github.com", "GET", "/user"));
        // The policy expands `$GH_TOKEN` before the run's proxy exists: the same placeholder
        // for every run of the process, one per name.
        let again = BoundSecret::resolve("GH_TOKEN", &b, &|_| Some(Secret::new("real"))).unwrap();
        assert_eq!(bound.placeholder, again.placeholder);
        let other = BoundSecret::resolve("NPM_TOKEN", &b, &|_| Some(Secret::new("real"))).unwrap();
        assert!(other
            .placeholder
            .starts_with("warden-placeholder-NPM_TOKEN-"));
        assert_eq!(
            other
                .placeholder
                .strip_prefix("warden-placeholder-NPM_TOKEN-"),
            bound
                .placeholder
                .strip_prefix("warden-placeholder-GH_TOKEN-")
        );
        let tail = &bound.placeholder["warden-placeholder-GH_TOKEN-".len()..];
        assert_eq!(tail.len(), 24, "12 random bytes");
        assert!(tail.chars().all(|c| c.is_ascii_hexdigit()));
        let mut secrets = BTreeMap::new();
        secrets.insert("GH_TOKEN".to_string(), b.clone());
        assert_eq!(
            jail_variables(&secrets),
            [("GH_TOKEN".to_string(), bound.placeholder.clone())]
        );
    }

    #[test]
    fn bad_bindings_and_missing_values_are_refused_naming_the_key() {
        for (name, text, why) in [
            ("PATH", "hosts = [\"a.com\"]", "the jail's variable"),
            ("lower", "hosts = [\"a.com\"]", "the jail's variable"),
            ("HTTPS_PROXY", "hosts = [\"a.com\"]", "the jail's variable"),
            ("GIT_PAGER", "hosts = [\"a.com\"]", "the jail's variable"),
            (
                "SSL_CERT_FILE",
                "hosts = [\"a.com\"]",
                "the jail's variable",
            ),
            ("T", "hosts = []", "hosts is empty"),
            ("T", "hosts = [\"https://a.com\"]", "must be a name"),
            ("T", "hosts = [\"10.0.0.1\"]", "must be a name"),
            (
                "T",
                "hosts = [\"a.com\"]\nheader = \"Host\"",
                "cannot carry",
            ),
            (
                "T",
                "hosts = [\"a.com\"]\nmethods = [\"get\"]",
                "upper-case",
            ),
        ] {
            let err = binding(text).check(name).unwrap_err();
            assert!(err.contains(why), "{name} {text}: {err}");
            assert!(err.contains("network.secrets"), "{err}");
        }
        let missing = BoundSecret::resolve("GH_TOKEN", &binding("hosts = [\"a.com\"]"), &|_| None)
            .unwrap_err();
        assert!(
            missing.contains("[network.secrets] GH_TOKEN needs the secret GH_TOKEN"),
            "{missing}"
        );
        assert!(missing.contains("WARDEN_SECRET_GH_TOKEN"), "{missing}");
    }
}
