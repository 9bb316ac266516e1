//! Method and path rules for plain-HTTP requests through the egress proxy: a skill's
//! `[permissions.network.rules."HOST"]`, a route's, and `[network.hosts]` entries for jailed
//! commands. Empty lists allow every method or path.

use serde::Deserialize;

/// Method and path rules: empty lists allow every method or path.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HttpRules {
    #[serde(default)]
    pub methods: Vec<String>,
    /// Path prefixes (`/v1/`), matched on the request's path before its query.
    #[serde(default)]
    pub paths: Vec<String>,
}

impl HttpRules {
    pub fn validate(&self, what: &str) -> Result<(), String> {
        for method in &self.methods {
            let token = !method.is_empty()
                && method.chars().all(|c| c.is_ascii_uppercase())
                && method.len() <= 16;
            if !token {
                return Err(format!(
                    "{what}: method {method:?} is not an upper-case HTTP method (GET, POST…)"
                ));
            }
        }
        for path in &self.paths {
            if !path.starts_with('/') || path.contains(['?', '#', '%', '\\']) {
                return Err(format!(
                    "{what}: path prefix {path:?} must start with / and hold no ?, #, % or \\"
                ));
            }
            if path.split('/').any(|s| s == "." || s == "..") {
                return Err(format!(
                    "{what}: path prefix {path:?} has a . or .. segment"
                ));
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.methods.is_empty() && self.paths.is_empty()
    }

    /// Whether `method` on `path` (the request target before `?`) passes, or why not.
    pub fn check(&self, method: &str, path: &str) -> Result<(), String> {
        if !self.methods.is_empty() && !self.methods.iter().any(|m| m == method) {
            return Err(format!(
                "method {method} is not allowed here (allowed: {})",
                self.methods.join(", ")
            ));
        }
        if self.paths.is_empty() {
            return Ok(());
        }
        // Encoded dots and slashes could be decoded upstream into a path the prefix never
        // matched; refuse them rather than guess how the upstream decodes.
        let lower = path.to_ascii_lowercase();
        let ambiguous = ["%2e", "%2f", "%5c", "\\"]
            .iter()
            .any(|e| lower.contains(e))
            || path.split('/').any(|s| s == "." || s == "..");
        if ambiguous {
            return Err(format!(
                "path {path} has a . or .. segment or an encoded / . or \\; refused under path rules"
            ));
        }
        if !self.paths.iter().any(|p| path.starts_with(p.as_str())) {
            return Err(format!(
                "path {path} is not allowed here (allowed prefixes: {})",
                self.paths.join(", ")
            ));
        }
        Ok(())
    }

    /// "GET only, paths under /v1/" for the review.
    pub fn describe(&self) -> Option<String> {
        let methods =
            (!self.methods.is_empty()).then(|| format!("{} only", self.methods.join("/")));
        let paths =
            (!self.paths.is_empty()).then(|| format!("paths under {}", self.paths.join(", ")));
        match (methods, paths) {
            (None, None) => None,
            (Some(m), None) => Some(m),
            (None, Some(p)) => Some(p),
            (Some(m), Some(p)) => Some(format!("{m}, {p}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_check_methods_and_path_prefixes_and_refuse_ambiguous_paths() {
        let rules = HttpRules {
            methods: vec!["GET".into()],
            paths: vec!["/repos/".into()],
        };
        assert_eq!(rules.check("GET", "/repos/a/b"), Ok(()));
        assert!(rules
            .check("POST", "/repos/a")
            .unwrap_err()
            .contains("method POST"));
        assert!(rules.check("GET", "/user").unwrap_err().contains("/repos/"));
        for sneaky in [
            "/repos/../user",
            "/repos/%2e%2e/user",
            "/repos/a%2Fb",
            "/repos/.\\x",
        ] {
            assert!(rules.check("GET", sneaky).is_err(), "{sneaky}");
        }
        assert_eq!(HttpRules::default().check("DELETE", "/../x"), Ok(()));
        assert_eq!(rules.describe().unwrap(), "GET only, paths under /repos/");
        assert!(HttpRules {
            methods: vec!["get".into()],
            paths: vec![]
        }
        .validate("x")
        .is_err());
        assert!(HttpRules {
            methods: vec![],
            paths: vec!["v1".into()]
        }
        .validate("x")
        .is_err());
    }
}
