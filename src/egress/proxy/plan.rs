//! What a request becomes: checked against the run's token, the domains or `[network]`
//! rules, and the skill's routes, before anything is resolved or connected.

use super::decide::{http_rules, rule_name};
use super::inject::Injection;
use super::request::{authority, body_length, normalize, upstream_head, Request};
use super::routes::HttpRules;
use super::EgressRules;
use base64::Engine;

/// What a request becomes once checked.
pub(super) enum Plan {
    /// CONNECT: a byte tunnel.
    Tunnel { host: String, port: u16 },
    /// CONNECT that warden answers itself to check each request (`super::intercept`).
    Intercept {
        host: String,
        port: u16,
        http: HttpRules,
    },
    /// One request sent upstream with exactly `body_len` bytes of body.
    Forward {
        host: String,
        port: u16,
        /// A route's upstream, which need not be a declared domain.
        route: bool,
        tls: bool,
        head: Vec<u8>,
        body_len: u64,
        /// `GET /path` for the record (no query: it may carry data).
        what: String,
    },
}

/// A refused request: the status the client sees and why.
pub(super) struct Refusal {
    pub(super) status: u16,
    pub(super) target: String,
    pub(super) why: String,
}

pub(super) fn refusal(status: u16, target: impl Into<String>, why: impl Into<String>) -> Refusal {
    Refusal {
        status,
        target: target.into(),
        why: why.into(),
    }
}

/// Check a request against the run's token, domains, rules and routes.
pub(super) fn plan(rules: &EgressRules, request: &Request) -> Result<(String, Plan), Refusal> {
    if request.target.starts_with('/') {
        return plan_route(rules, request);
    }
    let target = request.target.as_str();
    if !proxy_token_matches(rules, request.header("proxy-authorization")) {
        return Err(refusal(
            407,
            target,
            "this proxy serves one run; the request lacks its token (Proxy-Authorization)",
        ));
    }
    if request.method == "CONNECT" {
        let (host, port) = authority(target).map_err(|why| refusal(400, target, why))?;
        let label = format!("{host}:{port}");
        let http = http_rules(rules, &host)
            .map_err(|why| refusal(403, &label, why))?
            .unwrap_or_default();
        if let Some(interception) = &rules.interception {
            if interception.wants(&host, &http) {
                return Ok((label, Plan::Intercept { host, port, http }));
            }
        }
        if !http.is_empty() {
            let advice = match rules.network {
                Some(_) => "only plain http:// requests can reach it",
                None => "the skill must use plain HTTP or a route",
            };
            return Err(refusal(
                403,
                label,
                format!(
                    "{host} has method/path rules, which warden cannot check inside an encrypted \
                     tunnel; {advice}"
                ),
            ));
        }
        return Ok((label, Plan::Tunnel { host, port }));
    }
    let method = request.method.as_str();
    let url = url::Url::parse(target).map_err(|_| {
        refusal(
            400,
            "?",
            format!("{method} {target}: a proxy request needs an absolute http:// URL"),
        )
    })?;
    if url.scheme() != "http" {
        return Err(refusal(
            400,
            "?",
            format!(
                "{}: only http:// is forwarded; https goes through CONNECT",
                url.scheme()
            ),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refusal(400, "?", "URLs with credentials are not forwarded"));
    }
    let host = match url.host() {
        Some(url::Host::Domain(d)) => normalize(d),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(refusal(400, "?", "the URL has no host")),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let label = format!("{host}:{port}");
    // The parsed URL's path (dot segments resolved) is both what is checked and what is sent.
    let path = url.path();
    let http = http_rules(rules, &host).map_err(|why| refusal(403, &label, why))?;
    if let Some(domain_rules) = http {
        domain_rules.check(method, path).map_err(|why| {
            let under = rule_name(rules, &host)
                .map(|rule| format!(", under {rule}"))
                .unwrap_or_default();
            refusal(403, label.clone(), format!("{host}: {why}{under}"))
        })?;
    }
    let mut origin = path.to_string();
    if let Some(query) = url.query() {
        origin.push('?');
        origin.push_str(query);
    }
    let host_header = match port {
        80 => host.clone(),
        _ => label.clone(),
    };
    let body_len = body_length(request).map_err(|(status, why)| refusal(status, &label, why))?;
    let head = upstream_head(request, &origin, &host_header, &[], body_len);
    Ok((
        label,
        Plan::Forward {
            host,
            port,
            route: false,
            tls: false,
            head,
            body_len,
            what: format!("{method} {path}"),
        },
    ))
}

/// `/<token>/<route>/path?query`: a request the proxy makes for the skill.
pub(super) fn plan_route(
    rules: &EgressRules,
    request: &Request,
) -> Result<(String, Plan), Refusal> {
    let method = request.method.as_str();
    let unmatched = || {
        refusal(
            403,
            "route",
            "not a route of this run (requests to the proxy itself are /<run token>/<route>/…)",
        )
    };
    let rest = &request.target[1..];
    let (token, rest) = rest.split_once('/').ok_or_else(unmatched)?;
    if rules.token.is_empty() || !same(token, &rules.token) {
        return Err(unmatched());
    }
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (name, rest) = rest.split_at(split);
    let route = rules
        .routes
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| {
            refusal(
                404,
                format!("route {name}"),
                format!("no route {name:?} was declared"),
            )
        })?;
    let label = format!(
        "route {name} ({}:{})",
        route.domain.name,
        route.domain.port.unwrap_or(443)
    );
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let path = if path.is_empty() { "/" } else { path };
    route
        .rules
        .check(method, path)
        .map_err(|why| refusal(403, label.clone(), format!("route {name}: {why}")))?;
    let mut origin = format!("{}{path}", route.base_path);
    if let Some(query) = query {
        origin.push('?');
        origin.push_str(query);
    }
    let port = route
        .domain
        .port
        .unwrap_or(if route.tls { 443 } else { 80 });
    let default_port = if route.tls { 443 } else { 80 };
    let host_header = match port == default_port {
        true => route.domain.name.clone(),
        false => format!("{}:{port}", route.domain.name),
    };
    let body_len = body_length(request).map_err(|(status, why)| refusal(status, &label, why))?;
    let headers: Vec<Injection> = route
        .headers
        .iter()
        .map(|(name, value)| Injection::Set {
            name: name.clone(),
            value: value.clone(),
        })
        .collect();
    let head = upstream_head(request, &origin, &host_header, &headers, body_len);
    Ok((
        label,
        Plan::Forward {
            host: route.domain.name.clone(),
            port,
            route: true,
            tls: route.tls,
            head,
            body_len,
            what: format!("{method} {path}"),
        },
    ))
}

/// Whether `Proxy-Authorization: Basic base64(user:TOKEN)` carries this run's token.
pub(super) fn proxy_token_matches(rules: &EgressRules, header: Option<&[u8]>) -> bool {
    let Some(value) = header.and_then(|h| std::str::from_utf8(h).ok()) else {
        return false;
    };
    let Some(encoded) = value.trim().strip_prefix("Basic ") else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
        return false;
    };
    let decoded = String::from_utf8_lossy(&decoded);
    let password = decoded.split_once(':').map_or("", |(_, p)| p);
    !rules.token.is_empty() && same(password, &rules.token)
}

/// Equal, in time independent of where they differ.
pub(super) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}
