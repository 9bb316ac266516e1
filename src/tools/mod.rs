//! The agent's tools. A tool takes JSON input and returns a string, never a panic: a denial is
//! a normal result that tells the model why, so it can choose another way. Every call is
//! written to the audit log before its result reaches the model.

pub mod approval;
pub mod approval_mirror;
pub mod approval_rules;
pub mod background;
pub mod bash;
pub mod cron;
pub mod files;
pub mod gate;
pub mod mcp;
pub mod memory_search;
pub mod network;
pub mod outbox;
pub mod output;
pub mod process;
pub mod send_file;
pub mod skill;
pub mod web_fetch;
pub mod web_search;

use crate::audit::{self, AuditDecision, AuditEntry};
use crate::db::Database;
use crate::egress::Provenance;
use crate::llm::ToolSpec;
use crate::taint::Taint;
use approval::Approver;
use async_trait::async_trait;
use background::BackgroundFn;
use futures::FutureExt;
use outbox::Outbox;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Tool results longer than this (in characters) are cut, with the full text saved.
pub const MAX_RESULT_CHARS: usize = 30_000;

/// What a tool returns: the text for the model and what the audit log records.
#[derive(Clone, Debug)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    pub decision: AuditDecision,
    /// Why (the policy's reason for bash; a short summary otherwise).
    pub reason: String,
    pub exit_code: Option<i32>,
    /// What the jail's network did (every proxy decision, bytes by host), for the audit row.
    pub network: Option<serde_json::Value>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            is_error: false,
            decision: AuditDecision::Allow,
            reason: "ok".into(),
            exit_code: None,
            network: None,
        }
    }

    /// A refusal: the reason goes to the model and to the audit log.
    pub fn denied(reason: impl Into<String>) -> ToolOutput {
        let reason = reason.into();
        ToolOutput {
            content: format!("Denied: {reason}"),
            is_error: true,
            decision: AuditDecision::Deny,
            reason,
            exit_code: None,
            network: None,
        }
    }

    /// The same result, audited as approved by the user when it went through (the call
    /// needed an approval and got it).
    pub fn approved_if(mut self, approved: bool) -> ToolOutput {
        if approved && self.decision == AuditDecision::Allow {
            self.decision = AuditDecision::Approved;
        }
        self
    }

    /// A failure that is not a policy decision (bad input, I/O).
    pub fn error(message: impl Into<String>) -> ToolOutput {
        let message = message.into();
        ToolOutput {
            content: format!("Error: {message}"),
            is_error: true,
            decision: AuditDecision::Error,
            reason: message,
            exit_code: None,
            network: None,
        }
    }
}

/// Progress a tool reports while it runs ("Running `ls -la`…").
pub type ProgressFn = Arc<dyn Fn(String) + Send + Sync>;

/// Per-call context.
#[derive(Clone)]
pub struct ToolContext {
    /// The session key (`terminal:default`, `telegram:42`): the chat the tools act for (its
    /// sandbox, its cron jobs, its egress grants), also when a sub-agent calls them.
    pub session: String,
    /// The sub-agent making these calls, by its own session key (`telegram:42/delegate-1f3a`);
    /// `None` for the run's own agent. The audit log records a sub-agent's calls under it.
    pub sub_agent: Option<String>,
    /// Cancelled by `/stop` or Ctrl-C: a running sandbox process is killed.
    pub cancel: CancellationToken,
    /// Decides `ask` commands (terminal prompt, Telegram buttons, or nobody → deny).
    pub approver: Arc<dyn Approver>,
    /// Where `send_file` sends files (the run's chat, or nowhere).
    pub outbox: Arc<dyn Outbox>,
    pub progress: ProgressFn,
    /// Untrusted content this run has read (shared by the run's calls).
    pub taint: Taint,
    /// URLs this run may request without the model having composed them.
    pub provenance: Provenance,
    /// Where background commands this run starts report (their end goes to the chat).
    pub background: BackgroundFn,
}

impl ToolContext {
    /// A context outside an agent run: nobody to approve, no chat, never cancelled, no
    /// progress shown, an untainted run that knows no URLs, nobody told about background
    /// commands.
    pub fn detached(session: impl Into<String>) -> ToolContext {
        ToolContext {
            session: session.into(),
            sub_agent: None,
            cancel: CancellationToken::new(),
            approver: Arc::new(approval::NoApprover),
            outbox: Arc::new(outbox::Nowhere::TERMINAL),
            progress: Arc::new(|_| {}),
            taint: Taint::new(),
            provenance: Provenance::new(),
            background: background::ignore_background(),
        }
    }

    /// The session the audit log records a call under: the sub-agent's when one calls (its
    /// key begins with the parent's session), else the run's.
    pub fn audit_session(&self) -> &str {
        self.sub_agent.as_deref().unwrap_or(&self.session)
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    async fn run(&self, input: &serde_json::Value, ctx: &ToolContext) -> ToolOutput;
}

/// The tools offered to the model, with auditing and output capping around every call.
#[derive(Clone)]
pub struct ToolSet {
    tools: Vec<Arc<dyn Tool>>,
    db: Arc<Database>,
    /// Where full texts of capped results are saved (inside the workspace).
    overflow_dir: PathBuf,
}

impl ToolSet {
    pub fn new(db: Arc<Database>, overflow_dir: PathBuf) -> ToolSet {
        ToolSet {
            tools: Vec::new(),
            db,
            overflow_dir,
        }
    }

    pub fn add(&mut self, tool: Arc<dyn Tool>) {
        self.tools.push(tool);
    }

    /// What a model request offers: each name once (the first tool holding it). A provider
    /// refuses a request that names a tool twice, and would refuse every run after it.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut seen = std::collections::HashSet::new();
        let mut specs = Vec::with_capacity(self.tools.len());
        for spec in self.tools.iter().map(|t| t.spec()) {
            if seen.insert(spec.name.clone()) {
                specs.push(spec);
            } else {
                tracing::warn!(tool = %spec.name, "a second tool with the same name is not offered");
            }
        }
        specs
    }

    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.spec().name).collect()
    }

    /// The same tools (the same instances: the same policy, sandboxes and gate), only those
    /// named, audited into the same log. A name this set does not hold is an error that says
    /// which tools there are.
    pub fn subset(&self, names: &[String]) -> Result<ToolSet, String> {
        let mut subset = ToolSet::new(self.db.clone(), self.overflow_dir.clone());
        for name in names {
            let Some(tool) = self.tools.iter().find(|t| t.spec().name == *name) else {
                return Err(format!(
                    "there is no tool named {name:?} here; the tools are: {}",
                    self.names().join(", ")
                ));
            };
            if !subset.names().contains(name) {
                subset.add(tool.clone());
            }
        }
        Ok(subset)
    }

    /// Run one tool call: unknown tools and panics become error results; the call is audited;
    /// long results are capped.
    pub async fn call(
        &self,
        name: &str,
        input: &serde_json::Value,
        ctx: &ToolContext,
    ) -> ToolOutput {
        let started = Instant::now();
        let tool = self.tools.iter().find(|t| t.spec().name == name);
        let mut output = match tool {
            None => ToolOutput::error(format!(
                "unknown tool {name:?}; available: {}",
                self.names().join(", ")
            )),
            Some(tool) => match AssertUnwindSafe(tool.run(input, ctx)).catch_unwind().await {
                Ok(output) => output,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    tracing::error!(tool = name, "tool panicked: {what}");
                    ToolOutput::error(format!("the {name} tool failed internally ({what})"))
                }
            },
        };
        let entry = AuditEntry {
            session: ctx.audit_session().to_string(),
            tool: name.to_string(),
            input: input.to_string(),
            decision: output.decision,
            reason: output.reason.clone(),
            exit_code: output.exit_code,
            duration_ms: started.elapsed().as_millis() as u64,
            network: output.network.clone(),
        };
        if let Err(e) = audit::record(&self.db, &entry) {
            // The audit log is part of the security story: refuse to hand back a result that
            // was not recorded.
            tracing::error!("audit log write failed: {e}");
            return ToolOutput::error(format!(
                "the audit log could not be written ({e}); result withheld"
            ));
        }
        output.content = output::cap(&output.content, MAX_RESULT_CHARS, &self.overflow_dir, name);
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str, &'static str);

    #[async_trait]
    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.into(),
                description: self.1.into(),
                input_schema: serde_json::json!({"type": "object"}),
            }
        }
        async fn run(&self, _: &serde_json::Value, _: &ToolContext) -> ToolOutput {
            ToolOutput::error("not run here")
        }
    }

    #[test]
    fn a_model_request_names_each_tool_once() {
        let db = crate::schema::open_in_memory().unwrap();
        let mut set = ToolSet::new(db, std::env::temp_dir());
        for tool in [
            Named("notes__add", "first"),
            Named("bash", "shell"),
            Named("notes__add", "second"),
        ] {
            set.add(Arc::new(tool));
        }
        let specs = set.specs();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["notes__add", "bash"]);
        assert_eq!(specs[0].description, "first");
    }
}
