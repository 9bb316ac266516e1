//! Bytes between one exec's attached streams and the descriptors the executor handed in.
//!
//! Without a tty the daemon multiplexes stdout and stderr on one connection, in order. One
//! thread writes both to their descriptors (so `2>&1` keeps the order), one thread reads the
//! stdin descriptor; both are plain blocking threads, so any descriptor works (pipe, file,
//! terminal) and nothing ever sets `O_NONBLOCK` on a descriptor warden shares. What the kernel
//! would do to a process writing straight into these descriptors, the pump does by signal:
//! `SIGPIPE` when the reader is gone, `SIGXFSZ` past the file-size limit.

use super::signal::signal_exec;
use bollard::container::LogOutput;
use bollard::Docker;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use nix::sys::signal::Signal;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub type OutputStream =
    Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;
pub type InputSink = Pin<Box<dyn AsyncWrite + Send>>;

/// The first bytes of the message the daemon sends instead of output when the runtime cannot
/// start the program.
const START_FAILED: &[u8] = b"OCI runtime exec failed";
const CHUNK: usize = 64 * 1024;

/// The exec the pump serves.
#[derive(Clone)]
pub struct ExecRef {
    pub docker: Docker,
    pub exec_id: String,
    pub container_id: String,
    /// Whether the program is a host process warden may signal (runc), see `signal.rs`.
    pub host_signals: bool,
}

/// The standard streams of the program; `None` is `/dev/null`.
pub struct Descriptors {
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
    /// stderr was merged into stdout in the container (see `stdio.rs`): whatever still arrives
    /// as stderr goes to stdout too.
    pub merged: bool,
}

/// How the program's output ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// Every holder of its stdout and stderr closed them.
    Closed,
    /// The runtime found no such program; nothing ran.
    NotFound,
    /// The runtime could not start the program for another reason (its message); nothing ran.
    CannotStart(String),
}

/// A running pump.
pub struct Pump {
    /// Ends once all output is written and the descriptors are closed.
    pub done: JoinHandle<Ending>,
    /// Fires with the program's first output (so it started); dropped unsent when the output
    /// ended without any (the program ended, or never started: see `done`).
    pub first_output: oneshot::Receiver<()>,
}

/// Start pumping.
pub fn start(
    exec: ExecRef,
    output: OutputStream,
    input: InputSink,
    fds: Descriptors,
    max_file_size: u64,
) -> Pump {
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let (first_tx, first_rx) = oneshot::channel::<()>();
    if let Some(stdin) = fds.stdin {
        tokio::spawn(pump_stdin(stdin, input, done_rx));
    }
    let done = tokio::spawn(pump_output(
        exec,
        output,
        [fds.stdout, fds.stderr],
        fds.merged,
        max_file_size,
        done_tx,
        first_tx,
    ));
    Pump {
        done,
        first_output: first_rx,
    }
}

#[derive(Clone, Copy, Debug)]
enum Channel {
    Out = 0,
    Err = 1,
}

/// Why a descriptor stopped taking output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Broken {
    Pipe,
    FileSize,
    Other,
}

async fn pump_output(
    exec: ExecRef,
    mut output: OutputStream,
    fds: [Option<OwnedFd>; 2],
    merged: bool,
    max_file_size: u64,
    done_stdin: oneshot::Sender<()>,
    first_output: oneshot::Sender<()>,
) -> Ending {
    let mut first_output = Some(first_output);
    let (chunks_tx, chunks_rx) = mpsc::channel::<(Channel, Bytes)>(8);
    let (broken_tx, mut broken_rx) = mpsc::unbounded_channel::<Broken>();
    let (finished_tx, finished_rx) = oneshot::channel::<()>();
    let sinks = fds.map(|fd| fd.map(|fd| Sink::new(fd, max_file_size)));
    let writer = std::thread::Builder::new()
        .name("warden-exec-out".into())
        .spawn(move || {
            write_loop(chunks_rx, sinks, broken_tx);
            let _ = finished_tx.send(());
        });
    if let Err(e) = writer {
        tracing::warn!("cannot start the output thread of an exec: {e}");
        return Ending::Closed;
    }
    let send = |channel: Channel, bytes: Bytes| {
        let chunks_tx = chunks_tx.clone();
        async move {
            let _ = chunks_tx.send((channel, bytes)).await;
        }
    };
    let mut held: Option<Bytes> = None;
    let mut first = true;
    let mut signalled = false;
    loop {
        tokio::select! {
            item = output.next() => {
                let (channel, message) = match item {
                    Some(Ok(LogOutput::StdOut { message })) => (Channel::Out, message),
                    Some(Ok(LogOutput::Console { message })) => (Channel::Out, message),
                    Some(Ok(LogOutput::StdErr { message })) if merged => (Channel::Out, message),
                    Some(Ok(LogOutput::StdErr { message })) => (Channel::Err, message),
                    Some(Ok(LogOutput::StdIn { .. })) => continue,
                    Some(Err(e)) => {
                        tracing::debug!("exec output stream failed: {e}");
                        break;
                    }
                    None => break,
                };
                if std::mem::take(&mut first) && message.starts_with(START_FAILED) {
                    held = Some(message);
                    continue;
                }
                if let Some(signal) = first_output.take() {
                    let _ = signal.send(());
                }
                if let Some(h) = held.take() {
                    send(Channel::Out, h).await;
                }
                send(channel, message).await;
            }
            Some(broken) = broken_rx.recv() => {
                let signal = match broken {
                    Broken::Pipe => Signal::SIGPIPE,
                    Broken::FileSize => Signal::SIGXFSZ,
                    Broken::Other => continue,
                };
                if exec.host_signals && !std::mem::replace(&mut signalled, true) {
                    if let Err(e) = signal_exec(&exec.docker, &exec.exec_id, &exec.container_id, signal).await {
                        tracing::debug!("cannot deliver {signal} to an exec: {e}");
                    }
                }
            }
        }
    }
    drop(done_stdin);
    let mut ending = Ending::Closed;
    if let Some(message) = held {
        match start_failure(&exec, &message).await {
            Some(reason) if is_not_found(&reason) => ending = Ending::NotFound,
            Some(reason) => ending = Ending::CannotStart(reason),
            None => send(Channel::Out, message).await,
        }
    }
    drop(chunks_tx);
    let _ = finished_rx.await;
    ending
}

/// The runtime's reason when the held message means the program never started.
async fn start_failure(exec: &ExecRef, message: &[u8]) -> Option<String> {
    let inspect = exec.docker.inspect_exec(&exec.exec_id).await.ok()?;
    let never_started = inspect.pid.unwrap_or(0) == 0 && inspect.running != Some(true);
    never_started.then(|| String::from_utf8_lossy(message).trim().to_string())
}

fn is_not_found(reason: &str) -> bool {
    reason.contains("executable file not found") || reason.contains("no such file or directory")
}

fn write_loop(
    mut chunks: mpsc::Receiver<(Channel, Bytes)>,
    mut sinks: [Option<Sink>; 2],
    broken: mpsc::UnboundedSender<Broken>,
) {
    while let Some((channel, bytes)) = chunks.blocking_recv() {
        let Some(sink) = &mut sinks[channel as usize] else {
            continue; // /dev/null
        };
        if let Err(why) = sink.write(&bytes) {
            let _ = broken.send(why);
        }
    }
}

/// One output descriptor.
struct Sink {
    file: File,
    /// For regular files: whether writes append (the position is then the end).
    regular_append: Option<bool>,
    max_file_size: u64,
    dead: bool,
}

impl Sink {
    fn new(fd: OwnedFd, max_file_size: u64) -> Sink {
        let regular = nix::sys::stat::fstat(fd.as_fd())
            .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
            .unwrap_or(false);
        let append = nix::fcntl::fcntl(fd.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
            .map(|flags| flags & libc::O_APPEND != 0)
            .unwrap_or(false);
        Sink {
            file: File::from(fd),
            regular_append: regular.then_some(append),
            max_file_size,
            dead: false,
        }
    }

    /// Write everything, or report why this descriptor takes no more output.
    fn write(&mut self, bytes: &[u8]) -> Result<(), Broken> {
        if self.dead {
            return Ok(());
        }
        let mut allowed = bytes.len();
        if let Some(append) = self.regular_append {
            let position = if append {
                self.file.metadata().map(|m| m.len())
            } else {
                self.file.stream_position()
            }
            .unwrap_or(0);
            let room = self.max_file_size.saturating_sub(position);
            allowed = allowed.min(usize::try_from(room).unwrap_or(usize::MAX));
        }
        let result = self.file.write_all(&bytes[..allowed]);
        let why = match result {
            Ok(()) if allowed == bytes.len() => return Ok(()),
            Ok(()) => Broken::FileSize,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Broken::Pipe,
            Err(e) if e.raw_os_error() == Some(libc::EFBIG) => Broken::FileSize,
            Err(e) => {
                tracing::debug!("exec output descriptor failed: {e}");
                Broken::Other
            }
        };
        self.dead = true;
        Err(why)
    }
}

async fn pump_stdin(fd: OwnedFd, mut input: InputSink, mut done: oneshot::Receiver<()>) {
    let (tx, mut rx) = mpsc::channel::<Bytes>(4);
    let reader = std::thread::Builder::new()
        .name("warden-exec-in".into())
        .spawn(move || read_loop(fd, tx));
    if let Err(e) = reader {
        tracing::warn!("cannot start the input thread of an exec: {e}");
        return;
    }
    loop {
        let chunk = tokio::select! {
            _ = &mut done => return,
            chunk = rx.recv() => chunk,
        };
        let Some(chunk) = chunk else {
            // End of input: close the program's stdin.
            let _ = input.shutdown().await;
            return;
        };
        tokio::select! {
            _ = &mut done => return,
            written = input.write_all(&chunk) => if written.is_err() { return },
        }
    }
}

/// Read the descriptor until end of file, or until nobody wants the bytes any more.
fn read_loop(fd: OwnedFd, chunks: mpsc::Sender<Bytes>) {
    let mut file = File::from(fd);
    let mut buf = vec![0u8; CHUNK];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if chunks
                    .blocking_send(Bytes::copy_from_slice(&buf[..n]))
                    .is_err()
                {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
