//! How a run looks in a Telegram chat while it goes, and the gateway's [`Channel`] for
//! Telegram.
//!
//! "typing…" every few seconds, and one live message ([`super::live`]) edited in place:
//!
//! - the model's text as it streams, once it has streamed for a second (a quick answer simply
//!   arrives as the answer). This message replies to the prompt and is the answer's **draft**:
//!   its id is stored with the run, and the answer's first part replaces it, also after a
//!   restart, so the answer is never shown twice;
//! - before any text, after a few seconds, a status line alone ("⏳ Running `ls`…"), which is
//!   removed at the end (or when text starts, which then gets a message of its own).
//!
//! Telegram limits edits: at most one call per [`EDIT_EVERY`](crate::channels::pace::EDIT_EVERY) per run (one run per chat at a
//! time), a `retry_after` answer is waited out, unchanged text is not sent again, and the
//! answer's first edit keeps the same pace.

use super::api::{Draft, Telegram};
use super::approvals::{Approvals, ChatApprover};
use super::live::{Live, Shown};
use super::split::MESSAGE_LIMIT;
use super::upload::ChatOutbox;
use crate::agent::{EventFn, RunControl};
use crate::channels::pace::{Pace, EDIT_EVERY};
use crate::gateway::{Channel, ChatKey, DraftFn, RunInfo, RunView, SendError};
use crate::locks::lock;
use crate::policy::PathPolicy;
use crate::tools::approval::Approver;
use crate::tools::outbox::{Nowhere, Outbox};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use teloxide::RequestError;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// A status message appears once a run has taken this long.
const STATUS_AFTER: Duration = Duration::from_secs(3);
/// Streamed text appears once it has streamed this long.
const STREAM_AFTER: Duration = Duration::from_secs(1);
/// Telegram shows "typing…" for about 5 s per chat action.
const TYPING_EVERY: Duration = Duration::from_secs(4);

/// Why a run whose answer is filtered first (the heartbeat) sends no files.
const SILENT_RUN: Nowhere = Nowhere(
    "this run's answer is checked before it reaches the chat (the heartbeat), so it sends no \
     files",
);

pub struct TelegramChannel {
    tg: Telegram,
    approvals: Arc<Approvals>,
    /// The workspace: `send_file` uploads from here.
    paths: Arc<PathPolicy>,
    /// `telegram.max_send_bytes`.
    max_send_bytes: u64,
    /// The HTML each draft showed when its run ended, until the answer replaces it.
    drafts: Arc<Mutex<HashMap<i32, String>>>,
}

impl TelegramChannel {
    pub fn new(
        tg: Telegram,
        approvals: Arc<Approvals>,
        paths: Arc<PathPolicy>,
        max_send_bytes: u64,
    ) -> TelegramChannel {
        TelegramChannel {
            tg,
            approvals,
            paths,
            max_send_bytes,
            drafts: Arc::default(),
        }
    }
}

#[async_trait]
impl Channel for TelegramChannel {
    /// Every chat but the HTTP API's threads (their runs are `warden serve`'s) and Slack's
    /// conversations.
    fn serves(&self, chat_id: i64) -> bool {
        !crate::channels::http::threads::Threads::is_thread(chat_id)
            && !crate::channels::slack::store::SlackStore::is_slack(chat_id)
    }

    fn open_run(&self, run: &RunInfo, control: &RunControl, draft: DraftFn) -> Box<dyn RunView> {
        let live = Arc::new(Mutex::new(Live::new(run.deliver)));
        let wake = Arc::new(Notify::new());
        let done = CancellationToken::new();
        let chat = ChatKey::new(run.chat_id, run.topic);
        let presenter = Presenter {
            tg: self.tg.clone(),
            chat,
            reply_to: run.reply_to,
            live: live.clone(),
            wake: wake.clone(),
            done: done.clone(),
            on_draft: draft,
            drafts: self.drafts.clone(),
        };
        let outbox: Arc<dyn Outbox> = if run.deliver {
            Arc::new(ChatOutbox {
                tg: self.tg.clone(),
                chat,
                paths: self.paths.clone(),
                max_bytes: self.max_send_bytes,
            })
        } else {
            Arc::new(SILENT_RUN)
        };
        Box::new(TelegramView {
            approver: Arc::new(ChatApprover {
                approvals: self.approvals.clone(),
                run_id: run.run_id,
                tg: self.tg.clone(),
                chat_id: run.chat_id,
                topic: run.topic,
                reply_to: run.reply_to,
                cancel: control.cancel_token(),
            }),
            outbox,
            live,
            wake,
            done,
            task: tokio::spawn(presenter.show()),
        })
    }

    fn parts(&self, text: &str) -> Vec<String> {
        Telegram::parts(text)
    }

    async fn send_part(
        &self,
        run: &RunInfo,
        index: usize,
        part: &str,
        again: bool,
    ) -> Result<(), SendError> {
        let chat = ChatKey::new(run.chat_id, run.topic);
        let draft = run.draft.and_then(|id| i32::try_from(id).ok());
        match (index, draft) {
            (0, Some(message_id)) => {
                let draft = Draft {
                    message_id,
                    shown: lock(&self.drafts).get(&message_id).cloned(),
                };
                self.tg
                    .replace_draft(chat, run.reply_to, &draft, part, again)
                    .await?;
                lock(&self.drafts).remove(&message_id);
                Ok(())
            }
            (0, None) => self.tg.send_part(chat, run.reply_to, part, again).await,
            _ => self.tg.send_part(chat, None, part, again).await,
        }
    }
}

struct TelegramView {
    approver: Arc<ChatApprover>,
    outbox: Arc<dyn Outbox>,
    live: Arc<Mutex<Live>>,
    wake: Arc<Notify>,
    done: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

#[async_trait]
impl RunView for TelegramView {
    fn approver(&self) -> Arc<dyn Approver> {
        self.approver.clone()
    }

    fn events(&self) -> EventFn {
        crate::channels::pace::feed(&self.live, &self.wake, Live::apply)
    }

    fn outbox(&self) -> Arc<dyn Outbox> {
        self.outbox.clone()
    }

    async fn finish(self: Box<Self>) {
        crate::channels::pace::finish(&self.done, Some(self.task)).await;
    }
}

/// The live message on screen.
#[derive(Clone, Copy)]
struct OnScreen {
    id: i32,
    /// It shows model text: the answer's draft (else a status message, removed at the end).
    draft: bool,
}

/// The task that keeps one run's live message up to date, until `done`.
struct Presenter {
    tg: Telegram,
    /// The run's chat and topic.
    chat: ChatKey,
    reply_to: Option<i32>,
    live: Arc<Mutex<Live>>,
    wake: Arc<Notify>,
    done: CancellationToken,
    on_draft: DraftFn,
    drafts: Arc<Mutex<HashMap<i32, String>>>,
}

/// What one call to Telegram came to.
enum Called {
    Done,
    /// Flood control: the next call waits this long.
    Wait(Duration),
    /// It cannot work (the message is gone, the chat refuses): stop trying.
    GaveUp,
}

impl Presenter {
    async fn show(self) {
        let started = Instant::now();
        let mut last_typing: Option<Instant> = None;
        let mut message: Option<OnScreen> = None;
        let mut shown = String::new();
        let mut pace = Pace::at_once();
        let mut text_since: Option<Instant> = None;
        let mut gave_up = false;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let mut waiting = false;
        loop {
            tokio::select! {
                biased;
                _ = self.done.cancelled() => break,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep_until(pace.next_call().into()), if waiting => {}
                _ = tick.tick() => {}
            }
            if last_typing.is_none_or(|t| t.elapsed() >= TYPING_EVERY) {
                last_typing = Some(Instant::now());
                self.tg.typing(self.chat).await;
            }
            waiting = false;
            if gave_up {
                continue;
            }
            let current = lock(&self.live).render(MESSAGE_LIMIT);
            if current.has_text {
                text_since.get_or_insert_with(Instant::now);
            }
            let due = match text_since {
                Some(since) if current.has_text => since.elapsed() >= STREAM_AFTER,
                _ => started.elapsed() >= STATUS_AFTER,
            };
            if !due || (message.is_some() && current.html == shown) {
                continue;
            }
            if !pace.due() {
                waiting = true;
                continue;
            }
            let called = self.update(&mut message, &current).await;
            match called {
                Called::Done => {
                    shown = current.html;
                    pace.called();
                }
                Called::Wait(wait) => {
                    tracing::debug!(
                        chat = self.chat.chat_id,
                        "live message: flood control, {wait:?}"
                    );
                    pace.wait(wait);
                    waiting = true;
                }
                Called::GaveUp => gave_up = true,
            }
        }
        self.end(message, shown, &pace).await;
    }

    /// Bring the live message to `current`: send it, edit it, or — when text first replaces a
    /// status — remove the status message and send the draft in its place.
    async fn update(&self, message: &mut Option<OnScreen>, current: &Shown) -> Called {
        if let Some(status) = message.filter(|m| !m.draft && current.has_text) {
            self.tg.delete(self.chat.chat_id, status.id).await;
            *message = None;
        }
        let Some(on_screen) = *message else {
            let reply_to = if current.has_text {
                self.reply_to
            } else {
                None
            };
            return match self
                .tg
                .send_html_once(self.chat, reply_to, &current.html)
                .await
            {
                Ok(sent) => {
                    *message = Some(OnScreen {
                        id: sent.id.0,
                        draft: current.has_text,
                    });
                    if current.has_text {
                        (self.on_draft)(i64::from(sent.id.0));
                    }
                    Called::Done
                }
                Err(e) => self.failed("sending the live message", e),
            };
        };
        match self
            .tg
            .edit_html_once(self.chat.chat_id, on_screen.id, &current.html)
            .await
        {
            Ok(()) => Called::Done,
            Err(e) => self.failed("editing the live message", e),
        }
    }

    fn failed(&self, what: &str, error: RequestError) -> Called {
        match error {
            RequestError::RetryAfter(secs) => Called::Wait(secs.duration()),
            // A network hiccup: the next tick tries again.
            RequestError::Network(_) | RequestError::Io(_) => Called::Wait(EDIT_EVERY),
            other => {
                tracing::debug!(
                    chat = self.chat.chat_id,
                    "{what}: {}",
                    super::api::describe(&other)
                );
                Called::GaveUp
            }
        }
    }

    /// The run is over: a status message goes; a draft stays for the answer to replace, which
    /// comes no sooner than the edit pace allows.
    async fn end(&self, message: Option<OnScreen>, shown: String, pace: &Pace) {
        match message {
            Some(draft) if draft.draft => {
                lock(&self.drafts).insert(draft.id, shown);
                pace.before_the_answer().await;
            }
            Some(status) => self.tg.delete(self.chat.chat_id, status.id).await,
            None => {}
        }
    }
}
