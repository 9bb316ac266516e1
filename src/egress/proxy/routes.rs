//! What a skill may send through the egress proxy beyond "this domain": method and path rules,
//! and routes — named upstreams the proxy calls on the skill's behalf, adding headers that
//! carry secrets the skill never sees.
//!
//! ```toml
//! [permissions.network.rules."api.example.com"]   # plain HTTP to a declared domain
//! methods = ["GET"]
//! paths = ["/v1/"]
//!
//! [permissions.network.routes.github]
//! url = "https://api.github.com"              # https; http only for a name in [skills] hosts
//! env = "GITHUB_API"                          # gets http://127.0.0.1:PORT/<run token>/github
//! methods = ["GET"]
//! paths = ["/repos/"]
//! headers = { Authorization = "Bearer {secret:GITHUB_TOKEN}" }
//! ```
//!
//! Secrets come from warden's config (`[skills.secrets]`) or its environment
//! (`WARDEN_SECRET_NAME`), only when the run starts, and stay in warden's process.

use super::domain::{parse_domain, Domain};
pub use crate::egress::http_rules::HttpRules;
use crate::secret::fill_secrets;
use crate::secret::{secret_names, Secret};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A route as the manifest declares it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    pub url: String,
    /// The environment variable that receives the route's address (default
    /// `WARDEN_ROUTE_<NAME>`).
    pub env: Option<String>,
    #[serde(default)]
    pub methods: Vec<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    /// Headers added to every request, `{secret:NAME}` replaced by the secret.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// A route ready for the proxy: where it goes, its rules, and its headers with secrets in.
#[derive(Clone, Debug)]
pub struct Route {
    pub name: String,
    pub tls: bool,
    pub domain: Domain,
    /// The upstream's base path, without a trailing slash (`""` for the root).
    pub base_path: String,
    pub rules: HttpRules,
    pub headers: Vec<(String, Secret)>,
}

/// Variables a route may not take: the jail's own, and the proxy's.
const RESERVED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "TERM",
    "PWD",
    "SHELL",
    "USER",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "NODE_OPTIONS",
];

/// Headers a route may not set: they frame the request, which the proxy does itself.
const FRAMING_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

/// Route names: lowercase letters, digits and `-`, as they appear in the route's URL.
pub fn check_route_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    match ok {
        true => Ok(()),
        false => Err(format!(
            "route name {name:?}: use lowercase letters, digits and -"
        )),
    }
}

impl RouteSpec {
    /// Check everything that does not depend on warden's config.
    pub fn validate(&self, name: &str) -> Result<(), String> {
        check_route_name(name)?;
        let what = format!("route {name}");
        parse_url(&self.url).map_err(|why| format!("{what}: {why}"))?;
        let env = self.env_name(name);
        let env_ok = env
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
            && env
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !env_ok || RESERVED_ENV.contains(&env.as_str()) || env.starts_with("WARDEN_SECRET") {
            return Err(format!(
                "{what}: env {env:?} must be an upper-case variable name that the jail does not \
                 already use"
            ));
        }
        HttpRules {
            methods: self.methods.clone(),
            paths: self.paths.clone(),
        }
        .validate(&what)?;
        for (header, value) in &self.headers {
            let name_ok = !header.is_empty()
                && header
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !name_ok || FRAMING_HEADERS.contains(&header.to_ascii_lowercase().as_str()) {
                return Err(format!(
                    "{what}: header {header:?} cannot be set by a route"
                ));
            }
            if value.contains(['\r', '\n']) {
                return Err(format!("{what}: header {header} holds a line break"));
            }
            secret_names(value).map_err(|why| format!("{what}: header {header}: {why}"))?;
        }
        Ok(())
    }

    /// The variable the skill reads the route's address from.
    pub fn env_name(&self, name: &str) -> String {
        self.env.clone().unwrap_or_else(|| {
            format!(
                "WARDEN_ROUTE_{}",
                name.to_ascii_uppercase().replace('-', "_")
            )
        })
    }

    /// Every secret the route's headers name.
    pub fn secrets(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .headers
            .values()
            .flat_map(|v| secret_names(v).unwrap_or_default())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The route with its secrets filled in by `lookup` (a missing secret refuses the run).
    pub fn resolve(
        &self,
        name: &str,
        lookup: &dyn Fn(&str) -> Option<Secret>,
    ) -> Result<Route, String> {
        let (tls, domain, base_path) = parse_url(&self.url)?;
        let mut headers = Vec::new();
        for (header, template) in &self.headers {
            let value = fill_secrets(template, &format!("route {name}"), lookup)?;
            headers.push((header.clone(), value));
        }
        Ok(Route {
            name: name.to_string(),
            tls,
            domain,
            base_path,
            rules: HttpRules {
                methods: self.methods.clone(),
                paths: self.paths.clone(),
            },
            headers,
        })
    }

    /// "sends secret GITHUB_TOKEN to api.github.com (header Authorization)" for the review.
    pub fn describe(&self, name: &str) -> String {
        let mut text = format!("call {} through the route `{name}`", self.url);
        let rules = HttpRules {
            methods: self.methods.clone(),
            paths: self.paths.clone(),
        };
        if let Some(rules) = rules.describe() {
            text.push_str(&format!(" ({rules})"));
        }
        let host = parse_url(&self.url)
            .map(|(_, d, _)| d.name)
            .unwrap_or_else(|_| self.url.clone());
        for (header, value) in &self.headers {
            for secret in secret_names(value).unwrap_or_default() {
                text.push_str(&format!(
                    "; warden adds your secret {secret} to every request to {host} (header \
                     {header}) without the skill seeing it"
                ));
            }
        }
        text
    }
}

/// `https://name[:port][/base]` → (tls, domain, base path without trailing slash).
fn parse_url(text: &str) -> Result<(bool, Domain, String), String> {
    let url = url::Url::parse(text).map_err(|e| format!("url {text:?}: {e}"))?;
    let tls = match url.scheme() {
        "https" => true,
        "http" => false,
        other => return Err(format!("url {text:?}: {other}:// is not http or https")),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "url {text:?}: no credentials in the URL; use headers"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("url {text:?}: no query or fragment"));
    }
    let host = match url.host() {
        Some(url::Host::Domain(name)) => name.to_string(),
        _ => return Err(format!("url {text:?}: name the host (no addresses)")),
    };
    let host = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    };
    let mut domain = parse_domain(&host)?;
    if domain.port.is_none() {
        domain.port = Some(if tls { 443 } else { 80 });
    }
    let base_path = url.path().trim_end_matches('/').to_string();
    if base_path.split('/').any(|s| s == "." || s == "..") || base_path.contains('%') {
        return Err(format!("url {text:?}: the path has . or .. or an escape"));
    }
    Ok((tls, domain, base_path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(text: &str) -> RouteSpec {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn routes_are_checked_and_resolve_their_secrets() {
        let spec = route(
            "url = \"https://api.github.com/v3/\"\nmethods = [\"GET\"]\n\
             headers = { Authorization = \"Bearer {secret:GITHUB_TOKEN}\" }",
        );
        spec.validate("github").unwrap();
        assert_eq!(spec.env_name("github"), "WARDEN_ROUTE_GITHUB");
        assert_eq!(spec.secrets(), ["GITHUB_TOKEN"]);
        let described = spec.describe("github");
        assert!(
            described.contains("your secret GITHUB_TOKEN"),
            "{described}"
        );
        assert!(
            described.contains("api.github.com (header Authorization)"),
            "{described}"
        );
        let resolved = spec
            .resolve("github", &|name| {
                (name == "GITHUB_TOKEN").then(|| Secret::new("s3cr3t"))
            })
            .unwrap();
        assert!(resolved.tls);
        assert_eq!(resolved.domain.port, Some(443));
        assert_eq!(resolved.base_path, "/v3");
        assert_eq!(resolved.headers[0].1.expose(), "Bearer s3cr3t");
        let missing = spec.resolve("github", &|_| None).unwrap_err();
        assert!(missing.contains("WARDEN_SECRET_GITHUB_TOKEN"), "{missing}");

        for (bad, why) in [
            ("url = \"ftp://a.example.com\"", "not http"),
            ("url = \"https://10.0.0.1\"", "name the host"),
            ("url = \"https://u:p@a.example.com\"", "credentials"),
            ("url = \"https://a.example.com\"\nenv = \"PATH\"", "env"),
            (
                "url = \"https://a.example.com\"\nheaders = { Host = \"x\" }",
                "cannot be set",
            ),
            (
                "url = \"https://a.example.com\"\nheaders = { A = \"{secret:lower}\" }",
                "upper-case",
            ),
            (
                "url = \"https://a.example.com\"\nheaders = { A = \"{secret:X\" }",
                "unclosed",
            ),
        ] {
            let err = route(bad).validate("r").unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        assert!(check_route_name("Git Hub").is_err());
    }
}
