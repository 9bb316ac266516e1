//! Running one pipeline: pipes created by warden (`pipe2(O_CLOEXEC)`), each command's descriptor
//! table computed in warden, every program started through the sandbox, then all of them waited
//! for — or all killed, when the script's deadline passes or it is cancelled.

use super::checksums::{self, Fed};
use super::io_text::short;
use super::output::Outputs;
use super::redirect::FdTable;
use super::xargs;
use super::ExecError;
use crate::policy::ir::{Builtin, ChmodPlan, Command, Pipeline};
use crate::policy::PathPolicy;
use crate::sandbox::{JailedProcess, Sandbox, SandboxError};
use futures::future::BoxFuture;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a pipeline ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Status of the last command, as a shell reports it.
    Finished(i32),
    TimedOut,
    Cancelled,
}

/// The state a script carries from step to step.
pub struct Context<'a> {
    pub sandbox: &'a dyn Sandbox,
    pub outputs: &'a Outputs,
    pub paths: &'a PathPolicy,
    pub deadline: Instant,
    pub cancel: &'a CancellationToken,
    /// The working directory `cd` builtins have moved to.
    pub cwd: PathBuf,
    /// Processes commands left running in the background when they exited (killed).
    pub background_killed: usize,
    /// The status of the last pipeline (what `$?` stands for).
    pub last_status: i32,
    /// Standard streams set by an enclosing compound command's redirections (`{ …; } > f`);
    /// `None`: the script's own.
    pub streams: Option<[Arc<OwnedFd>; 3]>,
    /// The write verifier's part in this script (`None`: `warden jail`, no policy).
    pub ticket: Option<&'a crate::verify::Ticket>,
    /// Read ends of process substitutions' pipes for the next pipeline: (command index,
    /// descriptor, pipe). [`run`] takes them; none outlives the start of its command.
    pub pipe_inputs: Vec<(usize, u8, Arc<OwnedFd>)>,
}

impl Context<'_> {
    /// The standard streams commands start from: stdin, stdout, stderr.
    pub fn stream_fds(&self) -> [Arc<OwnedFd>; 3] {
        match &self.streams {
            Some(streams) => streams.clone(),
            None => [
                self.outputs.stdin(),
                self.outputs.stdout(),
                self.outputs.stderr(),
            ],
        }
    }
}

pub async fn run(ctx: &mut Context<'_>, pipeline: &Pipeline) -> Result<Outcome, ExecError> {
    let count = pipeline.commands.len();
    let mut statuses: Vec<i32> = vec![0; count];
    let mut running: Vec<(usize, Box<dyn JailedProcess>)> = Vec::new();
    let mut next_stdin: Option<Arc<OwnedFd>> = None;
    // What warden's own chmod prints, still being written when the programs end.
    let mut writers: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    // warden's own xargs runs, and the batch each is running (killed on a timeout).
    let mut xargs_runs: Vec<(usize, BoxFuture<'_, Result<i32, ExecError>>)> = Vec::new();
    let mut xargs_batches: Vec<xargs::Running> = Vec::new();
    let mut pipe_inputs = std::mem::take(&mut ctx.pipe_inputs);

    for (index, command) in pipeline.commands.iter().enumerate() {
        if ctx.cancel.is_cancelled() {
            kill_all(&mut running).await;
            return Ok(Outcome::Cancelled);
        }
        if Instant::now() >= ctx.deadline {
            kill_all(&mut running).await;
            return Ok(Outcome::TimedOut);
        }
        // What was checked is what runs: never run a command somewhere it was not checked for.
        if command.cwd != ctx.cwd {
            kill_all(&mut running).await;
            return Err(ExecError::CwdMismatch {
                command: command.display(),
                checked: command.cwd.clone(),
                actual: ctx.cwd.clone(),
            });
        }
        let [base_stdin, base_stdout, base_stderr] = ctx.stream_fds();
        let stdin = next_stdin.take().unwrap_or(base_stdin);
        let stdout = if index + 1 < count {
            let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| ExecError::Io(e.into()))?;
            next_stdin = Some(Arc::new(read));
            Arc::new(write)
        } else {
            base_stdout
        };
        let mut table = FdTable::new(stdin, stdout, base_stderr, ctx.outputs.null());
        // The checker chose descriptors no redirection of the command touches.
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut pipe_inputs)
            .into_iter()
            .partition(|(i, _, _)| *i == index);
        pipe_inputs = rest;
        for (_, fd, pipe) in mine {
            table.set(fd, pipe);
        }
        if let Err(message) = table.apply(&command.redirects, ctx.paths) {
            ctx.outputs.message(&message);
            statuses[index] = 1;
            continue;
        }
        if command.checksums_on_stdin {
            let name = command.argv[0].clone();
            let fed = tokio::select! {
                fed = checksums::feed(&mut table, ctx.outputs.null(), ctx.paths, &ctx.cwd, &name) => Some(fed),
                _ = tokio::time::sleep_until(ctx.deadline) => None,
                _ = ctx.cancel.cancelled() => None,
            };
            match fed {
                Some(Ok(Fed::Checked(writer))) => writers.push(writer),
                Some(Ok(Fed::Refused(reason))) => {
                    kill_all(&mut running).await;
                    return Err(ExecError::Refused(reason));
                }
                Some(Err(e)) => {
                    kill_all(&mut running).await;
                    return Err(ExecError::Io(e));
                }
                None => {
                    let timed_out = !ctx.cancel.is_cancelled();
                    kill_all(&mut running).await;
                    return Ok(if timed_out {
                        Outcome::TimedOut
                    } else {
                        Outcome::Cancelled
                    });
                }
            }
        }
        match &command.builtin {
            Some(Builtin::Cd(target)) => {
                // In a pipeline `cd` runs in a subshell: its status counts, its effect does not.
                statuses[index] = cd(ctx, target, count == 1);
            }
            Some(Builtin::Chmod(plan)) if ctx.sandbox.ignores_chmod() => {
                let (status, writer) = chmod(ctx, plan, &table);
                statuses[index] = status;
                writers.extend(writer);
            }
            Some(Builtin::Xargs(plan)) => {
                let running: xargs::Running = Default::default();
                let setup = xargs::Setup {
                    sandbox: ctx.sandbox,
                    outputs: ctx.outputs,
                    paths: ctx.paths,
                    cwd: ctx.cwd.clone(),
                    streams: table.standard(ctx.outputs.null()),
                    running: running.clone(),
                };
                xargs_runs.push((index, Box::pin(xargs::run(setup, plan))));
                xargs_batches.push(running);
            }
            Some(Builtin::Compound(_)) => {
                // The checker never puts a compound command in a pipeline of several.
                ctx.outputs.message(&format!(
                    "`{}` cannot run inside a pipeline",
                    command.display()
                ));
                statuses[index] = 1;
            }
            None if command.argv.is_empty() => statuses[index] = 0,
            // git reads its config and hooks as it starts: an earlier command of this script
            // must not have changed them unseen.
            None if crate::verify::is_git(&command.argv)
                && ctx.ticket.is_some_and(|t| !t.check_running()) =>
            {
                kill_all(&mut running).await;
                return Ok(Outcome::Cancelled);
            }
            None | Some(Builtin::Chmod(_)) => match spawn(ctx, command, table).await {
                Ok(process) => running.push((index, process)),
                Err(SpawnFailure::Status(status)) => statuses[index] = status,
                Err(SpawnFailure::Fatal(e)) => {
                    kill_all(&mut running).await;
                    return Err(e);
                }
            },
        }
    }
    drop(next_stdin);
    // warden keeps no read end of a process substitution: a command gone means EPIPE there.
    drop(pipe_inputs);

    let waited = {
        let waits = futures::future::join_all(
            running
                .iter_mut()
                .map(|(index, process)| async move { (*index, process.wait().await) }),
        );
        let xargs_waits = futures::future::join_all(
            xargs_runs
                .into_iter()
                .map(|(index, run)| async move { (index, run.await) }),
        );
        tokio::select! {
            results = futures::future::join(waits, xargs_waits) => Some(results),
            _ = tokio::time::sleep_until(ctx.deadline) => None,
            _ = ctx.cancel.cancelled() => None,
        }
    };
    let Some((results, xargs_results)) = waited else {
        let timed_out = !ctx.cancel.is_cancelled();
        kill_all(&mut running).await;
        kill_batches(&xargs_batches).await;
        return Ok(if timed_out {
            Outcome::TimedOut
        } else {
            Outcome::Cancelled
        });
    };
    for (index, result) in xargs_results {
        match result {
            Ok(status) => statuses[index] = status,
            Err(e) => {
                // A refused batch stops the line: nothing of this pipeline keeps running.
                kill_all(&mut running).await;
                return Err(e);
            }
        }
    }
    for (index, process) in &running {
        let left = process.background_killed();
        if left > 0 {
            ctx.background_killed += left;
            ctx.outputs.message(&format!(
                "`{}` left {left} process(es) running in the background when it exited; warden \
                 killed them (nothing outlives a command)",
                pipeline.commands[*index].display()
            ));
        }
    }
    // The pipeline ends when its output is written (a reader gone ends a writer with EPIPE).
    for writer in writers {
        let _ = tokio::time::timeout_at(ctx.deadline, writer).await;
    }
    for (index, result) in results {
        statuses[index] = match result {
            Ok(status) => status.as_shell_code(),
            Err(e) => {
                ctx.outputs
                    .message(&format!("waiting for a command failed: {e}"));
                1
            }
        };
    }
    Ok(Outcome::Finished(statuses.last().copied().unwrap_or(0)))
}

enum SpawnFailure {
    /// The command failed to start the way a shell reports it (127, 126).
    Status(i32),
    /// The jail itself failed: stop the script.
    Fatal(ExecError),
}

async fn spawn(
    ctx: &Context<'_>,
    command: &Command,
    table: FdTable,
) -> Result<Box<dyn JailedProcess>, SpawnFailure> {
    let name = command.argv[0].clone();
    let mut spec = table
        .into_spec(command.argv_with_status(ctx.last_status), ctx.cwd.clone())
        .map_err(|e| SpawnFailure::Fatal(ExecError::Io(e)))?;
    spec.env = command.env.clone();
    match crate::sandbox::starts::spawn_timed(ctx.sandbox, spec).await {
        Ok(process) => Ok(process),
        Err(SandboxError::NotFound(program)) => {
            ctx.outputs
                .message(&format!("{program}: command not found"));
            Err(SpawnFailure::Status(127))
        }
        Err(SandboxError::CannotExecute { program, source }) => {
            let status = if source.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            ctx.outputs
                .message(&format!("{program}: cannot execute: {}", short(&source)));
            Err(SpawnFailure::Status(status))
        }
        Err(SandboxError::Io(e)) => {
            ctx.outputs.message(&format!("{name}: {}", short(&e)));
            Err(SpawnFailure::Status(126))
        }
        Err(e @ SandboxError::Setup(_)) => Err(SpawnFailure::Fatal(ExecError::Sandbox(e))),
    }
}

/// `cd`: change the tracked directory (when `apply`), bash-like status and message.
fn cd(ctx: &mut Context<'_>, target: &Path, apply: bool) -> i32 {
    // The checked target has every link resolved (or did not exist yet: a directory an
    // earlier command made). Now that it exists it must still be that very directory.
    match std::fs::canonicalize(target) {
        Ok(real) if real != target => {
            ctx.outputs.message(&format!(
                "cd: {} now resolves to {}, not the directory that was checked",
                target.display(),
                real.display()
            ));
            return 1;
        }
        _ => {}
    }
    match std::fs::metadata(target) {
        Ok(meta) if meta.is_dir() => {
            if apply {
                ctx.cwd = target.to_path_buf();
            }
            0
        }
        Ok(_) => {
            ctx.outputs
                .message(&format!("cd: {}: Not a directory", target.display()));
            1
        }
        Err(e) => {
            ctx.outputs
                .message(&format!("cd: {}: {}", target.display(), short(&e)));
            1
        }
    }
}

/// `chmod` carried out by warden (see `exec::chmod`); what it prints goes to the command's own
/// stdout and stderr, written from a blocking task so a pipe nobody reads yet cannot stall the
/// script; the pipeline waits for it before it ends (else the words could be lost at exit).
fn chmod(
    ctx: &Context<'_>,
    plan: &ChmodPlan,
    table: &FdTable,
) -> (i32, Option<tokio::task::JoinHandle<()>>) {
    let result = super::chmod::run(ctx.paths, plan, super::chmod::current_umask());
    let [_, stdout, stderr] = table.standard(ctx.outputs.null());
    let writer = (!result.stdout.is_empty() || !result.stderr.is_empty()).then(|| {
        tokio::task::spawn_blocking(move || {
            for (fd, text) in [(stdout, result.stdout), (stderr, result.stderr)] {
                // A reader that went away (EPIPE) ends the writing; nothing else to do.
                let _ = write_all(&fd, text.as_bytes());
            }
        })
    });
    (result.status, writer)
}

fn write_all(fd: &OwnedFd, mut bytes: &[u8]) -> nix::Result<()> {
    while !bytes.is_empty() {
        match nix::unistd::write(fd, bytes) {
            Ok(written) => bytes = &bytes[written..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn kill_batches(batches: &[xargs::Running]) {
    for batch in batches {
        if let Some(process) = batch.lock().await.as_mut() {
            process.kill().await;
        }
    }
}

async fn kill_all(running: &mut [(usize, Box<dyn JailedProcess>)]) {
    for (_, process) in running.iter_mut() {
        process.kill().await;
    }
}
