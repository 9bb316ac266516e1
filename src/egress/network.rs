//! `[network]`: where jailed commands may connect. Their only way out is warden's egress proxy
//! (the jail reaches nothing else); the proxy asks these rules about every request.
//!
//! ```toml
//! [network]
//! presets = ["pypi"]                     # named host sets (network_presets.toml)
//! [network.hosts]
//! "example.com" = "allow"                # exact name, `*.suffix` or `*`
//! "*.internal.example" = "deny"
//! "api.example.com" = { rule = "ask", methods = ["GET"], paths = ["/v1/"] }
//! [network.resolve]
//! "pkgs.lan" = "192.168.1.5"             # the only way to reach a private address
//! [network.secrets.GITHUB_TOKEN]         # a credential the jail never holds
//! hosts = ["api.github.com", "github.com"]
//! ```
//!
//! `confinement` says how a jail is kept to the proxy (`super::confinement`): `"auto"` (the
//! default), `"namespace"` or `"supervisor"`.
//!
//! Nothing is reachable unless a rule names it. The most specific rule wins (as in
//! `[egress.hosts]`, `crate::egress::rules`). Method and path rules apply to every request: over
//! HTTPS to such a host (or one a secret binds) the proxy terminates TLS with a certificate of
//! the run's own CA and checks each request (`super::proxy::intercept`); other HTTPS stays an
//! opaque tunnel. A policy
//! file may carry a `[network]` section too; the config's entries replace its entries for the
//! same key.

use super::fixed::{parse_fixed_in, HostTarget};
use super::http_rules::HttpRules;
use super::network_secrets::SecretBinding;
use super::rules::{normalize_host, HostRules, Matched, Rule};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// `[network]` as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkConfig {
    /// Host rules: `"host" = "allow"`, or a table with `rule`, `methods` and `paths`.
    pub hosts: BTreeMap<String, HostEntry>,
    /// Named host sets (`pypi`, `npm`, `crates`, `github-read`).
    pub presets: Vec<String>,
    /// Fixed addresses for exact names (a LAN registry, tests).
    pub resolve: BTreeMap<String, String>,
    /// How the jail is kept to the proxy.
    pub confinement: Confinement,
    /// Credentials swapped in by the proxy (`super::network_secrets`).
    pub secrets: BTreeMap<String, SecretBinding>,
    /// A PEM file of extra CA certificates trusted for upstream servers, besides the bundled
    /// web roots, when the proxy looks inside HTTPS (a LAN registry's private CA, tests).
    pub upstream_ca: Option<std::path::PathBuf>,
}

/// `[network] confinement`: how a jail reaches nothing but the proxy.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Confinement {
    /// A network namespace where one can be made, else the connect supervisor.
    #[default]
    Auto,
    /// A network namespace of the jail's own, where only the proxy listens.
    Namespace,
    /// warden's network, with every `connect` of the jail made by warden, to the proxy only.
    Supervisor,
}

impl Confinement {
    pub fn as_str(self) -> &'static str {
        match self {
            Confinement::Auto => "auto",
            Confinement::Namespace => "namespace",
            Confinement::Supervisor => "supervisor",
        }
    }
}

/// One `[network.hosts]` value.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum HostEntry {
    Rule(String),
    Detailed(DetailedEntry),
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DetailedEntry {
    pub rule: String,
    #[serde(default)]
    pub methods: Vec<String>,
    #[serde(default)]
    pub paths: Vec<String>,
}

impl HostEntry {
    fn rule(&self) -> &str {
        match self {
            HostEntry::Rule(rule) => rule,
            HostEntry::Detailed(entry) => &entry.rule,
        }
    }

    fn http(&self) -> HttpRules {
        match self {
            HostEntry::Rule(_) => HttpRules::default(),
            HostEntry::Detailed(entry) => HttpRules {
                methods: entry.methods.clone(),
                paths: entry.paths.clone(),
            },
        }
    }
}

impl NetworkConfig {
    /// Whether any rule lets something through (presets count; `resolve` alone does not).
    pub fn has_rules(&self) -> bool {
        !self.hosts.is_empty() || !self.presets.is_empty()
    }

    /// The variables a jail with this network holds for `[network.secrets]`, with their
    /// placeholders (none without rules: such a jail has no network and no such variables).
    /// The policy's checker expands `$NAME` to these (`Checker::set_jail_variables`).
    pub fn jail_variables(&self) -> Vec<(String, String)> {
        match self.has_rules() {
            true => super::network_secrets::jail_variables(&self.secrets),
            false => Vec::new(),
        }
    }

    /// `self` (the config's section) over `base` (a policy file's): an entry here replaces
    /// the base's entry for the same key.
    pub fn over(&self, base: &NetworkConfig) -> NetworkConfig {
        let mut merged = base.clone();
        merged.hosts.extend(self.hosts.clone());
        if self.confinement != Confinement::Auto {
            merged.confinement = self.confinement;
        }
        merged.resolve.extend(self.resolve.clone());
        merged.secrets.extend(self.secrets.clone());
        if self.upstream_ca.is_some() {
            merged.upstream_ca = self.upstream_ca.clone();
        }
        for preset in &self.presets {
            if !merged.presets.contains(preset) {
                merged.presets.push(preset.clone());
            }
        }
        merged
    }

    /// Check everything (for config loading); the error names the key.
    pub fn check(&self) -> Result<(), String> {
        super::network_secrets::check_secrets(&self.secrets)?;
        NetworkRules::parse(self).map(drop)
    }
}

/// A preset as `network_presets.toml` writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Preset {
    about: String,
    hosts: Vec<String>,
    #[serde(default)]
    methods: Vec<String>,
}

const PRESETS: &str = include_str!("network_presets.toml");

fn presets() -> Result<BTreeMap<String, Preset>, String> {
    toml::from_str(PRESETS).map_err(|e| format!("the embedded network presets: {e}"))
}

/// The presets' names and what each is for (for the README and errors).
pub fn preset_names() -> Vec<(String, String)> {
    presets()
        .map(|all| all.into_iter().map(|(n, p)| (n, p.about)).collect())
        .unwrap_or_default()
}

/// Checked `[network]`.
#[derive(Clone, Debug, Default)]
pub struct NetworkRules {
    hosts: HostRules,
    /// Method/path rules by the matched key (`*.example.com`, `docs.rs`).
    http: BTreeMap<String, HttpRules>,
    /// Where each key came from, for reasons: `[network.hosts]` or `preset pypi`.
    origins: BTreeMap<String, String>,
    resolve: BTreeMap<String, HostTarget>,
    /// Every key with its rule, for describing what a command may reach.
    keys: Vec<(String, Rule)>,
}

/// A host the rules let through (possibly after asking).
#[derive(Clone, Debug)]
pub struct Admitted {
    pub matched: Matched,
    /// `[network.hosts] "x" = "allow"` or `preset pypi`.
    pub origin: String,
    pub http: HttpRules,
}

impl Admitted {
    pub fn asks(&self) -> bool {
        self.matched.rule == Rule::Ask
    }

    /// `[network.hosts] "docs.rs" = "allow"`, or `preset pypi ("pypi.org")`.
    pub fn describe(&self) -> String {
        match self.origin.as_str() {
            "[network.hosts]" => format!(
                "[network.hosts] \"{}\" = \"{}\"",
                self.matched.key,
                self.matched.rule.as_str()
            ),
            preset => format!("{preset} (\"{}\")", self.matched.key),
        }
    }
}

impl NetworkRules {
    pub fn parse(config: &NetworkConfig) -> Result<NetworkRules, String> {
        // The presets are parsed only when named: most configs name none, and this runs at
        // every start, `warden jail` included.
        let all = if config.presets.is_empty() {
            BTreeMap::new()
        } else {
            presets()?
        };
        let mut texts: BTreeMap<String, String> = BTreeMap::new();
        let mut http: BTreeMap<String, HttpRules> = BTreeMap::new();
        let mut origins: BTreeMap<String, String> = BTreeMap::new();
        for name in &config.presets {
            let preset = all.get(name).ok_or_else(|| {
                let known: Vec<&str> = all.keys().map(String::as_str).collect();
                format!(
                    "network.presets: no preset {name:?} (known: {})",
                    known.join(", ")
                )
            })?;
            for host in &preset.hosts {
                texts.insert(host.clone(), "allow".into());
                http.insert(
                    host.clone(),
                    HttpRules {
                        methods: preset.methods.clone(),
                        paths: Vec::new(),
                    },
                );
                origins.insert(host.clone(), format!("preset {name}"));
            }
        }
        for (key, entry) in &config.hosts {
            let rules = entry.http();
            rules.validate(&format!("network.hosts.{key:?}"))?;
            texts.insert(key.clone(), entry.rule().to_string());
            http.insert(key.clone(), rules);
            origins.insert(key.clone(), "[network.hosts]".into());
        }
        let hosts = HostRules::parse_section(&texts, "network.hosts")?;
        // Key the side tables by the form lookups report (`*.example.com`, lowercase).
        let canonical = |key: &str| match key.strip_prefix("*.") {
            Some(suffix) => format!("*.{}", normalize_host(suffix)),
            None if key == "*" => "*".to_string(),
            None => normalize_host(key),
        };
        let keys = texts
            .iter()
            .map(|(k, v)| {
                let rule = match v.as_str() {
                    "allow" => Rule::Allow,
                    "ask" => Rule::Ask,
                    _ => Rule::Deny,
                };
                (canonical(k), rule)
            })
            .collect();
        Ok(NetworkRules {
            hosts,
            http: http.into_iter().map(|(k, v)| (canonical(&k), v)).collect(),
            origins: origins
                .into_iter()
                .map(|(k, v)| (canonical(&k), v))
                .collect(),
            resolve: parse_fixed_in(&config.resolve, "network.resolve")?,
            keys,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// Whether `host` may be reached, and under which rule; the refusal names the config key.
    pub fn admit(&self, host: &str) -> Result<Admitted, String> {
        let host = normalize_host(host);
        let Some(matched) = self.hosts.lookup(&host) else {
            return Err(format!(
                "no [network.hosts] rule names {host}; jailed commands reach only hosts a rule \
                 allows (add \"{host}\" = \"allow\" under [network.hosts] in warden's config)"
            ));
        };
        let origin = self
            .origins
            .get(&matched.key)
            .cloned()
            .unwrap_or_else(|| "[network.hosts]".into());
        let admitted = Admitted {
            http: self.http.get(&matched.key).cloned().unwrap_or_default(),
            origin,
            matched,
        };
        if admitted.matched.rule == Rule::Deny {
            return Err(format!("{host} is refused by {}", admitted.describe()));
        }
        Ok(admitted)
    }

    /// The fixed address `[network.resolve]` gives `host`, if any.
    pub fn fixed(&self, host: &str) -> Option<HostTarget> {
        self.resolve.get(&normalize_host(host)).copied()
    }

    /// The fixed addresses, as the proxy takes them.
    pub fn fixed_addresses(&self) -> &BTreeMap<String, HostTarget> {
        &self.resolve
    }

    /// The hosts a command may reach and how: `pypi.org (allow)`, `*.example.com (ask)`.
    pub fn reachable(&self) -> Vec<String> {
        self.keys
            .iter()
            .filter(|(_, rule)| *rule != Rule::Deny)
            .map(|(key, rule)| format!("{key} ({})", rule.as_str()))
            .collect()
    }

    /// Whether every host a command may reach is `allow` by the user's own `[network.hosts]`
    /// (a preset is data warden ships, not the user's word about a host).
    pub fn all_allowed_by_user(&self) -> bool {
        self.keys
            .iter()
            .filter(|(_, rule)| *rule != Rule::Deny)
            .all(|(key, rule)| {
                *rule == Rule::Allow
                    && self.origins.get(key).map(String::as_str) == Some("[network.hosts]")
            })
    }
}

/// A request an `ask` rule puts to a person: which host, method and path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkAsk {
    pub host: String,
    pub port: u16,
    /// `CONNECT` for a tunnel (whose requests cannot be seen).
    pub method: String,
    /// The path of a request (plain HTTP, or HTTPS warden looks inside); empty for a tunnel.
    pub path: String,
    /// The rule that asks, as the config writes it.
    pub rule: String,
}

impl NetworkAsk {
    /// `GET http://host/path`, `GET https://host:443/path` (inspected), or a tunnel whose
    /// requests cannot be seen.
    pub fn describe(&self) -> String {
        match self.method.as_str() {
            "CONNECT" => format!(
                "a jailed command wants to open an HTTPS tunnel to {}:{} (the requests inside \
                 cannot be seen), under {}",
                self.host, self.port, self.rule
            ),
            method => format!(
                "a jailed command wants to send {method} {}://{}:{}{} under {}",
                if self.port == 443 { "https" } else { "http" },
                self.host,
                self.port,
                self.path,
                self.rule
            ),
        }
    }
}

/// The answer to one [`NetworkAsk`]: `true` approves this one request.
pub type AskAnswer = Pin<Box<dyn Future<Output = bool> + Send>>;

/// Whoever answers `ask` rules for a run (a terminal, the chat's approval buttons).
#[derive(Clone)]
pub struct NetworkAsker(pub Arc<dyn Fn(NetworkAsk) -> AskAnswer + Send + Sync>);

impl NetworkAsker {
    pub fn new(ask: impl Fn(NetworkAsk) -> AskAnswer + Send + Sync + 'static) -> NetworkAsker {
        NetworkAsker(Arc::new(ask))
    }

    pub async fn ask(&self, request: NetworkAsk) -> bool {
        (self.0)(request).await
    }
}

impl std::fmt::Debug for NetworkAsker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NetworkAsker")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> NetworkConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn nothing_passes_without_a_rule_and_refusals_name_the_key() {
        let rules = NetworkRules::parse(&NetworkConfig::default()).unwrap();
        assert!(rules.is_empty());
        let why = rules.admit("example.com").unwrap_err();
        assert!(why.contains("[network.hosts]"), "{why}");
        assert!(why.contains("\"example.com\" = \"allow\""), "{why}");
    }

    #[test]
    fn hosts_presets_and_details_decide() {
        let rules = NetworkRules::parse(&config(
            "presets = [\"pypi\"]\n[hosts]\n\"Example.com\" = \"allow\"\n\
             \"*.corp.example\" = \"deny\"\n\
             \"api.example.org\" = { rule = \"ask\", methods = [\"GET\"], paths = [\"/v1/\"] }\n\
             \"files.pythonhosted.org\" = \"deny\"\n[resolve]\n\"pkgs.test\" = \"127.0.0.1:9\"",
        ))
        .unwrap();
        let ok = rules.admit("example.com.").unwrap();
        assert_eq!(ok.describe(), "[network.hosts] \"example.com\" = \"allow\"");
        assert!(ok.http.is_empty());
        let pypi = rules.admit("pypi.org").unwrap();
        assert_eq!(pypi.describe(), "preset pypi (\"pypi.org\")");
        assert_eq!(pypi.http.methods, ["GET", "HEAD"]);
        let asked = rules.admit("api.example.org").unwrap();
        assert!(asked.asks());
        assert_eq!(asked.http.paths, ["/v1/"]);
        assert!(rules
            .admit("a.corp.example")
            .unwrap_err()
            .contains("\"*.corp.example\" = \"deny\""));
        // The user's entry replaces the preset's for the same host.
        assert!(rules.admit("files.pythonhosted.org").is_err());
        assert!(rules.fixed("PKGS.test").is_some());
        assert!(!rules.all_allowed_by_user(), "a preset and an ask");
        assert!(rules.reachable().contains(&"pypi.org (allow)".to_string()));
    }

    #[test]
    fn only_the_users_allow_rules_count_as_the_users_word() {
        let mine = NetworkRules::parse(&config("[hosts]\n\"a.test\" = \"allow\"")).unwrap();
        assert!(mine.all_allowed_by_user());
        let preset = NetworkRules::parse(&config("presets = [\"npm\"]")).unwrap();
        assert!(!preset.all_allowed_by_user());
    }

    #[test]
    fn invalid_entries_are_refused_naming_their_key() {
        for (text, needle) in [
            (
                "presets = [\"nope\"]",
                "network.presets: no preset \"nope\"",
            ),
            ("[hosts]\n\"a.test\" = \"yes\"", "network.hosts.\"a.test\""),
            (
                "[hosts]\n\"a.test\" = { rule = \"allow\", methods = [\"get\"] }",
                "network.hosts.\"a.test\"",
            ),
            (
                "[resolve]\n\"a.test\" = \"nowhere\"",
                "network.resolve.\"a.test\"",
            ),
        ] {
            let err = config(text).check().unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
        assert_eq!(preset_names().len(), 4);
    }

    #[test]
    fn the_configs_entries_replace_a_policy_files() {
        let policy = config("presets = [\"npm\"]\n[hosts]\n\"a.test\" = \"allow\"");
        let mine = config("[hosts]\n\"a.test\" = \"deny\"");
        let merged = mine.over(&policy);
        assert_eq!(merged.presets, ["npm"]);
        assert_eq!(merged.confinement, Confinement::Auto);
        let supervised = config("confinement = \"supervisor\"");
        assert_eq!(
            supervised.over(&policy).confinement,
            Confinement::Supervisor
        );
        assert_eq!(
            NetworkConfig::default().over(&supervised).confinement,
            Confinement::Supervisor
        );
        assert!(toml::from_str::<NetworkConfig>("confinement = \"none\"").is_err());
        assert_eq!(merged.hosts["a.test"], HostEntry::Rule("deny".into()));
    }
}
