//! Where a script's standard streams go: captured through pipes warden reads concurrently
//! (so a chatty command never blocks on a full pipe), or warden's own descriptors (the CLI).
//!
//! In capture mode there is one pipe for stdout (given to the last command of every pipeline)
//! and one for stderr (given to every command); warden's own diagnostics ("command not found",
//! redirection errors) go into the stderr capture. In tail mode (background commands) both
//! pipes feed one shared [`Tail`], diagnostics included. The write ends are only held by warden and
//! by jailed processes; since every process group is killed when its command ends, closing
//! warden's copies at the end of the script brings end of file.

use super::capture::{Capture, Captured, SaveTarget};
use super::tail::Tail;
use super::{OutputMode, StdinMode};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::task::JoinHandle;

/// How long to keep reading after the script ended (only a leaked writer could need it).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// A capture and the task filling it.
type CaptureTask = (Arc<Mutex<Capture>>, JoinHandle<()>);

pub struct Outputs {
    stdin: Option<Arc<OwnedFd>>,
    null: Arc<OwnedFd>,
    stdout: Arc<OwnedFd>,
    stderr: Arc<OwnedFd>,
    sinks: Sinks,
}

/// Where the captured streams go.
enum Sinks {
    /// warden's own descriptors: nothing to collect.
    Inherited,
    Captures([CaptureTask; 2]),
    /// Both streams into one tail, filled by these readers.
    Tail(Tail, [JoinHandle<()>; 2]),
}

/// What the streams produced.
pub struct Collected {
    pub stdout: Captured,
    pub stderr: Captured,
}

impl Outputs {
    pub fn new(
        stdin: StdinMode,
        output: &OutputMode,
        save: Option<SaveTarget>,
    ) -> std::io::Result<Outputs> {
        let null = Arc::new(OwnedFd::from(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")?,
        ));
        let stdin = match stdin {
            StdinMode::Null => None,
            StdinMode::Inherit => Some(Arc::new(dup_cloexec(0)?)),
        };
        let (stdout, stderr, sinks) = match output {
            OutputMode::Inherit => (
                Arc::new(dup_cloexec(1)?),
                Arc::new(dup_cloexec(2)?),
                Sinks::Inherited,
            ),
            OutputMode::Capture { cap_bytes } => {
                let (out_w, out_cap, out_task) = capture_pipe("stdout", *cap_bytes, save.clone())?;
                let (err_w, err_cap, err_task) = capture_pipe("stderr", *cap_bytes, save)?;
                (
                    Arc::new(out_w),
                    Arc::new(err_w),
                    Sinks::Captures([(out_cap, out_task), (err_cap, err_task)]),
                )
            }
            OutputMode::Tail(tail) => {
                let into_tail = |name| {
                    let tail = tail.clone();
                    drained_pipe(name, move |data: &[u8]| tail.push(data))
                };
                let (out_w, out_task) = into_tail("stdout")?;
                let (err_w, err_task) = into_tail("stderr")?;
                (
                    Arc::new(out_w),
                    Arc::new(err_w),
                    Sinks::Tail(tail.clone(), [out_task, err_task]),
                )
            }
        };
        Ok(Outputs {
            stdin,
            null,
            stdout,
            stderr,
            sinks,
        })
    }

    /// Standard input of the first command of a pipeline.
    pub fn stdin(&self) -> Arc<OwnedFd> {
        self.stdin.clone().unwrap_or_else(|| self.null.clone())
    }

    pub fn stdout(&self) -> Arc<OwnedFd> {
        self.stdout.clone()
    }

    pub fn stderr(&self) -> Arc<OwnedFd> {
        self.stderr.clone()
    }

    pub fn null(&self) -> Arc<OwnedFd> {
        self.null.clone()
    }

    /// A diagnostic from warden itself, shown where the commands' stderr goes.
    pub fn message(&self, text: &str) {
        let line = format!("warden: {text}\n");
        match &self.sinks {
            Sinks::Captures([_, (stderr, _)]) => lock(stderr).push(line.as_bytes()),
            Sinks::Tail(tail, _) => tail.push(line.as_bytes()),
            Sinks::Inherited => {
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
        }
    }

    /// Close warden's write ends and collect what was captured (in tail mode the tail holds
    /// it, and the collected streams are empty).
    pub async fn finish(self) -> Collected {
        let Outputs {
            sinks,
            stdin,
            null,
            stdout,
            stderr,
        } = self;
        // Warden's write ends must be closed before reading to end of file.
        drop((stdin, null, stdout, stderr));
        let empty = || Collected {
            stdout: Capture::new("stdout", 0, None).finish(),
            stderr: Capture::new("stderr", 0, None).finish(),
        };
        match sinks {
            Sinks::Inherited => empty(),
            Sinks::Tail(_, tasks) => {
                drain(tasks).await;
                empty()
            }
            Sinks::Captures([(out, out_task), (err, err_task)]) => {
                drain([out_task, err_task]).await;
                Collected {
                    stdout: take(out),
                    stderr: take(err),
                }
            }
        }
    }
}

/// Wait for the readers to reach end of file (briefly: only a leaked writer could hold on).
async fn drain(tasks: [JoinHandle<()>; 2]) {
    for task in tasks {
        let abort = task.abort_handle();
        if tokio::time::timeout(DRAIN_GRACE, task).await.is_err() {
            tracing::warn!("a jailed process kept an output pipe open; stopped reading");
            abort.abort();
        }
    }
}

fn take(capture: Arc<Mutex<Capture>>) -> Captured {
    match Arc::try_unwrap(capture) {
        Ok(mutex) => mutex
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .finish(),
        // The reader task was aborted while holding a clone: take its content anyway.
        Err(shared) => {
            std::mem::replace(&mut *lock(&shared), Capture::new("stdout", 0, None)).finish()
        }
    }
}

fn lock(capture: &Mutex<Capture>) -> std::sync::MutexGuard<'_, Capture> {
    capture.lock().unwrap_or_else(|p| p.into_inner())
}

type CapturePipe = (OwnedFd, Arc<Mutex<Capture>>, JoinHandle<()>);

/// A pipe whose read end a task drains into a capture.
fn capture_pipe(
    name: &'static str,
    cap: usize,
    save: Option<SaveTarget>,
) -> std::io::Result<CapturePipe> {
    let capture = Arc::new(Mutex::new(Capture::new(name, cap, save)));
    let sink = capture.clone();
    let (write, task) = drained_pipe(name, move |data: &[u8]| lock(&sink).push(data))?;
    Ok((write, capture, task))
}

/// A pipe whose read end a task drains into `sink` until end of file; returns the write end.
fn drained_pipe(
    name: &'static str,
    mut sink: impl FnMut(&[u8]) + Send + 'static,
) -> std::io::Result<(OwnedFd, JoinHandle<()>)> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let mut receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(read)?;
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match receiver.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => sink(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(stream = name, error = %e, "reading jailed output failed");
                    break;
                }
            }
        }
    });
    Ok((write, task))
}

fn dup_cloexec(fd: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: borrowing one of warden's standard descriptors just to duplicate it.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    borrowed.try_clone_to_owned()
}
