//! Evaluating lists and compound commands as bash does: `&&`, `||`, `;` by the last status,
//! `!` inverting it, `{ }` groups, `( )` subshells (their `cd` does not outlive them), `if`
//! branches and `while`/`until` loops, with a compound's redirections applied to everything
//! inside it; command substitutions run before the pipeline that holds them. Pipelines of
//! programs are `pipeline.rs`'s.

use super::pipeline::{self, Context, Outcome};
use super::redirect::FdTable;
use super::substitute::Capture;
use super::ExecError;
use crate::policy::ir::{Builtin, Command, Compound, Pipeline, Script};
use futures::future::BoxFuture;
use std::sync::Arc;

/// Run a list; `Outcome::Finished` carries the status of the last pipeline that ran (0 when
/// none did).
pub fn run_list<'a, 'c>(
    ctx: &'a mut Context<'c>,
    script: &'a Script,
) -> BoxFuture<'a, Result<Outcome, ExecError>>
where
    'c: 'a,
{
    Box::pin(async move {
        let mut status = 0;
        for step in &script.steps {
            if !step.connector.runs_after(ctx.last_status) {
                continue;
            }
            match run_pipeline(ctx, &step.pipeline).await? {
                Outcome::Finished(s) => {
                    status = if step.pipeline.negated {
                        i32::from(s == 0)
                    } else {
                        s
                    };
                    ctx.last_status = status;
                }
                other => return Ok(other),
            }
        }
        Ok(Outcome::Finished(status))
    })
}

async fn run_pipeline(ctx: &mut Context<'_>, pipeline: &Pipeline) -> Result<Outcome, ExecError> {
    if let [command] = pipeline.commands.as_slice() {
        if let Some(Builtin::Compound(compound)) = &command.builtin {
            return run_compound(ctx, command, compound).await;
        }
    }
    if pipeline
        .commands
        .iter()
        .any(|c| !c.substitutions.is_empty())
    {
        return match substituted(ctx, pipeline).await? {
            Captured::Filled(filled) => run_programs(ctx, &filled).await,
            Captured::Failed(message) => {
                ctx.outputs.message(&message);
                Ok(Outcome::Finished(1))
            }
            Captured::Ended(outcome) => Ok(outcome),
        };
    }
    run_programs(ctx, pipeline).await
}

/// A pipeline of programs, with the process substitutions it holds running beside it.
async fn run_programs(ctx: &mut Context<'_>, pipeline: &Pipeline) -> Result<Outcome, ExecError> {
    if pipeline
        .commands
        .iter()
        .any(|c| !c.process_substitutions.is_empty())
    {
        return run_beside(ctx, pipeline).await;
    }
    pipeline::run(ctx, pipeline).await
}

/// What running a pipeline's command substitutions gave.
enum Captured<T> {
    Filled(T),
    /// The output cannot be an argument (too long, a NUL byte, not UTF-8).
    Failed(String),
    /// Timed out or cancelled.
    Ended(Outcome),
}

/// The pipeline with every command substitution's output in its place in argv. Each inner
/// script runs first, in order, as bash's subshell would: its `cd` and status do not outlive
/// it, it reads nothing, its stderr is the command's.
async fn substituted(
    ctx: &mut Context<'_>,
    pipeline: &Pipeline,
) -> Result<Captured<Pipeline>, ExecError> {
    let mut filled = pipeline.clone();
    for command in &mut filled.commands {
        let mut outputs = Vec::with_capacity(command.substitutions.len());
        for substitution in &command.substitutions {
            match capture(ctx, &substitution.script).await? {
                Captured::Filled(text) => outputs.push(text),
                Captured::Failed(message) => return Ok(Captured::Failed(message)),
                Captured::Ended(outcome) => return Ok(Captured::Ended(outcome)),
            }
        }
        if !outputs.is_empty() {
            command.argv = command.argv_with_substitutions(&outputs);
            command.substitutions.clear();
        }
    }
    Ok(Captured::Filled(filled))
}

async fn capture(ctx: &mut Context<'_>, script: &Script) -> Result<Captured<String>, ExecError> {
    let capture = Capture::start()?;
    let (saved_streams, saved_cwd, saved_status) =
        (ctx.streams.clone(), ctx.cwd.clone(), ctx.last_status);
    let [_, _, stderr] = ctx.stream_fds();
    ctx.streams = Some([ctx.outputs.null(), capture.stdout.clone(), stderr]);
    let outcome = run_list(ctx, script).await;
    ctx.streams = saved_streams;
    ctx.cwd = saved_cwd;
    ctx.last_status = saved_status;
    match outcome? {
        Outcome::Finished(_) => {}
        other => return Ok(Captured::Ended(other)),
    }
    // The output ends when every holder of the pipe is gone; a process that escaped the
    // kill could keep it open, so the script's deadline bounds the wait.
    Ok(tokio::select! {
        value = capture.finish() => match value {
            Ok(text) => Captured::Filled(text),
            Err(message) => Captured::Failed(message),
        },
        _ = tokio::time::sleep_until(ctx.deadline) => Captured::Ended(Outcome::TimedOut),
        _ = ctx.cancel.cancelled() => Captured::Ended(Outcome::Cancelled),
    })
}

async fn run_compound(
    ctx: &mut Context<'_>,
    command: &Command,
    compound: &Compound,
) -> Result<Outcome, ExecError> {
    // What was checked is what runs: never where it was not checked for.
    if command.cwd != ctx.cwd {
        return Err(ExecError::CwdMismatch {
            command: command.display(),
            checked: command.cwd.clone(),
            actual: ctx.cwd.clone(),
        });
    }
    let saved_streams = ctx.streams.clone();
    if !command.redirects.is_empty() {
        let [stdin, stdout, stderr] = ctx.stream_fds();
        let mut table = FdTable::new(stdin, stdout, stderr, ctx.outputs.null());
        if let Err(message) = table.apply(&command.redirects, ctx.paths) {
            ctx.outputs.message(&message);
            return Ok(Outcome::Finished(1));
        }
        ctx.streams = Some(table.standard(ctx.outputs.null()));
    }
    let outcome = evaluate(ctx, compound).await;
    ctx.streams = saved_streams;
    outcome
}

async fn evaluate(ctx: &mut Context<'_>, compound: &Compound) -> Result<Outcome, ExecError> {
    match compound {
        Compound::Group(script) => run_list(ctx, script).await,
        Compound::Subshell(script) => {
            let cwd = ctx.cwd.clone();
            let outcome = run_list(ctx, script).await;
            ctx.cwd = cwd;
            outcome
        }
        Compound::If {
            branches,
            otherwise,
        } => {
            for branch in branches {
                match run_list(ctx, &branch.condition).await? {
                    Outcome::Finished(0) => return run_list(ctx, &branch.body).await,
                    Outcome::Finished(_) => {}
                    other => return Ok(other),
                }
            }
            match otherwise {
                Some(script) => run_list(ctx, script).await,
                None => Ok(Outcome::Finished(0)),
            }
        }
        Compound::Loop {
            until,
            condition,
            body,
        } => {
            let mut status = 0;
            loop {
                let proceed = match run_list(ctx, condition).await? {
                    Outcome::Finished(s) => (s == 0) != *until,
                    other => return Ok(other),
                };
                if !proceed {
                    return Ok(Outcome::Finished(status));
                }
                match run_list(ctx, body).await? {
                    Outcome::Finished(s) => status = s,
                    other => return Ok(other),
                }
                // A loop of builtins alone never reaches a spawn, where time is checked.
                if ctx.cancel.is_cancelled() {
                    return Ok(Outcome::Cancelled);
                }
                if tokio::time::Instant::now() >= ctx.deadline {
                    return Ok(Outcome::TimedOut);
                }
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Process substitutions, `<(cmd)`: each inner script runs beside the pipeline that holds it,
/// in the same sandbox, with the same deadline and cancel, stdin empty, stdout on a pipe warden
/// makes and stderr the script's. The read end goes to the command at the descriptor the
/// checker chose (its argv already names `/dev/fd/N`); warden keeps no copy once the command
/// has started. As in bash the pipeline's status is the line's; every inner script is waited
/// for after it.
async fn run_beside(ctx: &mut Context<'_>, pipeline: &Pipeline) -> Result<Outcome, ExecError> {
    let mut inputs = Vec::new();
    let mut inner_runs = Vec::new();
    let [_, _, stderr] = ctx.stream_fds();
    for (index, command) in pipeline.commands.iter().enumerate() {
        for substitution in &command.process_substitutions {
            let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| ExecError::Io(e.into()))?;
            inputs.push((index, substitution.fd, Arc::new(read)));
            let mut inner = Context {
                sandbox: ctx.sandbox,
                outputs: ctx.outputs,
                paths: ctx.paths,
                deadline: ctx.deadline,
                cancel: ctx.cancel,
                cwd: ctx.cwd.clone(),
                background_killed: 0,
                last_status: ctx.last_status,
                streams: Some([ctx.outputs.null(), Arc::new(write), stderr.clone()]),
                ticket: ctx.ticket,
                pipe_inputs: Vec::new(),
            };
            let script = &substitution.script;
            inner_runs.push(async move {
                let outcome = run_list(&mut inner, script).await;
                let killed = inner.background_killed;
                // warden's write end closes with the context: the reader sees the end.
                drop(inner);
                (outcome, killed)
            });
        }
    }
    ctx.pipe_inputs = inputs;
    let (inner, outer) = futures::future::join(
        futures::future::join_all(inner_runs),
        pipeline::run(ctx, pipeline),
    )
    .await;
    ctx.pipe_inputs.clear();
    let mut ended = None;
    for (outcome, killed) in inner {
        ctx.background_killed += killed;
        match outcome? {
            Outcome::Finished(_) => {}
            other => ended = ended.or(Some(other)),
        }
    }
    match outer? {
        // An inner script that timed out or was cancelled ends the line the same way.
        Outcome::Finished(status) => Ok(ended.unwrap_or(Outcome::Finished(status))),
        other => Ok(other),
    }
}
