//! Time, as the scheduler sees it: the real wall clock, or a [`TestClock`] that tests move by
//! hand, so schedule logic is tested without sleeping.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Mutex;
use tokio::sync::watch;

#[async_trait]
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
    /// Return at or after `deadline` (at once when it has passed).
    async fn sleep_until(&self, deadline: DateTime<Utc>);
}

/// The system clock. Sleeps are tokio timers; the runner re-reads the clock after each, and
/// never sleeps long, so a suspended laptop or a clock change is noticed soon after.
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    async fn sleep_until(&self, deadline: DateTime<Utc>) {
        if let Ok(wait) = (deadline - Utc::now()).to_std() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// A clock that moves only when told to; sleepers wake when it passes their deadline.
pub struct TestClock {
    now: Mutex<DateTime<Utc>>,
    ticks: watch::Sender<DateTime<Utc>>,
}

impl TestClock {
    pub fn new(start: DateTime<Utc>) -> TestClock {
        TestClock {
            now: Mutex::new(start),
            ticks: watch::Sender::new(start),
        }
    }

    /// Jump to `t` (forwards or backwards) and wake the sleepers whose deadline passed.
    pub fn set(&self, t: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(|p| p.into_inner()) = t;
        self.ticks.send_replace(t);
    }

    pub fn advance(&self, by: chrono::Duration) {
        let t = self.now() + by;
        self.set(t);
    }
}

#[async_trait]
impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn sleep_until(&self, deadline: DateTime<Utc>) {
        let mut ticks = self.ticks.subscribe();
        loop {
            if *ticks.borrow_and_update() >= deadline {
                return;
            }
            if ticks.changed().await.is_err() {
                // The clock is gone; nothing will ever wake us. Stay asleep like a real timer
                // that is never reached.
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn test_clock_wakes_sleepers_only_when_moved_past_their_deadline() {
        let start = Utc::now();
        let clock = Arc::new(TestClock::new(start));
        let sleeper = tokio::spawn({
            let clock = clock.clone();
            async move {
                clock
                    .sleep_until(start + chrono::Duration::minutes(10))
                    .await
            }
        });
        clock.advance(chrono::Duration::minutes(9));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished());
        clock.advance(chrono::Duration::minutes(1));
        tokio::time::timeout(Duration::from_secs(5), sleeper)
            .await
            .expect("woke")
            .unwrap();
        // A deadline in the past returns at once.
        clock.sleep_until(start).await;
    }

    #[tokio::test]
    async fn system_clock_sleeps_until_the_deadline() {
        let clock = SystemClock;
        let deadline = clock.now() + chrono::Duration::milliseconds(30);
        clock.sleep_until(deadline).await;
        assert!(clock.now() >= deadline);
    }
}
