//! The worker's side: read runs from the bot, run them with the agent, report back; transcribe
//! the voice messages the bot saved.

use super::protocol::{decode, encode, FromWorker, ToWorker};
use crate::agent::{Agent, AgentEvent, RunControl, RunRequest};
use crate::gateway::RunFailure;
use crate::locks::lock;
use crate::tools::approval::{Approval, ApprovalRequest, Approver};
use crate::tools::background::BackgroundEvent;
use crate::tools::outbox::{Outbox, OutgoingFile};
use crate::voice::Transcribe;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_util::task::TaskTracker;

/// How long the last messages may take to reach the bot once the worker is done.
const WRITER_GRACE: Duration = Duration::from_secs(1);

/// Runs the worker knows about: how to stop each, and its questions the bot has not answered
/// yet (approvals, files to send).
#[derive(Default)]
struct Runs {
    runs: Mutex<HashMap<u64, RunEntry>>,
}

struct RunEntry {
    control: RunControl,
    asks: HashMap<u64, oneshot::Sender<Reply>>,
}

/// The bot's answer to one of a run's questions.
enum Reply {
    Approval(Approval),
    FileSent(Result<String, String>),
}

impl Runs {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, RunEntry>> {
        lock(&self.runs)
    }

    /// Hand the bot's answer to the run's question that waits for it.
    fn reply(&self, run: u64, ask: u64, reply: Reply) {
        let waiting = self
            .lock()
            .get_mut(&run)
            .and_then(|entry| entry.asks.remove(&ask));
        if let Some(tx) = waiting {
            let _ = tx.send(reply);
        }
    }
}

/// Serve the bot until `input` ends (the bot closed the pipe or died): every run still going
/// is then aborted, and this returns once they have stopped (at most `grace` later). Each
/// notification on `jobs_changed` (the worker's job manager) is passed on to the bot.
pub async fn serve(
    agent: Arc<Agent>,
    supports_images: bool,
    voice: Option<Arc<dyn Transcribe>>,
    jobs_changed: Arc<Notify>,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
    grace: Duration,
) -> Result<(), String> {
    let (out, outgoing) = mpsc::unbounded_channel::<FromWorker>();
    let writer = tokio::spawn(write_lines(outgoing, output));
    let _ = out.send(FromWorker::Ready { supports_images });
    let forward_job_changes = {
        let out = out.clone();
        tokio::spawn(async move {
            loop {
                jobs_changed.notified().await;
                if out.send(FromWorker::JobsChanged).is_err() {
                    return;
                }
            }
        })
    };
    let runs = Arc::new(Runs::default());
    let tasks = TaskTracker::new();
    let mut lines = BufReader::new(input).lines();
    let ended = loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break Ok(()),
            Err(e) => break Err(format!("reading from the bot: {e}")),
        };
        let message = match decode::<ToWorker>(&line) {
            Ok(message) => message,
            // Not a guess at what the bot meant: stop everything.
            Err(e) => break Err(format!("from the bot: {e}")),
        };
        match message {
            ToWorker::Run {
                run,
                session,
                input,
                patience_secs,
            } => {
                let control = RunControl::new();
                runs.lock().insert(
                    run,
                    RunEntry {
                        control: control.clone(),
                        asks: HashMap::new(),
                    },
                );
                let bot = Arc::new(AskTheBot {
                    run,
                    runs: runs.clone(),
                    out: out.clone(),
                    control: control.clone(),
                    next: AtomicU64::new(1),
                });
                let request = RunRequest {
                    session,
                    input,
                    approver: bot.clone(),
                    outbox: bot,
                    events: {
                        let out = out.clone();
                        Arc::new(move |event: AgentEvent| {
                            let _ = out.send(FromWorker::Event { run, event });
                        })
                    },
                    control,
                    // Also after the run: the bot routes by the run it remembers.
                    background: {
                        let out = out.clone();
                        Arc::new(move |event: BackgroundEvent| {
                            let _ = out.send(FromWorker::Background { run, event });
                        })
                    },
                    patience: patience_secs.map(Duration::from_secs),
                };
                let (agent, runs, out) = (agent.clone(), runs.clone(), out.clone());
                tasks.spawn(async move {
                    let result = agent.run(request).await.map_err(RunFailure::from);
                    runs.lock().remove(&run);
                    let _ = out.send(FromWorker::Done { run, result });
                });
            }
            ToWorker::Abort { run, interrupted } => {
                if let Some(entry) = runs.lock().get(&run) {
                    if interrupted {
                        entry.control.interrupt();
                    } else {
                        entry.control.abort();
                    }
                }
            }
            ToWorker::Steer { run, text } => {
                if let Some(entry) = runs.lock().get(&run) {
                    entry.control.steer(text);
                }
            }
            ToWorker::Answer { run, ask, approval } => {
                runs.reply(run, ask, Reply::Approval(approval));
            }
            ToWorker::FileSent { run, ask, result } => {
                runs.reply(run, ask, Reply::FileSent(result));
            }
            ToWorker::Transcribe { id, path } => {
                let (voice, out) = (voice.clone(), out.clone());
                tasks.spawn(async move {
                    let result = match voice {
                        Some(voice) => voice.transcribe(&path).await,
                        None => Err("no speech-to-text endpoint is configured \
                                     ([voice] base_url)"
                            .to_string()),
                    };
                    let _ = out.send(FromWorker::Transcribed { id, result });
                });
            }
        }
    };
    // Nobody is left to show results to: stop what runs (its sandboxed commands are killed).
    for entry in runs.lock().values() {
        entry.control.interrupt();
    }
    tasks.close();
    if tokio::time::timeout(grace, tasks.wait()).await.is_err() {
        tracing::warn!("agent worker: some runs did not stop within {grace:?} of the abort");
    }
    // Background commands still hold senders until the caller kills them: do not wait for
    // every sender, only for what is already written to reach the pipe.
    forward_job_changes.abort();
    drop(out);
    if tokio::time::timeout(WRITER_GRACE, writer).await.is_err() {
        tracing::debug!("agent worker: stopped writing to the bot");
    }
    ended
}

async fn write_lines(
    mut outgoing: mpsc::UnboundedReceiver<FromWorker>,
    mut output: impl AsyncWrite + Unpin,
) {
    while let Some(message) = outgoing.recv().await {
        let line = match encode(&message) {
            Ok(line) => line,
            Err(e) => {
                tracing::error!("agent worker: a message to the bot cannot be written: {e}");
                return;
            }
        };
        if output.write_all(line.as_bytes()).await.is_err() || output.flush().await.is_err() {
            // The bot is gone; the reader sees the end of its input too.
            return;
        }
    }
}

/// A worker run's line to the bot: its approver (the bot shows the buttons) and its outbox
/// (the bot, which holds the token, sends the files).
struct AskTheBot {
    run: u64,
    runs: Arc<Runs>,
    out: mpsc::UnboundedSender<FromWorker>,
    control: RunControl,
    next: AtomicU64,
}

impl AskTheBot {
    /// Send the question `message(ask id)` and wait for the bot's reply, or why there is none.
    async fn ask(&self, message: impl FnOnce(u64) -> FromWorker) -> Result<Reply, String> {
        let ask = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        match self.runs.lock().get_mut(&self.run) {
            Some(entry) => entry.asks.insert(ask, tx),
            None => return Err("the run has ended".into()),
        };
        if self.out.send(message(ask)).is_err() {
            return Err("the bot is gone; nobody can answer".into());
        }
        let cancelled = self.control.cancel_token();
        tokio::select! {
            answer = rx => answer.map_err(|_| "the bot stopped before anyone answered".to_string()),
            _ = cancelled.cancelled() => Err("the run was stopped".into()),
        }
    }
}

#[async_trait]
impl Approver for AskTheBot {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        let run = self.run;
        let asked = self
            .ask(|ask| FromWorker::Ask {
                run,
                ask,
                request: request.clone(),
            })
            .await;
        match asked {
            Ok(Reply::Approval(approval)) => approval,
            Ok(Reply::FileSent(_)) => Approval::Denied("the bot answered something else".into()),
            Err(why) => Approval::Denied(why),
        }
    }
}

#[async_trait]
impl Outbox for AskTheBot {
    async fn send_file(&self, file: &OutgoingFile) -> Result<String, String> {
        let run = self.run;
        let asked = self
            .ask(|ask| FromWorker::SendFile {
                run,
                ask,
                file: file.clone(),
            })
            .await?;
        match asked {
            Reply::FileSent(result) => result,
            Reply::Approval(_) => Err("the bot answered something else".into()),
        }
    }
}
