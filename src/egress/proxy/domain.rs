//! A skill's network destination: the domains its manifest declares (`api.example.com`,
//! `api.example.com:8443`), and `[skills] hosts`, the fixed addresses warden's config maps such
//! names to. The egress proxy lets a skill reach nothing else.

use crate::egress::fixed::HostTarget;
use std::collections::BTreeMap;

/// One allowed destination of the egress proxy.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Domain {
    pub name: String,
    /// `None`: ports 80 and 443.
    pub port: Option<u16>,
}

/// `api.example.com` or `api.example.com:8443`: lowercase DNS names with a dot.
pub fn parse_domain(text: &str) -> Result<Domain, String> {
    let bad = |why: &str| Err(format!("network domain {text:?}: {why}"));
    let (name, port) = match text.rsplit_once(':') {
        Some((name, port)) => match port.parse::<u16>() {
            Ok(p) if p > 0 => (name, Some(p)),
            _ => return bad("the port must be 1-65535"),
        },
        None => (text, None),
    };
    if name.parse::<std::net::IpAddr>().is_ok() || name.starts_with('[') {
        return bad("addresses are not allowed; name the domain");
    }
    if name.contains('*') {
        return bad("wildcards are not allowed; list each name");
    }
    let labels_ok = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    });
    if !labels_ok || name.len() > 253 || !name.contains('.') {
        return bad("use a lowercase DNS name with at least one dot (api.example.com)");
    }
    Ok(Domain {
        name: name.to_string(),
        port,
    })
}

impl std::fmt::Display for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl Domain {
    /// Whether a connection to `port` of this domain is allowed.
    pub fn allows_port(&self, port: u16) -> bool {
        match self.port {
            Some(p) => p == port,
            None => port == 80 || port == 443,
        }
    }
}

/// Check `[skills] hosts`: every key a domain name, every value an address.
pub fn parse_hosts(
    hosts: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, HostTarget>, String> {
    hosts
        .iter()
        .map(|(name, value)| {
            let domain = parse_domain(name).map_err(|e| format!("skills.hosts: {e}"))?;
            if domain.port.is_some() {
                return Err(format!(
                    "skills.hosts: {name:?}: map the name without a port"
                ));
            }
            let target =
                HostTarget::parse(value).map_err(|e| format!("skills.hosts.{name}: {e}"))?;
            Ok((domain.name, target))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    #[test]
    fn hosts_config_is_checked() {
        let ok = BTreeMap::from([
            ("a.example.test".to_string(), "127.0.0.1:80".to_string()),
            ("b.example.test".to_string(), "10.1.2.3".to_string()),
        ]);
        let parsed = parse_hosts(&ok).unwrap();
        assert_eq!(
            parsed["b.example.test"].addr(443),
            "10.1.2.3:443".parse::<SocketAddr>().unwrap()
        );
        for (name, value) in [
            ("a.example.test", "x"),
            ("*.test", "1.1.1.1"),
            ("a.test:80", "1.1.1.1"),
        ] {
            let bad = BTreeMap::from([(name.to_string(), value.to_string())]);
            assert!(parse_hosts(&bad).is_err(), "{name} = {value}");
        }
    }

    #[test]
    fn domains_are_lowercase_names_with_an_optional_port() {
        let domain = parse_domain("api.example.com:8443").unwrap();
        assert_eq!(domain.to_string(), "api.example.com:8443");
        assert!(domain.allows_port(8443) && !domain.allows_port(443));
        let plain = parse_domain("api.example.com").unwrap();
        assert!(plain.allows_port(80) && plain.allows_port(443) && !plain.allows_port(22));
        for bad in [
            "1.2.3.4",
            "[::1]:80",
            "*.example.com",
            "API.example.com",
            "localhost",
            "a.b:0",
        ] {
            assert!(parse_domain(bad).is_err(), "{bad}");
        }
    }
}
