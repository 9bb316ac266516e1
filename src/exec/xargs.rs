//! warden's own xargs (see `policy::xargs` and `policy::xargs_input`): the input is read from the command's stdin (at
//! most [`MAX_INPUT`] bytes), split and batched as the plan says, and each batch's argv is
//! checked by the policy that checked the line, as a program of its own, right before it runs.
//! A refused batch stops the line (nothing after it runs). Each batch runs in the sandbox with
//! stdin from /dev/null, as GNU xargs gives it, and xargs' stdout and stderr. The status is
//! GNU xargs': 123 when a batch exited 1-125, 124 when one exited 255 (which stops it), 125
//! when one was killed by a signal, 126 and 127 when a program could not run.

use super::output::Outputs;
use super::redirect::FdTable;
use super::ExecError;
use crate::policy::ir::XargsPlan;
use crate::policy::xargs_input as xargs;
use crate::policy::{Checker, PathPolicy};
use crate::sandbox::{JailedProcess, Sandbox, SandboxError};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Mutex;

/// The most input warden's xargs reads (bytes); more is refused, not cut.
pub const MAX_INPUT: usize = 1024 * 1024;

/// The batch running now, so a timeout or cancel can kill it after the run is dropped.
pub type Running = Arc<Mutex<Option<Box<dyn JailedProcess>>>>;

/// Where a run reads, writes and checks.
pub struct Setup<'a> {
    pub sandbox: &'a dyn Sandbox,
    pub outputs: &'a Outputs,
    pub paths: &'a PathPolicy,
    pub cwd: PathBuf,
    /// xargs' stdin, stdout and stderr after its redirections.
    pub streams: [Arc<OwnedFd>; 3],
    pub running: Running,
}

pub async fn run(setup: Setup<'_>, plan: &XargsPlan) -> Result<i32, ExecError> {
    let Some(policy) = &plan.policy else {
        setup
            .outputs
            .message("xargs: no policy to check its batches with; nothing ran");
        return Ok(1);
    };
    let [stdin, stdout, stderr] = setup.streams.clone();
    let source = stdin.try_clone()?;
    drop(stdin);
    let input = tokio::task::spawn_blocking(move || {
        let mut bytes = Vec::new();
        std::fs::File::from(source)
            .take(MAX_INPUT as u64 + 1)
            .read_to_end(&mut bytes)
            .map(|_| bytes)
    })
    .await
    .map_err(std::io::Error::other)??;
    if input.len() > MAX_INPUT {
        setup.outputs.message(&format!(
            "xargs: more than {MAX_INPUT} bytes of input; nothing ran"
        ));
        return Ok(1);
    }
    let items = match xargs::items(&input, plan.null) {
        Ok(items) => items,
        Err(message) => {
            setup.outputs.message(&message);
            return Ok(1);
        }
    };
    if items.is_empty() && plan.no_run_if_empty {
        return Ok(0);
    }
    let checker = Checker::new(Arc::clone(&policy.0), setup.paths.clone());
    let max_argv = policy.0.settings().max_args;
    let mut batches = xargs::batches(plan, items, max_argv);
    if batches.is_empty() {
        batches.push(Vec::new());
    }
    let mut status = 0;
    for batch in batches {
        let mut argv = plan.command.clone();
        argv.extend(batch);
        let command = checker
            .plain_program(argv, &setup.cwd)
            .map_err(|d| ExecError::Refused(d.reason))?;
        let null = setup.outputs.null();
        let table = FdTable::new(null.clone(), stdout.clone(), stderr.clone(), null);
        let mut spec = table.into_spec(command.argv.clone(), setup.cwd.clone())?;
        spec.env = command.env.clone();
        let process = match crate::sandbox::starts::spawn_timed(setup.sandbox, spec).await {
            Ok(process) => process,
            Err(SandboxError::NotFound(program)) => {
                setup
                    .outputs
                    .message(&format!("xargs: {program}: command not found"));
                return Ok(127);
            }
            Err(SandboxError::CannotExecute { program, .. }) => {
                setup
                    .outputs
                    .message(&format!("xargs: {program}: cannot execute"));
                return Ok(126);
            }
            Err(SandboxError::Io(e)) => return Err(ExecError::Io(e)),
            Err(e @ SandboxError::Setup(_)) => return Err(ExecError::Sandbox(e)),
        };
        let mut slot = setup.running.lock().await;
        *slot = Some(process);
        let exit = match slot.as_mut() {
            Some(process) => process.wait().await,
            None => return Ok(1),
        };
        *slot = None;
        drop(slot);
        let code = match exit {
            Ok(exit) => exit.as_shell_code(),
            Err(e) => {
                setup
                    .outputs
                    .message(&format!("xargs: waiting for a batch failed: {e}"));
                return Ok(1);
            }
        };
        match code {
            0 => {}
            255 => return Ok(124),
            code if code > 128 => return Ok(125),
            1..=125 => status = 123,
            code => return Ok(code),
        }
    }
    Ok(status)
}
