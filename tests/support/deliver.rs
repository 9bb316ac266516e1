//! A scripted [`Deliver`] for scheduler tests: records every delivery, answers from a script
//! (then a default), applies the delivery's `send_if` filter like a real channel would, and
//! lets a test wait for the n-th delivery.

use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use warden::scheduler::{Deliver, DeliverError, Delivered, Delivery};

pub struct FakeDeliver {
    script: Mutex<VecDeque<Result<String, String>>>,
    fallback: Result<String, String>,
    seen: Mutex<Vec<Delivery>>,
    sent: Mutex<Vec<String>>,
    /// While true, deliveries are recorded and then never return (a run cut off by a crash).
    hang: bool,
    /// Answer every delivery with `DeliverError::Closed` (warden shutting down).
    closed: bool,
    changed: Notify,
}

impl FakeDeliver {
    /// Answers every delivery with `answer`.
    pub fn answering(answer: &str) -> FakeDeliver {
        FakeDeliver::scripted(Vec::new(), Ok(answer.to_string()))
    }

    /// Answers from `script`, then with `fallback`.
    pub fn scripted(
        script: Vec<Result<String, String>>,
        fallback: Result<String, String>,
    ) -> FakeDeliver {
        FakeDeliver {
            script: Mutex::new(script.into()),
            fallback,
            seen: Mutex::new(Vec::new()),
            sent: Mutex::new(Vec::new()),
            hang: false,
            closed: false,
            changed: Notify::new(),
        }
    }

    /// Records deliveries and never finishes them.
    pub fn hanging() -> FakeDeliver {
        FakeDeliver {
            hang: true,
            ..FakeDeliver::answering("never")
        }
    }

    /// Every delivery ends with the gateway shutting down.
    pub fn closing() -> FakeDeliver {
        FakeDeliver {
            closed: true,
            ..FakeDeliver::answering("never")
        }
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.seen.lock().unwrap().clone()
    }

    /// Answers that passed the delivery's filter (what the chat would show).
    pub fn sent(&self) -> Vec<String> {
        self.sent.lock().unwrap().clone()
    }

    /// Wait (real time, at most 10 s) until `n` deliveries have been seen.
    pub async fn wait_for(&self, n: usize) -> Vec<Delivery> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let notified = self.changed.notified();
            let seen = self.deliveries();
            if seen.len() >= n {
                return seen;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("waited for {n} deliveries, saw {}: {seen:#?}", seen.len());
            }
        }
    }
}

#[async_trait]
impl Deliver for FakeDeliver {
    async fn deliver(&self, delivery: Delivery) -> Result<Delivered, DeliverError> {
        let filter = delivery.send_if.clone();
        self.seen.lock().unwrap().push(delivery);
        self.changed.notify_waiters();
        if self.hang {
            std::future::pending::<()>().await;
        }
        if self.closed {
            return Err(DeliverError::Closed);
        }
        let next = self.script.lock().unwrap().pop_front();
        let answer = next.unwrap_or_else(|| self.fallback.clone())?;
        let sent = filter.is_none_or(|f| f(&answer));
        if sent {
            self.sent.lock().unwrap().push(answer.clone());
        }
        Ok(Delivered { answer, sent })
    }
}
