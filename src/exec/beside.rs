//! Process substitutions, `<(cmd)`: each inner script runs beside the pipeline that holds it,
//! in the same sandbox, with the same deadline and cancel, stdin empty, stdout on a pipe warden
//! makes and stderr the script's. The read end goes to the command at the descriptor the
//! checker chose (its argv already names `/dev/fd/N`); warden keeps no copy once the command
//! has started. As in bash the pipeline's status is the line's; every inner script is waited
//! for after it.

use super::flow;
use super::pipeline::{self, Context, Outcome};
use super::ExecError;
use crate::policy::ir::Pipeline;
use std::sync::Arc;

pub async fn run(ctx: &mut Context<'_>, pipeline: &Pipeline) -> Result<Outcome, ExecError> {
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
                let outcome = flow::run_list(&mut inner, script).await;
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
