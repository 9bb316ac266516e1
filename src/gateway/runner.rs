//! What the gateway needs from the agent: run one request to its end. In tests and in-process
//! uses that is the [`Agent`] itself; `warden bot` runs agents in a worker process instead
//! (see [`super::worker`]), so the long-lived bot process holds none of the agent's code,
//! keys or sandboxes while it waits for messages.

use crate::agent::{Agent, RunOutcome, RunRequest};
use async_trait::async_trait;

#[async_trait]
pub trait AgentRunner: Send + Sync + 'static {
    /// Run `request` to its end. The error is the reason the run could not finish, for the
    /// user ("Sorry, I could not finish that: …").
    async fn run(&self, request: RunRequest) -> Result<RunOutcome, String>;
}

#[async_trait]
impl AgentRunner for Agent {
    async fn run(&self, request: RunRequest) -> Result<RunOutcome, String> {
        Agent::run(self, request).await.map_err(|e| e.to_string())
    }
}
