//! The warm container of one session: created on first use, shared by every command of the
//! session, removed when the session has been idle for `idle_secs`, when the sandbox shuts down
//! or is dropped. A process counts as activity until it has been waited for or killed.

use super::connect;
use super::container::{self, Started};
use super::orphans::short;
use super::plan::ContainerPlan;
use crate::sandbox::SandboxError;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::Docker;
use futures::StreamExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// How long the in-container `kill -9 -1` may take before the container is replaced instead.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Session {
    pub docker: Docker,
    pub plan: ContainerPlan,
    socket: PathBuf,
    /// Container names: `warden-<session>-<pid>-<n>`.
    name_prefix: String,
    idle: Duration,
    /// The current container, if one runs.
    warm: Mutex<Option<Started>>,
    activity: StdMutex<Activity>,
    created: AtomicU64,
}

struct Activity {
    running: usize,
    last_used: Instant,
}

/// Keeps the session busy while a process runs.
pub struct Busy {
    session: Arc<Session>,
    released: bool,
}

impl Busy {
    pub fn release(&mut self) {
        if !std::mem::replace(&mut self.released, true) {
            let mut activity = self.session.activity();
            activity.running = activity.running.saturating_sub(1);
            activity.last_used = Instant::now();
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.release();
    }
}

impl Session {
    pub fn new(
        docker: Docker,
        plan: ContainerPlan,
        socket: PathBuf,
        session: &str,
        idle: Duration,
    ) -> Session {
        let safe: String = session
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        Session {
            docker,
            plan,
            socket,
            name_prefix: format!("warden-{safe}-{}", std::process::id()),
            idle,
            warm: Mutex::new(None),
            activity: StdMutex::new(Activity {
                running: 0,
                last_used: Instant::now(),
            }),
            created: AtomicU64::new(0),
        }
    }

    fn activity(&self) -> std::sync::MutexGuard<'_, Activity> {
        self.activity.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The running container (created now if there is none), marked busy for one process.
    pub async fn acquire(self: &Arc<Self>) -> Result<(String, Busy), SandboxError> {
        let mut warm = self.warm.lock().await;
        let id = match warm.as_ref() {
            Some(started) => started.id.clone(),
            None => {
                let n = self.created.fetch_add(1, Ordering::Relaxed);
                let name = format!("{}-{n}", self.name_prefix);
                let started = container::create(&self.docker, &self.plan, &name).await?;
                let id = started.id.clone();
                *warm = Some(started);
                id
            }
        };
        let mut activity = self.activity();
        activity.running += 1;
        activity.last_used = Instant::now();
        let busy = Busy {
            session: Arc::clone(self),
            released: false,
        };
        Ok((id, busy))
    }

    /// The current container's id, if one runs.
    pub async fn container_id(&self) -> Option<String> {
        self.warm.lock().await.as_ref().map(|s| s.id.clone())
    }

    /// Forget and remove container `id` (it stopped, or its processes could not be killed);
    /// the next command gets a fresh one.
    pub async fn discard(&self, id: &str) {
        let mut warm = self.warm.lock().await;
        if warm.as_ref().is_some_and(|s| s.id == id) {
            *warm = None;
        }
        drop(warm);
        container::remove(&self.docker, id).await;
    }

    /// Remove the container now; a later command starts a new one.
    pub async fn shutdown(&self) {
        let started = self.warm.lock().await.take();
        if let Some(started) = started {
            container::remove(&self.docker, &started.id).await;
        }
    }

    /// Remove the container when nothing ran for `idle`; true when the session is idle.
    pub async fn reap_if_idle(&self) -> bool {
        let mut warm = self.warm.lock().await;
        let idle = {
            let activity = self.activity();
            activity.running == 0 && activity.last_used.elapsed() >= self.idle
        };
        if idle {
            if let Some(Started { id, .. }) = warm.take() {
                tracing::debug!(container = %short(&id), "session idle: removing its container");
                container::remove(&self.docker, &id).await;
            }
        }
        idle
    }

    /// Kill every process of the session's user in container `id` except PID 1: the only way to
    /// reach children that double-forked or called `setsid`. A second exec runs the shell's
    /// `kill -9 -1` as the same user (the kernel skips the caller and the namespace's init);
    /// when that cannot run (pids limit reached, no shell, daemon trouble) the container is
    /// removed instead, which kills everything in it.
    pub async fn kill_everything(&self, id: &str) {
        match tokio::time::timeout(SWEEP_TIMEOUT, self.sweep(id)).await {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                tracing::debug!(container = %short(id), "kill -9 -1 failed ({why}): replacing the container");
                self.discard(id).await;
            }
            Err(_) => {
                tracing::debug!(container = %short(id), "kill -9 -1 timed out: replacing the container");
                self.discard(id).await;
            }
        }
    }

    async fn sweep(&self, id: &str) -> Result<(), String> {
        let options = CreateExecOptions {
            cmd: Some(vec!["/bin/sh", "-c", "kill -9 -1"]),
            user: Some(&self.plan.user.spec()),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let exec = self
            .docker
            .create_exec(id, options)
            .await
            .map_err(|e| e.to_string())?;
        let started = self
            .docker
            .start_exec(&exec.id, Some(StartExecOptions::default()))
            .await
            .map_err(|e| e.to_string())?;
        if let StartExecResults::Attached { mut output, .. } = started {
            while output.next().await.is_some() {}
        }
        let inspect = self
            .docker
            .inspect_exec(&exec.id)
            .await
            .map_err(|e| e.to_string())?;
        match inspect.exit_code {
            Some(0) => Ok(()),
            other => Err(format!("it exited with {other:?}")),
        }
    }
}

impl Drop for Session {
    /// Last resort when nobody called `shutdown`: remove the container synchronously, on a
    /// thread of its own so this works inside or outside an async runtime.
    fn drop(&mut self) {
        let Some(Started { id, .. }) = self.warm.get_mut().take() else {
            return;
        };
        let socket = self.socket.clone();
        let removal = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match (runtime, connect::client(&socket)) {
                (Ok(runtime), Ok(docker)) => runtime.block_on(container::remove(&docker, &id)),
                _ => {
                    tracing::warn!(container = %short(&id), "cannot remove session container at exit")
                }
            }
        });
        let _ = removal.join();
    }
}
