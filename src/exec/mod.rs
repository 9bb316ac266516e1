//! The executor: runs the checked IR ([`Script`]) in a [`Sandbox`], itself — never through a
//! shell. warden evaluates `&&`, `||` and `;`, creates the pipes, opens redirection targets
//! without following symlinks, tracks `cd`, and enforces the wall-clock timeout and output caps.
//! Works over any backend (`&dyn Sandbox`).

mod capture;
mod checksums;
mod chmod;
mod flow;
mod io_text;
mod open;
mod output;
mod pipeline;
mod redirect;
mod substitute;
mod tail;
mod xargs;

use crate::policy::ir::Script;
use crate::policy::PathPolicy;
use crate::sandbox::{Sandbox, SandboxError};
use crate::verify::{Protection, Refusal};
use pipeline::Outcome;
use std::path::PathBuf;
use std::time::Duration;
pub use tail::Tail;
use tokio_util::sync::CancellationToken;

/// Exit status of a script killed by its timeout (as `timeout(1)`).
pub const STATUS_TIMED_OUT: i32 = 124;
/// Exit status of a cancelled script (as after SIGINT).
pub const STATUS_CANCELLED: i32 = 130;

/// Where the first command of each pipeline reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StdinMode {
    /// `/dev/null` (the agent: nobody types into a tool call).
    Null,
    /// warden's own standard input (the CLI).
    Inherit,
}

/// Where output goes.
#[derive(Clone, Debug)]
pub enum OutputMode {
    /// Captured into [`RunOutput`], each stream capped at `cap_bytes` (head and tail kept).
    Capture { cap_bytes: usize },
    /// warden's own stdout/stderr (the CLI).
    Inherit,
    /// Both streams into one shared ring of their last bytes, readable while the script runs
    /// (background commands); [`RunOutput`]'s streams stay empty.
    Tail(Tail),
}

#[derive(Clone, Debug)]
pub struct ExecOptions {
    /// Wall-clock limit for the whole script.
    pub timeout: Duration,
    pub stdin: StdinMode,
    pub output: OutputMode,
    /// Where a stream over its cap is saved in full (a directory inside a writable root).
    pub save_dir: Option<PathBuf>,
    /// Cancelling kills every running process; the script ends with status 130.
    pub cancel: CancellationToken,
    /// Where warden itself may open redirection targets: the same roots the policy checked
    /// against and the jail confines to.
    pub paths: PathPolicy,
    /// What the write verifier protects around the script. `None` only for `warden jail`,
    /// which runs a program without the policy.
    pub protection: Option<Protection>,
}

impl ExecOptions {
    /// Capture mode with a 64 KiB cap per stream, stdin from /dev/null.
    pub fn capture(paths: PathPolicy, timeout: Duration) -> ExecOptions {
        ExecOptions {
            timeout,
            stdin: StdinMode::Null,
            output: OutputMode::Capture {
                cap_bytes: 64 * 1024,
            },
            save_dir: None,
            cancel: CancellationToken::new(),
            protection: Some(Protection::for_paths(&paths)),
            paths,
        }
    }

    /// The CLI: the jailed program uses warden's terminal.
    pub fn inherit(paths: PathPolicy, timeout: Duration) -> ExecOptions {
        ExecOptions {
            timeout,
            stdin: StdinMode::Inherit,
            output: OutputMode::Inherit,
            save_dir: None,
            cancel: CancellationToken::new(),
            protection: Some(Protection::for_paths(&paths)),
            paths,
        }
    }
}

/// The result of a script.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RunOutput {
    /// Status of the last pipeline that ran; 124 on timeout, 130 when cancelled.
    pub status: i32,
    /// Captured stdout of the pipelines' last commands (empty in inherit mode).
    pub stdout: String,
    /// Captured stderr of every command plus warden's own diagnostics.
    pub stderr: String,
    /// Whether either stream was cut to the cap.
    pub truncated: bool,
    /// The file holding the full output of a truncated stream (stdout's first).
    pub full_output: Option<PathBuf>,
    pub timed_out: bool,
    pub cancelled: bool,
    pub duration: Duration,
    /// Processes the commands left running in the background, killed when they exited.
    pub background_killed: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The sandbox could not be set up (exit 125); nothing more ran.
    #[error(transparent)]
    Sandbox(SandboxError),
    /// A command's checked working directory is not where the script is (a `cd` before it did
    /// not run, e.g. skipped by `||`): refuse rather than run it unchecked.
    #[error(
        "refusing to run `{command}` in {}: it was checked for {} (a `cd` before it did not run)",
        actual.display(),
        checked.display()
    )]
    CwdMismatch {
        command: String,
        checked: PathBuf,
        actual: PathBuf,
    },
    /// A command that runs code the policy cannot read, in a sandbox that cannot confine it.
    #[error(
        "refusing to run `{command}`: it runs code the policy cannot read, and this sandbox does \
         not confine code (the host jail without Landlock); use the Docker backend or a kernel \
         with Landlock"
    )]
    CodeNotConfined { command: String },
    /// The script changed protected files nobody approved; warden undid it (as far as it could).
    #[error(transparent)]
    Protected(Refusal),
    /// A check that could only be made as the script ran refused it (a name in a checksum list
    /// read from stdin); nothing after it ran.
    #[error("denied: {0}")]
    Refused(String),
    #[error("executor I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl ExecError {
    /// The CLI exit code: 125 when the sandbox failed, 126 when warden refused to run.
    pub fn exit_code(&self) -> i32 {
        match self {
            ExecError::CwdMismatch { .. }
            | ExecError::CodeNotConfined { .. }
            | ExecError::Protected(_)
            | ExecError::Refused(_) => 126,
            ExecError::Sandbox(_) | ExecError::Io(_) => 125,
        }
    }
}

/// Run a checked script in `sandbox`.
pub async fn run_script(
    sandbox: &dyn Sandbox,
    script: &Script,
    options: &ExecOptions,
) -> Result<RunOutput, ExecError> {
    if !sandbox.confines_code() {
        if let Some(code) = script.commands().find(|c| c.runs_code) {
            return Err(ExecError::CodeNotConfined {
                command: code.display(),
            });
        }
    }
    if sandbox.backend() == crate::sandbox::Backend::Docker {
        if let Some(command) = script
            .commands()
            .find(|c| !c.process_substitutions.is_empty())
        {
            return Err(ExecError::Refused(format!(
                "process substitution runs on the host backend only (`{}`): the Docker backend \
                 cannot hand a program a descriptor beyond stdin, stdout and stderr; nothing ran",
                command.display()
            )));
        }
    }
    let started = tokio::time::Instant::now();
    let save = options.save_dir.clone().map(|dir| capture::SaveTarget {
        paths: options.paths.clone(),
        dir,
    });
    let outputs = output::Outputs::new(options.stdin, &options.output, save)?;
    let Some(first) = script.commands().next() else {
        return Ok(finish(outputs, 0, false, false, started, 0).await);
    };
    // Look at the protected set before anything starts; the processes run under the
    // verifier's token, which it cancels when it sees a change nobody approved.
    let ticket = options
        .protection
        .as_ref()
        .map(|p| crate::verify::begin(p, script, &options.cancel));
    let cancel = ticket
        .as_ref()
        .map_or_else(|| options.cancel.clone(), |t| t.kill_token().clone());
    let watcher = ticket.as_ref().map(|t| t.watch());
    let mut ctx = pipeline::Context {
        sandbox,
        outputs: &outputs,
        paths: &options.paths,
        // Saturate: no timeout may overflow the clock (callers bound them; this is the net).
        deadline: started
            .checked_add(options.timeout)
            .unwrap_or_else(|| started + Duration::from_secs(crate::durations::MAX_SECONDS)),
        cancel: &cancel,
        cwd: first.cwd.clone(),
        background_killed: 0,
        last_status: 0,
        streams: None,
        ticket: ticket.as_ref(),
        pipe_inputs: Vec::new(),
    };

    let result = flow::run_list(&mut ctx, script).await;
    let background_killed = ctx.background_killed;
    let last_status = ctx.last_status;
    drop(ctx);
    drop(watcher);
    // Every process of the script has ended: now the last look, and the undo.
    let undone = ticket.map(|t| t.finish()).unwrap_or_default();
    if !undone.is_empty() {
        finish(outputs, last_status, false, false, started, 0).await;
        return Err(ExecError::Protected(Refusal {
            command: script
                .commands()
                .map(|c| c.display())
                .collect::<Vec<_>>()
                .join("\n"),
            undone,
        }));
    }
    let (mut timed_out, mut cancelled) = (false, false);
    let status = match result {
        Ok(Outcome::Finished(s)) => s,
        Ok(Outcome::TimedOut) => {
            timed_out = true;
            outputs.message(&format!(
                "timed out after {} s; every process of the command was killed",
                options.timeout.as_secs_f64()
            ));
            STATUS_TIMED_OUT
        }
        Ok(Outcome::Cancelled) => {
            cancelled = true;
            outputs.message("cancelled; every process of the command was killed");
            STATUS_CANCELLED
        }
        Err(e) => {
            // Collect (and so close) the streams before reporting.
            finish(outputs, last_status, false, false, started, 0).await;
            return Err(e);
        }
    };
    Ok(finish(
        outputs,
        status,
        timed_out,
        cancelled,
        started,
        background_killed,
    )
    .await)
}

async fn finish(
    outputs: output::Outputs,
    status: i32,
    timed_out: bool,
    cancelled: bool,
    started: tokio::time::Instant,
    background_killed: usize,
) -> RunOutput {
    let collected = outputs.finish().await;
    RunOutput {
        status,
        truncated: collected.stdout.truncated || collected.stderr.truncated,
        full_output: collected.stdout.saved.or(collected.stderr.saved),
        stdout: collected.stdout.text,
        stderr: collected.stderr.text,
        timed_out,
        cancelled,
        duration: started.elapsed(),
        background_killed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executor_future_can_move_between_threads() {
        // The agent runs scripts on a multi-threaded runtime and aborts them from another task.
        fn assert_send<T: Send>(_: &T) {}
        let dir = tempfile::tempdir().unwrap();
        let spec = crate::sandbox::JailSpec::new(dir.path().canonicalize().unwrap());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = runtime.enter();
        let sandbox = crate::sandbox::host::HostSandbox::new(spec).unwrap();
        let paths = PathPolicy::new(dir.path(), &[], &[], std::path::Path::new("/")).unwrap();
        let options = ExecOptions::capture(paths, Duration::from_secs(1));
        let script = Script::default();
        let future = run_script(&sandbox, &script, &options);
        assert_send(&future);
        let out = runtime.block_on(future).unwrap();
        assert_eq!(out.status, 0);
        assert_eq!(out.stdout, "");
    }
}

#[cfg(test)]
mod confinement_tests {
    use super::*;
    use crate::sandbox::{Backend, JailedProcess, ProcessSpec, SandboxError};
    use async_trait::async_trait;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A sandbox that confines nothing and counts what it was asked to start.
    struct Unconfined(AtomicUsize);

    #[async_trait]
    impl Sandbox for Unconfined {
        fn backend(&self) -> Backend {
            Backend::Host
        }
        async fn spawn(&self, _: ProcessSpec) -> Result<Box<dyn JailedProcess>, SandboxError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err(SandboxError::Setup("not in this test".into()))
        }
        fn guest_path(&self, host_path: &Path) -> Option<PathBuf> {
            Some(host_path.to_path_buf())
        }
    }

    #[tokio::test]
    async fn code_the_policy_cannot_read_never_starts_where_it_is_not_confined() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::write(ws.join("tool.py"), "print(1)\n").unwrap();
        let policy = std::sync::Arc::new(crate::policy::Policy::embedded_default());
        let mut checker = policy.checker(&ws, &[], &ws).unwrap();
        let verdict = checker.check("true && python3 tool.py");
        assert_eq!(
            verdict.decision,
            crate::policy::Decision::Ask,
            "{}",
            verdict.reason
        );
        let sandbox = Unconfined(AtomicUsize::new(0));
        let paths = checker.paths().clone();
        let options = ExecOptions::capture(paths, Duration::from_secs(5));
        let err = run_script(&sandbox, &verdict.script, &options)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ExecError::CodeNotConfined { command } if command.contains("tool.py")),
            "{err}"
        );
        assert_eq!(err.exit_code(), 126);
        assert_eq!(
            sandbox.0.load(Ordering::SeqCst),
            0,
            "nothing started, not even `true`"
        );
    }
}
