//! The bot's side: start the worker when a run (or a voice message) needs one, route each
//! run's messages, stop the worker after `idle` without runs or background commands, and fail
//! the runs in flight when it dies.

use super::protocol::{decode, encode, FromWorker, ToWorker};
use crate::agent::{EventFn, RunOutcome, RunRequest};
use crate::gateway::{AgentRunner, FailureKind, RunFailure};
use crate::locks::lock;
use crate::tools::approval::{Approval, Approver};
use crate::tools::background::{self, BackgroundEvent, BackgroundFn};
use crate::tools::outbox::Outbox;
use crate::voice::Transcribe;
use async_trait::async_trait;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_util::sync::CancellationToken;

/// The worker must say it is ready within this time (it builds the agent: config, policy,
/// memory index, sandbox checks).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// How to start a worker: `warden-full [--config FILE] agent-worker`.
#[derive(Clone, Debug)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// An [`AgentRunner`] whose agents run in a worker process.
#[derive(Clone)]
pub struct WorkerAgent {
    shared: Arc<Shared>,
}

struct Shared {
    command: WorkerCommand,
    idle: Duration,
    /// Told when a worker's cron jobs changed (the bot's scheduler waits on it).
    jobs_changed: Arc<Notify>,
    /// The worker now serving runs, if one is up. An async lock: starting one takes a while,
    /// and runs that arrive meanwhile wait for it instead of starting a second.
    live: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Names runs and transcriptions alike.
    next_run: AtomicU64,
}

struct Connection {
    /// Dropping the sender closes the worker's stdin: it aborts what runs and exits.
    tx: Mutex<Option<mpsc::UnboundedSender<ToWorker>>>,
    runs: Mutex<HashMap<u64, RunSlot>>,
    /// Transcriptions asked for and not answered yet.
    transcriptions: Mutex<HashMap<u64, oneshot::Sender<Result<String, String>>>>,
    /// Runs and transcriptions in progress: the worker is not retired under them.
    active: AtomicUsize,
    /// Counts runs started, so an idle timer knows whether a run came and went meanwhile.
    started: AtomicU64,
    supports_images: bool,
    /// Background commands running in the worker, with where each reports (its run's chat).
    /// The worker is not retired while any runs.
    jobs: Mutex<HashMap<u64, BackgroundFn>>,
    /// Cancelled when the worker's output ended (it exited or closed it).
    gone: CancellationToken,
    /// Cancelled once the worker was reaped.
    exited: CancellationToken,
}

struct RunSlot {
    events: EventFn,
    approver: Arc<dyn Approver>,
    background: BackgroundFn,
    outbox: Arc<dyn Outbox>,
    done: oneshot::Sender<Result<RunOutcome, RunFailure>>,
}

impl Connection {
    fn send(&self, message: ToWorker) -> Result<(), String> {
        match &*lock(&self.tx) {
            Some(tx) => tx
                .send(message)
                .map_err(|_| "the agent worker has stopped".to_string()),
            None => Err("the agent worker is stopping".into()),
        }
    }

    fn close(&self) {
        lock(&self.tx).take();
    }
}

impl WorkerAgent {
    /// No worker runs until [`WorkerAgent::check`] or the first run; one stops `idle` after
    /// its last run ended. `jobs_changed` is notified whenever a worker's cron jobs changed.
    pub fn new(command: WorkerCommand, idle: Duration, jobs_changed: Arc<Notify>) -> WorkerAgent {
        WorkerAgent {
            shared: Arc::new(Shared {
                command,
                idle,
                jobs_changed,
                live: tokio::sync::Mutex::new(None),
                next_run: AtomicU64::new(1),
            }),
        }
    }

    /// Start a worker to see that it can build its agent (the config, policy, keys and sandbox
    /// are checked there), then stop it. Returns whether the model takes images.
    pub async fn check(&self) -> Result<bool, String> {
        let conn = self.connection(false).await?;
        let supports_images = conn.supports_images;
        self.retire(&conn, conn.started.load(Ordering::SeqCst))
            .await;
        tokio::time::timeout(Duration::from_secs(30), conn.exited.cancelled())
            .await
            .map_err(|_| "the agent worker did not exit after its start-up check".to_string())?;
        Ok(supports_images)
    }

    /// Stop the worker (its runs are aborted) and wait up to `grace` for it to exit, so the
    /// sandboxes it holds (Docker containers) are released.
    pub async fn shutdown(&self, grace: Duration) {
        let Some(conn) = self.shared.live.lock().await.take() else {
            return;
        };
        conn.close();
        if tokio::time::timeout(grace, conn.exited.cancelled())
            .await
            .is_err()
        {
            tracing::warn!("the agent worker did not exit within {grace:?}");
        }
    }

    /// The live worker, started if there is none. With `for_run`, the run is counted under
    /// the same lock, so an idle timer firing right now cannot retire the worker under it.
    async fn connection(&self, for_run: bool) -> Result<Arc<Connection>, String> {
        let mut live = self.shared.live.lock().await;
        let conn = match live.as_ref().filter(|c| !c.gone.is_cancelled()) {
            Some(conn) => conn.clone(),
            None => {
                let (conn, lines, child) = spawn(&self.shared.command).await?;
                tokio::spawn(read_replies(self.clone(), conn.clone(), lines, child));
                *live = Some(conn.clone());
                conn
            }
        };
        if for_run {
            conn.active.fetch_add(1, Ordering::SeqCst);
            conn.started.fetch_add(1, Ordering::SeqCst);
        }
        Ok(conn)
    }

    /// Stop `conn` if it is still the live worker, no run started since `started` and no
    /// background command runs in it.
    async fn retire(&self, conn: &Arc<Connection>, started: u64) {
        let mut live = self.shared.live.lock().await;
        let current = live.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn));
        if current
            && conn.active.load(Ordering::SeqCst) == 0
            && conn.started.load(Ordering::SeqCst) == started
            && lock(&conn.jobs).is_empty()
        {
            live.take();
            conn.close();
        }
    }

    /// A run or transcription on `conn` ended: retire the worker `idle` after the last one.
    fn release(&self, conn: &Arc<Connection>) {
        if conn.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.retire_later(conn.clone(), conn.started.load(Ordering::SeqCst));
        }
    }

    fn retire_later(&self, conn: Arc<Connection>, started: u64) {
        let this = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(this.shared.idle) => this.retire(&conn, started).await,
                _ = conn.gone.cancelled() => {}
            }
        });
    }
}

#[async_trait]
impl AgentRunner for WorkerAgent {
    async fn run(&self, request: RunRequest) -> Result<RunOutcome, RunFailure> {
        let conn = self
            .connection(true)
            .await
            .map_err(|e| RunFailure::new(FailureKind::Other, e))?;
        let run = self.shared.next_run.fetch_add(1, Ordering::Relaxed);
        let (done, mut finished) = oneshot::channel();
        lock(&conn.runs).insert(
            run,
            RunSlot {
                events: request.events,
                approver: request.approver,
                background: request.background,
                outbox: request.outbox,
                done,
            },
        );
        let control = request.control;
        let mut result = match conn.send(ToWorker::Run {
            run,
            session: request.session,
            input: request.input,
            patience_secs: request.patience.map(|p| p.as_secs()),
        }) {
            Err(e) => {
                lock(&conn.runs).remove(&run);
                Err(RunFailure::new(FailureKind::Interrupted, e))
            }
            Ok(()) => {
                let mut abort_sent = false;
                let cancelled = control.cancel_token();
                loop {
                    tokio::select! {
                        result = &mut finished => {
                            break result.unwrap_or_else(|_| {
                                Err(RunFailure::new(
                                    FailureKind::Interrupted,
                                    "the agent worker stopped",
                                ))
                            });
                        }
                        _ = cancelled.cancelled(), if !abort_sent => {
                            abort_sent = true;
                            let interrupted = control.is_interrupted();
                            let _ = conn.send(ToWorker::Abort { run, interrupted });
                        }
                        _ = control.steered() => {
                            for text in control.take_steer() {
                                let _ = conn.send(ToWorker::Steer { run, text });
                            }
                        }
                    }
                }
            }
        };
        // Steering that arrived after the worker's last word runs next, like in-process.
        if let Ok(outcome) = &mut result {
            outcome.unconsumed_steer.extend(control.take_steer());
        }
        self.release(&conn);
        result
    }
}

#[async_trait]
impl Transcribe for WorkerAgent {
    /// The worker transcribes (it holds `[voice] api_key`); the bot only asks.
    async fn transcribe(&self, path: &str) -> Result<String, String> {
        let conn = self.connection(true).await?;
        let id = self.shared.next_run.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&conn.transcriptions).insert(id, tx);
        let result = match conn.send(ToWorker::Transcribe {
            id,
            path: path.to_string(),
        }) {
            Ok(()) => rx
                .await
                .unwrap_or_else(|_| Err("the agent worker stopped".into())),
            Err(e) => {
                lock(&conn.transcriptions).remove(&id);
                Err(e)
            }
        };
        self.release(&conn);
        result
    }
}

/// The worker's replies, read by [`read_replies`].
type Replies = Lines<BufReader<ChildStdout>>;

/// Start a worker and wait for its `ready`.
async fn spawn(command: &WorkerCommand) -> Result<(Arc<Connection>, Replies, Child), String> {
    let mut child = tokio::process::Command::new(&command.program)
        .args(&command.args)
        // The agent never needs the bot token: it stays in the bot process.
        .env_remove("TELEGRAM_BOT_TOKEN")
        // Nor the HTTP API's token: only the gateway checks it.
        .env_remove("WARDEN_HTTP_TOKEN")
        // Nor Slack's tokens.
        .env_remove("SLACK_APP_TOKEN")
        .env_remove("SLACK_BOT_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start the agent worker {}: {e}",
                command.program.display()
            )
        })?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.start_kill();
        return Err("the agent worker's pipes were not set up".into());
    };
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(READY_TIMEOUT, lines.next_line()).await;
    let supports_images = match first {
        Ok(Ok(Some(line))) => match decode::<FromWorker>(&line) {
            Ok(FromWorker::Ready { supports_images }) => supports_images,
            Ok(other) => {
                let _ = child.start_kill();
                return Err(format!("the agent worker began with {other:?}, not ready"));
            }
            Err(e) => {
                let _ = child.start_kill();
                return Err(format!("the agent worker: {e}"));
            }
        },
        Ok(_) => {
            // It exited while setting up; what went wrong is on its stderr (ours).
            let status = child.wait().await.map_err(|e| e.to_string())?;
            return Err(format!(
                "the agent worker could not start ({status}); its error is above"
            ));
        }
        Err(_) => {
            let _ = child.start_kill();
            return Err(format!(
                "the agent worker was not ready within {READY_TIMEOUT:?}"
            ));
        }
    };
    let (tx, mut outgoing) = mpsc::unbounded_channel::<ToWorker>();
    tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            let line = match encode(&message) {
                Ok(line) => line,
                Err(e) => {
                    tracing::error!("agent worker: a message to it cannot be written: {e}");
                    return;
                }
            };
            if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                return;
            }
        }
        // Every sender is gone: dropping stdin tells the worker to finish.
    });
    let conn = Arc::new(Connection {
        tx: Mutex::new(Some(tx)),
        runs: Mutex::new(HashMap::new()),
        transcriptions: Mutex::new(HashMap::new()),
        active: AtomicUsize::new(0),
        started: AtomicU64::new(0),
        supports_images,
        jobs: Mutex::new(HashMap::new()),
        gone: CancellationToken::new(),
        exited: CancellationToken::new(),
    });
    Ok((conn, lines, child))
}

/// Route the worker's messages until its output ends, then fail whatever still waits.
async fn read_replies(
    agent: WorkerAgent,
    conn: Arc<Connection>,
    mut lines: Replies,
    mut child: Child,
) {
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::error!("reading from the agent worker: {e}");
                break;
            }
        };
        match decode::<FromWorker>(&line) {
            Ok(FromWorker::Event { run, event }) => {
                let events = lock(&conn.runs).get(&run).map(|s| s.events.clone());
                if let Some(events) = events {
                    events(event);
                }
            }
            Ok(FromWorker::Ask { run, ask, request }) => {
                let approver = lock(&conn.runs).get(&run).map(|s| s.approver.clone());
                let conn = conn.clone();
                tokio::spawn(async move {
                    let approval = match approver {
                        Some(approver) => approver.approve(&request).await,
                        None => Approval::Denied("the run has ended".into()),
                    };
                    let _ = conn.send(ToWorker::Answer { run, ask, approval });
                });
            }
            Ok(FromWorker::SendFile { run, ask, file }) => {
                let outbox = lock(&conn.runs).get(&run).map(|s| s.outbox.clone());
                let conn = conn.clone();
                tokio::spawn(async move {
                    let result = match outbox {
                        Some(outbox) => outbox.send_file(&file).await,
                        None => Err("the run has ended".into()),
                    };
                    let _ = conn.send(ToWorker::FileSent { run, ask, result });
                });
            }
            Ok(FromWorker::Transcribed { id, result }) => {
                if let Some(tx) = lock(&conn.transcriptions).remove(&id) {
                    let _ = tx.send(result);
                }
            }
            Ok(FromWorker::Done { run, result }) => {
                if let Some(slot) = lock(&conn.runs).remove(&run) {
                    let _ = slot.done.send(result);
                }
            }
            Ok(FromWorker::Background { run, event }) => {
                background(&agent, &conn, run, event);
            }
            Ok(FromWorker::JobsChanged) => agent.shared.jobs_changed.notify_one(),
            Ok(FromWorker::Ready { .. }) => {
                tracing::error!("the agent worker said ready twice; stopping it");
                let _ = child.start_kill();
            }
            Err(e) => {
                // A worker that says something we cannot read is not trusted further.
                tracing::error!("the agent worker: {e}; stopping it");
                let _ = child.start_kill();
            }
        }
    }
    conn.gone.cancel();
    conn.close();
    let reason = match child.wait().await {
        Ok(status) if status.success() => "the agent worker exited".to_string(),
        Ok(status) => format!("the agent worker stopped ({status})"),
        Err(e) => format!("the agent worker stopped (waiting for it failed: {e})"),
    };
    for (_, slot) in lock(&conn.runs).drain() {
        let _ = slot
            .done
            .send(Err(RunFailure::new(FailureKind::Interrupted, &reason)));
    }
    // Background commands whose end never came: their chats are told rather than left
    // waiting (at a shutdown the gateway no longer takes the notice).
    let lost: Vec<(u64, BackgroundFn)> = lock(&conn.jobs).drain().collect();
    for (job, report) in lost {
        report(BackgroundEvent::Ended {
            job,
            notice: Some(background::lost_notice(job, &reason)),
            untrusted: Vec::new(),
            persisted: Vec::new(),
        });
    }
    for (_, tx) in lock(&conn.transcriptions).drain() {
        let _ = tx.send(Err(reason.clone()));
    }
    conn.exited.cancel();
}

/// A background command started (its run's reporter is kept until it ends) or ended (its
/// notice goes where its run said; the worker may retire once nothing runs in it).
fn background(agent: &WorkerAgent, conn: &Arc<Connection>, run: u64, event: BackgroundEvent) {
    let report = match &event {
        BackgroundEvent::Started { job } => {
            let Some(report) = lock(&conn.runs).get(&run).map(|s| s.background.clone()) else {
                tracing::warn!(run, job, "a background command of a run that has ended");
                return;
            };
            lock(&conn.jobs).insert(*job, report.clone());
            report
        }
        BackgroundEvent::Ended { job, .. } => {
            let Some(report) = lock(&conn.jobs).remove(job) else {
                return;
            };
            if conn.active.load(Ordering::SeqCst) == 0 && lock(&conn.jobs).is_empty() {
                agent.retire_later(conn.clone(), conn.started.load(Ordering::SeqCst));
            }
            report
        }
    };
    report(event);
}
