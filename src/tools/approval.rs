//! Approvals for `ask` decisions. The channel supplies the approver: the terminal asks y/n,
//! Telegram sends Approve / Deny buttons; with nobody to ask, the answer is no.

use super::ToolOutput;
use crate::audit::AuditDecision;
use crate::policy::shape::CommandShape;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub session: String,
    pub tool: String,
    /// The exact command(s) that would run, argv shell-quoted, one per line.
    pub command: String,
    /// Why the policy asks.
    pub reason: String,
    /// What an "always" answer would approve from now on in this chat (channels that cannot
    /// store it do not offer it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<Always>,
    /// What the change would do, when it is known (a unified diff of the file a write
    /// replaces); shown after the reason, cut where a channel's message limit requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The standing approval an "always" answer stores for the chat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Always {
    /// An egress approval for a host without a rule: "Always for this host".
    Host(String),
    /// A bash approval the policy asked for (nothing else asked about the line): "Always in
    /// this chat" approves these command shapes, each with how it is shown.
    Commands(Vec<(CommandShape, String)>),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Approval {
    Approved,
    /// Refused, with who/why ("denied by the user", "no answer within 120 s").
    Denied(String),
}

#[async_trait]
pub trait Approver: Send + Sync {
    async fn approve(&self, request: &ApprovalRequest) -> Approval;
}

/// No one to ask: `ask` means deny.
pub struct NoApprover;

#[async_trait]
impl Approver for NoApprover {
    async fn approve(&self, _request: &ApprovalRequest) -> Approval {
        Approval::Denied("approval is required and there is no one to ask in this channel".into())
    }
}

/// Ask `request`'s question of `approver`: `Ok` when approved; a refusal comes back as the
/// tool's result, saying who refused and why approval was needed, audited as rejected.
pub async fn ask(approver: &dyn Approver, request: &ApprovalRequest) -> Result<(), ToolOutput> {
    match approver.approve(request).await {
        Approval::Approved => Ok(()),
        Approval::Denied(why) => Err(ToolOutput {
            content: format!("Not run: {why}. (Approval was needed: {})", request.reason),
            is_error: true,
            decision: AuditDecision::Rejected,
            reason: format!("{why}; {}", request.reason),
            exit_code: None,
            network: None,
        }),
    }
}

/// An approver for unit tests: answers as told and remembers what it was asked.
#[cfg(test)]
pub struct Recording {
    pub approve: bool,
    pub asked: std::sync::Mutex<Vec<ApprovalRequest>>,
}

#[cfg(test)]
impl Recording {
    pub fn answering(approve: bool) -> std::sync::Arc<Recording> {
        std::sync::Arc::new(Recording {
            approve,
            asked: std::sync::Mutex::new(Vec::new()),
        })
    }
}

#[cfg(test)]
#[async_trait]
impl Approver for Recording {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        asked.push(request.clone());
        match self.approve {
            true => Approval::Approved,
            false => Approval::Denied("denied by the test".into()),
        }
    }
}
