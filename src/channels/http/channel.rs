//! The HTTP channel on the gateway's seam: a run on an API thread asks its approvals through
//! the [`Inbox`], and its answer is "delivered" by being stored — a script reads it with
//! `GET /v1/runs/{id}`, so there is nothing to send and nothing to send twice.

use super::approvals::{Inbox, RunApprover};
use super::threads::Threads;
use crate::agent::{EventFn, RunControl};
use crate::gateway::{Channel, DraftFn, RunInfo, RunView, SendError};
use crate::tools::approval::Approver;
use async_trait::async_trait;
use std::sync::Arc;

pub struct HttpChannel {
    inbox: Arc<Inbox>,
}

impl HttpChannel {
    pub fn new(inbox: Arc<Inbox>) -> HttpChannel {
        HttpChannel { inbox }
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
        })
    }

    fn serves(&self, chat_id: i64) -> bool {
        Threads::is_thread(chat_id)
    }

    /// One part: the stored answer is the whole answer.
    fn parts(&self, text: &str) -> Vec<String> {
        vec![text.to_string()]
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
}

#[async_trait]
impl RunView for HttpRunView {
    fn approver(&self) -> Arc<dyn Approver> {
        self.approver.clone()
    }

    fn events(&self) -> EventFn {
        Arc::new(|_| {})
    }

    async fn finish(self: Box<Self>) {}
}
