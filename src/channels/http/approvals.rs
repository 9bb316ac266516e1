//! The API's approvals inbox: an `ask` decision of a run on an HTTP thread waits here until
//! `POST /v1/approvals/{id}` answers it. No answer within the timeout, a cancelled run or a
//! shutdown all mean deny; an id is answered once (the first answer wins, a second one finds
//! nothing waiting).

use super::events::{Hub, PendingApproval, RunEvent};
use super::metrics::Metrics;
use crate::locks::lock;
use crate::tools::approval::{Approval, ApprovalRequest, Approver};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// How an answer went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    Done,
    /// Answered already, timed out, its run ended, or never was.
    NotWaiting,
}

struct Waiting {
    shown: PendingApproval,
    answer: oneshot::Sender<bool>,
}

pub struct Inbox {
    pending: Mutex<HashMap<String, Waiting>>,
    timeout: Duration,
    closing: CancellationToken,
    /// Where a request is announced to the run's live listeners.
    hub: Option<Arc<Hub>>,
    /// Where answers and waiting times are counted.
    metrics: Option<Arc<Metrics>>,
}

impl Inbox {
    pub fn new(timeout: Duration) -> Inbox {
        Inbox {
            pending: Mutex::new(HashMap::new()),
            timeout,
            closing: CancellationToken::new(),
            hub: None,
            metrics: None,
        }
    }

    /// Count answers and waiting times in `metrics` (`GET /metrics`).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Inbox {
        self.metrics = Some(metrics);
        self
    }

    /// Announce each request on `hub` (`GET /v1/runs/{id}/events`).
    pub fn with_hub(mut self, hub: Arc<Hub>) -> Inbox {
        self.hub = Some(hub);
        self
    }

    /// Waiting requests, oldest run first.
    pub fn list(&self) -> Vec<PendingApproval> {
        let mut all: Vec<PendingApproval> = lock(&self.pending)
            .values()
            .map(|w| w.shown.clone())
            .collect();
        all.sort_by(|a, b| {
            let run = |p: &PendingApproval| p.run_id.parse::<i64>().unwrap_or(0);
            run(a).cmp(&run(b)).then(a.id.cmp(&b.id))
        });
        all
    }

    /// Whether run `run_id` waits for an answer now.
    pub fn is_waiting(&self, run_id: i64) -> bool {
        let run_id = run_id.to_string();
        lock(&self.pending)
            .values()
            .any(|w| w.shown.run_id == run_id)
    }

    /// How many runs wait for an answer now.
    pub fn waiting_runs(&self) -> usize {
        let pending = lock(&self.pending);
        let mut runs: Vec<&str> = pending.values().map(|w| w.shown.run_id.as_str()).collect();
        runs.sort_unstable();
        runs.dedup();
        runs.len()
    }

    /// Approve (`true`) or deny request `id`.
    pub fn answer(&self, id: &str, approve: bool) -> Answered {
        match lock(&self.pending).remove(id) {
            Some(waiting) => {
                let _ = waiting.answer.send(approve);
                Answered::Done
            }
            None => Answered::NotWaiting,
        }
    }

    /// Shutdown: every waiting request is denied now, and new ones at once.
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// Post `request` of run `run_id` and wait for its answer (or a reason to stop waiting).
    async fn ask(
        &self,
        run_id: i64,
        request: &ApprovalRequest,
        run: &CancellationToken,
    ) -> Approval {
        if self.closing.is_cancelled() {
            return Approval::Denied("warden is shutting down".into());
        }
        let id = format!("ap_{:016x}", rand::random::<u64>());
        let (tx, rx) = oneshot::channel();
        let shown = PendingApproval {
            id: id.clone(),
            run_id: run_id.to_string(),
            tool: request.tool.clone(),
            command: request.command.clone(),
            reason: request.reason.clone(),
            detail: request.detail.clone(),
        };
        lock(&self.pending).insert(
            id.clone(),
            Waiting {
                shown: shown.clone(),
                answer: tx,
            },
        );
        if let Some(hub) = &self.hub {
            hub.publish(run_id, RunEvent::Approval(shown));
        }
        tracing::info!(run = run_id, approval = %id, tool = %request.tool, "approval waiting");
        let asked = std::time::Instant::now();
        let (decision, how) = tokio::select! {
            answer = rx => match answer {
                Ok(true) => (Approval::Approved, "approved"),
                Ok(false) => (Approval::Denied("denied over the HTTP API".into()), "denied"),
                Err(_) => (Approval::Denied("the request was dropped".into()), "dropped"),
            },
            _ = tokio::time::sleep(self.timeout) => (Approval::Denied(format!(
                "no answer within {} s", self.timeout.as_secs()
            )), "timeout"),
            _ = run.cancelled() => (Approval::Denied("the run was cancelled".into()), "cancelled"),
            _ = self.closing.cancelled() => {
                (Approval::Denied("warden is shutting down".into()), "shutdown")
            }
        };
        lock(&self.pending).remove(&id);
        if let Some(metrics) = &self.metrics {
            metrics.on_approval_end(how, asked.elapsed());
        }
        decision
    }
}

/// The approver of one run.
pub struct RunApprover {
    pub inbox: Arc<Inbox>,
    pub run_id: i64,
    /// The run's abort signal: a cancelled run stops waiting.
    pub cancel: CancellationToken,
}

#[async_trait]
impl Approver for RunApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        self.inbox.ask(self.run_id, request, &self.cancel).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            session: "http:1".into(),
            tool: "bash".into(),
            command: "rm -r build".into(),
            reason: "recursive delete".into(),
            always: None,
            detail: None,
        }
    }

    async fn waiting(inbox: &Inbox) -> PendingApproval {
        for _ in 0..200 {
            if let Some(p) = inbox.list().pop() {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("nothing waits")
    }

    #[tokio::test]
    async fn the_first_answer_wins_and_is_the_only_one() {
        let inbox = Arc::new(Inbox::new(Duration::from_secs(30)));
        let approver = RunApprover {
            inbox: inbox.clone(),
            run_id: 7,
            cancel: CancellationToken::new(),
        };
        let asked = tokio::spawn(async move { approver.approve(&request()).await });
        let shown = waiting(&inbox).await;
        assert_eq!(
            (shown.run_id.as_str(), shown.command.as_str()),
            ("7", "rm -r build")
        );
        assert!(inbox.is_waiting(7));
        assert_eq!(inbox.answer(&shown.id, true), Answered::Done);
        assert_eq!(inbox.answer(&shown.id, false), Answered::NotWaiting);
        assert_eq!(asked.await.unwrap(), Approval::Approved);
        assert!(!inbox.is_waiting(7) && inbox.list().is_empty());
    }

    #[tokio::test]
    async fn deny_timeout_and_cancel_all_refuse() {
        let inbox = Arc::new(Inbox::new(Duration::from_millis(50)));
        let timed_out = RunApprover {
            inbox: inbox.clone(),
            run_id: 1,
            cancel: CancellationToken::new(),
        }
        .approve(&request())
        .await;
        assert!(matches!(timed_out, Approval::Denied(why) if why.contains("no answer")));

        let inbox = Arc::new(Inbox::new(Duration::from_secs(30)));
        let cancel = CancellationToken::new();
        let approver = RunApprover {
            inbox: inbox.clone(),
            run_id: 2,
            cancel: cancel.clone(),
        };
        let asked = tokio::spawn(async move { approver.approve(&request()).await });
        waiting(&inbox).await;
        cancel.cancel();
        assert!(matches!(asked.await.unwrap(), Approval::Denied(why) if why.contains("cancelled")));
        assert!(inbox.list().is_empty(), "a cancelled run's request is gone");

        let approver = RunApprover {
            inbox: inbox.clone(),
            run_id: 3,
            cancel: CancellationToken::new(),
        };
        let asked = tokio::spawn(async move { approver.approve(&request()).await });
        let shown = waiting(&inbox).await;
        inbox.answer(&shown.id, false);
        assert!(matches!(asked.await.unwrap(), Approval::Denied(why) if why.contains("denied")));
    }
}
