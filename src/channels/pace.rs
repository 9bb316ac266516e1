//! The pace of a run's live message, the same in Telegram and Slack (both allow about one
//! message or edit per second per conversation): sends and edits are at least [`EDIT_EVERY`]
//! apart, a rate limit pushes the next one back, and when the run ends the answer that
//! replaces the draft comes no sooner than the pace allows. Also how a run's events reach its
//! presenter, and how the presenter is ended.

use crate::agent::{AgentEvent, EventFn};
use crate::locks::lock;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Sends and edits of the live message are at least this far apart.
pub const EDIT_EVERY: Duration = Duration::from_secs(1);
/// Longest the end of a run waits for the edit pace (longer flood waits: the answer's own
/// retries honor them).
const END_PACE_WAIT: Duration = Duration::from_secs(4);

/// When the live message may be sent or edited next.
pub struct Pace {
    next_call: Instant,
}

impl Pace {
    /// The first call may go at once.
    pub fn at_once() -> Pace {
        Pace {
            next_call: Instant::now(),
        }
    }

    /// Whether a call may go now.
    pub fn due(&self) -> bool {
        Instant::now() >= self.next_call
    }

    /// When the next call may go.
    pub fn next_call(&self) -> Instant {
        self.next_call
    }

    /// A call went: the next one waits [`EDIT_EVERY`].
    pub fn called(&mut self) {
        self.wait(EDIT_EVERY);
    }

    /// The next call waits `wait` (a rate limit's answer).
    pub fn wait(&mut self, wait: Duration) {
        self.next_call = Instant::now() + wait;
    }

    /// The run is over and its draft stays for the answer to replace: wait for the pace, at
    /// most a few seconds.
    pub async fn before_the_answer(&self) {
        let pace = self.next_call.saturating_duration_since(Instant::now());
        tokio::time::sleep(pace.min(END_PACE_WAIT)).await;
    }
}

/// How long the end of a run waits for its presenter.
const FINISH_WAIT: Duration = Duration::from_secs(10);

/// The run's events into its live state `live` (with `apply`), each waking the presenter.
pub fn feed<L: Send + 'static>(
    live: &Arc<Mutex<L>>,
    wake: &Arc<Notify>,
    apply: fn(&mut L, &AgentEvent),
) -> EventFn {
    let (live, wake) = (live.clone(), wake.clone());
    Arc::new(move |event| {
        apply(&mut lock(&live), &event);
        wake.notify_one();
    })
}

/// The run is over: the presenter (`task`) ends with at most a short wait and one request;
/// it never holds up the answer for long.
pub async fn finish(done: &CancellationToken, task: Option<JoinHandle<()>>) {
    done.cancel();
    if let Some(mut task) = task {
        if tokio::time::timeout(FINISH_WAIT, &mut task).await.is_err() {
            task.abort();
        }
    }
}
