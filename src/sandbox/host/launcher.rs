//! Starting one jailed process: fork, then build the jail in the child, top to bottom, in the
//! order it is applied — session, fds, cgroup, env, rlimits, capabilities, no_new_privs,
//! Landlock, seccomp, exec.
//!
//! The parent prepares everything beforehand (argv, envp, the absolute program path, the fd plan,
//! the Landlock ruleset, the compiled seccomp programs). After `fork` the child only makes raw
//! system calls: no allocation, no locks, no panics — warden may have other threads holding the
//! allocator's lock at the moment of the fork. warden forks itself rather than using
//! `std::process::Command` so that every descriptor number the child touches is known (std's
//! internal error pipe could otherwise sit in the 3-9 range a redirection targets).
//!
//! A failing step is reported to the parent over a close-on-exec pipe as (step, errno), and the
//! child exits without running anything: the jail fails closed. A successful `execve` closes the
//! pipe, which the parent sees as end of file.

use super::capabilities::CapabilityPlan;
use super::fds::{dup_private, errno, FdPlan};
use super::rlimits::RlimitPlan;
use super::seccomp::SeccompProgram;
use super::{cgroup, landlock};
use crate::sandbox::SandboxError;
use std::convert::Infallible;
use std::ffi::{c_char, CStr};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Everything the child needs, prepared by the parent.
pub struct ChildPlan<'a> {
    /// Absolute path of the program (resolved in the parent against the jail's fixed PATH).
    pub program: &'a CStr,
    /// NULL-terminated argv.
    pub argv: &'a [*const c_char],
    /// NULL-terminated, scrubbed environment (`env.rs`).
    pub envp: &'a [*const c_char],
    pub cwd: &'a CStr,
    pub fds: &'a FdPlan,
    /// `cgroup.procs` of the process's pids cgroup, when there is one.
    pub cgroup_procs: Option<RawFd>,
    pub rlimits: &'a RlimitPlan,
    pub capabilities: &'a CapabilityPlan,
    /// The ruleset and the rights to grant on the process's own `/proc/<pid>`; `None` only in
    /// weak mode on a kernel without Landlock.
    pub landlock: Option<(RawFd, u64)>,
    pub seccomp: &'a SeccompProgram,
}

/// The steps of the child, as reported when one fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    Session = 1,
    Fds,
    Cwd,
    Cgroup,
    Rlimits,
    Capabilities,
    NoNewPrivs,
    LandlockProcSelf,
    Landlock,
    Seccomp,
    Exec,
}

impl Step {
    fn from_u32(v: u32) -> Option<Step> {
        use Step::*;
        [
            Session,
            Fds,
            Cwd,
            Cgroup,
            Rlimits,
            Capabilities,
            NoNewPrivs,
            LandlockProcSelf,
            Landlock,
            Seccomp,
            Exec,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }

    fn describe(self) -> &'static str {
        match self {
            Step::Session => "starting a new session (setsid)",
            Step::Fds => "setting up file descriptors",
            Step::Cwd => "entering the working directory",
            Step::Cgroup => "joining the pids cgroup",
            Step::Rlimits => "setting resource limits",
            Step::Capabilities => "dropping capabilities",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::LandlockProcSelf => "allowing the process's own /proc entry in Landlock",
            Step::Landlock => "applying the Landlock ruleset",
            Step::Seccomp => "installing the seccomp filter",
            Step::Exec => "executing the program",
        }
    }
}

/// Why a launch failed.
#[derive(Debug)]
pub enum LaunchError {
    /// A step in the child failed; nothing ran.
    Child { step: Step, errno: i32 },
    /// fork or the report pipe failed in the parent.
    Parent(io::Error),
}

impl LaunchError {
    /// Map to the sandbox error the executor understands.
    pub fn into_sandbox_error(self, program: &str, cwd: &std::path::Path) -> SandboxError {
        match self {
            LaunchError::Child {
                step: Step::Exec,
                errno,
            } => SandboxError::CannotExecute {
                program: program.to_string(),
                source: io::Error::from_raw_os_error(errno),
            },
            LaunchError::Child {
                step: Step::Cwd,
                errno,
            } => SandboxError::Io(io::Error::new(
                io::Error::from_raw_os_error(errno).kind(),
                format!(
                    "cannot enter {}: {}",
                    cwd.display(),
                    io::Error::from_raw_os_error(errno)
                ),
            )),
            LaunchError::Child { step, errno } => SandboxError::Setup(format!(
                "{} failed: {}",
                step.describe(),
                io::Error::from_raw_os_error(errno)
            )),
            LaunchError::Parent(e) => SandboxError::Setup(format!("cannot start a process: {e}")),
        }
    }
}

/// Fork and run the child sequence; returns the child's pid once it has executed the program.
pub fn launch(plan: &ChildPlan<'_>) -> Result<libc::pid_t, LaunchError> {
    let (report_read, pipe_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| LaunchError::Parent(e.into()))?;
    // Above the 0-9 range the child rewires, like every descriptor it uses. The original must
    // be closed too, or the parent would never see end of file.
    let report_write = dup_private(&pipe_write).map_err(LaunchError::Parent)?;
    drop(pipe_write);

    // SAFETY: the child runs only async-signal-safe code (see `child_main`) and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(LaunchError::Parent(io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: we are the freshly forked child.
        unsafe { child_main(plan, report_write.as_raw_fd()) }
    }
    drop(report_write);

    let mut report = [0u8; 8];
    let mut filled = 0;
    while filled < report.len() {
        match nix::unistd::read(&report_read, &mut report[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                reap(pid);
                return Err(LaunchError::Parent(e.into()));
            }
        }
    }
    if filled == 0 {
        return Ok(pid);
    }
    reap(pid);
    let step_raw = u32::from_ne_bytes([report[0], report[1], report[2], report[3]]);
    let errno = i32::from_ne_bytes([report[4], report[5], report[6], report[7]]);
    match (filled, Step::from_u32(step_raw)) {
        (8, Some(step)) => Err(LaunchError::Child { step, errno }),
        _ => Err(LaunchError::Parent(io::Error::other(
            "the jailed child sent a malformed failure report",
        ))),
    }
}

fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waits for our own child, which has exited or is about to.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// The child: build the jail, then exec. Never returns.
///
/// # Safety
/// Only in the child right after fork.
unsafe fn child_main(plan: &ChildPlan<'_>, report_fd: RawFd) -> ! {
    let Err((step, err)) = build_jail_and_exec(plan);
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&(step as u32).to_ne_bytes());
    msg[4..].copy_from_slice(&err.to_ne_bytes());
    libc::write(report_fd, msg.as_ptr().cast(), msg.len());
    libc::_exit(125);
}

/// The jail, in the order it is built. Returns only on failure.
unsafe fn build_jail_and_exec(plan: &ChildPlan<'_>) -> Result<Infallible, (Step, i32)> {
    let fail = |step: Step| move |e: i32| (step, e);

    // Session: a new session and process group, so the timeout can kill the whole group and
    // the process has no controlling terminal. Signal dispositions and the mask go back to the
    // defaults (warden ignores SIGPIPE, which `yes | head` relies on).
    if libc::setsid() < 0 {
        return Err((Step::Session, errno()));
    }
    reset_signals();

    // Fds: 0-2 and the requested 3-9; everything else closes at exec.
    plan.fds.apply_in_child().map_err(fail(Step::Fds))?;
    if libc::chdir(plan.cwd.as_ptr()) != 0 {
        return Err((Step::Cwd, errno()));
    }

    // Cgroup: count (and later find) every descendant.
    if let Some(fd) = plan.cgroup_procs {
        cgroup::join_in_child(fd).map_err(fail(Step::Cgroup))?;
    }

    // Env: the scrubbed allowlist, prepared by the parent, is passed to execve below.

    // Rlimits.
    plan.rlimits.apply_in_child().map_err(fail(Step::Rlimits))?;

    // Capabilities: none, even as root.
    plan.capabilities
        .drop_all_in_child()
        .map_err(fail(Step::Capabilities))?;

    // no_new_privs: no setuid/file-capability gains; required for Landlock and seccomp.
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
        return Err((Step::NoNewPrivs, errno()));
    }

    // Landlock: files, TCP and scopes.
    if let Some((ruleset, proc_access)) = plan.landlock {
        landlock::allow_proc_self_in_child(ruleset, proc_access)
            .map_err(fail(Step::LandlockProcSelf))?;
        landlock::restrict_self_in_child(ruleset).map_err(fail(Step::Landlock))?;
    }

    // Seccomp: the allow-list.
    plan.seccomp
        .install_in_child()
        .map_err(fail(Step::Seccomp))?;

    // Exec.
    libc::execve(
        plan.program.as_ptr(),
        plan.argv.as_ptr(),
        plan.envp.as_ptr(),
    );
    Err((Step::Exec, errno()))
}

/// Default dispositions for every signal and an empty mask. Async-signal-safe.
unsafe fn reset_signals() {
    // The raw syscall, because glibc's sigaction refuses its reserved signals 32 and 33, which
    // an ignoring parent would otherwise pass on. Kernel layout: handler, flags, restorer, mask.
    let default_action = [0u64; 4];
    let mut sig: libc::c_long = 1;
    while sig < 65 {
        if sig != libc::SIGKILL as libc::c_long && sig != libc::SIGSTOP as libc::c_long {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                default_action.as_ptr(),
                std::ptr::null_mut::<u64>(),
                8usize,
            );
        }
        sig += 1;
    }
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_trip_through_the_report() {
        for v in 1..=11 {
            let step = Step::from_u32(v).unwrap();
            assert_eq!(step as u32, v);
            assert!(!step.describe().is_empty());
        }
        assert_eq!(Step::from_u32(0), None);
        assert_eq!(Step::from_u32(12), None);
    }

    #[test]
    fn child_failures_become_readable_errors() {
        let err = LaunchError::Child {
            step: Step::Landlock,
            errno: libc::EPERM,
        }
        .into_sandbox_error("ls", std::path::Path::new("/w"));
        let text = err.to_string();
        assert!(
            text.contains("applying the Landlock ruleset failed"),
            "{text}"
        );
        assert!(matches!(err, SandboxError::Setup(_)));

        let err = LaunchError::Child {
            step: Step::Exec,
            errno: libc::EACCES,
        }
        .into_sandbox_error("./script.sh", std::path::Path::new("/w"));
        assert!(matches!(err, SandboxError::CannotExecute { .. }));
        assert!(err.to_string().contains("./script.sh"), "{err}");
    }
}
