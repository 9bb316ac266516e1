//! Where an admitted host goes: the skill's declared domains or `[network]` (asking when its
//! rule says so), then the address, fixed by config or resolved and checked to be public.

use super::domain::Domain;
use super::routes::HttpRules;
use super::{EgressEvent, EgressRules};
use crate::egress::addresses::forbidden_reason;
use crate::egress::network::{NetworkAsk, NetworkRules};
use std::net::SocketAddr;

pub(super) fn refused(target: String, why: String) -> EgressEvent {
    EgressEvent {
        target,
        allowed: false,
        detail: why,
    }
}

/// The method/path rules for `host`: a skill's declared ones, or for jailed commands the
/// `[network]` rule's (an error when no rule lets the host through).
pub(super) fn http_rules(rules: &EgressRules, host: &str) -> Result<Option<HttpRules>, String> {
    match &rules.network {
        Some(network) => network.admit(host).map(|admitted| Some(admitted.http)),
        None => Ok(rules.rules.get(host).cloned()),
    }
}

/// For jailed commands, the `[network]` rule that admits `host`, as the config writes it.
pub(super) fn rule_name(rules: &EgressRules, host: &str) -> Option<String> {
    let network = rules.network.as_ref()?;
    network.admit(host).ok().map(|admitted| admitted.describe())
}

/// For jailed commands: `[network]` decides (asking when its rule says so, unless `ask_here` is
/// false: an inspected tunnel asks about each request inside), on the web's ports.
pub(super) async fn decide_network(
    rules: &EgressRules,
    network: &NetworkRules,
    host: &str,
    port: u16,
    what: &str,
    ask_here: bool,
) -> Result<SocketAddr, String> {
    network.admit(host)?;
    if port != 80 && port != 443 {
        return Err(format!(
            "port {port} of {host}: jailed commands reach ports 80 and 443 only"
        ));
    }
    if ask_here {
        let (method, path) = what.split_once(' ').unwrap_or((what, ""));
        approve(rules, host, port, method, path).await?;
    }
    resolve(rules, host, port).await
}

/// For jailed commands: when `host`'s rule asks, ask about `method path` (`CONNECT` and no
/// path for an opaque tunnel); without anyone to ask, or with a no, why not.
pub(super) async fn approve(
    rules: &EgressRules,
    host: &str,
    port: u16,
    method: &str,
    path: &str,
) -> Result<(), String> {
    let Some(network) = &rules.network else {
        return Ok(());
    };
    let admitted = network.admit(host)?;
    if !admitted.asks() {
        return Ok(());
    }
    let request = NetworkAsk {
        host: host.to_string(),
        port,
        method: method.to_string(),
        path: path.to_string(),
        rule: admitted.describe(),
    };
    let approved = match &rules.asker {
        Some(asker) => asker.ask(request).await,
        None => false,
    };
    match approved {
        true => Ok(()),
        false => Err(format!(
            "{host} needs approval ({}), and it was not given",
            admitted.describe()
        )),
    }
}

/// The address to connect to for `host:port`, or why not.
pub(super) async fn decide(
    rules: &EgressRules,
    host: &str,
    port: u16,
) -> Result<SocketAddr, String> {
    let domain = rules
        .domains
        .iter()
        .find(|d| d.name == host)
        .ok_or_else(|| {
            let declared: Vec<String> = rules.domains.iter().map(Domain::to_string).collect();
            format!(
                "{host} is not a declared domain of this skill (declared: {})",
                declared.join(", ")
            )
        })?;
    if !domain.allows_port(port) {
        let allowed = domain
            .port
            .map_or_else(|| "80 and 443".to_string(), |p| p.to_string());
        return Err(format!(
            "port {port} of {host} is not declared (allowed: {allowed})"
        ));
    }
    resolve(rules, host, port).await
}

/// `[skills] hosts`, or a lookup whose every address is public.
pub(super) async fn resolve(
    rules: &EgressRules,
    host: &str,
    port: u16,
) -> Result<SocketAddr, String> {
    let fixed = rules
        .hosts
        .get(host)
        .copied()
        .or_else(|| rules.network.as_ref().and_then(|n| n.fixed(host)));
    if let Some(target) = fixed {
        return Ok(target.addr(port));
    }
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("{host} does not resolve: {e}"))?
        .collect();
    check_resolved(host, &resolved)
}

/// Every address must be public; the first one is used.
pub(super) fn check_resolved(host: &str, addrs: &[SocketAddr]) -> Result<SocketAddr, String> {
    let first = addrs
        .first()
        .ok_or_else(|| format!("{host} resolves to no address"))?;
    for addr in addrs {
        if let Some(why) = forbidden_reason(addr.ip()) {
            return Err(format!(
                "{host} resolves to {} ({why}); only [skills] hosts or [network.resolve] can \
                 map a name to such an address",
                addr.ip()
            ));
        }
    }
    Ok(*first)
}
