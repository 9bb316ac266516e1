//! One client connection, from its request head to the relayed bytes.

use super::decide::{decide, decide_network, refused, resolve, rule_name};
use super::intercept;
use super::plan::{plan, Plan};
use super::relay::{forward, tls_connect, tunnel};
use super::request::{read_head, respond};
use super::{EgressEvent, EgressRules, CONNECT_TIMEOUT, HEAD_TIMEOUT};
use tokio::net::TcpStream;

/// Serve one client connection, reporting its decision through `record` (nothing for a
/// client that sent no request at all).
pub(super) async fn handle(
    mut client: TcpStream,
    rules: &EgressRules,
    record: impl Fn(EgressEvent),
    count: impl FnOnce(&str, u64, u64),
) {
    let request = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(Some(request))) => request,
        Ok(Ok(None)) | Err(_) => return,
        Ok(Err(why)) => {
            respond(&mut client, 400, &why).await;
            return record(refused("?".into(), why));
        }
    };
    let (target, plan) = match plan(rules, &request) {
        Ok(planned) => planned,
        Err(r) => {
            respond(&mut client, r.status, &r.why).await;
            return record(refused(r.target, r.why));
        }
    };
    let (host, port, route, what) = match &plan {
        Plan::Tunnel { host, port } | Plan::Intercept { host, port, .. } => {
            (host, *port, false, "CONNECT")
        }
        Plan::Forward {
            host,
            port,
            route,
            what,
            ..
        } => (host, *port, *route, what.as_str()),
    };
    let addr = match (route, &rules.network) {
        (true, _) => resolve(rules, host, port).await,
        (false, Some(network)) => {
            let ask_here = !matches!(plan, Plan::Intercept { .. });
            decide_network(rules, network, host, port, what, ask_here).await
        }
        (false, None) => decide(rules, host, port).await,
    };
    let addr = match addr {
        Ok(addr) => addr,
        Err(why) => {
            respond(&mut client, 403, &why).await;
            return record(refused(target, why));
        }
    };
    let upstream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            let why = format!("connecting to {addr} failed: {e}");
            respond(&mut client, 502, &why).await;
            return record(refused(target, why));
        }
        Err(_) => {
            let why = format!("connecting to {addr} timed out");
            respond(&mut client, 504, &why).await;
            return record(refused(target, why));
        }
    };
    let detail = match &plan {
        Plan::Tunnel { .. } => format!("CONNECT via {addr}"),
        Plan::Intercept { .. } => format!("CONNECT via {addr} (HTTPS inspected)"),
        Plan::Forward { what, .. } => format!("{what} via {addr}"),
    };
    let under = rule_name(rules, host).unwrap_or_default();
    record(EgressEvent {
        target,
        allowed: true,
        detail,
    });
    let host = host.clone();
    let relayed = match plan {
        Plan::Tunnel { .. } => tunnel(client, upstream, &request.rest).await,
        Plan::Intercept { http, .. } => match &rules.interception {
            Some(interception) if request.rest.is_empty() => {
                let inspected = intercept::Inspected {
                    host: &host,
                    port,
                    http: &http,
                    under: &under,
                    rules,
                };
                intercept::serve(client, upstream, inspected, interception, &record).await
            }
            // Planned only with an interception; bytes before the tunnel's answer are not TLS.
            _ => Ok((0, 0)),
        },
        Plan::Forward {
            host,
            tls: true,
            head,
            body_len,
            ..
        } => match tls_connect(&host, upstream).await {
            Ok(upstream) => forward(client, upstream, &head, &request.rest, body_len).await,
            Err(why) => {
                respond(&mut client, 502, &why).await;
                Ok((0, 0))
            }
        },
        Plan::Forward { head, body_len, .. } => {
            forward(client, upstream, &head, &request.rest, body_len).await
        }
    };
    let (sent, received) = relayed.unwrap_or((0, 0));
    count(&host, sent, received);
}
