//! A secret value (an API key, the bot token, a skill's header secret) and the
//! `{secret:NAME}` placeholders that name one in a header template. Nothing here reads the
//! environment or a file: the config fills secrets in, the egress proxy and MCP client use them.

use serde::Deserialize;

/// A secret value: its `Debug` and `Display` never show it.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The secret itself, for the one place that sends it (an HTTP header, the Bot API URL).
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "Secret(<empty>)"
        } else {
            "Secret(<redacted>)"
        })
    }
}

/// The names inside `{secret:NAME}` placeholders; a malformed placeholder is an error.
pub fn secret_names(template: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{secret:") {
        let after = &rest[start + "{secret:".len()..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("{template:?}: an unclosed {{secret:"))?;
        let name = &after[..end];
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return Err(format!(
                "{template:?}: secret names are upper-case letters, digits and _"
            ));
        }
        names.push(name.to_string());
        rest = &after[end + 1..];
    }
    Ok(names)
}

/// A header `template` with every `{secret:NAME}` replaced by `lookup(NAME)`; a missing
/// secret is an error saying that `needed_by` needs it and where to set it.
pub fn fill_secrets(
    template: &str,
    needed_by: &str,
    lookup: &dyn Fn(&str) -> Option<Secret>,
) -> Result<Secret, String> {
    let mut value = template.to_string();
    for secret in secret_names(template)? {
        let found = lookup(&secret).filter(|s| !s.is_empty()).ok_or_else(|| {
            format!(
                "{needed_by} needs the secret {secret}, which warden does not have: set \
                 [skills.secrets] {secret} in the config or WARDEN_SECRET_{secret} in warden's \
                 environment"
            )
        })?;
        if found.expose().contains(['\r', '\n']) {
            return Err(format!("the secret {secret} holds a line break"));
        }
        value = value.replace(&format!("{{secret:{secret}}}"), found.expose());
    }
    Ok(Secret::new(value))
}

/// A secret from warden's store: `[skills.secrets] NAME` in the config (`configured`), else
/// `WARDEN_SECRET_NAME` in warden's environment. Skill routes and `[network.secrets]` both
/// read it here, when a run starts.
pub fn stored_secret(
    configured: &std::collections::BTreeMap<String, Secret>,
    name: &str,
) -> Option<Secret> {
    configured
        .get(name)
        .filter(|s| !s.is_empty())
        .cloned()
        .or_else(|| {
            std::env::var(format!("WARDEN_SECRET_{name}"))
                .ok()
                .map(Secret::new)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_named_and_malformed_ones_refused() {
        assert_eq!(
            secret_names("Bearer {secret:A_1} and {secret:B}").unwrap(),
            ["A_1", "B"]
        );
        assert!(secret_names("no placeholder").unwrap().is_empty());
        assert!(secret_names("{secret:OPEN")
            .unwrap_err()
            .contains("unclosed"));
        assert!(secret_names("{secret:lower}")
            .unwrap_err()
            .contains("upper-case"));
        assert!(secret_names("{secret:}")
            .unwrap_err()
            .contains("upper-case"));
    }

    #[test]
    fn debug_output_never_shows_the_value() {
        assert_eq!(
            format!("{:?}", Secret::new("hunter2")),
            "Secret(<redacted>)"
        );
        assert_eq!(format!("{:?}", Secret::default()), "Secret(<empty>)");
    }
}
