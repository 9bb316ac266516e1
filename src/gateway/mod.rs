//! The gateway: one actor per chat between the channels (and the scheduler) and the agent.
//! A chat with topics is several chats here: each topic has its own actor, queue and session
//! ([`ChatKey`]).
//!
//! Each chat has a queue of prompts; its actor runs them one at a time, so one chat's runs
//! never overlap, while different chats run concurrently. An actor is created on demand and
//! stops after a while without work. `/stop` aborts the running agent (which kills a running
//! sandbox process) and drops the queue, `/steer` injects a message into the running agent,
//! `/new` starts a fresh session. Every accepted prompt is a durable row (see [`store`]) before
//! it is queued, so a crash loses none, and an answer's part is sent again only when it may
//! not have arrived — marked as a possible repeat. A database that cannot be written (a full
//! disk) holds work up instead of losing it (see [`storage`]).
//!
//! Prompts that do not come from a chat message — scheduled jobs — go through the same queue:
//!
//! ```ignore
//! let handle = gateway.submit(
//!     Submission::text(chat_id, Origin::Scheduled { job_id: "7".into() }, "check the backups")
//!         .dedup_key("cron:7:2026-11-21T08:00"),
//! )?;
//! let result = handle.wait().await?; // RunResult { status, text, .. }; the chat got it too
//! ```

mod actor;
mod cancel;
pub mod channel;
pub mod channels;
mod failure;
mod notices;
mod recovery;
pub mod runner;
mod storage;
pub mod store;
pub mod worker;

pub use crate::memory::chat_key::ChatKey;
pub use cancel::Cancelled;
pub use channel::{Channel, DraftFn, RunInfo, RunView, SendError};
pub use failure::{FailureKind, RunFailure};
pub use runner::AgentRunner;
pub use storage::Trouble;

use crate::db::{Database, DbError};
use crate::llm::ContentBlock;
use crate::locks::lock;
use crate::memory::sessions::SessionStore;
use actor::{ChatSlot, Queued};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Inserted, NewRun, RunRow, RunState, RunStore};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where a prompt came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// A message a user sent in the chat.
    User { user_id: i64 },
    /// A job of the scheduler (cron, heartbeat).
    Scheduled { job_id: String },
    /// A `/steer` message that reached the agent after its last step: it runs next.
    Steer,
    /// A background command of the chat ended; the prompt is warden's notice of it.
    Background { job: u64 },
    /// A webhook of the HTTP API delivered a payload (untrusted content, in warden's notice).
    Hook { name: String },
    /// A stored origin this version cannot read.
    #[serde(other)]
    Unknown,
}

/// A prompt for a chat's queue.
#[derive(Clone, Debug)]
pub struct Submission {
    pub chat_id: i64,
    /// The chat's topic the prompt came from and the answer goes to (see [`ChatKey`]).
    pub topic: Option<i32>,
    pub origin: Origin,
    /// What the agent receives as the user's message.
    pub input: Vec<ContentBlock>,
    /// A short text for `/status` and notices.
    pub preview: String,
    /// The chat message the answer replies to.
    pub reply_to: Option<i32>,
    /// Submitting the same key again returns the existing run instead of a second one
    /// (a re-delivered update, a scheduler firing again after a restart).
    pub dedup_key: Option<String>,
    /// Send the answer to the chat (default). `false`: only the [`RunHandle`] gets it.
    pub deliver: bool,
    /// Run in this session instead of the chat's own (still queued in the chat): a scheduled
    /// job that starts fresh each time, the heartbeat.
    pub session: Option<String>,
}

impl Submission {
    /// A text prompt. Only a person's message is the person's words; a scheduled prompt or a
    /// notice is warden's (see [`Submission::notice`] for one that carries outside content).
    pub fn text(chat_id: i64, origin: Origin, text: impl Into<String>) -> Submission {
        let text = text.into();
        let block = match origin {
            Origin::User { .. } | Origin::Steer => ContentBlock::text(text.clone()),
            Origin::Scheduled { .. }
            | Origin::Background { .. }
            | Origin::Hook { .. }
            | Origin::Unknown => ContentBlock::notice(text.clone(), Vec::new()),
        };
        Submission {
            chat_id,
            topic: None,
            origin,
            preview: preview(&text),
            input: vec![block],
            reply_to: None,
            dedup_key: None,
            deliver: true,
            session: None,
        }
    }

    /// warden's own prompt carrying outside content (`untrusted`: what, for the taint).
    pub fn notice(
        chat_id: i64,
        origin: Origin,
        text: impl Into<String>,
        untrusted: Vec<String>,
    ) -> Submission {
        let text = text.into();
        let mut submission = Submission::text(chat_id, origin, text.clone());
        submission.input = vec![ContentBlock::notice(text, untrusted)];
        submission
    }

    pub fn blocks(chat_id: i64, origin: Origin, input: Vec<ContentBlock>, preview: &str) -> Self {
        Submission {
            chat_id,
            topic: None,
            origin,
            input,
            preview: self::preview(preview),
            reply_to: None,
            dedup_key: None,
            deliver: true,
            session: None,
        }
    }

    /// Queue it in `topic` of its chat (its own queue and session), answered there.
    pub fn in_topic(mut self, topic: Option<i32>) -> Submission {
        self.topic = topic;
        self
    }

    /// Where it is queued.
    pub fn chat_key(&self) -> ChatKey {
        ChatKey::new(self.chat_id, self.topic)
    }

    pub fn reply_to(mut self, message_id: i32) -> Submission {
        self.reply_to = Some(message_id);
        self
    }

    pub fn dedup_key(mut self, key: impl Into<String>) -> Submission {
        self.dedup_key = Some(key.into());
        self
    }

    /// Do not send the answer to the chat.
    pub fn silent(mut self) -> Submission {
        self.deliver = false;
        self
    }

    /// Run in `session` instead of the chat's own session.
    pub fn in_session(mut self, session: impl Into<String>) -> Submission {
        self.session = Some(session.into());
        self
    }
}

/// The first line of a prompt, shortened, for status displays and notices.
pub fn preview(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let short: String = line.trim().chars().take(80).collect();
    if short.len() < line.trim().len() || text.trim().lines().count() > 1 {
        format!("{short}…")
    } else {
        short
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("busy: {queued} messages are already waiting in this chat")]
    Busy { queued: usize },
    #[error("warden is shutting down")]
    ShuttingDown,
    #[error("{0}")]
    Store(#[from] DbError),
}

/// How a run ended, as the submitter sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    Answered,
    /// The agent hit its per-run iteration cap (the text says so).
    IterationLimit,
    /// `/stop` while it ran.
    Stopped,
    /// The model could not be reached (the text says why).
    Failed,
    /// Dropped from the queue by `/stop` before it started.
    Cancelled,
    /// warden stopped while the agent worked on it; it is not run again.
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Answered => "answered",
            RunStatus::IterationLimit => "iteration_limit",
            RunStatus::Stopped => "stopped",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Interrupted => "interrupted",
        }
    }

    fn parse(s: &str) -> RunStatus {
        match s {
            "answered" => RunStatus::Answered,
            "iteration_limit" => RunStatus::IterationLimit,
            "stopped" => RunStatus::Stopped,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            _ => RunStatus::Interrupted,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    pub run_id: i64,
    pub status: RunStatus,
    /// The answer as sent to the chat (empty for cancelled and interrupted runs).
    pub text: String,
}

impl RunResult {
    fn from_row(row: &RunRow) -> RunResult {
        RunResult {
            run_id: row.id,
            status: RunStatus::parse(row.outcome.as_deref().unwrap_or("interrupted")),
            text: row.answer.clone().unwrap_or_default(),
        }
    }
}

/// Waits for a submitted run's result.
#[derive(Debug)]
pub struct RunHandle {
    pub run_id: i64,
    rx: oneshot::Receiver<RunResult>,
}

#[derive(Debug, thiserror::Error)]
#[error("the gateway shut down before run {0} finished; it stays queued for the next start")]
pub struct GatewayClosed(pub i64);

impl RunHandle {
    pub async fn wait(self) -> Result<RunResult, GatewayClosed> {
        self.rx.await.map_err(|_| GatewayClosed(self.run_id))
    }
}

#[derive(Clone, Debug)]
pub struct GatewaySettings {
    /// Prompts that may wait behind the running one; more get [`SubmitError::Busy`].
    pub queue_depth: usize,
    /// An actor with nothing to do stops after this long (it is recreated on demand).
    pub idle: Duration,
    /// Session keys are `<prefix>:<chat_id>`, or `<prefix>:<chat_id>:<topic>` in a topic.
    pub session_prefix: String,
    /// The workspace's untrusted folders (`[trust] untrusted_paths`), for `/trust` to say what
    /// tainted a session.
    pub untrusted_folders: Vec<String>,
    /// No run starts while the database's disk has less free (its bookkeeping needs room).
    pub min_free_bytes: u64,
    /// How long a scheduled job's model calls wait out a busy model (nobody waits for the
    /// answer); `None`: as long as a chat's.
    pub scheduled_patience: Option<Duration>,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        GatewaySettings {
            queue_depth: 5,
            idle: Duration::from_secs(600),
            session_prefix: "telegram".into(),
            untrusted_folders: crate::config::TrustConfig::default().untrusted_paths,
            min_free_bytes: 64 * 1024 * 1024,
            scheduled_patience: None,
        }
    }
}

/// What `/status` shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatStatus {
    /// The running prompt's preview and how long it has run.
    pub running: Option<(String, Duration)>,
    /// Previews of the waiting prompts, in order.
    pub queued: Vec<String>,
}

/// What `/stop` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StopReport {
    pub aborted: bool,
    pub dropped: usize,
}

#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    agent: Arc<dyn AgentRunner>,
    /// For the audit log (a failed run's details).
    db: Arc<Database>,
    /// The chats' conversations (`/new` resets one, recovery closes one).
    sessions: SessionStore,
    store: RunStore,
    channel: Arc<dyn Channel>,
    settings: GatewaySettings,
    chats: Mutex<HashMap<ChatKey, Arc<ChatSlot>>>,
    waiters: Mutex<HashMap<i64, Vec<oneshot::Sender<RunResult>>>>,
    /// Set at shutdown: no new prompts, no new runs.
    closing: CancellationToken,
    /// Set when shutdown aborts the runs still going: their abort means "interrupted".
    aborting: AtomicBool,
    tasks: TaskTracker,
    /// Chats told that their work waits for the database.
    told: storage::Told,
}

impl Gateway {
    pub fn new(
        agent: Arc<dyn AgentRunner>,
        db: Arc<Database>,
        channel: Arc<dyn Channel>,
        settings: GatewaySettings,
    ) -> Gateway {
        Gateway {
            inner: Arc::new(Inner {
                agent,
                db: db.clone(),
                sessions: SessionStore::new(db.clone()),
                store: RunStore::new(db),
                channel,
                settings,
                chats: Mutex::new(HashMap::new()),
                waiters: Mutex::new(HashMap::new()),
                closing: CancellationToken::new(),
                aborting: AtomicBool::new(false),
                tasks: TaskTracker::new(),
                told: storage::Told::default(),
            }),
        }
    }

    /// The session key of a chat (or of one of its topics).
    pub fn session_key(&self, chat: impl Into<ChatKey>) -> String {
        self.inner.session_key(chat.into())
    }

    /// The chat (and topic) whose session `key` is; `None` for any other session.
    pub fn chat_of_session(&self, key: &str) -> Option<ChatKey> {
        let (prefix, _) = key.split_once(':')?;
        let chat = ChatKey::from_session_key(prefix, key)?;
        // Only the key this gateway itself gives the chat (`http:` for a Telegram chat is
        // nobody's session).
        (self.inner.session_key(chat) == key).then_some(chat)
    }

    /// Queue a prompt in its chat. Fails with [`SubmitError::Busy`] when `queue_depth` prompts
    /// already wait there; with a known dedup key, returns a handle to the existing run.
    pub fn submit(&self, submission: Submission) -> Result<RunHandle, SubmitError> {
        self.enqueue(submission, false)
    }

    fn enqueue(&self, s: Submission, front: bool) -> Result<RunHandle, SubmitError> {
        let inner = &self.inner;
        if inner.closing.is_cancelled() {
            return Err(SubmitError::ShuttingDown);
        }
        // The chats lock is held until the run is queued, so an idle actor cannot retire
        // between our lookup and our push.
        let chats = &mut lock(&inner.chats);
        let slot = self.slot(chats, s.chat_key());
        let mut state = lock(&slot.state);
        if let Some(key) = &s.dedup_key {
            if let Some(row) = inner.store.by_key(key)? {
                return Ok(self.handle_for(&row));
            }
        }
        if !front && state.queue.len() >= inner.settings.queue_depth {
            return Err(SubmitError::Busy {
                queued: state.queue.len(),
            });
        }
        let new = NewRun {
            chat_id: s.chat_id,
            topic: s.topic,
            origin: &s.origin,
            dedup_key: s.dedup_key.as_deref(),
            input: &s.input,
            preview: &s.preview,
            reply_to: s.reply_to,
            deliver: s.deliver,
            session: s.session.as_deref(),
        };
        let run_id = match inner.store.insert(&new)? {
            Inserted::New(id) => id,
            Inserted::Existing(row) => return Ok(self.handle_for(&row)),
        };
        let (tx, rx) = oneshot::channel();
        lock(&inner.waiters).entry(run_id).or_default().push(tx);
        let queued = Queued {
            run_id,
            preview: s.preview.clone(),
        };
        if front {
            state.queue.push_front(queued);
        } else {
            state.queue.push_back(queued);
        }
        drop(state);
        slot.wake.notify_one();
        Ok(RunHandle { run_id, rx })
    }

    /// The chat's slot, starting its actor if it has none.
    fn slot(&self, chats: &mut HashMap<ChatKey, Arc<ChatSlot>>, chat: ChatKey) -> Arc<ChatSlot> {
        chats
            .entry(chat)
            .or_insert_with(|| {
                let slot = Arc::new(ChatSlot::default());
                let inner = self.inner.clone();
                let actor_slot = slot.clone();
                self.inner
                    .tasks
                    .spawn(actor::run_chat(inner, chat, actor_slot));
                slot
            })
            .clone()
    }

    /// A handle for a run that exists already: resolved now if it is finished.
    fn handle_for(&self, row: &RunRow) -> RunHandle {
        let (tx, rx) = oneshot::channel();
        match row.state {
            RunState::Answered | RunState::Cancelled | RunState::Interrupted => {
                let _ = tx.send(RunResult::from_row(row));
            }
            _ => lock(&self.inner.waiters)
                .entry(row.id)
                .or_default()
                .push(tx),
        }
        RunHandle { run_id: row.id, rx }
    }

    /// Send `text` to a chat outside any run: an answer the submitter filtered first (the
    /// heartbeat drops `HEARTBEAT_OK` and repeats from a silent run's result). Not recorded,
    /// so a part that may have arrived is not sent again.
    pub async fn send(&self, chat: impl Into<ChatKey>, text: &str) -> Result<(), String> {
        self.inner.say(chat.into(), None, text).await
    }

    /// `/stop`: abort the running agent and drop the waiting prompts.
    pub fn stop(&self, chat: impl Into<ChatKey>) -> StopReport {
        let Some(slot) = lock(&self.inner.chats).get(&chat.into()).cloned() else {
            return StopReport::default();
        };
        let (aborted, dropped) = {
            let mut state = lock(&slot.state);
            let aborted = match &state.running {
                Some(running) => {
                    running.control.abort();
                    true
                }
                None => false,
            };
            (aborted, state.queue.drain(..).collect::<Vec<_>>())
        };
        for queued in &dropped {
            if let Err(e) = self.inner.store.set_cancelled(queued.run_id) {
                tracing::warn!(run = queued.run_id, "recording a cancelled run: {e}");
            }
            self.inner.resolve(RunResult {
                run_id: queued.run_id,
                status: RunStatus::Cancelled,
                text: String::new(),
            });
        }
        StopReport {
            aborted,
            dropped: dropped.len(),
        }
    }

    /// `/retry`: queue again the chat's messages that got no answer since its last answered
    /// one (the model failed, or a restart cut them off), in order, each once. Scheduled jobs
    /// are left to the scheduler, which tries them again itself. Returns how many were queued.
    pub fn retry(&self, chat: impl Into<ChatKey>, user_id: i64) -> Result<usize, SubmitError> {
        let chat: ChatKey = chat.into();
        let mut queued = 0;
        for row in self.inner.store.unanswered(chat)? {
            let origin = match row.origin {
                Origin::Scheduled { .. } => continue,
                Origin::Background { job } => Origin::Background { job },
                Origin::Hook { name } => Origin::Hook { name },
                _ => Origin::User { user_id },
            };
            let submission = Submission {
                chat_id: chat.chat_id,
                topic: chat.topic,
                origin,
                input: row.input,
                preview: row.preview,
                reply_to: row.reply_to,
                dedup_key: Some(format!("retry:{}", row.id)),
                deliver: true,
                session: row.session,
            };
            self.submit(submission)?;
            queued += 1;
        }
        Ok(queued)
    }

    /// `/steer TEXT`: deliver `text` to the running agent before its next step. False when
    /// nothing runs in the chat.
    pub fn steer(&self, chat: impl Into<ChatKey>, text: &str) -> bool {
        let slot = lock(&self.inner.chats).get(&chat.into()).cloned();
        slot.is_some_and(|slot| match &lock(&slot.state).running {
            Some(running) => {
                running.control.steer(text);
                true
            }
            None => false,
        })
    }

    pub fn status(&self, chat: impl Into<ChatKey>) -> ChatStatus {
        let Some(slot) = lock(&self.inner.chats).get(&chat.into()).cloned() else {
            return ChatStatus::default();
        };
        let state = lock(&slot.state);
        ChatStatus {
            running: state
                .running
                .as_ref()
                .map(|r| (r.preview.clone(), r.started.elapsed())),
            queued: state.queue.iter().map(|q| q.preview.clone()).collect(),
        }
    }

    /// `/new`: start a fresh session. Refused (`Ok(false)`) while a run is in progress, since
    /// the running agent would write into the new session.
    pub fn new_session(&self, chat: impl Into<ChatKey>) -> Result<bool, DbError> {
        let chat = chat.into();
        let slot = lock(&self.inner.chats).get(&chat).cloned();
        if let Some(slot) = slot {
            if lock(&slot.state).running.is_some() {
                return Ok(false);
            }
        }
        self.inner.sessions.reset(&self.session_key(chat))?;
        Ok(true)
    }

    /// `/trust`: the chat's session is trusted again — what tainted it (returned) no longer
    /// does. Refused (`Ok(None)`) while a run is in progress: it would record its taint again.
    pub fn trust_session(&self, chat: impl Into<ChatKey>) -> Result<Option<Vec<String>>, DbError> {
        let chat = chat.into();
        let slot = lock(&self.inner.chats).get(&chat).cloned();
        if let Some(slot) = slot {
            if lock(&slot.state).running.is_some() {
                return Ok(None);
            }
        }
        let key = self.session_key(chat);
        self.inner
            .sessions
            .trust(&key, &self.inner.settings.untrusted_folders)
            .map(Some)
    }

    /// Stop taking prompts, let running agents finish for up to `grace`, then abort them
    /// (they are recorded as interrupted and the user is told at the next start). Queued
    /// prompts stay queued in the database.
    pub async fn shutdown(&self, grace: Duration) {
        let inner = &self.inner;
        inner.closing.cancel();
        inner.tasks.close();
        if tokio::time::timeout(grace, inner.tasks.wait())
            .await
            .is_err()
        {
            self.abort_all().await;
        }
        // Handles of prompts still queued learn that they run at the next start.
        lock(&inner.waiters).clear();
    }

    async fn abort_all(&self) {
        let inner = &self.inner;
        inner
            .aborting
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let slots: Vec<Arc<ChatSlot>> = lock(&inner.chats).values().cloned().collect();
        for slot in slots {
            if let Some(running) = &lock(&slot.state).running {
                running.control.interrupt();
            }
        }
        if tokio::time::timeout(Duration::from_secs(10), inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("some runs did not stop within 10 s of being aborted");
        }
    }
}

/// What [`Gateway::recover`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    pub interrupted: usize,
    pub requeued: usize,
}

impl Inner {
    /// The session a run works in: its own (a fresh-session job, the heartbeat) or the chat's.
    fn session_of(&self, row: &RunRow) -> String {
        row.session
            .clone()
            .unwrap_or_else(|| self.session_key(row.chat_key()))
    }

    /// The session key of `chat`: its channel's prefix, or the gateway's.
    fn session_key(&self, chat: ChatKey) -> String {
        let prefix = self.channel.session_prefix(chat.chat_id);
        chat.session_key(prefix.unwrap_or(&self.settings.session_prefix))
    }

    /// A run failed: the details go to the log and the audit log (the chat gets plain words).
    fn record_failure(&self, row: &RunRow, failure: &RunFailure) {
        tracing::warn!(
            run = row.id,
            chat = row.chat_id,
            kind = ?failure.kind,
            "the run could not finish: {}",
            failure.detail
        );
        let entry = crate::audit::AuditEntry {
            session: self.session_of(row),
            tool: "run".into(),
            input: row.preview.clone(),
            decision: crate::audit::AuditDecision::Error,
            reason: format!("{:?}: {}", failure.kind, failure.detail),
            exit_code: None,
            duration_ms: 0,
            network: None,
        };
        if let Err(e) = crate::audit::record(&self.db, &entry) {
            tracing::warn!(run = row.id, "auditing a failed run: {e}");
        }
    }

    /// Hand `result` to everyone waiting for its run.
    fn resolve(&self, result: RunResult) {
        for tx in lock(&self.waiters)
            .remove(&result.run_id)
            .unwrap_or_default()
        {
            let _ = tx.send(result.clone());
        }
    }
}

#[cfg(test)]
mod tests;
