//! How long sandboxes take to start a program, measured where it happens: every
//! [`spawn_timed`] is recorded in [`STARTS`], and the agent loop takes the records after each
//! tool call and reports them as events — which reach `warden bot`'s or `warden serve`'s
//! `/metrics` on the worker protocol's event messages. Records are per process: two runs in
//! one worker may carry each other's, which a metric (a sum over all runs) does not mind.

use super::{Backend, JailedProcess, ProcessSpec, Sandbox, SandboxError};
use crate::locks::lock;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Records kept until taken; older ones are dropped beyond this (nobody is taking them).
const KEPT: usize = 1024;

/// Starts recorded and not yet taken.
pub struct Starts(Mutex<Vec<(Backend, Duration)>>);

impl Starts {
    pub const fn new() -> Starts {
        Starts(Mutex::new(Vec::new()))
    }

    pub fn record(&self, backend: Backend, took: Duration) {
        let mut starts = lock(&self.0);
        if starts.len() >= KEPT {
            starts.remove(0);
        }
        starts.push((backend, took));
    }

    /// The starts recorded since the last call.
    pub fn take(&self) -> Vec<(Backend, Duration)> {
        std::mem::take(&mut *lock(&self.0))
    }
}

impl Default for Starts {
    fn default() -> Self {
        Starts::new()
    }
}

/// This process's starts.
pub static STARTS: Starts = Starts::new();

/// `sandbox.spawn(spec)`, timed: a start that succeeded is recorded in [`STARTS`].
pub async fn spawn_timed(
    sandbox: &dyn Sandbox,
    spec: ProcessSpec,
) -> Result<Box<dyn JailedProcess>, SandboxError> {
    let started = Instant::now();
    let process = sandbox.spawn(spec).await?;
    STARTS.record(sandbox.backend(), started.elapsed());
    Ok(process)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_taken_once_and_bounded() {
        let starts = Starts::new();
        starts.record(Backend::Docker, Duration::from_millis(70));
        assert_eq!(
            starts.take(),
            [(Backend::Docker, Duration::from_millis(70))]
        );
        assert!(starts.take().is_empty());
        for _ in 0..KEPT + 10 {
            starts.record(Backend::Host, Duration::from_micros(900));
        }
        assert_eq!(starts.take().len(), KEPT, "the oldest were dropped");
    }
}
