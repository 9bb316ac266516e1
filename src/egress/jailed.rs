//! A jailed command's way out: when `[network]` has rules, the jail gets a network namespace
//! of its own (`sandbox::host::netns`, the same one skills use) where the only listening
//! socket is warden's egress proxy (`super::proxy`, the same one skills use), and the proxy asks
//! `[network]` (`super::network`) about every request. The jail's environment names the proxy,
//! with the run's token in the URL's userinfo; DNS is resolved by warden after the decision.
//!
//! Where no such namespace can be made (warden not root and no unprivileged user namespaces),
//! the network stays off: the jail keeps its seccomp filter without network sockets, and the
//! caller says why.

use super::network::{NetworkAsker, NetworkConfig, NetworkRules};
use super::proxy::{new_token, EgressEvent, EgressProxy, EgressRules, Traffic};
use crate::sandbox::host::netns::{Bypasses, JailNetwork};
use crate::sandbox::JailSpec;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// The proxy and namespace of one run. Must be started inside a tokio runtime.
pub struct JailedNetwork {
    proxy: EgressProxy,
    namespace: JailNetwork,
    token: String,
    rules: Arc<NetworkRules>,
}

/// What a run's network did, for its report and audit row.
#[derive(Clone, Debug, Default)]
pub struct NetworkReport {
    pub events: Vec<EgressEvent>,
    /// Bytes by host.
    pub traffic: BTreeMap<String, Traffic>,
    /// Connections that went around the proxy (refused or unroutable, counted by the kernel).
    pub bypasses: Option<Bypasses>,
}

impl NetworkReport {
    /// One line per refusal and per host's traffic.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .events
            .iter()
            .filter(|e| !e.allowed)
            .map(EgressEvent::describe)
            .collect();
        for (host, traffic) in &self.traffic {
            lines.push(format!(
                "network: {host}: {} bytes sent, {} received",
                traffic.sent, traffic.received
            ));
        }
        if let Some(what) = self.bypasses.as_ref().and_then(Bypasses::describe) {
            lines.push(what);
        }
        lines
    }
}

/// Why a run has no network although `[network]` has rules.
pub fn unavailable_reason(why: &str) -> String {
    format!(
        "[network] has rules, but jailed commands get no network here: {why}. warden lets a \
         jail reach only its egress proxy through a network namespace of the jail's own, which \
         needs warden to run as root or the kernel to allow unprivileged user namespaces; \
         network programs run without network (see `warden doctor`)"
    )
}

impl JailedNetwork {
    /// `None` when `[network]` has no rules (the jail keeps no network at all).
    pub fn start(
        config: &NetworkConfig,
        asker: Option<NetworkAsker>,
    ) -> Result<Option<JailedNetwork>, String> {
        if !config.has_rules() {
            return Ok(None);
        }
        let rules = Arc::new(NetworkRules::parse(config)?);
        let mut namespace = JailNetwork::create().map_err(|why| unavailable_reason(&why))?;
        let listener = namespace
            .take_listener()
            .ok_or_else(|| "the proxy's listener is gone".to_string())?;
        let token = new_token();
        let proxy = EgressProxy::serve_on(
            listener,
            EgressRules {
                token: token.clone(),
                network: Some(rules.clone()),
                asker,
                ..EgressRules::default()
            },
        )
        .map_err(|e| format!("starting the egress proxy failed: {e}"))?;
        Ok(Some(JailedNetwork {
            proxy,
            namespace,
            token,
            rules,
        }))
    }

    pub fn proxy_addr(&self) -> SocketAddr {
        self.proxy.addr()
    }

    pub fn rules(&self) -> &NetworkRules {
        &self.rules
    }

    /// Point the jail at the proxy: its namespace, and the proxy variables every HTTP client
    /// reads (`NO_PROXY` empty: nothing goes around it).
    pub fn apply(&self, spec: &mut JailSpec) {
        let addr = self.proxy.addr();
        let url = format!("http://warden:{}@{addr}", self.token);
        for name in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            spec.env.push((name.into(), url.clone()));
        }
        for name in ["NO_PROXY", "no_proxy"] {
            spec.env.push((name.into(), String::new()));
        }
        // git's transports: http and https (through the proxy) besides local paths; the
        // variable beats any protocol.*.allow a repository's config sets.
        spec.env
            .push(("GIT_ALLOW_PROTOCOL".into(), "file:http:https".into()));
        spec.egress_proxy = Some(addr);
        spec.network_namespace = Some(self.namespace.namespace());
        spec.user_namespace = self.namespace.user_namespace();
    }

    /// Stop the proxy: every decision, the bytes by host, and what went around it.
    pub async fn close(self) -> NetworkReport {
        let (events, traffic) = self.proxy.finish().await;
        let mut namespace = self.namespace;
        let bypasses = namespace
            .bypasses()
            .map_err(|why| tracing::warn!(%why, "reading the jail's network counters failed"))
            .ok();
        NetworkReport {
            events,
            traffic,
            bypasses,
        }
    }
}
