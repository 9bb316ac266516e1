//! How a run looks in a Slack conversation while it goes, and the gateway's [`Channel`] for
//! Slack.
//!
//! Once the model's text has streamed for a second, it appears in one message (in the
//! session's thread), edited in place with `chat.update` at most once per
//! [`EDIT_EVERY`](crate::channels::pace::EDIT_EVERY);
//! a rate limit's `Retry-After` pushes the next edit back, unchanged text is not sent again.
//! That message is the answer's **draft**: its `ts` is stored with the run, and the answer's
//! first part replaces it — also after a restart — so the answer is never shown twice.

use super::api::{id_to_ts, ts_to_id, ApiError, SlackApi};
use super::approvals::{SlackApprovals, SlackApprover};
use super::files::SlackOutbox;
use super::format::{escape, parts, MESSAGE_LIMIT};
use super::store::{Conversation, SlackStore};
use crate::agent::{AgentEvent, EventFn, RunControl};
use crate::channels::pace::Pace;
use crate::gateway::{Channel, DraftFn, RunInfo, RunView, SendError};
use crate::locks::lock;
use crate::policy::PathPolicy;
use crate::tools::approval::{Approver, NoApprover};
use crate::tools::outbox::{Nowhere, Outbox};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Streamed text appears once it has streamed this long (a quick answer simply arrives).
const STREAM_AFTER: Duration = Duration::from_secs(1);
/// The first line of a part sent again after a restart or a time-out.
const MAYBE_REPEAT: &str =
    "_↻ Sent again: warden could not confirm that this arrived, so it may be a repeat._\n";

pub struct SlackChannel {
    pub api: SlackApi,
    pub store: SlackStore,
    pub approvals: Arc<SlackApprovals>,
    /// The workspace: `send_file` uploads from here.
    pub paths: Arc<PathPolicy>,
    /// `slack.max_send_bytes`.
    pub max_send_bytes: u64,
}

/// Why a run whose answer is filtered first (the heartbeat) sends no files.
const SILENT_RUN: Nowhere = Nowhere(
    "this run's answer is checked before it reaches the conversation, so it sends no files",
);

impl SlackChannel {
    fn conversation(&self, chat_id: i64) -> Result<Conversation, SendError> {
        match self.store.conversation(chat_id) {
            Ok(Some(conversation)) => Ok(conversation),
            Ok(None) => Err(SendError::Failed(format!(
                "chat {chat_id} is no Slack conversation warden knows"
            ))),
            Err(e) => Err(SendError::Failed(format!("reading the conversation: {e}"))),
        }
    }
}

fn send_error(error: ApiError) -> SendError {
    match error {
        ApiError::Transport(why) => SendError::MayHaveArrived(why),
        other => SendError::Failed(other.to_string()),
    }
}

#[async_trait]
impl Channel for SlackChannel {
    fn serves(&self, chat_id: i64) -> bool {
        SlackStore::is_slack(chat_id)
    }

    fn open_run(&self, run: &RunInfo, control: &RunControl, draft: DraftFn) -> Box<dyn RunView> {
        let live = Arc::new(Mutex::new(Live::new(run.deliver)));
        let wake = Arc::new(Notify::new());
        let done = CancellationToken::new();
        let conversation = match self.store.conversation(run.chat_id) {
            Ok(Some(conversation)) => Some(conversation),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(chat = run.chat_id, "slack: reading the conversation: {e}");
                None
            }
        };
        // Without its conversation a run can show nothing and ask nobody: `ask` is `deny`.
        let approver: Arc<dyn Approver> = match &conversation {
            Some(conversation) => Arc::new(SlackApprover {
                approvals: self.approvals.clone(),
                api: self.api.clone(),
                conversation: conversation.clone(),
                cancel: control.cancel_token(),
            }),
            None => Arc::new(NoApprover),
        };
        let outbox: Arc<dyn Outbox> = match (&conversation, run.deliver) {
            (Some(conversation), true) => Arc::new(SlackOutbox {
                api: self.api.clone(),
                conversation: conversation.clone(),
                paths: self.paths.clone(),
                max_bytes: self.max_send_bytes,
            }),
            _ => Arc::new(SILENT_RUN),
        };
        let task = conversation.map(|conversation| {
            tokio::spawn(
                Presenter {
                    api: self.api.clone(),
                    conversation,
                    live: live.clone(),
                    wake: wake.clone(),
                    done: done.clone(),
                    on_draft: draft,
                }
                .show(),
            )
        });
        Box::new(SlackView {
            approver,
            outbox,
            live,
            wake,
            done,
            task,
        })
    }

    fn parts(&self, text: &str) -> Vec<String> {
        parts(text, MESSAGE_LIMIT)
    }

    async fn send_part(
        &self,
        run: &RunInfo,
        index: usize,
        part: &str,
        again: bool,
    ) -> Result<(), SendError> {
        let conversation = self.conversation(run.chat_id)?;
        if let (0, Some(draft)) = (index, run.draft) {
            // An edit made twice shows the same text: no repeat to warn about.
            return self
                .api
                .update(&conversation.channel, &id_to_ts(draft), part, true)
                .await
                .map_err(send_error);
        }
        let text = if again {
            format!("{MAYBE_REPEAT}{part}")
        } else {
            part.to_string()
        };
        self.api
            .post(
                &conversation.channel,
                conversation.thread_ts.as_deref(),
                &text,
                true,
            )
            .await
            .map(|_| ())
            .map_err(send_error)
    }
}

struct SlackView {
    approver: Arc<dyn Approver>,
    outbox: Arc<dyn Outbox>,
    live: Arc<Mutex<Live>>,
    wake: Arc<Notify>,
    done: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

#[async_trait]
impl RunView for SlackView {
    fn approver(&self) -> Arc<dyn Approver> {
        self.approver.clone()
    }

    fn outbox(&self) -> Arc<dyn Outbox> {
        self.outbox.clone()
    }

    fn events(&self) -> EventFn {
        crate::channels::pace::feed(&self.live, &self.wake, Live::apply)
    }

    async fn finish(self: Box<Self>) {
        crate::channels::pace::finish(&self.done, self.task).await;
    }
}

/// What the live message shows: the current step's text, and under it what runs now.
#[derive(Default)]
struct Live {
    stream: bool,
    text: String,
    status: Option<String>,
    new_step: bool,
}

impl Live {
    fn new(stream: bool) -> Live {
        Live {
            stream,
            ..Live::default()
        }
    }

    fn apply(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::TextDelta(delta) if self.stream => {
                if self.new_step {
                    self.text.clear();
                    self.new_step = false;
                }
                self.text.push_str(delta);
                self.status = None;
            }
            AgentEvent::TextDelta(_) => {}
            AgentEvent::ToolEnd { .. } => self.new_step = true,
            AgentEvent::ToolStart { name, summary, .. } => {
                let what = if name == "bash" {
                    format!("⏳ Running `{}`…", escape(summary))
                } else {
                    format!("⏳ {}: `{}`…", escape(name), escape(summary))
                };
                self.status = Some(what);
                self.new_step = true;
            }
            AgentEvent::Progress(text) => self.status = Some(format!("⏳ {}", escape(text))),
            AgentEvent::Steered(_) => self.status = Some("⏳ Got your steer; continuing…".into()),
            // Numbers for /metrics, not for the person.
            AgentEvent::Measured(_) => {}
        }
    }

    /// The message as it should look now (its first part only); `None` before any text.
    fn render(&self) -> Option<String> {
        if self.text.trim().is_empty() {
            return None;
        }
        let tail = self
            .status
            .as_ref()
            .map(|s| format!("\n\n{s}"))
            .unwrap_or_default();
        let budget = MESSAGE_LIMIT.saturating_sub(tail.chars().count()).max(64);
        let first = parts(&self.text, budget).into_iter().next()?;
        Some(first + &tail)
    }
}

/// The task that keeps one run's live message up to date, until `done`.
struct Presenter {
    api: SlackApi,
    conversation: Conversation,
    live: Arc<Mutex<Live>>,
    wake: Arc<Notify>,
    done: CancellationToken,
    on_draft: DraftFn,
}

impl Presenter {
    async fn show(self) {
        let mut ts: Option<String> = None;
        let mut shown = String::new();
        let mut pace = Pace::at_once();
        let mut text_since: Option<Instant> = None;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tokio::select! {
                biased;
                _ = self.done.cancelled() => break,
                _ = self.wake.notified() => {}
                _ = tick.tick() => {}
            }
            let Some(current) = lock(&self.live).render() else {
                continue;
            };
            let since = *text_since.get_or_insert_with(Instant::now);
            if since.elapsed() < STREAM_AFTER || current == shown || !pace.due() {
                continue;
            }
            let result = match &ts {
                None => self
                    .api
                    .post(
                        &self.conversation.channel,
                        self.conversation.thread_ts.as_deref(),
                        &current,
                        false,
                    )
                    .await
                    .map(|new| {
                        if let Some(id) = ts_to_id(&new) {
                            (self.on_draft)(id);
                        }
                        ts = Some(new);
                    }),
                Some(ts) => {
                    self.api
                        .update(&self.conversation.channel, ts, &current, false)
                        .await
                }
            };
            match result {
                Ok(()) => {
                    shown = current;
                    pace.called();
                }
                Err(ApiError::RateLimited(wait)) => {
                    tracing::debug!("slack live message: rate limited for {wait:?}");
                    pace.wait(wait);
                }
                Err(ApiError::Transport(_)) if ts.is_some() => pace.called(),
                Err(e) => {
                    // A post whose answer got lost may still show: posting again could show
                    // two drafts, so the run's answer comes as its own message instead.
                    tracing::debug!("slack live message: {e}; no more edits for this run");
                    break;
                }
            }
        }
        // The answer's first part replaces the draft no sooner than the pace allows.
        if ts.is_some() {
            pace.before_the_answer().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_message_shows_text_then_what_runs_and_escapes_both() {
        let mut live = Live::new(true);
        assert_eq!(live.render(), None);
        live.apply(&AgentEvent::TextDelta("Looking at <!channel> & co".into()));
        assert_eq!(
            live.render().as_deref(),
            Some("Looking at &lt;!channel&gt; &amp; co")
        );
        live.apply(&AgentEvent::ToolStart {
            id: "t".into(),
            name: "bash".into(),
            summary: "ls <x>".into(),
        });
        assert!(live
            .render()
            .unwrap()
            .ends_with("⏳ Running `ls &lt;x&gt;`…"));
        let mut silent = Live::new(false);
        silent.apply(&AgentEvent::TextDelta("HEARTBEAT_OK".into()));
        assert_eq!(silent.render(), None);
    }
}
