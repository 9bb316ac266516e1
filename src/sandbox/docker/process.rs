//! One simple command as one `docker exec` in the session's warm container.

use super::pump::{self, Descriptors, Ending, ExecRef};
use super::session::{Busy, Session};
use crate::sandbox::{ExitStatus, JailedProcess, SandboxError};
use async_trait::async_trait;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Longest pause between two `inspect_exec` polls while a program runs with its output closed.
const MAX_POLL: Duration = Duration::from_millis(100);
/// How long `kill` waits for the killed program's streams to end.
const KILL_DRAIN: Duration = Duration::from_secs(5);
/// How long the daemon may take to start a program before `spawn` gives up.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How often `spawn` asks the daemon whether a silent program has started.
const START_POLL: Duration = Duration::from_millis(10);

/// A program running through `docker exec`.
pub struct DockerProcess {
    session: Arc<Session>,
    exec: ExecRef,
    argv0: String,
    pump: Option<JoinHandle<Ending>>,
    first_output: Option<tokio::sync::oneshot::Receiver<()>>,
    ending: Option<Ending>,
    status: Option<ExitStatus>,
    killed: bool,
    busy: Busy,
}

/// What to run, already translated into the container's view.
pub struct ExecRequest {
    /// The program as the command named it, for messages.
    pub argv0: String,
    /// What the exec runs (the argv, or the wrapper that merges stderr into stdout).
    pub cmd: Vec<String>,
    pub guest_cwd: String,
    pub fds: Descriptors,
    /// `NAME=value` for this exec only (on top of the container's environment).
    pub env: Vec<String>,
}

impl DockerProcess {
    /// Start `request` in the session's container, replacing a container that stopped.
    pub async fn start(
        session: &Arc<Session>,
        request: ExecRequest,
        host_signals: bool,
    ) -> Result<DockerProcess, SandboxError> {
        let (mut container_id, mut busy) = session.acquire().await?;
        let exec_id = match create_exec(session, &container_id, &request).await {
            Ok(id) => id,
            Err(e) if container_stopped(&e) => {
                // The warm container died (OOM, removed by hand): one fresh attempt.
                busy.release();
                session.discard(&container_id).await;
                (container_id, busy) = session.acquire().await?;
                create_exec(session, &container_id, &request)
                    .await
                    .map_err(|e| exec_error(&request.argv0, &e))?
            }
            Err(e) => return Err(exec_error(&request.argv0, &e)),
        };
        let started = session
            .docker
            .start_exec(&exec_id, Some(StartExecOptions::default()))
            .await
            .map_err(|e| exec_error(&request.argv0, &e))?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(SandboxError::Setup(
                "the daemon detached an exec warden asked to attach to".into(),
            ));
        };
        let exec = ExecRef {
            docker: session.docker.clone(),
            exec_id,
            container_id,
            host_signals,
        };
        let max_file_size = session.plan.limits.file_size_bytes;
        let pump = pump::start(exec.clone(), output, input, request.fds, max_file_size);
        let mut process = DockerProcess {
            session: Arc::clone(session),
            exec,
            argv0: request.argv0,
            pump: Some(pump.done),
            first_output: Some(pump.first_output),
            ending: None,
            status: None,
            killed: false,
            busy,
        };
        process.started().await?;
        Ok(process)
    }

    /// Wait until the runtime has started the program, so that a missing or unexecutable
    /// program is reported by `spawn`, as on the host (the daemon answers `start` before the
    /// runtime has tried). The first output, or its end, tells without asking the daemon; a
    /// silent program is seen started once the daemon reports its pid.
    async fn started(&mut self) -> Result<(), SandboxError> {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        let Some(mut first_output) = self.first_output.take() else {
            return Ok(());
        };
        loop {
            tokio::select! {
                sign = &mut first_output => {
                    if sign.is_ok() {
                        return Ok(());
                    }
                    // The output ended without a byte: it ran and ended, or never started.
                    self.drain().await;
                    return self.start_result();
                }
                _ = tokio::time::sleep(START_POLL) => {}
            }
            let inspect = self
                .session
                .docker
                .inspect_exec(&self.exec.exec_id)
                .await
                .map_err(|e| exec_error(&self.argv0, &e))?;
            if inspect.pid.unwrap_or(0) > 0 {
                return Ok(());
            }
            if inspect.running != Some(true) && inspect.exit_code.is_some() {
                // Ended already; the drained output tells a start failure from a quick program.
                self.drain().await;
                return self.start_result();
            }
            if tokio::time::Instant::now() >= deadline {
                self.kill().await;
                return Err(SandboxError::Setup(format!(
                    "the container did not start {} within {} s",
                    self.argv0,
                    START_TIMEOUT.as_secs()
                )));
            }
        }
    }

    /// After the output ended: an error when it says the program never started.
    fn start_result(&self) -> Result<(), SandboxError> {
        match self.ending {
            Some(Ending::NotFound | Ending::CannotStart(_)) => Err(self.start_error()),
            _ => Ok(()),
        }
    }

    /// The error for a program the runtime did not start.
    fn start_error(&self) -> SandboxError {
        let program = self.argv0.clone();
        match &self.ending {
            Some(Ending::NotFound) => SandboxError::NotFound(program),
            Some(Ending::CannotStart(reason)) => {
                let kind = if reason.contains("permission denied") {
                    std::io::ErrorKind::PermissionDenied
                } else {
                    std::io::ErrorKind::Other
                };
                SandboxError::CannotExecute {
                    program,
                    source: std::io::Error::new(kind, reason.clone()),
                }
            }
            _ => SandboxError::Setup(format!("the container did not start {program}")),
        }
    }

    /// Wait until every output byte is written and the descriptors are closed.
    async fn drain(&mut self) {
        if let Some(pump) = &mut self.pump {
            let ending = pump.await.unwrap_or(Ending::Closed);
            self.pump = None;
            self.ending = Some(ending);
        }
    }

    /// The exit status once the daemon records the program as ended.
    async fn exit_status(&self) -> Result<ExitStatus, SandboxError> {
        let mut pause = Duration::from_millis(1);
        loop {
            let inspect = match self.session.docker.inspect_exec(&self.exec.exec_id).await {
                Ok(inspect) => inspect,
                // The container was replaced by `kill`: its processes died of SIGKILL.
                Err(_) if self.killed => return Ok(ExitStatus::Signal(libc::SIGKILL)),
                Err(e) => {
                    return Err(SandboxError::Setup(format!(
                        "cannot read the exit status of {}: {e}",
                        self.argv0
                    )))
                }
            };
            if inspect.running != Some(true) {
                return Ok(match inspect.exit_code {
                    Some(code) => ExitStatus::Code(code as i32),
                    None => ExitStatus::Signal(libc::SIGKILL),
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_POLL);
        }
    }
}

#[async_trait]
impl JailedProcess for DockerProcess {
    async fn wait(&mut self) -> Result<ExitStatus, SandboxError> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        self.drain().await;
        if matches!(self.ending, Some(Ending::NotFound | Ending::CannotStart(_))) {
            self.busy.release();
            return Err(self.start_error());
        }
        let status = self.exit_status().await?;
        self.status = Some(status);
        self.busy.release();
        Ok(status)
    }

    /// Kills every process of the session except PID 1, not only this program's: nothing
    /// inside the container tells a double-forked or `setsid` child of this program from one of
    /// another command of the same session. The executor runs one command string per session
    /// at a time, and kills on timeout or abort, so this is what it needs.
    async fn kill(&mut self) {
        if std::mem::replace(&mut self.killed, true) {
            return;
        }
        self.session.kill_everything(&self.exec.container_id).await;
        if tokio::time::timeout(KILL_DRAIN, self.drain())
            .await
            .is_err()
        {
            if let Some(pump) = self.pump.take() {
                pump.abort();
            }
        }
        self.busy.release();
    }
}

async fn create_exec(
    session: &Session,
    container_id: &str,
    request: &ExecRequest,
) -> Result<String, bollard::errors::Error> {
    let user = session.plan.user.spec();
    let options = CreateExecOptions {
        cmd: Some(request.cmd.iter().map(String::as_str).collect()),
        user: Some(user.as_str()),
        working_dir: Some(request.guest_cwd.as_str()),
        env: (!request.env.is_empty()).then(|| request.env.iter().map(String::as_str).collect()),
        attach_stdin: Some(request.fds.stdin.is_some()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        ..Default::default()
    };
    Ok(session.docker.create_exec(container_id, options).await?.id)
}

fn container_stopped(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404 | 409,
            ..
        }
    )
}

fn exec_error(argv0: &str, e: &bollard::errors::Error) -> SandboxError {
    SandboxError::Setup(format!(
        "cannot start {argv0} in the sandbox container: {e}"
    ))
}
