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
