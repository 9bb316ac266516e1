//! Evaluating lists and compound commands as bash does: `&&`, `||`, `;` by the last status,
//! `!` inverting it, `{ }` groups, `( )` subshells (their `cd` does not outlive them), `if`
//! branches and `while`/`until` loops, with a compound's redirections applied to everything
//! inside it. Pipelines of programs are `pipeline.rs`'s.

use super::pipeline::{self, Context, Outcome};
use super::redirect::FdTable;
use super::ExecError;
use crate::policy::ir::{Builtin, Command, Compound, Pipeline, Script};
use futures::future::BoxFuture;

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
    pipeline::run(ctx, pipeline).await
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
