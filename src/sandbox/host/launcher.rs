//! Starting one jailed process: clone, then build the jail in the child, top to bottom, in the
//! order it is applied — session, network namespace, fds, cgroup, env, rlimits, capabilities, no_new_privs,
//! Landlock, seccomp (and handing its listener to warden), exec.
//!
//! The parent prepares everything beforehand (argv, envp, the absolute program path, the fd plan,
//! the Landlock ruleset, the compiled seccomp program). The child is created the way glibc's
//! `posix_spawn` does it — `clone(CLONE_VM | CLONE_VFORK)` on a stack of its own — so nothing of
//! warden's memory is copied however large warden grows, and warden's thread sleeps until the
//! child has executed the program or failed. `CLONE_PIDFD` hands back a pidfd with no window for
//! pid reuse. Sharing memory with warden, the child only makes raw system calls: no allocation,
//! no locks, no panics; all signals are blocked around the clone, so no warden signal handler
//! can run on the child's stack before the child resets every disposition to the default.
//!
//! A failing step is stored as (step, errno) in memory the parent reads after the clone
//! returns, and the child exits without running anything: the jail fails closed.

use super::capabilities::CapabilityPlan;
use super::fds::{errno, FdPlan};
use super::rlimits::RlimitPlan;
use super::seccomp::SeccompProgram;
use super::{cgroup, landlock};
use crate::sandbox::SandboxError;
use std::convert::Infallible;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// The child's stack. Its frames are small (no allocation, a few structs).
const CHILD_STACK_BYTES: usize = 256 * 1024;

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
    /// The join file of the process's pids cgroup, when there is one.
    pub cgroup_join: Option<RawFd>,
    /// The network namespace to join (a jail with an egress proxy).
    pub network_namespace: Option<RawFd>,
    /// The user namespace owning it, joined first (warden not root).
    pub user_namespace: Option<RawFd>,
    pub rlimits: &'a RlimitPlan,
    pub capabilities: &'a CapabilityPlan,
    /// The ruleset and the rights to grant on the process's own `/proc/<pid>`; `None` only in
    /// weak mode on a kernel without Landlock.
    pub landlock: Option<(RawFd, u64)>,
    pub seccomp: &'a SeccompProgram,
    /// The socket the filter's listener goes to warden over (`supervisor.rs`).
    pub listener_socket: RawFd,
    /// Stamp each step's end for `WARDEN_JAIL_TRACE` (`sandbox::steps`).
    pub trace: bool,
}

/// The steps of the child, as reported when one fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    Session = 1,
    Network,
    Fds,
    Cwd,
    Cgroup,
    Rlimits,
    Capabilities,
    NoNewPrivs,
    LandlockProcSelf,
    Landlock,
    Seccomp,
    SeccompListener,
    Exec,
}

impl Step {
    fn from_u32(v: u32) -> Option<Step> {
        use Step::*;
        [
            Session,
            Network,
            Fds,
            Cwd,
            Cgroup,
            Rlimits,
            Capabilities,
            NoNewPrivs,
            LandlockProcSelf,
            Landlock,
            Seccomp,
            SeccompListener,
            Exec,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }

    /// The step's name in the `WARDEN_JAIL_TRACE` report.
    fn trace_name(self) -> &'static str {
        match self {
            Step::Session => "child: process group, signals",
            Step::Network => "child: network namespace",
            Step::Fds => "child: fds",
            Step::Cwd => "child: cwd",
            Step::Cgroup => "child: join pids cgroup",
            Step::Rlimits => "child: rlimits",
            Step::Capabilities => "child: drop capabilities",
            Step::NoNewPrivs => "child: no_new_privs",
            Step::LandlockProcSelf => "child: Landlock /proc/self",
            Step::Landlock => "child: Landlock restrict",
            Step::Seccomp => "child: seccomp install",
            Step::SeccompListener => "child: hand over listener",
            Step::Exec => "execve (until it returned)",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Step::Session => "starting a new process group without a terminal",
            Step::Network => "joining the jail's network namespace",
            Step::Fds => "setting up file descriptors",
            Step::Cwd => "entering the working directory",
            Step::Cgroup => "joining the pids cgroup",
            Step::Rlimits => "setting resource limits",
            Step::Capabilities => "dropping capabilities",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::LandlockProcSelf => "allowing the process's own /proc entry in Landlock",
            Step::Landlock => "applying the Landlock ruleset",
            Step::Seccomp => "installing the seccomp filter",
            Step::SeccompListener => "handing the seccomp filter's listener to warden",
            Step::Exec => "executing the program",
        }
    }
}

/// Why a launch failed.
#[derive(Debug)]
pub enum LaunchError {
    /// A step in the child failed; nothing ran.
    Child { step: Step, errno: i32 },
    /// clone failed in the parent.
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

/// Start the child and run the jail sequence in it; returns its pid and pidfd once it has
/// executed the program.
pub fn launch(plan: &ChildPlan<'_>) -> Result<(libc::pid_t, OwnedFd), LaunchError> {
    let shared = Shared {
        plan,
        failure: AtomicU64::new(0),
        stamps: Default::default(),
    };
    let mut stack = vec![0u8; CHILD_STACK_BYTES];
    // The stack grows down from its (16-byte aligned) end.
    let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
    let mut pidfd: c_int = -1;

    // SAFETY: sigset manipulation on locals; the mask is restored below on every path.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
    }
    // SAFETY: `child_entry` runs on its own stack, only async-signal-safe code, and ends in
    // execve or _exit; with CLONE_VFORK this thread sleeps until then, so `shared` and `stack`
    // outlive every use by the child.
    let pid = unsafe {
        libc::clone(
            child_entry,
            top as *mut c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            &shared as *const Shared<'_> as *mut c_void,
            &mut pidfd as *mut c_int,
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    drop(stack);
    if pid < 0 {
        return Err(LaunchError::Parent(clone_error));
    }
    if plan.trace {
        report_stamps(&shared.stamps);
    }
    // SAFETY: CLONE_PIDFD stored a new descriptor (close-on-exec) that we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };

    let failure = shared.failure.load(Ordering::Acquire);
    if failure == 0 {
        return Ok((pid, pidfd));
    }
    // The child has exited: reap it.
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let (step_raw, errno) = ((failure >> 32) as u32, failure as u32 as i32);
    match Step::from_u32(step_raw) {
        Some(step) => Err(LaunchError::Child { step, errno }),
        None => Err(LaunchError::Parent(io::Error::other(
            "the jailed child reported an unknown failure",
        ))),
    }
}

/// What the parent shares with the child (same memory, CLONE_VM).
struct Shared<'a> {
    plan: &'a ChildPlan<'a>,
    /// 0, or (step << 32 | errno) of the step that failed.
    failure: AtomicU64,
    /// When each step ended (CLOCK_MONOTONIC ns, by `Step` - 1), when tracing.
    stamps: Stamps,
}

type Stamps = [AtomicU64; STEPS];
const STEPS: usize = Step::Exec as usize;

/// Child side: `step` has ended. Async-signal-safe (the vDSO clock, an atomic store).
fn stamp(plan: &ChildPlan<'_>, stamps: &Stamps, step: Step) {
    if plan.trace {
        stamps[step as usize - 1].store(crate::sandbox::steps::monotonic_ns(), Ordering::Relaxed);
    }
}

/// Parent side, once the clone returned: the child's steps, and the exec (until now).
fn report_stamps(stamps: &Stamps) {
    let mut steps: Vec<(&'static str, u64)> = (1..STEPS as u32)
        .filter_map(Step::from_u32)
        .map(|step| {
            (
                step.trace_name(),
                stamps[step as usize - 1].load(Ordering::Relaxed),
            )
        })
        .collect();
    steps.push((
        Step::Exec.trace_name(),
        crate::sandbox::steps::monotonic_ns(),
    ));
    crate::sandbox::steps::child_marks(&steps);
}

/// The child's first function, on its own stack.
extern "C" fn child_entry(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `Shared`, alive until this child execs or exits.
    let shared = unsafe { &*(arg as *const Shared<'_>) };
    // SAFETY: we are the freshly cloned child.
    let Err((step, err)) = unsafe { build_jail_and_exec(shared.plan, &shared.stamps) };
    let report = (u64::from(step as u32) << 32) | u64::from(err as u32);
    shared.failure.store(report, Ordering::Release);
    // SAFETY: leave without running anything else (no atexit handlers, no flushing).
    unsafe { libc::_exit(125) }
}

/// The jail, in the order it is built. Returns only on failure.
unsafe fn build_jail_and_exec(
    plan: &ChildPlan<'_>,
    stamps: &Stamps,
) -> Result<Infallible, (Step, i32)> {
    let fail = |step: Step| move |e: i32| (step, e);
    let done = |step: Step| stamp(plan, stamps, step);

    // Session: a process group of its own, so the timeout can kill the whole group, and no
    // controlling terminal. Signal dispositions and the mask go back to the defaults (warden
    // ignores SIGPIPE, which `yes | head` relies on).
    leave_session_and_terminal().map_err(fail(Step::Session))?;
    reset_signals();
    done(Step::Session);

    // Network: the namespace where only the egress proxy listens (needs CAP_SYS_ADMIN, so
    // before capabilities are dropped).
    if let Some(namespace) = plan.network_namespace {
        super::netns::join_in_child(namespace, plan.user_namespace).map_err(fail(Step::Network))?;
        done(Step::Network);
    }

    // Fds: 0-2 and the requested 3-9; everything else closes at exec.
    plan.fds.apply_in_child().map_err(fail(Step::Fds))?;
    done(Step::Fds);
    if libc::chdir(plan.cwd.as_ptr()) != 0 {
        return Err((Step::Cwd, errno()));
    }
    done(Step::Cwd);

    // Cgroup: count (and later find) every descendant.
    if let Some(fd) = plan.cgroup_join {
        cgroup::join_in_child(fd).map_err(fail(Step::Cgroup))?;
        done(Step::Cgroup);
    }

    // Env: the scrubbed allowlist, prepared by the parent, is passed to execve below.

    // Rlimits.
    plan.rlimits.apply_in_child().map_err(fail(Step::Rlimits))?;
    done(Step::Rlimits);

    // Capabilities: none, even as root.
    plan.capabilities
        .drop_all_in_child()
        .map_err(fail(Step::Capabilities))?;
    done(Step::Capabilities);

    // no_new_privs: no setuid/file-capability gains; required for Landlock and seccomp.
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
        return Err((Step::NoNewPrivs, errno()));
    }
    done(Step::NoNewPrivs);

    // Landlock: files, TCP and scopes.
    if let Some((ruleset, proc_access)) = plan.landlock {
        landlock::allow_proc_self_in_child(ruleset, proc_access)
            .map_err(fail(Step::LandlockProcSelf))?;
        done(Step::LandlockProcSelf);
        landlock::restrict_self_in_child(ruleset).map_err(fail(Step::Landlock))?;
        done(Step::Landlock);
    }

    // Seccomp: the allow-list. Its listener goes to warden, which answers `flock` (and
    // `connect` when supervised); the child keeps no copy.
    let listener = plan
        .seccomp
        .install_in_child()
        .map_err(fail(Step::Seccomp))?;
    done(Step::Seccomp);
    if let Some(listener) = listener {
        super::supervisor::hand_over_in_child(plan.listener_socket, listener)
            .map_err(fail(Step::SeccompListener))?;
        done(Step::SeccompListener);
    }

    // Exec.
    libc::execve(
        plan.program.as_ptr(),
        plan.argv.as_ptr(),
        plan.envp.as_ptr(),
    );
    Err((Step::Exec, errno()))
}

/// A new process group led by the caller, without a controlling terminal. Async-signal-safe.
///
/// Not `setsid()` where it can be helped: on kernels with `sched_autogroup` (most desktop and
/// server distributions) every new session gets a new scheduling group, created and torn down
/// per command, and a busy machine runs it late — measured on 2 shared cores, a static vfork +
/// exec of `/bin/true` took 1.0 ms with `setpgid` and 4.0 ms with `setsid` (medians) while two
/// builds ran, the same on an idle machine. A new process group in warden's session gives the same
/// walls: the group is what the timeout kills (`setsid` and `setpgid` stay denied by seccomp),
/// and `TIOCNOTTY` drops the controlling terminal (a process that is not a session leader
/// cannot take one again). When it cannot be told whether there is a controlling terminal,
/// `setsid()` is used as before.
unsafe fn leave_session_and_terminal() -> Result<(), i32> {
    let tty = libc::open(
        c"/dev/tty".as_ptr(),
        libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC,
    );
    let detached = if tty >= 0 {
        let detached = libc::ioctl(tty, libc::TIOCNOTTY) == 0;
        libc::close(tty);
        detached
    } else {
        // ENXIO: no controlling terminal to drop.
        errno() == libc::ENXIO
    };
    let r = if detached {
        libc::setpgid(0, 0)
    } else {
        libc::setsid()
    };
    if r < 0 {
        return Err(errno());
    }
    Ok(())
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
        for v in 1..=13 {
            let step = Step::from_u32(v).unwrap();
            assert_eq!(step as u32, v);
            assert!(!step.describe().is_empty());
        }
        assert_eq!(Step::from_u32(0), None);
        assert_eq!(Step::from_u32(14), None);
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
