//! `ask` at the terminal: the command (escaped: it is the model's text), the policy's reason
//! and any diff, then the answer read through the same input as the prompt. Anything but y/yes
//! — an empty line, Ctrl-C, the end of input — is a no. Where the bash tool offers "always"
//! (the policy's ask alone), the same choices as in Telegram are offered too: h (an hour), d
//! (today) or a (until revoked) approve it and store the commands' shapes for this
//! conversation (`/approvals`, `warden approvals list|rm`).

use super::escape_controls;
use super::input::{Input, Read};
use crate::lasting::Lasting;
use crate::tools::approval::{Always, Approval, ApprovalRequest, Approver};
use crate::tools::approval_rules::ApprovalRules;
use async_trait::async_trait;
use std::sync::Arc;

pub struct TerminalApprover {
    input: Arc<dyn Input>,
    /// Where "always" is stored; `None`: only y/N.
    rules: Option<ApprovalRules>,
}

impl TerminalApprover {
    pub fn new(input: Arc<dyn Input>) -> TerminalApprover {
        TerminalApprover { input, rules: None }
    }

    /// Offer "always here" for 1 hour, today or until revoked, storing it in `rules`.
    pub fn with_rules(mut self, rules: ApprovalRules) -> TerminalApprover {
        self.rules = Some(rules);
        self
    }
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        // The tool says who asks (`bash`, or `bash (by the sub-agent delegate-…)`).
        eprintln!(
            "\n[approval needed: {}] {}",
            request.tool,
            escape_controls(&request.reason)
        );
        for line in request.command.lines() {
            eprintln!("    {}", escape_controls(line));
        }
        if let Some(detail) = &request.detail {
            for line in detail.lines() {
                eprintln!("{}", escape_controls(line));
            }
        }
        let always = match (&request.always, &self.rules) {
            (Some(Always::Commands(shapes)), Some(rules)) if !shapes.is_empty() => {
                Some((shapes, rules))
            }
            _ => None,
        };
        let Some((shapes, rules)) = always else {
            return if self.input.confirm("Run it? [y/N] ").await {
                Approval::Approved
            } else {
                Approval::Denied("denied at the terminal".into())
            };
        };
        let shown: Vec<String> = shapes.iter().map(|(_, s)| escape_controls(s)).collect();
        eprintln!(
            "  \"always here\" would approve from now on in this conversation: {}",
            shown.join(", ")
        );
        let answer = match self
            .input
            .read(
                "Run it? [y] once · always here: [h] 1 hour, [d] today, [a] until revoked · [N]o ",
            )
            .await
        {
            Read::Line(answer) => answer.trim().to_ascii_lowercase(),
            Read::Interrupted | Read::Eof => String::new(),
        };
        if matches!(answer.as_str(), "y" | "yes") {
            return Approval::Approved;
        }
        let Some(lasting) = Lasting::from_code(&answer) else {
            return Approval::Denied("denied at the terminal".into());
        };
        match rules.grant(&request.session, shapes, lasting, "you at the terminal") {
            Ok(()) => eprintln!(
                "approved; {} in this conversation: {} (/approvals lists them)",
                lasting.label(),
                shown.join(", ")
            ),
            Err(e) => {
                tracing::error!("storing an approval rule: {e}");
                eprintln!("approved this once; the rule could not be stored");
            }
        }
        Approval::Approved
    }
}
