//! Runs as they go, for `GET /v1/runs/{id}/events` (server-sent events): the agent's progress,
//! tool calls and their decisions, approval requests, the answer as it streams, and the run's
//! status first and last. Events are not stored: a client that connects late gets the status
//! and what happens from then on; one that falls behind is told how many it missed.

use super::runs::RunView;
use crate::agent::AgentEvent;
use crate::locks::lock;
use axum::response::sse::Event as SseEvent;
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::broadcast;

/// A request waiting for an answer, as `GET /v1/approvals` shows it: the whole command, the
/// policy's reason and the change it would make (a diff), never shortened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingApproval {
    pub id: String,
    pub run_id: String,
    pub tool: String,
    pub command: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Events one subscriber may fall behind before it is told it missed some.
const BACKLOG: usize = 512;

#[derive(Clone, Debug)]
pub enum RunEvent {
    Agent(AgentEvent),
    Approval(PendingApproval),
}

/// Where each run's live events are published.
#[derive(Default)]
pub struct Hub {
    runs: Mutex<HashMap<i64, broadcast::Sender<RunEvent>>>,
}

impl Hub {
    /// Listen to run `run_id` (also before it starts).
    pub fn subscribe(&self, run_id: i64) -> broadcast::Receiver<RunEvent> {
        lock(&self.runs)
            .entry(run_id)
            .or_insert_with(|| broadcast::channel(BACKLOG).0)
            .subscribe()
    }

    /// Tell run `run_id`'s listeners, if it has any.
    pub fn publish(&self, run_id: i64, event: RunEvent) {
        if let Some(sender) = lock(&self.runs).get(&run_id) {
            let _ = sender.send(event);
        }
    }

    /// The run's events are over: its listeners' streams end once they have read the rest.
    pub fn close(&self, run_id: i64) {
        lock(&self.runs).remove(&run_id);
    }

    /// Forget run `run_id` if nobody listens (a subscriber of a run that never started).
    pub fn forget_unheard(&self, run_id: i64) {
        let mut runs = lock(&self.runs);
        if runs.get(&run_id).is_some_and(|s| s.receiver_count() == 0) {
            runs.remove(&run_id);
        }
    }
}

/// The SSE form of an event: its name, and JSON data.
pub fn sse(event: &RunEvent) -> SseEvent {
    let (name, data) = match event {
        RunEvent::Approval(request) => ("approval", json!(request)),
        RunEvent::Agent(event) => match event {
            AgentEvent::TextDelta(text) => ("text", json!({ "text": text })),
            AgentEvent::ToolStart { id, name, summary } => (
                "tool_start",
                json!({ "id": id, "tool": name, "summary": summary }),
            ),
            AgentEvent::ToolEnd {
                id,
                name,
                decision,
                is_error,
                duration,
                detail,
            } => (
                "tool_end",
                json!({
                    "id": id,
                    "tool": name,
                    "decision": decision.as_str(),
                    "is_error": is_error,
                    "duration_ms": duration.as_millis() as u64,
                    "detail": detail,
                }),
            ),
            AgentEvent::Steered(text) => ("steered", json!({ "text": text })),
            AgentEvent::Progress(text) => ("progress", json!({ "text": text })),
            // Counted in /metrics; the HTTP channel does not publish them.
            AgentEvent::Measured(measure) => ("measured", json!(measure)),
        },
    };
    SseEvent::default().event(name).data(data.to_string())
}

/// The run's status as an event (the first and the last of a stream).
pub fn status(run: &RunView) -> SseEvent {
    SseEvent::default()
        .event("status")
        .data(json!(run).to_string())
}

/// Told to a subscriber that fell behind.
pub fn lagged(missed: u64) -> SseEvent {
    SseEvent::default()
        .event("lagged")
        .data(json!({ "missed": missed }).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn listeners_get_the_runs_events_until_it_closes() {
        let hub = Hub::default();
        hub.publish(1, RunEvent::Agent(AgentEvent::Progress("unheard".into())));
        let mut rx = hub.subscribe(1);
        let mut other = hub.subscribe(2);
        hub.publish(1, RunEvent::Agent(AgentEvent::TextDelta("hi".into())));
        hub.close(1);
        assert!(matches!(
            rx.recv().await.unwrap(),
            RunEvent::Agent(AgentEvent::TextDelta(t)) if t == "hi"
        ));
        assert!(rx.recv().await.is_err(), "closed after the run");
        assert!(
            other.try_recv().is_err(),
            "another run's listener hears nothing"
        );
        drop(other);
        hub.forget_unheard(2);
        assert!(lock(&hub.runs).is_empty());
    }
}
