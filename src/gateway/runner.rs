//! What the gateway needs from the agent: run one request to its end. In tests and in-process
//! uses that is the [`Agent`] itself; `warden bot` runs agents in a worker process instead
//! (see [`super::worker`]), so the long-lived bot process holds none of the agent's code,
//! keys or sandboxes while it waits for messages.

use super::failure::RunFailure;
use crate::agent::{Agent, RunOutcome, RunRequest};
use async_trait::async_trait;

#[async_trait]
pub trait AgentRunner: Send + Sync + 'static {
    /// Run `request` to its end, or say why it could not finish.
    async fn run(&self, request: RunRequest) -> Result<RunOutcome, RunFailure>;
}

#[async_trait]
impl AgentRunner for Agent {
    async fn run(&self, request: RunRequest) -> Result<RunOutcome, RunFailure> {
        Agent::run(self, request).await.map_err(RunFailure::from)
    }
}
