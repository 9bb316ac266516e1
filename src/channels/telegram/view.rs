//! How a run looks in a Telegram chat while it goes: "typing…" every few seconds, and for runs
//! longer than a few seconds a status message ("Running `ls -la`…") edited in place as tools
//! start, removed when the answer is ready. Also the gateway's [`Channel`] for Telegram.

use super::api::Telegram;
use super::approvals::{Approvals, ChatApprover};
use super::format::escape;
use crate::agent::{AgentEvent, EventFn, RunControl};
use crate::gateway::{Channel, RunInfo, RunView};
use crate::tools::approval::Approver;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A status message appears once a run has taken this long.
const STATUS_AFTER: Duration = Duration::from_secs(3);
/// Telegram shows "typing…" for about 5 s per chat action.
const TYPING_EVERY: Duration = Duration::from_secs(4);
/// Edits of the status message are spaced out (Telegram limits edits per chat).
const EDIT_EVERY: Duration = Duration::from_secs(2);

pub struct TelegramChannel {
    tg: Telegram,
    approvals: Arc<Approvals>,
}

impl TelegramChannel {
    pub fn new(tg: Telegram, approvals: Arc<Approvals>) -> TelegramChannel {
        TelegramChannel { tg, approvals }
    }
}

#[async_trait]
impl Channel for TelegramChannel {
    fn open_run(&self, run: &RunInfo, control: &RunControl) -> Box<dyn RunView> {
        let (status, watch) = watch::channel(String::new());
        let done = CancellationToken::new();
        let task = tokio::spawn(show(self.tg.clone(), run.chat_id, watch, done.clone()));
        Box::new(TelegramView {
            approver: Arc::new(ChatApprover {
                approvals: self.approvals.clone(),
                tg: self.tg.clone(),
                chat_id: run.chat_id,
                reply_to: run.reply_to,
                cancel: control.cancel_token(),
            }),
            status: Arc::new(status),
            done,
            task,
        })
    }

    async fn deliver(
        &self,
        run: &RunInfo,
        text: &str,
        already_sent: usize,
        sent: &(dyn Fn(usize) + Send + Sync),
    ) -> Result<(), String> {
        self.tg
            .send_markdown(run.chat_id, run.reply_to, text, already_sent, sent)
            .await
    }
}

struct TelegramView {
    approver: Arc<ChatApprover>,
    /// The latest status line (HTML); empty until a tool starts.
    status: Arc<watch::Sender<String>>,
    done: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

#[async_trait]
impl RunView for TelegramView {
    fn approver(&self) -> Arc<dyn Approver> {
        self.approver.clone()
    }

    fn events(&self) -> EventFn {
        let status = self.status.clone();
        Arc::new(move |event| {
            if let Some(line) = status_line(&event) {
                status.send_replace(line);
            }
        })
    }

    async fn finish(self: Box<Self>) {
        self.done.cancel();
        let mut task = self.task;
        // The presenter ends with one best-effort request; never let it hold up the answer.
        if tokio::time::timeout(Duration::from_secs(5), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

/// The status line for an event, if it changes the status.
fn status_line(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::ToolStart { name, summary, .. } if name == "bash" => {
            Some(format!("⏳ Running <code>{}</code>…", escape(summary)))
        }
        AgentEvent::ToolStart { name, summary, .. } => Some(format!(
            "⏳ {}: <code>{}</code>…",
            escape(name),
            escape(summary)
        )),
        AgentEvent::Progress(text) => Some(format!("⏳ {}", escape(text))),
        AgentEvent::Steered(_) => Some("⏳ Got your steer; continuing…".into()),
        AgentEvent::TextDelta(_) | AgentEvent::ToolEnd { .. } => None,
    }
}

/// The presenter task of one run, until `done`.
async fn show(
    tg: Telegram,
    chat: i64,
    mut status: watch::Receiver<String>,
    done: CancellationToken,
) {
    let started = Instant::now();
    let mut last_typing: Option<Instant> = None;
    let mut message: Option<i32> = None;
    let mut shown = String::new();
    let mut last_edit = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut events_open = true;
    loop {
        tokio::select! {
            biased;
            _ = done.cancelled() => break,
            changed = status.changed(), if events_open => events_open = changed.is_ok(),
            _ = tick.tick() => {}
        }
        if last_typing.is_none_or(|t| t.elapsed() >= TYPING_EVERY) {
            last_typing = Some(Instant::now());
            tg.typing(chat).await;
        }
        if started.elapsed() < STATUS_AFTER {
            continue;
        }
        let current = match status.borrow_and_update().clone() {
            line if line.is_empty() => "⏳ Working…".to_string(),
            line => line,
        };
        match message {
            None => match tg.send_html(chat, None, &current, None).await {
                Ok(sent) => {
                    message = Some(sent.id.0);
                    shown = current;
                    last_edit = Instant::now();
                }
                Err(e) => {
                    tracing::debug!(chat, "status message: {e}");
                    // Do not try again every tick.
                    message = Some(-1);
                }
            },
            Some(id) if id > 0 && current != shown && last_edit.elapsed() >= EDIT_EVERY => {
                if let Err(e) = tg.edit_html(chat, id, &current).await {
                    tracing::debug!(chat, "editing the status message: {e}");
                }
                shown = current;
                last_edit = Instant::now();
            }
            Some(_) => {}
        }
    }
    if let Some(id) = message.filter(|&id| id > 0) {
        tg.delete(chat, id).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_escape_commands() {
        let line = status_line(&AgentEvent::ToolStart {
            id: "t".into(),
            name: "bash".into(),
            summary: "ls <dir> && echo".into(),
        });
        assert_eq!(
            line.as_deref(),
            Some("⏳ Running <code>ls &lt;dir&gt; &amp;&amp; echo</code>…")
        );
        assert_eq!(status_line(&AgentEvent::TextDelta("x".into())), None);
    }
}
