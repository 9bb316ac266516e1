//! A running jailed process: waiting for it through a pidfd, and making sure nothing it started
//! outlives it.
//!
//! The process leads its own process group, without a controlling terminal (the launcher's
//! `setpgid` and `TIOCNOTTY`, or `setsid`; both `setsid` and `setpgid` are then denied by
//! seccomp), so every descendant stays in that group. When the
//! leader exits — normally or killed — its group is SIGKILLed *before* the leader is reaped:
//! the unreaped zombie pins the group id, so the kill cannot hit a recycled one. After reaping,
//! the group is killed again until the kernel reports it empty (or only zombies are left, for
//! an init that reaps slowly), and the pids cgroup, when there is one, is emptied and removed.

use super::cgroup::ProcessCgroup;
use super::supervisor::Supervisor;
use crate::sandbox::{ExitStatus, JailedProcess, SandboxError};
use async_trait::async_trait;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;

/// `idtype_t` for waitid on a pidfd (not in the libc crate yet).
const P_PIDFD: libc::idtype_t = 3;
/// Give up on a process group that does not die within this time (it is logged).
const KILL_DEADLINE: Duration = Duration::from_secs(5);

/// What the launch hands over: the leader, its pids cgroup and its registration with the
/// supervisor answering the tree's `flock` (and, supervised, `connect`) calls.
pub struct Started {
    pub pid: libc::pid_t,
    pub pidfd: OwnedFd,
    pub cgroup: Option<ProcessCgroup>,
    pub supervisor: Option<Supervisor>,
}

pub struct HostProcess {
    pid: libc::pid_t,
    pidfd: AsyncFd<OwnedFd>,
    cgroup: Option<ProcessCgroup>,
    /// Stops with the process (dropped with it).
    _supervisor: Option<Supervisor>,
    status: Option<ExitStatus>,
    /// Processes still alive when the leader exited normally (then killed).
    background: usize,
}

impl HostProcess {
    /// Take over a launched child and its pidfd (not yet reaped by anyone: only warden's jail
    /// reaps it).
    pub fn new(started: Started) -> Result<HostProcess, SandboxError> {
        let Started {
            pid,
            pidfd,
            cgroup,
            supervisor,
        } = started;
        // SAFETY: the OwnedFd moves into the AsyncFd and stays open for its whole lifetime.
        match unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) } {
            Ok(pidfd) => Ok(HostProcess {
                pid,
                pidfd,
                cgroup,
                _supervisor: supervisor,
                status: None,
                background: 0,
            }),
            Err(e) => {
                // Without a watched pidfd we cannot wait for it: kill and reap it now.
                // SAFETY: the child and its group are ours; it is unreaped, so the ids are too.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
                Err(SandboxError::Setup(format!("cannot watch the pidfd: {e}")))
            }
        }
    }

    /// waitid on the pidfd; `WNOWAIT` leaves the zombie in place.
    fn waitid(&self, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
        // SAFETY: siginfo is plain data the kernel fills in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waitid with a pidfd we own.
            let r = unsafe {
                libc::waitid(
                    P_PIDFD,
                    self.pidfd.get_ref().as_raw_fd() as libc::id_t,
                    &mut info,
                    libc::WEXITED | flags,
                )
            };
            if r == 0 {
                break;
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
        // SAFETY: the kernel filled si_pid/si_code/si_status for an exited child.
        unsafe {
            if info.si_pid() == 0 {
                return Ok(None);
            }
            let status = info.si_status();
            Ok(Some(match info.si_code {
                libc::CLD_EXITED => ExitStatus::Code(status),
                _ => ExitStatus::Signal(status),
            }))
        }
    }

    /// Until the leader has exited (it stays an unreaped zombie).
    async fn exited(&self) -> io::Result<()> {
        loop {
            let mut guard = self.pidfd.readable().await?;
            if self.waitid(libc::WNOHANG | libc::WNOWAIT)?.is_some() {
                crate::sandbox::steps::mark("program ran");
                return Ok(());
            }
            guard.clear_ready();
        }
    }

    /// With the leader exited (a zombie): how many of its processes are still alive — the
    /// cgroup lists them (zombies excluded); without one, the process group is scanned.
    fn live_members(&self) -> usize {
        match &self.cgroup {
            Some(cg) => cg.pids().len(),
            None => usize::from(group_has_live_members(self.pid)),
        }
    }

    /// SIGKILL the process group and the cgroup.
    fn kill_once(&self) -> bool {
        // SAFETY: kill(2) of our own process group (pgid == leader pid).
        let group_alive = unsafe { libc::kill(-self.pid, libc::SIGKILL) } == 0;
        let in_cgroup = self.cgroup.as_ref().map_or(0, |cg| cg.kill_all());
        group_alive || in_cgroup > 0
    }

    /// Reap the exited leader and keep its status.
    fn reap(&mut self) -> io::Result<ExitStatus> {
        let status = self
            .waitid(0)?
            .ok_or_else(|| io::Error::other("the jailed process vanished before being reaped"))?;
        self.status = Some(status);
        Ok(status)
    }

    /// After the leader exited: kill the rest, reap the leader, and wait until nothing is left.
    async fn finish(&mut self) -> io::Result<ExitStatus> {
        // The zombie leader still pins the group id here.
        self.kill_once();
        let status = self.reap()?;

        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        loop {
            // SAFETY: kill(2) of the jailed process group; ESRCH once it is empty.
            let group_exists = unsafe { libc::kill(-self.pid, libc::SIGKILL) } == 0;
            let group_alive = group_exists && group_has_live_members(self.pid);
            // A cgroup that can be removed is empty; otherwise kill what is in it.
            let cgroup_gone = match &self.cgroup {
                Some(cg) => {
                    cg.remove().is_ok() || {
                        cg.kill_all();
                        false
                    }
                }
                None => true,
            };
            if !group_alive && cgroup_gone {
                break;
            }
            if start.elapsed() > KILL_DEADLINE {
                tracing::warn!(
                    pgid = self.pid,
                    "processes of a jailed command did not die within 5 s"
                );
                break;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        crate::sandbox::steps::mark("group killed, reaped, cgroup removed");
        Ok(status)
    }
}

/// Whether a process group still has members that are not zombies (a /proc scan; only used
/// when the kernel says the group exists, which includes zombies an init has not reaped yet).
fn group_has_live_members(pgid: libc::pid_t) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // "pid (comm) state ppid pgrp ...": comm may contain anything, so split after ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let pgrp = fields.nth(1).and_then(|p| p.parse::<libc::pid_t>().ok());
        pgrp == Some(pgid) && state != "Z" && state != "X"
    })
}

#[async_trait]
impl JailedProcess for HostProcess {
    async fn wait(&mut self) -> Result<ExitStatus, SandboxError> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        self.exited().await?;
        if self.cgroup.as_ref().is_some_and(|cg| cg.remove_if_empty()) {
            // Nothing of the jailed tree is alive: the kernel removes a cgroup only once no
            // live process is left in it (the zombie leader no longer counts), and every
            // process of the tree is in it (Landlock keeps the cgroup files out of reach). So
            // there is nothing to count or wait for. The group is still killed once, while the
            // zombie leader pins its id: in the weak mode without Landlock a process could
            // have moved itself to another cgroup, though not out of the group (seccomp denies
            // setsid and setpgid).
            // SAFETY: kill(2) of the jailed process group; the unreaped leader pins its id.
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
            let status = self.reap()?;
            crate::sandbox::steps::mark("group killed, reaped, cgroup removed");
            return Ok(status);
        }
        self.background = self.live_members();
        Ok(self.finish().await?)
    }

    fn background_killed(&self) -> usize {
        self.background
    }

    async fn kill(&mut self) {
        if self.status.is_some() {
            return;
        }
        // SAFETY: signals the process the pidfd refers to, never a recycled pid.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.get_ref().as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
        self.kill_once();
        let result = async {
            self.exited().await?;
            self.finish().await
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(pid = self.pid, error = %e, "killing a jailed process failed");
        }
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // Dropped without wait/kill: kill synchronously, reap if it dies promptly.
        self.kill_once();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.waitid(libc::WNOHANG) {
                self.kill_once();
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        tracing::warn!(
            pid = self.pid,
            "a dropped jailed process did not exit in time"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_group_is_alive_and_a_free_one_is_not() {
        // SAFETY: getpgrp has no preconditions.
        let own = unsafe { libc::getpgrp() };
        assert!(group_has_live_members(own));
        assert!(!group_has_live_members(i32::MAX - 7));
    }
}
