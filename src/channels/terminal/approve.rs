//! `ask` at the terminal: the command (escaped: it is the model's text), the policy's reason
//! and any diff, then y/N read through the same input as the prompt. Anything but y/yes — an
//! empty line, Ctrl-C, the end of input — is a no.

use super::escape_controls;
use super::input::Input;
use crate::tools::approval::{Approval, ApprovalRequest, Approver};
use async_trait::async_trait;
use std::sync::Arc;

pub struct TerminalApprover {
    input: Arc<dyn Input>,
}

impl TerminalApprover {
    pub fn new(input: Arc<dyn Input>) -> TerminalApprover {
        TerminalApprover { input }
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
        if self.input.confirm("Run it? [y/N] ").await {
            Approval::Approved
        } else {
            Approval::Denied("denied at the terminal".into())
        }
    }
}
