//! A gateway run as the API shows it: the gateway's states and outcomes folded into the six
//! statuses scripts rely on (`queued|running|waiting_approval|succeeded|failed|cancelled`).

use crate::gateway::store::{RunRow, RunState};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Queued,
    Running,
    WaitingApproval,
    Succeeded,
    Failed,
    Cancelled,
}

impl Status {
    pub const ALL: [&'static str; 6] = [
        "queued",
        "running",
        "waiting_approval",
        "succeeded",
        "failed",
        "cancelled",
    ];

    pub fn parse(text: &str) -> Option<Status> {
        Some(match text {
            "queued" => Status::Queued,
            "running" => Status::Running,
            "waiting_approval" => Status::WaitingApproval,
            "succeeded" => Status::Succeeded,
            "failed" => Status::Failed,
            "cancelled" => Status::Cancelled,
            _ => return None,
        })
    }

    pub fn is_final(self) -> bool {
        matches!(self, Status::Succeeded | Status::Failed | Status::Cancelled)
    }
}

/// `GET /v1/runs/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunView {
    pub id: String,
    pub thread: String,
    pub status: Status,
    /// The model's answer (also what a stopped run said before it stopped).
    pub output: Option<String>,
    /// Why it failed or was cancelled, in words.
    pub error: Option<String>,
    pub created_at: String,
    pub finished_at: Option<String>,
}

/// The status of a run in `state` that ended with `outcome`; `waiting`: it waits for an
/// approval now.
pub fn status_of(state: RunState, outcome: Option<&str>, waiting: bool) -> Status {
    match state {
        RunState::Queued => Status::Queued,
        // `Replying`: the answer is stored and being recorded as delivered (a moment).
        RunState::Running | RunState::Replying if waiting => Status::WaitingApproval,
        RunState::Running | RunState::Replying => Status::Running,
        RunState::Cancelled => Status::Cancelled,
        RunState::Interrupted => Status::Failed,
        RunState::Answered => match outcome {
            Some("answered") | Some("iteration_limit") => Status::Succeeded,
            Some("stopped") | Some("cancelled") => Status::Cancelled,
            // `failed` (the model could not be reached) and `interrupted` (a restart cut it
            // off): the stored answer is the words that say so.
            _ => Status::Failed,
        },
    }
}

/// The view of `row` on thread `thread`; `waiting` says whether it waits for an approval now.
pub fn view(row: &RunRow, thread: &str, waiting: bool) -> RunView {
    let status = status_of(row.state, row.outcome.as_deref(), waiting);
    let answer = row.answer.clone();
    let (output, error) = match status {
        Status::Succeeded => (answer, None),
        Status::Failed if row.state == RunState::Interrupted => (
            None,
            Some("warden stopped while the run was going; it was not run again".to_string()),
        ),
        Status::Failed => (None, answer),
        Status::Cancelled if row.outcome.as_deref() == Some("stopped") => {
            (answer, Some("cancelled while it ran".to_string()))
        }
        Status::Cancelled => (None, Some("cancelled before it started".to_string())),
        Status::Queued | Status::Running | Status::WaitingApproval => (None, None),
    };
    RunView {
        id: row.id.to_string(),
        thread: thread.to_string(),
        status,
        output,
        error,
        created_at: row.created_at.clone(),
        finished_at: status.is_final().then(|| row.updated_at.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::store::RunStore;

    fn stored(store: &RunStore) -> i64 {
        store.queue_hi(-(1 << 61))
    }

    #[test]
    fn states_and_outcomes_fold_into_six_statuses() {
        let store = RunStore::new(crate::schema::open_in_memory().unwrap());
        let shown = |id: i64, waiting: bool| view(&store.get(id).unwrap().unwrap(), "t", waiting);

        let id = stored(&store);
        assert_eq!(shown(id, false).status, Status::Queued);
        store.set_running(id).unwrap();
        assert_eq!(shown(id, false).status, Status::Running);
        assert_eq!(shown(id, true).status, Status::WaitingApproval);
        assert_eq!(shown(id, false).finished_at, None);
        store.set_replying(id, "answered", "42").unwrap();
        store.set_answered(id).unwrap();
        let done = shown(id, false);
        assert_eq!(
            (done.status, done.output.as_deref(), done.error),
            (Status::Succeeded, Some("42"), None)
        );
        assert!(done.finished_at.is_some());

        for (outcome, status) in [
            ("iteration_limit", Status::Succeeded),
            ("stopped", Status::Cancelled),
            ("failed", Status::Failed),
            ("interrupted", Status::Failed),
        ] {
            let id = stored(&store);
            store.set_replying(id, outcome, "words").unwrap();
            store.set_answered(id).unwrap();
            assert_eq!(shown(id, false).status, status, "{outcome}");
        }
        let failed = {
            let id = stored(&store);
            store
                .set_replying(id, "failed", "the model could not be reached")
                .unwrap();
            store.set_answered(id).unwrap();
            shown(id, false)
        };
        assert_eq!(
            failed.error.as_deref(),
            Some("the model could not be reached")
        );
        assert_eq!(failed.output, None);

        let id = stored(&store);
        store.set_cancelled(id).unwrap();
        assert_eq!(shown(id, false).status, Status::Cancelled);
        assert!(Status::ALL.iter().all(|s| Status::parse(s).is_some()));
    }
}
