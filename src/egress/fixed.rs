//! Fixed addresses for exact names: `[egress.resolve]` for warden's own fetches, `[skills]
//! hosts` for a skill's egress proxy. They are the only way either reaches a private or
//! loopback address, and only under that name.

use super::rules::normalize_host;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// A fixed address for a name (`[skills] hosts`, `[egress.resolve]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostTarget {
    /// Always this address and port.
    Addr(SocketAddr),
    /// This address, on the port the client asked for.
    Ip(IpAddr),
}

impl HostTarget {
    pub fn parse(text: &str) -> Result<HostTarget, String> {
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(HostTarget::Addr(addr));
        }
        text.parse::<IpAddr>()
            .map(HostTarget::Ip)
            .map_err(|_| format!("{text:?} is not an address (1.2.3.4, 1.2.3.4:8080, [::1]:80)"))
    }

    /// The address to connect to when the client asked for `port`.
    pub fn addr(self, port: u16) -> SocketAddr {
        match self {
            HostTarget::Addr(addr) => addr,
            HostTarget::Ip(ip) => SocketAddr::new(ip, port),
        }
    }
}

/// Check `[egress.resolve]`: every key a host name, every value an address.
pub fn parse_fixed(
    entries: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, HostTarget>, String> {
    parse_fixed_in(entries, "egress.resolve")
}

/// Check fixed addresses written under the config key `section` (`network.resolve`).
pub fn parse_fixed_in(
    entries: &BTreeMap<String, String>,
    section: &str,
) -> Result<BTreeMap<String, HostTarget>, String> {
    entries
        .iter()
        .map(|(name, value)| {
            let host = match url::Host::parse(name) {
                Ok(url::Host::Domain(d)) if !d.is_empty() => normalize_host(&d),
                _ => {
                    return Err(format!(
                        "{section}.{name:?}: not a host name (map a name, without a port)"
                    ))
                }
            };
            let target =
                HostTarget::parse(value).map_err(|e| format!("{section}.{name:?}: {e}"))?;
            Ok((host, target))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_an_address_with_or_without_a_port() {
        assert_eq!(
            HostTarget::parse("127.0.0.1:8080").unwrap().addr(443),
            "127.0.0.1:8080".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            HostTarget::parse("::1").unwrap().addr(443),
            "[::1]:443".parse::<SocketAddr>().unwrap()
        );
        assert!(HostTarget::parse("example.com")
            .unwrap_err()
            .contains("is not an address"));
    }

    #[test]
    fn resolve_entries_name_a_host_and_their_key() {
        let ok = BTreeMap::from([("Wiki.LAN".to_string(), "192.168.1.5".to_string())]);
        assert!(parse_fixed(&ok).unwrap().contains_key("wiki.lan"));
        let bad = BTreeMap::from([("wiki.lan:80".to_string(), "192.168.1.5".to_string())]);
        assert!(parse_fixed(&bad)
            .unwrap_err()
            .contains("egress.resolve.\"wiki.lan:80\""));
    }
}
