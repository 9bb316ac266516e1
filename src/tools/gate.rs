//! The gate every outgoing request of warden's own process passes: the host rule, the URL's
//! provenance, the approver, and the audit row — in that order, before anything is resolved.

use super::approval::{Always, Approval, ApprovalRequest};
use super::ToolContext;
use crate::audit::{self, AuditDecision, AuditEntry};
use crate::db::Database;
use crate::egress::grants::Grants;
use crate::egress::provenance::{decode, Standing};
use crate::egress::rules::{normalize_host, HostRules, Matched, Rule};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use url::Url;

/// One URL about to be requested.
pub struct Hop<'a> {
    /// The tool asking (`web_fetch`).
    pub tool: &'a str,
    pub url: &'a Url,
    /// 0 for the URL the model asked for, then one per redirect.
    pub index: usize,
    pub standing: &'a Standing,
    /// For a redirect: the URL that redirected here (it was admitted).
    pub from: Option<&'a Url>,
}

/// The request may be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// By a rule or the URL's provenance.
    Allowed,
    /// The user approved it.
    Approved,
}

/// The request may not be made: a `deny` rule (`Deny`) or an `ask` nobody approved
/// (`Rejected`); `reason` is for the model and the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub decision: AuditDecision,
    pub reason: String,
}

enum Verdict {
    Pass(String),
    Ask(String),
    Refuse(String),
}

pub struct Gate {
    rules: HostRules,
    /// Hosts a chat allowed with "Always for this host".
    grants: Grants,
    db: Arc<Database>,
}

impl Gate {
    pub fn new(rules: HostRules, db: Arc<Database>) -> Gate {
        Gate {
            rules,
            grants: Grants::new(db.clone()),
            db,
        }
    }

    /// The config's rule for `host`, else the rule this session stored, if any.
    fn rule_for(&self, session: &str, host: &str) -> Option<Matched> {
        if let Some(matched) = self.rules.lookup(host) {
            return Some(matched);
        }
        match self.grants.allows(session, host) {
            Ok(true) => Some(Matched {
                key: host.to_string(),
                rule: Rule::Allow,
                origin: "the rule stored for this chat",
            }),
            Ok(false) => None,
            Err(e) => {
                tracing::warn!("reading the stored egress rules: {e}");
                None
            }
        }
    }

    pub fn rules(&self) -> &HostRules {
        &self.rules
    }

    /// Decide one hop; ask the run's approver when the decision is `ask`. The decision is
    /// audited before this returns; an audit failure refuses.
    pub async fn admit(&self, hop: &Hop<'_>, ctx: &ToolContext) -> Result<Admission, Refusal> {
        let started = Instant::now();
        let host = normalize_host(hop.url.host_str().unwrap_or(""));
        let matched = self.rule_for(&ctx.session, &host);
        let verdict = self.verdict(hop, &host, matched.as_ref(), ctx);
        let (outcome, reason) = match verdict {
            Verdict::Pass(why) => (Ok(Admission::Allowed), why),
            Verdict::Refuse(why) => (
                Err(AuditDecision::Deny),
                format!("{} is not fetched: {why}", hop.url),
            ),
            Verdict::Ask(why) => {
                let request = ApprovalRequest {
                    session: ctx.session.clone(),
                    tool: hop.tool.to_string(),
                    command: describe_request(hop.url),
                    reason: why.clone(),
                    always: matched.is_none().then(|| Always::Host(host.clone())),
                    detail: None,
                };
                match ctx.approver.approve(&request).await {
                    Approval::Approved => (Ok(Admission::Approved), format!("approved: {why}")),
                    Approval::Denied(no) => (
                        Err(AuditDecision::Rejected),
                        format!(
                            "{} needs approval ({why}) and was not approved: {no}. To fetch \
                             from {host} without asking, add to warden's config: \
                             [egress.hosts] \"{host}\" = \"allow\"",
                            hop.url
                        ),
                    ),
                }
            }
        };
        let decision = match outcome {
            Ok(Admission::Allowed) => AuditDecision::Allow,
            Ok(Admission::Approved) => AuditDecision::Approved,
            Err(d) => d,
        };
        let entry = AuditEntry {
            session: ctx.audit_session().to_string(),
            tool: "egress".into(),
            input: json!({
                "tool": hop.tool,
                "url": hop.url.as_str(),
                "host": host,
                "hop": hop.index,
                "rule": matched.as_ref().map(Matched::describe),
                "provenance": hop.standing.label(),
            })
            .to_string(),
            decision,
            reason: reason.clone(),
            exit_code: None,
            duration_ms: started.elapsed().as_millis() as u64,
            network: None,
        };
        if let Err(e) = audit::record(&self.db, &entry) {
            tracing::error!("audit log write failed: {e}");
            return Err(Refusal {
                decision: AuditDecision::Error,
                reason: format!("the audit log could not be written ({e}); not fetched"),
            });
        }
        outcome.map_err(|decision| Refusal { decision, reason })
    }

    fn verdict(
        &self,
        hop: &Hop<'_>,
        host: &str,
        matched: Option<&Matched>,
        ctx: &ToolContext,
    ) -> Verdict {
        let same_host = hop
            .from
            .is_some_and(|from| normalize_host(from.host_str().unwrap_or("")) == host);
        let tainted = ctx
            .taint
            .why()
            .map(|why| format!(" ({why})"))
            .unwrap_or_default();
        match matched {
            Some(m) if m.rule == Rule::Deny => {
                return Verdict::Refuse(format!("{host} is refused by {}", m.describe()))
            }
            Some(m) if m.rule == Rule::Allow => {
                return Verdict::Pass(format!("allowed by {}", m.describe()))
            }
            _ => {}
        }
        if same_host {
            return Verdict::Pass(format!(
                "a redirect within {host}, which this fetch was already admitted to"
            ));
        }
        if let Some(m) = matched {
            return Verdict::Ask(format!(
                "{} asks before every fetch from {host}{tainted}",
                m.describe()
            ));
        }
        match hop.standing {
            Standing::Known(source) => Verdict::Pass(format!("no rule for {host}; {source}")),
            Standing::Composed => {
                let redirect = match hop.from {
                    Some(from) => format!(
                        "; {from} redirected here, and the model composed the URL that led to it"
                    ),
                    None => String::new(),
                };
                Verdict::Ask(format!(
                    "the model composed this URL; it did not appear in your messages or in \
                     fetched pages{redirect}{tainted}"
                ))
            }
        }
    }
}

/// What an approval shows: the exact URL, then its parts decoded so that data hidden in
/// percent-encoding is visible (control and invisible characters escaped).
pub fn describe_request(url: &Url) -> String {
    let mut out = format!("GET {url}\nhost: {}", url.host_str().unwrap_or(""));
    let path = url.path();
    let decoded_path = visible(&decode(path));
    if decoded_path != path {
        out.push_str(&format!("\npath (decoded): {decoded_path}"));
    }
    if url.query().is_some_and(|q| !q.is_empty()) {
        out.push_str("\nquery (decoded):");
        for (key, value) in url.query_pairs() {
            out.push_str(&format!("\n  {} = {}", visible(&key), visible(&value)));
        }
    }
    out
}

/// Control characters, bidi overrides and zero-width characters as escapes, so one line of an
/// approval cannot pose as several or hide text.
fn visible(text: &str) -> String {
    text.chars()
        .map(|c| {
            let hidden = c.is_control()
                || matches!(c as u32, 0x200B..=0x200F | 0x202A..=0x202E | 0x2066..=0x2069 | 0xFEFF);
            if hidden {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::provenance::Source;
    use crate::tools::approval::{NoApprover, Recording};

    fn gate(pairs: &[(&str, &str)]) -> Gate {
        let hosts = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Gate::new(
            HostRules::parse(&hosts).unwrap(),
            crate::schema::open_in_memory().unwrap(),
        )
    }

    fn ctx(approver: Arc<dyn crate::tools::approval::Approver>) -> ToolContext {
        let mut ctx = ToolContext::detached("test");
        ctx.approver = approver;
        ctx
    }

    async fn admit(
        gate: &Gate,
        ctx: &ToolContext,
        url: &str,
        standing: Standing,
        from: Option<&str>,
    ) -> Result<Admission, Refusal> {
        let url = Url::parse(url).unwrap();
        let from = from.map(|f| Url::parse(f).unwrap());
        gate.admit(
            &Hop {
                tool: "web_fetch",
                url: &url,
                index: usize::from(from.is_some()),
                standing: &standing,
                from: from.as_ref(),
            },
            ctx,
        )
        .await
    }

    #[tokio::test]
    async fn rules_then_provenance() {
        let g = gate(&[
            ("docs.rs", "allow"),
            ("*.ask.example", "ask"),
            ("pastebin.com", "deny"),
        ]);
        let nobody = ctx(Arc::new(NoApprover));
        let user = || Standing::Known(Source::User);
        // allow: even composed.
        assert_eq!(
            admit(
                &g,
                &nobody,
                "https://docs.rs/x?q=1",
                Standing::Composed,
                None
            )
            .await,
            Ok(Admission::Allowed)
        );
        // deny: even from the user.
        let refused = admit(&g, &nobody, "https://pastebin.com/raw/1", user(), None)
            .await
            .unwrap_err();
        assert_eq!(refused.decision, AuditDecision::Deny);
        assert!(
            refused.reason.contains("\"pastebin.com\" = \"deny\""),
            "{refused:?}"
        );
        // ask: even from the user; with nobody to ask the reason names the key.
        let refused = admit(&g, &nobody, "https://a.ask.example/", user(), None)
            .await
            .unwrap_err();
        assert_eq!(refused.decision, AuditDecision::Rejected);
        assert!(
            refused
                .reason
                .contains("[egress.hosts] \"a.ask.example\" = \"allow\""),
            "{refused:?}"
        );
        // no rule: known passes, composed asks.
        assert_eq!(
            admit(&g, &nobody, "https://other.example/", user(), None).await,
            Ok(Admission::Allowed)
        );
        let refused = admit(
            &g,
            &nobody,
            "https://other.example/?d=x",
            Standing::Composed,
            None,
        )
        .await
        .unwrap_err();
        assert!(
            refused.reason.contains("the model composed this URL"),
            "{refused:?}"
        );
        assert!(refused
            .reason
            .contains("[egress.hosts] \"other.example\" = \"allow\""));

        // Every decision was audited.
        let rows = audit::recent(&g.db, 10).unwrap();
        let decisions: Vec<&str> = rows.iter().map(|r| r.decision.as_str()).collect();
        assert_eq!(
            decisions,
            ["allow", "deny", "rejected", "allow", "rejected"]
        );
        assert!(rows.iter().all(|r| r.tool == "egress"));
        assert!(
            rows[2]
                .input
                .contains("\"rule\":\"[egress.hosts] \\\"*.ask.example\\\" = \\\"ask\\\"\""),
            "{}",
            rows[2].input
        );
        assert!(
            rows[4].input.contains("composed by the model"),
            "{}",
            rows[4].input
        );
    }

    #[tokio::test]
    async fn approvals_show_the_decoded_url_and_the_taint() {
        let g = gate(&[]);
        let recording = Recording::answering(true);
        let ctx = ctx(recording.clone());
        ctx.taint.add("web_fetch https://page.example/");
        let url = "https://x.example/p%20q?d=my%20secret&k%0A=v+w";
        assert_eq!(
            admit(&g, &ctx, url, Standing::Composed, None).await,
            Ok(Admission::Approved)
        );
        let asked = recording.asked.lock().unwrap().pop().unwrap();
        assert!(
            asked.command.starts_with(&format!("GET {url}\n")),
            "{}",
            asked.command
        );
        assert!(
            asked.command.contains("path (decoded): /p q"),
            "{}",
            asked.command
        );
        assert!(
            asked.command.contains("\n  d = my secret"),
            "{}",
            asked.command
        );
        assert!(
            asked.command.contains("\n  k\\u{a} = v w"),
            "{}",
            asked.command
        );
        assert!(asked.reason.contains("the model composed this URL"));
        assert!(
            asked
                .reason
                .contains("this run read untrusted content from: web_fetch https://page.example/"),
            "{}",
            asked.reason
        );
        let rows = audit::recent(&g.db, 1).unwrap();
        assert_eq!(rows[0].decision, "approved");
    }

    #[tokio::test]
    async fn redirects() {
        let g = gate(&[("allowed.example", "allow")]);
        let nobody = ctx(Arc::new(NoApprover));
        // Within the admitted host: passes whatever the URL.
        assert_eq!(
            admit(
                &g,
                &nobody,
                "https://other.example/b?x",
                Standing::Composed,
                Some("https://other.example/a")
            )
            .await,
            Ok(Admission::Allowed)
        );
        // From an allowed host to an unlisted one, after a composed URL: asks.
        let refused = admit(
            &g,
            &nobody,
            "https://evil.example/?d=secret",
            Standing::Composed,
            Some("https://allowed.example/r?to=https://evil.example/?d=secret"),
        )
        .await
        .unwrap_err();
        assert!(refused.reason.contains("redirected here"), "{refused:?}");
        // After a known URL: the server chose the target.
        let known = Standing::Known(Source::Redirect("https://allowed.example/r".into()));
        assert_eq!(
            admit(
                &g,
                &nobody,
                "https://evil.example/x",
                known,
                Some("https://allowed.example/r")
            )
            .await,
            Ok(Admission::Allowed)
        );
    }

    #[test]
    fn hidden_characters_are_escaped() {
        let url = Url::parse("https://x.example/?a=%E2%80%AEtxt.exe&b=%0D%0Aforged: yes").unwrap();
        let shown = describe_request(&url);
        assert!(shown.contains("a = \\u{202e}txt.exe"), "{shown}");
        assert!(shown.contains("b = \\u{d}\\u{a}forged: yes"), "{shown}");
        assert_eq!(shown.lines().count(), 5, "{shown}");
    }
}
