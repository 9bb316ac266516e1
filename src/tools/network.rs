//! The network for one of the agent's command lines, when `[network]` has rules.
//!
//! A line that may use the network — a network program (`policy/network.toml`, marked by the
//! checker) or code the policy cannot read — runs in a host jail of its own whose only way out
//! is warden's egress proxy (`egress::jailed`, the same namespace and proxy as `warden exec`),
//! opened for the line and closed when it ends. Every other line runs in the session's
//! sandbox, which has no network at all. Per line rather than per session: the proxy's
//! decisions and bytes belong to one tool call (its result and its audit row), an `ask` rule
//! is put to the person through that call's approver, and nothing outlives the call.
//!
//! In a run that read untrusted content, such a line asks first, showing every host it may
//! reach, unless each of them is `allow` by the user's own `[network.hosts]` rule — the rule
//! `web_fetch` follows (a host the user allowed is the user's word; a preset is not).

use super::approval::{Approval, ApprovalRequest};
use super::ToolContext;
use crate::egress::jailed::{self, JailedNetwork, NetworkReport};
use crate::egress::network::{NetworkAsk, NetworkAsker, NetworkConfig, NetworkRules};
use crate::policy::Script;
use crate::sandbox::pool::SandboxPool;
use crate::sandbox::{Sandbox, SandboxError};
use crate::secret::Secret;
use crate::taint::Taint;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// `[network]` as the agent's bash tool uses it.
pub struct CommandNetwork {
    config: NetworkConfig,
    rules: NetworkRules,
    /// warden's secret store (`[skills.secrets]`), for `[network.secrets]`.
    secrets: BTreeMap<String, Secret>,
}

/// The sandbox one line runs in, and its network when it has one.
pub struct Opened {
    pub sandbox: Arc<dyn Sandbox>,
    pub network: Option<JailedNetwork>,
    /// Why a line that may use the network runs without it (Docker, no namespaces here).
    pub unavailable: Option<String>,
}

impl CommandNetwork {
    /// `None` when `[network]` has no rules (no line gets any network).
    pub fn new(
        config: NetworkConfig,
        secrets: BTreeMap<String, Secret>,
    ) -> Result<Option<CommandNetwork>, String> {
        if !config.has_rules() {
            return Ok(None);
        }
        let rules = NetworkRules::parse(&config)?;
        Ok(Some(CommandNetwork {
            config,
            rules,
            secrets,
        }))
    }

    /// The variables a line's jail holds for `[network.secrets]`, with their placeholders:
    /// what the checker expands `$NAME` to (`Checker::set_jail_variables`).
    pub fn jail_variables(&self) -> Vec<(String, String)> {
        self.config.jail_variables()
    }

    /// Why `script` must be approved before it runs in a run tainted as `taint`, or `None`.
    pub fn why_ask(&self, script: &Script, taint: &Taint) -> Option<String> {
        if !script.may_use_network() || self.rules.all_allowed_by_user() {
            return None;
        }
        let why = taint.why()?;
        Some(format!(
            "{why}, and this line may use the network through warden's proxy, reaching: {}. In \
             such a run only hosts your own [network.hosts] rules allow go without asking",
            self.rules.reachable().join(", ")
        ))
    }

    /// The sandbox for `script`: a jail of its own with the proxy when the line may use the
    /// network, else the session's. Where no network can be given, the session's, saying why.
    pub async fn open(
        &self,
        sandboxes: &SandboxPool,
        script: &Script,
        ctx: &ToolContext,
    ) -> Result<Opened, SandboxError> {
        let without = |unavailable: Option<String>| async move {
            Ok(Opened {
                sandbox: sandboxes.get(&ctx.session).await?,
                network: None,
                unavailable,
            })
        };
        if !script.may_use_network() {
            return without(None).await;
        }
        // The network first: where it cannot be opened the line runs in the session's
        // sandbox, and no jail or container of its own is built for nothing.
        let mut spec = sandboxes.spec();
        let secret = |name: &str| crate::secret::stored_secret(&self.secrets, name);
        match jailed::open(
            &self.config,
            sandboxes.backend(),
            asker(ctx),
            &secret,
            &mut spec,
        ) {
            Ok(Some(network)) => Ok(Opened {
                sandbox: sandboxes.own(&ctx.session, spec).await?,
                network: Some(network),
                unavailable: None,
            }),
            Ok(None) => without(None).await,
            Err(why) => without(Some(why)).await,
        }
    }
}

/// Who answers `ask` rules while the line runs: the run's approver, once per host and method
/// for the line (a package manager makes many requests); no answer is a refusal.
fn asker(ctx: &ToolContext) -> NetworkAsker {
    let approver = ctx.approver.clone();
    let session = ctx.session.clone();
    let tainted = ctx.taint.why();
    let answered: Arc<tokio::sync::Mutex<HashMap<(String, String), bool>>> = Arc::default();
    NetworkAsker::new(move |request: NetworkAsk| {
        let approver = approver.clone();
        let session = session.clone();
        let tainted = tainted.clone();
        let answered = answered.clone();
        Box::pin(async move {
            // Held while asking: the line's other requests to the host wait for this answer.
            let mut answered = answered.lock().await;
            let key = (request.host.clone(), request.method.clone());
            if let Some(yes) = answered.get(&key) {
                return *yes;
            }
            let mut reason = request.describe();
            if let Some(why) = &tainted {
                reason.push_str(&format!(" ({why})"));
            }
            let approval = ApprovalRequest {
                session,
                tool: "bash".into(),
                command: shown(&request),
                reason,
                always: None,
                detail: None,
            };
            let yes = matches!(approver.approve(&approval).await, Approval::Approved);
            answered.insert(key, yes);
            yes
        })
    })
}

/// What an approval shows of one request: method, host and path.
fn shown(request: &NetworkAsk) -> String {
    match request.method.as_str() {
        "CONNECT" => format!(
            "CONNECT {}:{} (HTTPS: the method and path inside cannot be seen)",
            request.host, request.port
        ),
        method => format!(
            "{method} http://{}:{}{}\nhost: {}\npath: {}",
            request.host, request.port, request.path, request.host, request.path
        ),
    }
}

/// The lines a tool result ends with: each refusal (with the config key to change), the bytes
/// by host, and what went around the proxy.
pub fn result_lines(report: &NetworkReport) -> String {
    report
        .lines()
        .into_iter()
        .map(|line| format!("[{line}]\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::approval::Recording;

    fn request(host: &str, method: &str, path: &str) -> NetworkAsk {
        NetworkAsk {
            host: host.into(),
            port: 80,
            method: method.into(),
            path: path.into(),
            rule: format!("[network.hosts] \"{host}\" = \"ask\""),
        }
    }

    #[tokio::test]
    async fn an_ask_goes_to_the_approver_once_per_host_and_method() {
        for approve in [true, false] {
            let recording = Recording::answering(approve);
            let mut ctx = ToolContext::detached("telegram:1");
            ctx.approver = recording.clone();
            ctx.taint.add("web_fetch http://page.test/");
            let asker = asker(&ctx);
            assert_eq!(asker.ask(request("a.test", "GET", "/x")).await, approve);
            assert_eq!(asker.ask(request("a.test", "GET", "/y")).await, approve);
            assert_eq!(asker.ask(request("a.test", "POST", "/y")).await, approve);
            let asked = recording.asked.lock().unwrap().clone();
            assert_eq!(asked.len(), 2, "GET once, POST once");
            assert_eq!(asked[0].session, "telegram:1");
            assert!(asked[0].command.starts_with("GET http://a.test:80/x"));
            assert!(asked[0].reason.contains("\"a.test\" = \"ask\""));
            assert!(asked[0].reason.contains("web_fetch http://page.test/"));
            assert!(
                asked[0].always.is_none(),
                "no standing approval for the network"
            );
        }
        // Nobody to ask: refused.
        let ctx = ToolContext::detached("run");
        assert!(!asker(&ctx).ask(request("a.test", "GET", "/")).await);
    }

    #[test]
    fn only_a_tainted_line_that_may_use_the_network_asks_unless_the_user_allowed_every_host() {
        let rules = |text: &str| {
            CommandNetwork::new(toml::from_str(text).unwrap(), BTreeMap::new())
                .unwrap()
                .unwrap()
        };
        let preset = rules("presets = [\"pypi\"]\n[hosts]\n\"a.test\" = \"allow\"");
        let mine = rules("[hosts]\n\"a.test\" = \"allow\"\n\"b.test\" = \"deny\"");
        let policy = Arc::new(
            crate::policy::Policy::load_with_network(
                None,
                &toml::from_str("presets = [\"pypi\"]").unwrap(),
            )
            .unwrap(),
        );
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let mut checker = policy.checker(&ws, &[], &ws).unwrap();
        let curl = checker.check("curl -sS http://a.test/").script;
        let ls = checker.check("ls").script;
        let tainted = Taint::new();
        tainted.add("attachments/report.pdf");
        assert_eq!(preset.why_ask(&curl, &Taint::new()), None, "untainted");
        assert_eq!(preset.why_ask(&ls, &tainted), None, "no network");
        let why = preset.why_ask(&curl, &tainted).unwrap();
        assert!(why.contains("attachments/report.pdf"), "{why}");
        assert!(
            why.contains("pypi.org (allow)") && why.contains("a.test (allow)"),
            "{why}"
        );
        assert_eq!(
            mine.why_ask(&curl, &tainted),
            None,
            "only the user's own allow rules"
        );
        assert!(CommandNetwork::new(Default::default(), BTreeMap::new())
            .unwrap()
            .is_none());
    }
}
