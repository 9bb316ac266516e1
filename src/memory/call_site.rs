//! What the agent hands compaction before a model call: the session, the system prompt and the
//! model the call would use, and the run's own tools behind [`RunTools`]. Memory needs nothing
//! more of the tools than their list and a way to call one: the flush turn writes its notes
//! through the same policy, approvals and audit as any other call of the run.

use crate::llm::{Provider, ToolSpec};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// One tool call's result, as the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct CallResult {
    pub content: String,
    pub is_error: bool,
}

/// The run's tools, in the run's context (its chat, approver and taint).
#[async_trait]
pub trait RunTools: Send + Sync {
    /// What a model request offers.
    fn specs(&self) -> Vec<ToolSpec>;
    /// Run one call: audited and capped like every call of the run.
    async fn call(&self, name: &str, input: &serde_json::Value) -> CallResult;
}

pub struct CallSite<'a> {
    pub session: &'a str,
    pub system: &'a str,
    pub tools: &'a dyn RunTools,
    pub provider: &'a dyn Provider,
    /// Cancelled by `/stop` or Ctrl-C: the flush and the summary stop with the run.
    pub cancel: &'a CancellationToken,
    /// Progress shown to the user ("Saving notes to memory…").
    pub progress: &'a (dyn Fn(String) + Send + Sync),
}
