//! A jailed command's way out: when `[network]` has rules, the jail gets a network namespace
//! of its own (`sandbox::host::netns`, the same one skills use) where the only listening
//! socket is warden's egress proxy (`super::proxy`, the same one skills use), and the proxy asks
//! `[network]` (`super::network`) about every request. The jail's environment names the proxy,
//! with the run's token in the URL's userinfo; DNS is resolved by warden after the decision.
//!
//! A Docker container keeps its own namespace (network none): the proxy then listens on
//! loopback in warden's namespace and the Docker backend forwards to it from a listener it puts
//! in the container's namespace (`sandbox::docker::egress`).
//!
//! Each run makes its own CA (`super::proxy::intercept`): its key stays in warden's memory, its
//! certificate goes into a folder of warden's the jail may read, named by the variables TLS
//! clients read (`SSL_CERT_FILE`…, the system's roots included). `[network.secrets]` variables
//! hold placeholders the proxy swaps for the real values toward their hosts.
//!
//! Where no such namespace can be made (warden not root and no unprivileged user namespaces),
//! the jail shares warden's network and warden makes each of its connects, to the proxy only
//! (`super::confinement`, `[network] confinement`). Where neither works the network stays off:
//! the jail keeps its seccomp filter without network sockets, and the caller says why.

use super::confinement::Confined;
use super::jail_trust::TrustFiles;
use super::network::{NetworkAsker, NetworkConfig, NetworkRules};
use super::network_secrets::BoundSecret;
use super::proxy::intercept::Interception;
use super::proxy::{new_token, EgressEvent, EgressProxy, EgressRules, Traffic};
use crate::sandbox::host::connect::RefusedConnects;
use crate::sandbox::host::netns::Bypasses;
use crate::sandbox::{Backend, JailSpec};
use crate::secret::Secret;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// The proxy and namespace of one run. Must be started inside a tokio runtime.
pub struct JailedNetwork {
    proxy: EgressProxy,
    confined: Confined,
    token: String,
    rules: Arc<NetworkRules>,
    /// The run's CA and secret placeholders (`super::proxy::intercept`).
    interception: Arc<Interception>,
    /// The CA certificate, alone and with the system's roots, where the jail reads them.
    trust: TrustFiles,
}

/// What a run's network did, for its report and audit row.
#[derive(Clone, Debug, Default)]
pub struct NetworkReport {
    pub events: Vec<EgressEvent>,
    /// Bytes by host.
    pub traffic: BTreeMap<String, Traffic>,
    /// Connections that went around the proxy (refused or unroutable, counted by the kernel).
    pub bypasses: Option<Bypasses>,
    /// Connects warden's supervisor refused (a jail without a namespace of its own).
    pub refused_connects: Option<RefusedConnects>,
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
        if let Some(what) = self
            .refused_connects
            .as_ref()
            .and_then(RefusedConnects::describe)
        {
            lines.push(what);
        }
        lines
    }

    /// For the run's audit row: every decision, the bytes by host, what went around the proxy.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "events": self.events,
            "traffic": self.traffic,
            "bypasses": self.bypasses.map(|b| serde_json::json!({
                "refused": b.refused,
                "unroutable": b.unroutable,
            })),
            "refused_connects": self.refused_connects.as_ref().map(|r| serde_json::json!({
                "count": r.count,
                "first": r.first,
            })),
        })
    }
}

/// Open the jail's network for one run when `[network]` has rules (`Ok(None)` when it has
/// none): the proxy and the confinement that keeps the jail to it (for a Docker container,
/// its own namespace), and `spec` pointed at them; an error says why none can be made.
pub fn open(
    config: &NetworkConfig,
    backend: Backend,
    asker: NetworkAsker,
    secret: &dyn Fn(&str) -> Option<Secret>,
    spec: &mut JailSpec,
) -> Result<Option<JailedNetwork>, String> {
    let jailed = JailedNetwork::start(config, backend, Some(asker), secret)?;
    if let Some(jailed) = &jailed {
        jailed.apply(spec);
    }
    Ok(jailed)
}

/// Why a run has no network although `[network]` has rules.
pub fn unavailable_reason(why: &str) -> String {
    format!(
        "[network] has rules, but jailed commands get no network here: {why}. warden lets a \
         jail reach only its egress proxy through a network namespace of the jail's own (warden \
         run as root, or a kernel that allows unprivileged user namespaces) or by making the \
         jail's connects itself (seccomp user notification and pidfd_getfd, Linux 5.6 or \
         newer; [network] confinement picks one); network programs run without network (see \
         `warden doctor`)"
    )
}

impl JailedNetwork {
    /// `None` when `[network]` has no rules (the jail keeps no network at all).
    /// `secret` is warden's secret store (`crate::secret::stored_secret`), for
    /// `[network.secrets]`. On the host the jail is confined as `[network] confinement` says;
    /// for a Docker container the proxy listens on loopback in warden's own namespace, which
    /// only warden's forwarder in the container's namespace reaches for the container (the
    /// per-run token in the proxy URL keeps other local processes out).
    pub fn start(
        config: &NetworkConfig,
        backend: Backend,
        asker: Option<NetworkAsker>,
        secret: &dyn Fn(&str) -> Option<Secret>,
    ) -> Result<Option<JailedNetwork>, String> {
        if !config.has_rules() {
            return Ok(None);
        }
        let rules = Arc::new(NetworkRules::parse(config)?);
        let secrets = config
            .secrets
            .iter()
            .map(|(name, binding)| BoundSecret::resolve(name, binding, secret))
            .collect::<Result<Vec<_>, _>>()?;
        let interception = Arc::new(Interception::new(secrets, config.upstream_ca.as_deref())?);
        let trust = TrustFiles::write(interception.ca_pem())?;
        let (confined, listener) = match backend {
            Backend::Host => {
                Confined::open(config.confinement).map_err(|why| unavailable_reason(&why))?
            }
            Backend::Docker => Confined::for_container()?,
        };
        let token = new_token();
        let proxy = EgressProxy::serve_on(
            listener,
            EgressRules {
                token: token.clone(),
                network: Some(rules.clone()),
                asker,
                interception: Some(interception.clone()),
                ..EgressRules::default()
            },
        )
        .map_err(|e| format!("starting the egress proxy failed: {e}"))?;
        Ok(Some(JailedNetwork {
            proxy,
            confined,
            token,
            rules,
            interception,
            trust,
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
        // The run's CA, trusted by the jail's clients so the proxy can look inside HTTPS to
        // hosts with method/path rules or secrets; the real roots stay trusted alongside.
        let bundle = self.trust.bundle().display().to_string();
        for name in super::jail_trust::BUNDLE_VARIABLES {
            spec.env.push((name.into(), bundle.clone()));
        }
        spec.env.push((
            super::jail_trust::EXTRA_CA_VARIABLE.into(),
            self.trust.ca().display().to_string(),
        ));
        spec.read_roots.push(self.trust.dir().to_path_buf());
        // Secrets: the variable holds a placeholder; the proxy swaps in the value.
        for (name, placeholder) in self.interception.placeholders() {
            spec.env.push((name.to_string(), placeholder.to_string()));
        }
        spec.egress_proxy = Some(addr);
        self.confined.apply(spec);
    }

    /// Stop the proxy: every decision, the bytes by host, and what went around it.
    pub async fn close(self) -> NetworkReport {
        let (events, traffic) = self.proxy.finish().await;
        drop(self.trust);
        let mut confined = self.confined;
        let (bypasses, refused_connects) = confined.bypasses();
        NetworkReport {
            events,
            traffic,
            bypasses,
            refused_connects,
        }
    }
}
