//! One chat's actor: takes prompts from the chat's queue one at a time, runs the agent,
//! stores the answer, delivers it, and stops after a while with nothing to do.
//!
//! The queue and the running run live in a [`ChatSlot`] shared with the [`super::Gateway`], so
//! `/stop`, `/steer` and `/status` act at once without waiting for the actor.

use super::store::{RunRow, RunState};
use super::{lock, ChatKey, Inner, Origin, RunInfo, RunResult, RunStatus, SendError, Submission};
use crate::agent::{RunControl, RunEnd, RunRequest};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Notify;

#[derive(Default)]
pub(super) struct ChatSlot {
    pub state: Mutex<ChatState>,
    /// Rung when a prompt is queued.
    pub wake: Notify,
}

#[derive(Default)]
pub(super) struct ChatState {
    pub queue: VecDeque<Queued>,
    pub running: Option<Running>,
}

pub(super) struct Queued {
    pub run_id: i64,
    pub preview: String,
}

pub(super) struct Running {
    pub run_id: i64,
    pub preview: String,
    pub started: Instant,
    pub control: RunControl,
}

pub(super) fn info(row: &RunRow) -> RunInfo {
    RunInfo {
        run_id: row.id,
        chat_id: row.chat_id,
        topic: row.topic,
        reply_to: row.reply_to,
        preview: row.preview.clone(),
        origin: row.origin.clone(),
        deliver: row.deliver,
        draft: row.draft,
    }
}

pub(super) async fn run_chat(inner: Arc<Inner>, chat: ChatKey, slot: Arc<ChatSlot>) {
    loop {
        if inner.closing.is_cancelled() {
            retire(&inner, chat, &slot, true);
            return;
        }
        let next = lock(&slot.state).queue.pop_front();
        if let Some(queued) = next {
            execute(&inner, &slot, queued).await;
            continue;
        }
        tokio::select! {
            _ = slot.wake.notified() => {}
            _ = inner.closing.cancelled() => {}
            _ = tokio::time::sleep(inner.settings.idle) => {
                if retire(&inner, chat, &slot, false) {
                    return;
                }
            }
        }
    }
}

/// Remove the slot from the gateway if there is nothing left to do (or when closing).
fn retire(inner: &Inner, chat: ChatKey, slot: &Arc<ChatSlot>, closing: bool) -> bool {
    let mut chats = lock(&inner.chats);
    let idle = {
        let state = lock(&slot.state);
        state.queue.is_empty() && state.running.is_none()
    };
    if (idle || closing) && chats.get(&chat).is_some_and(|s| Arc::ptr_eq(s, slot)) {
        chats.remove(&chat);
    }
    idle || closing
}

async fn execute(inner: &Arc<Inner>, slot: &ChatSlot, queued: Queued) {
    let row = match inner.store.get(queued.run_id) {
        Ok(Some(row)) => row,
        Ok(None) => return,
        Err(e) => {
            // Not dropped: it is still queued in the store. Try again after a pause (a start
            // that fails here comes back through the queue, in its place).
            tracing::error!(run = queued.run_id, "reading a queued run: {e}");
            lock(&slot.state).queue.push_front(queued);
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                _ = inner.closing.cancelled() => {}
            }
            return;
        }
    };
    match row.state {
        RunState::Queued => run_agent(inner, slot, row).await,
        RunState::Replying => {
            let text = row.answer.clone().unwrap_or_default();
            deliver(inner, &row, &text).await;
        }
        // Finished meanwhile (a duplicate submission, a /stop).
        _ => {}
    }
}

async fn run_agent(inner: &Arc<Inner>, slot: &ChatSlot, row: RunRow) {
    // A full disk would fail the run's own writes: it waits for room first. Running without
    // the durable mark could answer twice after a crash: it waits for that too.
    if !inner.room_for(&row).await
        || inner
            .durable(&row, false, "marking a run as running", || {
                inner.store.set_running(row.id)
            })
            .await
            .is_none()
    {
        return;
    }
    let control = RunControl::new();
    lock(&slot.state).running = Some(Running {
        run_id: row.id,
        preview: row.preview.clone(),
        started: Instant::now(),
        control: control.clone(),
    });
    let info = info(&row);
    let draft = Arc::new(Mutex::new(None));
    let view = inner
        .channel
        .open_run(&info, &control, draft_recorder(inner, row.id, &draft));
    let result = inner
        .agent
        .run(RunRequest {
            session: inner.session_of(&row),
            input: row.input.clone(),
            approver: view.approver(),
            outbox: view.outbox(),
            events: view.events(),
            control,
            background: super::Gateway {
                inner: inner.clone(),
            }
            .background_reporter(row.chat_key(), row.session.clone()),
            patience: match row.origin {
                Origin::Scheduled { .. } => inner.settings.scheduled_patience,
                _ => None,
            },
        })
        .await;
    view.finish().await;
    lock(&slot.state).running = None;
    let row = RunRow {
        draft: *lock(&draft),
        ..row
    };

    let (status, text, leftover) = match result {
        Ok(outcome) => match outcome.end {
            RunEnd::Aborted if inner.aborting.load(Ordering::SeqCst) => {
                // Cut short by shutdown, not by the user: told at the next start.
                let notice = interrupted_notice(&row);
                if let Err(e) = inner.store.set_interrupted(&[(row.id, notice)]) {
                    tracing::error!(run = row.id, "recording an interrupted run: {e}");
                }
                inner.resolve(RunResult {
                    run_id: row.id,
                    status: RunStatus::Interrupted,
                    text: String::new(),
                });
                return;
            }
            // The answer carries the summary of what the run changed for later runs.
            RunEnd::Aborted => (RunStatus::Stopped, outcome.text_with_summary(), Vec::new()),
            RunEnd::Answered => (
                RunStatus::Answered,
                outcome.text_with_summary(),
                outcome.unconsumed_steer,
            ),
            RunEnd::IterationLimit => (
                RunStatus::IterationLimit,
                outcome.text_with_summary(),
                outcome.unconsumed_steer,
            ),
        },
        Err(failure) => {
            inner.record_failure(&row, &failure);
            let scheduled = matches!(row.origin, Origin::Scheduled { .. });
            let told = failure.tell(&row.preview, scheduled);
            (RunStatus::Failed, told, Vec::new())
        }
    };
    let text = if text.trim().is_empty() {
        "(done — the model gave no text)".to_string()
    } else {
        text
    };
    // Nothing reaches the chat before the store has the answer: a restart would otherwise
    // tell the chat that the run was cut off after it was answered.
    if inner
        .durable(&row, true, "storing an answer", || {
            inner.store.set_replying(row.id, status.as_str(), &text)
        })
        .await
        .is_none()
    {
        return;
    }
    let row = RunRow {
        state: RunState::Replying,
        outcome: Some(status.as_str().into()),
        answer: Some(text.clone()),
        ..row
    };
    deliver(inner, &row, &text).await;
    // Steering that came after the model's last step runs next, before anything queued.
    for steer in leftover.into_iter().rev() {
        let submission = Submission::text(row.chat_id, Origin::Steer, steer).in_topic(row.topic);
        let gateway = super::Gateway {
            inner: inner.clone(),
        };
        if let Err(e) = gateway.enqueue(submission, true) {
            tracing::warn!(chat = row.chat_id, "queueing a late steer message: {e}");
        }
    }
}

/// Keeps the run's draft (see [`super::DraftFn`]) in `cell` for this process and in the store
/// for the next one.
fn draft_recorder(inner: &Inner, run: i64, cell: &Arc<Mutex<Option<i64>>>) -> super::DraftFn {
    let (store, cell) = (inner.store.clone(), cell.clone());
    Arc::new(move |message| {
        *lock(&cell) = Some(message);
        if let Err(e) = store.set_draft(run, message) {
            tracing::error!(run, "recording where the answer streams: {e}");
        }
    })
}

/// Send the stored answer from the first part not known to have arrived, then mark the run
/// answered. Each part is marked `sending` before it goes out and counted once the channel
/// took it; a part that may have arrived before (a restart, a time-out) goes out once more,
/// marked as a possible repeat — never silently twice.
async fn deliver(inner: &Inner, row: &RunRow, text: &str) {
    if row.deliver {
        let info = info(row);
        let parts = inner.channel.parts_for(row.chat_id, text);
        for (index, part) in parts.iter().enumerate().skip(row.parts_sent) {
            let number = index + 1;
            let mut again = row.sending >= number;
            if inner
                .durable(row, true, "recording a part being sent", || {
                    inner.store.set_sending(row.id, number)
                })
                .await
                .is_none()
            {
                return;
            }
            let mut result = inner.channel.send_part(&info, index, part, again).await;
            if let (Err(SendError::MayHaveArrived(e)), false) = (&result, again) {
                tracing::warn!(
                    run = row.id,
                    part = number,
                    "{e}; sending it once more, marked"
                );
                again = true;
                result = inner.channel.send_part(&info, index, part, again).await;
            }
            if let Err(e) = result {
                // Not retried forever: a blocked bot or a deleted chat would never accept it.
                tracing::warn!(
                    run = row.id,
                    chat = row.chat_id,
                    part = number,
                    "answer not delivered: {e}"
                );
                break;
            }
            if inner
                .durable(row, true, "recording delivery progress", || {
                    inner.store.set_parts_sent(row.id, number)
                })
                .await
                .is_none()
            {
                return;
            }
        }
    }
    if inner
        .durable(row, true, "marking a run answered", || {
            inner.store.set_answered(row.id)
        })
        .await
        .is_none()
    {
        return;
    }
    inner.resolve(RunResult {
        run_id: row.id,
        status: RunStatus::parse(row.outcome.as_deref().unwrap_or("answered")),
        text: text.to_string(),
    });
}

/// What the chat of a run cut off by a restart is told.
pub(super) fn interrupted_notice(row: &RunRow) -> String {
    let what = match &row.origin {
        Origin::Scheduled { .. } => " the scheduled task",
        Origin::Background { .. } => " the end of a background command",
        Origin::Hook { .. } => " a webhook's delivery",
        _ => "",
    };
    format!(
        "I was restarted while working on{what}: “{}”. I did not run it again, because it may \
         have done part of its work already; tap /retry if you still want it.",
        row.preview
    )
}
