//! The API's approvals inbox: an `ask` decision of a run on an HTTP thread waits here until
//! `POST /v1/approvals/{id}` answers it. No answer within the timeout, a cancelled run or a
//! shutdown all mean deny; an id is answered once (the first answer wins, a second one finds
//! nothing waiting).
//!
//! When `warden bot` serves the API, a Telegram chat's requests are shown here too (the
//! inbox is their [`ApprovalMirror`]): whichever channel answers first decides, and an answer
//! here after Telegram's is refused, naming who answered.

use super::events::{Hub, PendingApproval, RunEvent};
use super::metrics::Metrics;
use crate::locks::lock;
use crate::tools::approval::{Approval, ApprovalRequest, Approver};
use crate::tools::approval_mirror::{ApprovalMirror, FirstAnswer};
use async_trait::async_trait;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// How an answer went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answered {
    Done,
    /// Answered already, timed out, its run ended, or never was.
    NotWaiting,
    /// Shown in another channel too, and answered there first (by whom).
    Elsewhere(String),
}

/// How many taken-down mirrored requests are remembered, to say who answered them.
const REMEMBERED: usize = 256;

struct Waiting {
    shown: PendingApproval,
    answer: oneshot::Sender<bool>,
    /// A request shown in another channel too: the first answer claims it.
    first: Option<FirstAnswer>,
}

pub struct Inbox {
    pending: Mutex<HashMap<String, Waiting>>,
    /// Mirrored requests taken down, newest last: who answered them.
    withdrawn: Mutex<VecDeque<(String, FirstAnswer)>>,
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
            withdrawn: Mutex::new(VecDeque::new()),
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
        let mut pending = lock(&self.pending);
        let Some(waiting) = pending.get(id) else {
            drop(pending);
            return match lock(&self.withdrawn).iter().find(|(w, _)| w == id) {
                Some((_, first)) => match first.claimed_by() {
                    Some(who) => Answered::Elsewhere(who),
                    None => Answered::NotWaiting,
                },
                None => Answered::NotWaiting,
            };
        };
        if let Some(first) = &waiting.first {
            if let Err(who) = first.claim(OVER_HTTP) {
                return Answered::Elsewhere(who);
            }
        }
        if let Some(waiting) = pending.remove(id) {
            let _ = waiting.answer.send(approve);
        }
        Answered::Done
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
        let (id, rx) = self.post(run_id, request, None);
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

/// Who answered, as the other channel is told.
pub const OVER_HTTP: &str = "answered over HTTP";

impl Inbox {
    /// Put `request` of run `run_id` in the inbox; its id and where its answer comes.
    fn post(
        &self,
        run_id: i64,
        request: &ApprovalRequest,
        first: Option<FirstAnswer>,
    ) -> (String, oneshot::Receiver<bool>) {
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
                first,
            },
        );
        if let Some(hub) = &self.hub {
            hub.publish(run_id, RunEvent::Approval(shown));
        }
        (id, rx)
    }
}

/// A Telegram chat's requests, shown in the inbox too.
impl ApprovalMirror for Inbox {
    fn show(
        &self,
        run_id: i64,
        request: &ApprovalRequest,
        first: FirstAnswer,
    ) -> (String, oneshot::Receiver<bool>) {
        let (id, rx) = self.post(run_id, request, Some(first));
        tracing::info!(run = run_id, approval = %id, tool = %request.tool, "approval shown in the HTTP inbox too");
        (id, rx)
    }

    fn withdraw(&self, id: &str) {
        let Some(waiting) = lock(&self.pending).remove(id) else {
            return;
        };
        let mut withdrawn = lock(&self.withdrawn);
        if let Some(first) = waiting.first {
            if withdrawn.len() >= REMEMBERED {
                withdrawn.pop_front();
            }
            withdrawn.push_back((id.to_string(), first));
        }
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

    #[test]
    fn a_mirrored_request_is_decided_by_whichever_channel_answers_first() {
        let inbox = Inbox::new(Duration::from_secs(30));
        // Answered over HTTP first: Telegram's later press finds it claimed.
        let first = FirstAnswer::default();
        let (id, mut answer) = inbox.show(4, &request(), first.clone());
        assert_eq!(inbox.list()[0].command, "rm -r build");
        assert_eq!(inbox.answer(&id, true), Answered::Done);
        assert_eq!(answer.try_recv(), Ok(true));
        assert_eq!(
            first.claim("answered by Ann in Telegram"),
            Err(OVER_HTTP.to_string())
        );

        // Answered in Telegram first: the inbox answer is refused, naming who answered, also
        // after the request was taken down.
        let first = FirstAnswer::default();
        let (id, mut answer) = inbox.show(5, &request(), first.clone());
        first.claim("answered by Ann in Telegram").unwrap();
        assert_eq!(
            inbox.answer(&id, true),
            Answered::Elsewhere("answered by Ann in Telegram".into())
        );
        inbox.withdraw(&id);
        assert!(inbox.list().is_empty());
        assert_eq!(
            inbox.answer(&id, false),
            Answered::Elsewhere("answered by Ann in Telegram".into())
        );
        assert!(answer.try_recv().is_err(), "no answer came from the inbox");

        // Timed out in Telegram (nobody claimed it): gone, nothing to say.
        let (id, _answer) = inbox.show(6, &request(), FirstAnswer::default());
        inbox.withdraw(&id);
        assert_eq!(inbox.answer(&id, true), Answered::NotWaiting);
    }
}
