//! `[http]`: the HTTP control API's listener and token (see [`super`]).
//!
//! A listener on anything but loopback is reachable by other machines: it needs TLS
//! (`tls_cert` + `tls_key`, PEM files) or an explicit `allow_plain_http = true`, and the token
//! is required in every case — `warden serve` refuses to start without one.

use crate::durations::MAX_SECONDS;
use crate::secret::Secret;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Where `warden serve` listens when neither `--listen` nor `[http] listen` says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// The address to listen on (`HOST:PORT`). `warden serve` uses [`DEFAULT_LISTEN`] without it.
    pub listen: Option<String>,
    /// The Bearer token every request but `/healthz` must carry; `WARDEN_HTTP_TOKEN` in the
    /// environment also sets it.
    pub token: Secret,
    /// A PEM certificate chain and its private key: the listener speaks HTTPS (rustls).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Listen without TLS on an address other machines reach (the token then crosses the
    /// network in the clear: only behind a TLS-terminating proxy you trust).
    pub allow_plain_http: bool,
    /// The largest request body read, in bytes; a larger one is refused with 413.
    pub max_body_bytes: usize,
    /// Seconds an approval request waits for an answer; no answer means deny.
    pub approval_timeout_secs: u64,
    /// Messages that may wait in one thread behind the running one; more get 429.
    pub queue_depth: usize,
    /// Failed sign-ins (a missing or wrong token) allowed per client address per minute;
    /// more are refused with 429 before the token is even compared.
    pub max_failed_auth_per_minute: u32,
    /// Seconds a shutdown waits for running agents before recording them as interrupted.
    pub shutdown_grace_secs: u64,
    /// `[http.hooks.NAME]`: webhooks at `POST /v1/hooks/NAME`.
    pub hooks: BTreeMap<String, HookConfig>,
}

/// One webhook: its payload starts a run on its thread as untrusted content.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HookConfig {
    /// The HMAC-SHA256 key the sender signs each body with (`X-Warden-Signature-256:
    /// sha256=HEX`, or GitHub's `X-Hub-Signature-256`).
    pub secret: Secret,
    /// The thread its runs go to (default `hook:NAME`).
    pub thread: Option<String>,
    /// What the agent is asked to do with a delivery (the owner's words; the payload follows
    /// as untrusted data).
    pub prompt: Option<String>,
}

impl HookConfig {
    pub fn thread(&self, name: &str) -> String {
        self.thread
            .clone()
            .unwrap_or_else(|| format!("hook:{name}"))
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: None,
            token: Secret::default(),
            tls_cert: None,
            tls_key: None,
            allow_plain_http: false,
            max_body_bytes: 64 * 1024,
            approval_timeout_secs: 600,
            queue_depth: 20,
            max_failed_auth_per_minute: 10,
            shutdown_grace_secs: 20,
            hooks: BTreeMap::new(),
        }
    }
}

/// The shortest token accepted: a guessable token would make the API anyone's.
pub const MIN_TOKEN_CHARS: usize = 16;

/// How the listener serves: plain HTTP or HTTPS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Plain,
    Tls { cert: PathBuf, key: PathBuf },
}

/// What to listen on, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenPlan {
    pub addr: SocketAddr,
    pub transport: Transport,
}

/// The section's own values (the environment may still set the token; see [`plan`]).
pub fn check(config: &HttpConfig) -> Result<(), String> {
    for (key, value) in [
        ("http.approval_timeout_secs", config.approval_timeout_secs),
        ("http.shutdown_grace_secs", config.shutdown_grace_secs),
    ] {
        if value > MAX_SECONDS {
            return Err(format!(
                "{key} = {value} is longer than warden allows ({MAX_SECONDS} seconds, 30 days)"
            ));
        }
    }
    if config.max_body_bytes < 1024 {
        return Err("http.max_body_bytes must be at least 1024".into());
    }
    if config.queue_depth == 0 {
        return Err("http.queue_depth must be at least 1".into());
    }
    if config.tls_cert.is_some() != config.tls_key.is_some() {
        return Err("http.tls_cert and http.tls_key go together: set both or neither".into());
    }
    if let Some(listen) = &config.listen {
        parse_addr(listen)?;
    }
    for (name, hook) in &config.hooks {
        super::threads::check_name(name)
            .map_err(|why| format!("http.hooks.{name:?}: the name: {why}"))?;
        super::threads::check_name(&hook.thread(name))
            .map_err(|why| format!("http.hooks.{name}.thread: {why}"))?;
        if hook.secret.expose().chars().count() < MIN_TOKEN_CHARS {
            return Err(format!(
                "http.hooks.{name}.secret must have at least {MIN_TOKEN_CHARS} characters \
                 (e.g. `openssl rand -hex 32`)"
            ));
        }
    }
    Ok(())
}

fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("{text:?} is not an address to listen on: write HOST:PORT, e.g. {DEFAULT_LISTEN}")
    })
}

/// Everything the listener needs, or the reason it must not start: no token (or a short one),
/// or a non-loopback address with neither TLS nor `allow_plain_http`. `listen` (the flag)
/// wins over the config's.
pub fn plan(config: &HttpConfig, listen: Option<&str>) -> Result<ListenPlan, String> {
    check(config)?;
    let token = config.token.expose();
    if token.is_empty() {
        return Err(
            "no HTTP API token: set WARDEN_HTTP_TOKEN (or http.token in ~/.warden/config.toml) \
             to a long random string, e.g. the output of `openssl rand -hex 32`"
                .into(),
        );
    }
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(format!(
            "the HTTP API token is too short: use at least {MIN_TOKEN_CHARS} characters \
             (e.g. `openssl rand -hex 32`)"
        ));
    }
    let text = listen
        .or(config.listen.as_deref())
        .unwrap_or(DEFAULT_LISTEN);
    let addr = parse_addr(text)?;
    let transport = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Transport::Tls {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => Transport::Plain,
    };
    if transport == Transport::Plain && !addr.ip().is_loopback() && !config.allow_plain_http {
        return Err(format!(
            "{addr} is reachable from other machines, and plain HTTP would send the token in \
             the clear: set http.tls_cert and http.tls_key (PEM files), or listen on \
             127.0.0.1, or set http.allow_plain_http = true if a TLS proxy you trust is in front"
        ));
    }
    Ok(ListenPlan { addr, transport })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_token() -> HttpConfig {
        HttpConfig {
            token: Secret::new("0123456789abcdef0123"),
            ..HttpConfig::default()
        }
    }

    #[test]
    fn loopback_by_default_and_a_token_is_required() {
        let plan = plan(&with_token(), None).unwrap();
        assert_eq!(plan.addr.to_string(), DEFAULT_LISTEN);
        assert_eq!(plan.transport, Transport::Plain);
        let err = super::plan(&HttpConfig::default(), None).unwrap_err();
        assert!(err.contains("WARDEN_HTTP_TOKEN"), "{err}");
        let short = HttpConfig {
            token: Secret::new("short"),
            ..HttpConfig::default()
        };
        assert!(super::plan(&short, None).unwrap_err().contains("too short"));
    }

    #[test]
    fn a_public_address_needs_tls_or_an_explicit_plain_http() {
        let err = plan(&with_token(), Some("0.0.0.0:8787")).unwrap_err();
        assert!(
            err.contains("tls_cert") && err.contains("allow_plain_http"),
            "{err}"
        );
        let plain = HttpConfig {
            allow_plain_http: true,
            ..with_token()
        };
        assert_eq!(
            plan(&plain, Some("0.0.0.0:8787")).unwrap().transport,
            Transport::Plain
        );
        let tls = HttpConfig {
            tls_cert: Some("/c.pem".into()),
            tls_key: Some("/k.pem".into()),
            ..with_token()
        };
        assert!(matches!(
            plan(&tls, Some("[::]:443")).unwrap().transport,
            Transport::Tls { .. }
        ));
        assert!(plan(&with_token(), Some("[::1]:9000")).is_ok());
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let half = HttpConfig {
            tls_cert: Some("/c.pem".into()),
            ..with_token()
        };
        assert!(check(&half).unwrap_err().contains("go together"));
        let addr = HttpConfig {
            listen: Some("localhost".into()),
            ..with_token()
        };
        assert!(check(&addr).unwrap_err().contains("HOST:PORT"));
        assert!(plan(&with_token(), Some("nope")).is_err());
    }
}
