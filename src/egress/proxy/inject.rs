//! Keys added by the proxy, never held by the jail: the one place a secret enters a request.
//!
//! - A skill's route sets its headers outright ([`Injection::Set`]): the client's own header of
//!   that name is dropped.
//! - A `[network.secrets]` binding swaps its value for the run's placeholder
//!   ([`Injection::Swap`]) in the header it names, where the client put the placeholder:
//!   `Bearer <placeholder>`, or inside `Basic` credentials (`user:<placeholder>`, as git sends a
//!   token). A header without the placeholder goes out as the client wrote it.

use crate::secret::Secret;
use base64::Engine;

/// What the proxy does to one header of a request it forwards.
#[derive(Clone, Debug)]
pub enum Injection {
    /// Set `name` to `value` (replacing the client's).
    Set { name: String, value: Secret },
    /// In `name`, replace `placeholder` by `value`.
    Swap {
        name: String,
        placeholder: String,
        value: Secret,
    },
}

impl Injection {
    fn name(&self) -> &str {
        match self {
            Injection::Set { name, .. } | Injection::Swap { name, .. } => name,
        }
    }
}

/// The client's `headers` with `injections` applied, in order; set headers come last.
pub fn inject<'a>(
    headers: impl Iterator<Item = &'a (String, Vec<u8>)>,
    injections: &[Injection],
) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, value) in headers {
        let mut value = value.clone();
        let mut dropped = false;
        for injection in injections
            .iter()
            .filter(|i| i.name().eq_ignore_ascii_case(name))
        {
            match injection {
                Injection::Set { .. } => dropped = true,
                Injection::Swap {
                    placeholder,
                    value: secret,
                    ..
                } => value = swap(&value, placeholder, secret.expose()),
            }
        }
        if !dropped {
            out.push((name.clone(), value));
        }
    }
    for injection in injections {
        if let Injection::Set { name, value } = injection {
            out.push((name.clone(), value.expose().as_bytes().to_vec()));
        }
    }
    out
}

/// `value` with `placeholder` replaced by `secret`, in the clear or inside `Basic` credentials.
fn swap(value: &[u8], placeholder: &str, secret: &str) -> Vec<u8> {
    let Ok(text) = std::str::from_utf8(value) else {
        return value.to_vec();
    };
    if text.contains(placeholder) {
        return text.replace(placeholder, secret).into_bytes();
    }
    let Some((scheme, encoded)) = text.trim().split_once(' ') else {
        return value.to_vec();
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return value.to_vec();
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let Some(decoded) = engine
        .decode(encoded.trim())
        .ok()
        .and_then(|d| String::from_utf8(d).ok())
    else {
        return value.to_vec();
    };
    if !decoded.contains(placeholder) {
        return value.to_vec();
    }
    let swapped = engine.encode(decoded.replace(placeholder, secret));
    format!("{scheme} {swapped}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn text(out: &[(String, Vec<u8>)]) -> Vec<(String, String)> {
        out.iter()
            .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).to_string()))
            .collect()
    }

    #[test]
    fn set_replaces_and_swap_replaces_only_the_placeholder() {
        let engine = base64::engine::general_purpose::STANDARD;
        let basic = format!("Basic {}", engine.encode("x-access-token:PH"));
        let client = headers(&[
            ("Authorization", "Bearer PH"),
            ("X-Other", "Bearer PH"),
            ("X-Key", "forged"),
            ("authorization", &basic),
            ("Accept", "*/*"),
        ]);
        let out = inject(
            client.iter(),
            &[
                Injection::Swap {
                    name: "Authorization".into(),
                    placeholder: "PH".into(),
                    value: Secret::new("real"),
                },
                Injection::Set {
                    name: "x-key".into(),
                    value: Secret::new("k"),
                },
            ],
        );
        let real_basic = format!("Basic {}", engine.encode("x-access-token:real"));
        assert_eq!(
            text(&out),
            [
                ("Authorization".to_string(), "Bearer real".to_string()),
                ("X-Other".into(), "Bearer PH".into()),
                ("authorization".into(), real_basic),
                ("Accept".into(), "*/*".into()),
                ("x-key".into(), "k".into()),
            ]
        );
    }

    #[test]
    fn headers_without_the_placeholder_are_untouched() {
        let client = headers(&[("Authorization", "Basic bm90OnRoaXM=")]);
        let swap = Injection::Swap {
            name: "Authorization".into(),
            placeholder: "PH".into(),
            value: Secret::new("real"),
        };
        assert_eq!(inject(client.iter(), &[swap]), client);
    }
}
