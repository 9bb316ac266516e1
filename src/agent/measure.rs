//! Numbers a run measures where they happen (in the agent worker, for `warden bot` and
//! `warden serve`) and reports as [`AgentEvent::Measured`](super::AgentEvent::Measured), so
//! they reach the gateway's `/metrics` on the worker protocol's event messages.

use crate::sandbox::Backend;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "measure", rename_all = "snake_case")]
pub enum Measure {
    /// One model call that answered: from the request to the whole streamed answer.
    ModelCall {
        latency: Duration,
        input_tokens: u64,
        output_tokens: u64,
    },
    /// The sandbox started a program: from asking to the program running in its jail.
    SandboxStart { backend: Backend, took: Duration },
}
