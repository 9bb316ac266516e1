//! The HTTP channel on the gateway's seam: a run on an API thread asks its approvals through
//! the [`Inbox`], and its answer is "delivered" by being stored — a script reads it with
//! `GET /v1/runs/{id}`, so there is nothing to send and nothing to send twice.

use super::approvals::{Inbox, RunApprover};
use super::events::{Hub, RunEvent};
use super::metrics::Metrics;
use super::threads::Threads;
use crate::agent::{AgentEvent, EventFn, RunControl};
use crate::gateway::{Channel, DraftFn, RunInfo, RunView, SendError};
use crate::tools::approval::Approver;
use async_trait::async_trait;
use std::sync::Arc;

/// The prefix of an API thread's session key (`http:<chat>`), in `warden serve` and in
/// `warden bot` alike: one thread is one session whichever process serves it.
pub const SESSION_PREFIX: &str = "http";

pub struct HttpChannel {
    inbox: Arc<Inbox>,
    hub: Arc<Hub>,
    metrics: Arc<Metrics>,
}

impl HttpChannel {
    pub fn new(inbox: Arc<Inbox>, hub: Arc<Hub>, metrics: Arc<Metrics>) -> HttpChannel {
        HttpChannel {
            inbox,
            hub,
            metrics,
        }
    }
}

#[async_trait]
impl Channel for HttpChannel {
    fn open_run(&self, run: &RunInfo, control: &RunControl, _draft: DraftFn) -> Box<dyn RunView> {
        Box::new(HttpRunView {
            approver: Arc::new(RunApprover {
                inbox: self.inbox.clone(),
                run_id: run.run_id,
                cancel: control.cancel_token(),
            }),
            hub: self.hub.clone(),
            metrics: self.metrics.clone(),
            run_id: run.run_id,
        })
    }

    fn serves(&self, chat_id: i64) -> bool {
        Threads::is_thread(chat_id)
    }

    /// One part: the stored answer is the whole answer.
    fn parts(&self, text: &str) -> Vec<String> {
        vec![text.to_string()]
    }

    fn session_prefix(&self, chat_id: i64) -> Option<&'static str> {
        Threads::is_thread(chat_id).then_some(SESSION_PREFIX)
    }

    async fn send_part(
        &self,
        _run: &RunInfo,
        _index: usize,
        _part: &str,
        _again: bool,
    ) -> Result<(), SendError> {
        Ok(())
    }
}

struct HttpRunView {
    approver: Arc<RunApprover>,
    hub: Arc<Hub>,
    metrics: Arc<Metrics>,
    run_id: i64,
}

#[async_trait]
impl RunView for HttpRunView {
    fn approver(&self) -> Arc<dyn Approver> {
        self.approver.clone()
    }

    fn events(&self) -> EventFn {
        let (hub, metrics, run_id) = (self.hub.clone(), self.metrics.clone(), self.run_id);
        Arc::new(move |event| {
            metrics.on_event(&event);
            if !matches!(event, AgentEvent::Measured(_)) {
                hub.publish(run_id, RunEvent::Agent(event));
            }
        })
    }

    async fn finish(self: Box<Self>) {
        self.hub.close(self.run_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{RunOutcome, RunRequest};
    use crate::gateway::store::{RunState, RunStore};
    use crate::gateway::{AgentRunner, FailureKind, Gateway, GatewaySettings, RunFailure};
    use std::time::Duration;

    /// Every run fails at once (the model is unreachable).
    struct Unreachable;

    #[async_trait]
    impl AgentRunner for Unreachable {
        async fn run(&self, _request: RunRequest) -> Result<RunOutcome, RunFailure> {
            Err(RunFailure::new(
                FailureKind::ModelUnreachable,
                "no model here",
            ))
        }
    }

    fn queued(store: &RunStore, chat_id: i64) -> i64 {
        store.queue_hi(chat_id)
    }

    #[tokio::test]
    async fn recovery_takes_up_only_the_apis_threads() {
        let db = crate::schema::open_in_memory().unwrap();
        let store = RunStore::new(db.clone());
        let thread = super::super::threads::Threads::new(db.clone())
            .chat_of("home")
            .unwrap();
        let ours = queued(&store, thread);
        let telegrams = queued(&store, 4242);
        let inbox = Arc::new(Inbox::new(Duration::from_secs(5)));
        let gateway = Gateway::new(
            Arc::new(Unreachable),
            db,
            Arc::new(HttpChannel::new(
                inbox,
                Arc::new(Hub::default()),
                Arc::new(Metrics::new()),
            )),
            GatewaySettings {
                min_free_bytes: 0,
                ..GatewaySettings::default()
            },
        );
        let report = gateway.recover().await.unwrap();
        assert_eq!((report.requeued, report.interrupted), (1, 0));
        for _ in 0..200 {
            if store.get(ours).unwrap().unwrap().state == RunState::Answered {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(store.get(ours).unwrap().unwrap().state, RunState::Answered);
        assert_eq!(
            store.get(telegrams).unwrap().unwrap().state,
            RunState::Queued,
            "a Telegram chat's run is left for warden bot to run and deliver"
        );
    }
}
