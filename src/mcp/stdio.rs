//! Starting a stdio MCP server in its jail, the way a skill runs, and stopping it so that
//! nothing it started survives:
//!
//! 1. a fresh run folder with a private copy of exactly the granted bytes, and the run's
//!    policy: the default policy widened or narrowed only by the manifest;
//! 2. the command checked by that policy (`ask` goes to the approver of the run that first
//!    needs the server) and re-verified independently; it must be one plain command — no
//!    pipes, redirections or other steps, since warden holds its standard input and output;
//! 3. the sandbox (with, when the manifest declared domains or routes, a network namespace of
//!    its own where only warden's egress proxy listens) and the process, with three pipes:
//!    MCP's JSON-RPC on stdin/stdout, and stderr to warden's log, redacted;
//! 4. stopping: close its stdin (the MCP way to end a stdio server), give it a moment, then
//!    kill its whole process tree; report what it left running and what the kernel and the
//!    proxy saw of its network attempts.

use super::definition::StdioServer;
use crate::locks::lock;
use crate::policy::ir::Command;
use crate::policy::{invariant, Checker, Decision};
use crate::sandbox::{ExitStatus, JailedProcess, ProcessSpec, Stdio};
use crate::sizes::read::{CutLine, CutLines};
use crate::skills::jail::{Prepared, RunJail, SetupError};
use crate::skills::settings::SkillSettings;
use crate::tools::approval::{Approval, ApprovalRequest, Approver};
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::{oneshot, watch};

/// How long a server may take to exit after its stdin closed before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// Lines of stderr kept for the report when a server dies.
const STDERR_KEPT: usize = 5;
/// Longer stderr lines are cut (in the log and the report).
const STDERR_LINE_BYTES: usize = 500;

/// Why a start was refused or failed, in words for the audit log and the model.
#[derive(Debug)]
pub enum StartError {
    /// Not allowed (policy, manifest, approval): a denial.
    Refused(String),
    /// Could not be done (sandbox, I/O).
    Failed(String),
}

impl From<SetupError> for StartError {
    fn from(e: SetupError) -> Self {
        match e {
            SetupError::Denied(why) => StartError::Refused(why),
            SetupError::Failed(why) => StartError::Failed(why),
        }
    }
}

/// A running server process in its jail.
pub struct JailedServer {
    /// The pipes MCP runs over (taken once by the client).
    pub stdout: Option<pipe::Receiver>,
    pub stdin: Option<pipe::Sender>,
    kill: Option<oneshot::Sender<()>>,
    ended: watch::Receiver<Option<Ended>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    jail: Option<RunJail>,
    /// The checked command line.
    pub command: String,
    /// Whether the user approved the start (the policy asked).
    pub approved: bool,
}

/// How a server process ended.
#[derive(Clone, Debug)]
pub struct Ended {
    pub status: Result<ExitStatus, String>,
    /// Processes it left running when it exited (all killed).
    pub leftovers: usize,
    /// warden killed it.
    pub killed: bool,
}

impl Ended {
    pub fn describe(&self) -> String {
        let mut text = match (&self.status, self.killed) {
            (_, true) => "killed with every process it started".to_string(),
            (Ok(ExitStatus::Code(code)), false) => format!("exited with status {code}"),
            (Ok(ExitStatus::Signal(signal)), false) => format!("ended by signal {signal}"),
            (Err(e), false) => format!("lost ({e})"),
        };
        if self.leftovers > 0 {
            text.push_str(&format!(
                "; {} process(es) it left running were killed",
                self.leftovers
            ));
        }
        text
    }
}

/// What a stopped server leaves for the report.
pub struct Stopped {
    pub ended: Option<Ended>,
    /// The egress proxy's decisions and the network attempts around it.
    pub egress: Vec<String>,
    pub last_stderr: Vec<String>,
}

impl JailedServer {
    /// Steps 1 to 3. `who` names the server in messages.
    pub async fn start(
        who: &str,
        server: &StdioServer,
        settings: &SkillSettings,
        session: &str,
        approver: &dyn Approver,
    ) -> Result<JailedServer, StartError> {
        let skill = &server.skill;
        // The server's own backend (`mcp.servers.NAME.backend`), not only `[sandbox]`'s.
        let settings = &SkillSettings {
            backend: server.backend,
            ..settings.clone()
        };
        let prepared = Prepared::new(settings, skill, &format!("the MCP server {who}"))?;
        let plan = &prepared.plan;
        let command = shell_words::join(&server.argv);
        let mut checker = Checker::new(plan.policy.clone(), plan.paths.clone());
        let verdict = checker.check_in(&command, &plan.copy);
        let approved = match verdict.decision {
            Decision::Allow => false,
            Decision::Deny => {
                return Err(StartError::Refused(format!(
                    "{who}'s command `{command}` is refused by its policy (the default policy \
                     and its manifest): {}",
                    verdict.reason
                )))
            }
            Decision::Ask => {
                let request = ApprovalRequest {
                    session: session.to_string(),
                    tool: format!("mcp:{who}"),
                    command: command.clone(),
                    reason: format!("starting the MCP server {who}: {}", verdict.reason),
                    always: None,
                    detail: None,
                };
                match approver.approve(&request).await {
                    Approval::Approved => true,
                    Approval::Denied(why) => {
                        return Err(StartError::Refused(format!(
                            "{who} was not started: {why}; {}",
                            verdict.reason
                        )))
                    }
                }
            }
        };
        invariant::verify(&verdict, &plan.policy, &plan.paths, &[]).map_err(|violation| {
            tracing::error!(server = who, %violation, "policy invariant violated");
            StartError::Refused(format!(
                "internal policy check failed ({violation}); not started"
            ))
        })?;
        let program = single_command(&verdict.script).ok_or_else(|| {
            StartError::Refused(format!(
                "{who}'s command `{command}` must be one program with its arguments (no pipes, \
                 redirections, `cd` or further commands): warden holds its input and output"
            ))
        })?;
        let jail = prepared.start(settings, skill).await?;
        let sandbox = jail.sandbox();
        if program.runs_code && !sandbox.confines_code() {
            return Err(StartError::Refused(format!(
                "{who} runs code, and this sandbox cannot confine code"
            )));
        }
        let (stdin_read, stdin_write) = pipe_pair()?;
        let (stdout_read, stdout_write) = pipe_pair()?;
        let (stderr_read, stderr_write) = pipe_pair()?;
        let spec = ProcessSpec {
            argv: program.argv.clone(),
            cwd: program.cwd.clone(),
            stdin: Stdio::Fd(stdin_read),
            stdout: Stdio::Fd(stdout_write),
            stderr: Stdio::Fd(stderr_write),
            extra_fds: Vec::new(),
            env: program.env.clone(),
        };
        let process = sandbox
            .spawn(spec)
            .await
            .map_err(|e| StartError::Failed(format!("starting {who} failed: {e}")))?;
        let io = |e: std::io::Error| StartError::Failed(format!("{who}'s pipes: {e}"));
        let stdin = pipe::Sender::from_owned_fd(stdin_write).map_err(io)?;
        let stdout = pipe::Receiver::from_owned_fd(stdout_read).map_err(io)?;
        let stderr_pipe = pipe::Receiver::from_owned_fd(stderr_read).map_err(io)?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        tokio::spawn(pump_stderr(who.to_string(), stderr_pipe, stderr.clone()));
        let (kill, ended) = watch_process(process);
        Ok(JailedServer {
            stdout: Some(stdout),
            stdin: Some(stdin),
            kill: Some(kill),
            ended,
            stderr,
            jail: Some(jail),
            command,
            approved,
        })
    }

    /// How it ended, once it has.
    pub fn ended(&self) -> Option<Ended> {
        self.ended.borrow().clone()
    }

    /// Step 4. `graceful`: its stdin was closed (the client ended); wait a moment before
    /// killing. Otherwise (a hung server) kill at once.
    pub async fn stop(mut self, graceful: bool) -> Stopped {
        drop(self.stdin.take());
        drop(self.stdout.take());
        let mut ended = self.ended.clone();
        let exited = graceful
            && tokio::time::timeout(EXIT_GRACE, ended.wait_for(Option::is_some))
                .await
                .is_ok();
        if !exited {
            if let Some(kill) = self.kill.take() {
                let _ = kill.send(());
            }
            // The kill ends the process tree; waiting for it is bounded by the jail's own
            // deadline for a group that will not die.
            let _ = ended.wait_for(Option::is_some).await;
        }
        let egress = match self.jail.take() {
            Some(jail) => jail
                .close()
                .await
                .into_iter()
                .map(|event| event.describe())
                .collect(),
            None => Vec::new(),
        };
        let ended = self.ended();
        let last_stderr = lock(&self.stderr).iter().cloned().collect();
        Stopped {
            ended,
            egress,
            last_stderr,
        }
    }
}

/// The one program of a script that is a single plain command.
fn single_command(script: &crate::policy::ir::Script) -> Option<&Command> {
    let [step] = script.steps.as_slice() else {
        return None;
    };
    let [command] = step.pipeline.commands.as_slice() else {
        return None;
    };
    let plain = !step.pipeline.negated
        && command.redirects.is_empty()
        && command.builtin.is_none()
        && command.status_args.is_empty()
        && !command.argv.is_empty();
    plain.then_some(command)
}

fn pipe_pair() -> Result<(OwnedFd, OwnedFd), StartError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| StartError::Failed(format!("creating a pipe failed: {e}")))
}

/// A task owning the process: it reports how it ended, or kills it when asked.
fn watch_process(
    mut process: Box<dyn JailedProcess>,
) -> (oneshot::Sender<()>, watch::Receiver<Option<Ended>>) {
    let (kill_tx, kill_rx) = oneshot::channel::<()>();
    let (ended_tx, ended_rx) = watch::channel(None);
    tokio::spawn(async move {
        let ended = tokio::select! {
            status = process.wait() => Ended {
                status: status.map_err(|e| e.to_string()),
                leftovers: process.background_killed(),
                killed: false,
            },
            Ok(()) = kill_rx => {
                process.kill().await;
                Ended {
                    status: Err("killed".into()),
                    leftovers: 0,
                    killed: true,
                }
            }
        };
        let _ = ended_tx.send(Some(ended));
    });
    (kill_tx, ended_rx)
}

/// Every stderr line to the log, redacted and cut; the last few kept for a death's report.
/// Read in bounded chunks: the rest of an over-long line is dropped as it arrives (counted),
/// so a server that never ends a line costs nothing but the reading.
async fn pump_stderr(server: String, mut pipe: pipe::Receiver, kept: Arc<Mutex<VecDeque<String>>>) {
    let mut cut = CutLines::new(STDERR_LINE_BYTES);
    let mut buf = vec![0u8; 8 * 1024];
    let mut lines = Vec::new();
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        cut.push(&buf[..n], &mut lines);
        for line in lines.drain(..) {
            keep_stderr(&server, line, &kept);
        }
    }
    if let Some(line) = cut.finish() {
        keep_stderr(&server, line, &kept);
    }
}

fn keep_stderr(server: &str, line: CutLine, kept: &Mutex<VecDeque<String>>) {
    let mut text = crate::redact::redact(&line.text);
    if line.dropped > 0 {
        text.push_str(&format!(" [… {} more bytes dropped]", line.dropped));
    }
    tracing::info!(target: "warden::mcp", server = %server, "stderr: {text}");
    let mut kept = lock(kept);
    if kept.len() == STDERR_KEPT {
        kept.pop_front();
    }
    kept.push_back(text);
}
