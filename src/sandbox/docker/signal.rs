//! Signalling the program behind one exec from the host.
//!
//! The Engine API has no way to signal an exec, yet the pump must do what the kernel would do
//! for a process writing straight into a pipe or file: `SIGPIPE` when the reader is gone,
//! `SIGXFSZ` past the file-size limit. With runc the exec's program is an ordinary host process
//! whose pid the daemon reports. The pid is pinned with a pidfd first and only signalled when
//! its cgroup names this container, so a reused pid or a daemon in another pid namespace can
//! never make warden signal an unrelated process.

use bollard::Docker;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// How long to wait for the daemon to report the pid of a running exec.
const PID_WAIT: Duration = Duration::from_secs(2);

/// Send `signal` to the program `exec_id` started in container `container_id`.
pub async fn signal_exec(
    docker: &Docker,
    exec_id: &str,
    container_id: &str,
    signal: nix::sys::signal::Signal,
) -> Result<(), String> {
    // The daemon records the pid only after the runtime returns, while the program may
    // already be writing: wait for it.
    let mut pause = Duration::from_millis(1);
    let pid = loop {
        let inspect = docker
            .inspect_exec(exec_id)
            .await
            .map_err(|e| format!("cannot inspect the exec: {e}"))?;
        match (inspect.running, inspect.pid) {
            (Some(true), Some(pid)) if pid > 0 => break pid as libc::pid_t,
            (Some(true), _) if pause < PID_WAIT => {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            (Some(true), _) => return Err("the daemon never reported the exec's pid".into()),
            _ => return Ok(()), // not running any more: nothing to signal
        }
    };
    let pidfd = pidfd_open(pid).map_err(|e| format!("cannot pin pid {pid}: {e}"))?;
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("cannot read the cgroup of pid {pid}: {e}"))?;
    if !cgroups.contains(container_id) {
        return Err(format!(
            "pid {pid} is not in container {} (another pid namespace or runtime?)",
            &container_id[..container_id.len().min(12)]
        ));
    }
    tracing::debug!(pid, %signal, "signalling exec");
    pidfd_send_signal(&pidfd, signal).map_err(|e| format!("cannot signal pid {pid}: {e}"))
}

fn pidfd_open(pid: libc::pid_t) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn pidfd_send_signal(pidfd: &OwnedFd, signal: nix::sys::signal::Signal) -> std::io::Result<()> {
    // SAFETY: a valid pidfd, a valid signal number, no siginfo, no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    match rc {
        0 => Ok(()),
        _ => {
            let err = std::io::Error::last_os_error();
            // The process ended meanwhile: the signal has nothing left to do.
            if err.raw_os_error() == Some(libc::ESRCH) {
                Ok(())
            } else {
                Err(err)
            }
        }
    }
}
