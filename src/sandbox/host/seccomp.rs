//! The seccomp filter: an allow-list of system calls, everything else fails with EPERM.
//!
//! Modelled on Docker's default profile (what coreutils, grep, sed, find, git, busybox and
//! python need), minus what a jailed command never needs and could abuse: `ptrace`,
//! `process_vm_*`, `io_uring_*`, namespaces (`unshare`, `setns`, namespace flags of `clone`),
//! `mount` and friends, keyrings, `bpf`, `perf_event_open`, kernel modules, `kexec_*`,
//! `userfaultfd`, SysV IPC and POSIX message queues (shared with the host without an IPC
//! namespace), `setsid` / `setpgid` (so the timeout's process-group kill reaches everything),
//! and networking:
//!
//! - `socket` only for AF_UNIX stream/seqpacket, `socketpair` likewise: no datagram socket
//!   exists that could `sendmsg` to a path such as `/dev/log`;
//! - `connect` denied: an AF_UNIX connect would reach path sockets (`/var/run/docker.sock`),
//!   which Landlock does not control on ABI < 9;
//! - `sendto` only without a destination address (arg4 == 0), `sendmsg` without MSG_FASTOPEN;
//! - with an egress proxy: `connect` allowed, `socket` only AF_INET/AF_INET6 TCP (AF_UNIX
//!   sockets then cannot be created at all, so the allowed `connect` cannot reach docker.sock);
//!   Landlock limits TCP connects to the proxy's port.
//!
//! Argument checks: `ioctl` without TIOCSTI / TIOCLINUX, compared as 32 bits (a 64-bit compare
//! is bypassed by `TIOCSTI | 1 << 32`); `clone` without namespace flags; `kill(-1)` refused;
//! calls that can act on other processes of the same uid (`prlimit64`, `setpriority`,
//! `sched_set*`, `ioprio_set`) only on the caller itself. The jail keeps warden's uid, so for
//! those the uid check in the kernel is no protection.
//!
//! `clone3` must fail with ENOSYS (not EPERM) so glibc falls back to `clone`, whose flags the
//! filter can see. seccompiler has one match action per filter, so a second small filter does
//! that; the kernel applies the most restrictive result, and among two errno results the one of
//! the newest filter.
//!
//! seccompiler checks the architecture (anything but x86_64 is killed) but not the x32 bit: x32
//! system call numbers (bit 30 set) match no allow-list entry and fall to the default EPERM.
//! Keep it an allow-list. Only x86_64 has a table; elsewhere the jail refuses to start.

use crate::sandbox::SandboxError;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition,
    SeccompFilter, SeccompRule,
};
use std::collections::BTreeMap;

/// Whether the jail may reach an egress proxy over TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    None,
    EgressProxy,
}

/// The compiled filters, installed in the child in this order.
#[derive(Debug)]
pub struct SeccompPrograms {
    allow_list: BpfProgram,
    clone3_enosys: BpfProgram,
}

impl SeccompPrograms {
    /// Compile both filters (parent side, once per `HostSandbox`).
    pub fn new(network: Network) -> Result<SeccompPrograms, SandboxError> {
        let arch = target_arch()?;
        let err = |e: seccompiler::BackendError| {
            SandboxError::Setup(format!("compiling the seccomp filter failed: {e}"))
        };
        let allow = SeccompFilter::new(
            allow_list_rules(network)?,
            SeccompAction::Errno(libc::EPERM as u32),
            SeccompAction::Allow,
            arch,
        )
        .map_err(err)?;
        let clone3 = SeccompFilter::new(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch,
        )
        .map_err(err)?;
        Ok(SeccompPrograms {
            allow_list: allow.try_into().map_err(err)?,
            clone3_enosys: clone3.try_into().map_err(err)?,
        })
    }

    /// Child side: install both filters (needs `no_new_privs`). Async-signal-safe.
    ///
    /// # Safety
    /// Call only in the forked child; afterwards only `execve` should follow.
    pub unsafe fn install_in_child(&self) -> Result<(), i32> {
        for program in [&self.allow_list, &self.clone3_enosys] {
            let fprog = libc::sock_fprog {
                len: program.len() as libc::c_ushort,
                // seccompiler's sock_filter has the kernel's layout.
                filter: program.as_ptr() as *mut libc::sock_filter,
            };
            if libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &fprog as *const libc::sock_fprog,
            ) != 0
            {
                return Err(super::fds::errno());
            }
        }
        Ok(())
    }
}

fn target_arch() -> Result<seccompiler::TargetArch, SandboxError> {
    if cfg!(target_arch = "x86_64") {
        Ok(seccompiler::TargetArch::x86_64)
    } else {
        Err(SandboxError::Setup(format!(
            "the host jail's seccomp allow-list exists for x86_64 only, not {}",
            std::env::consts::ARCH
        )))
    }
}

/// System calls allowed with any arguments.
#[cfg(target_arch = "x86_64")]
#[rustfmt::skip]
const ALWAYS_ALLOWED: &[libc::c_long] = {
    use libc::*;
    &[
        // files and descriptors
        SYS_read, SYS_write, SYS_readv, SYS_writev, SYS_pread64, SYS_pwrite64, SYS_preadv,
        SYS_pwritev, SYS_preadv2, SYS_pwritev2, SYS_lseek, SYS_close, SYS_close_range, SYS_dup,
        SYS_dup2, SYS_dup3, SYS_fcntl, SYS_flock, SYS_fsync, SYS_fdatasync, SYS_sync,
        SYS_syncfs, SYS_sync_file_range, SYS_ftruncate, SYS_truncate, SYS_fallocate,
        SYS_fadvise64, SYS_readahead, SYS_open, SYS_openat, SYS_openat2, SYS_creat,
        SYS_access, SYS_faccessat, SYS_faccessat2, SYS_stat, SYS_lstat, SYS_fstat,
        SYS_newfstatat, SYS_statx, SYS_statfs, SYS_fstatfs, SYS_getdents, SYS_getdents64,
        SYS_getcwd, SYS_chdir, SYS_fchdir, SYS_mkdir, SYS_mkdirat, SYS_mknod, SYS_mknodat,
        SYS_rmdir, SYS_unlink, SYS_unlinkat, SYS_rename, SYS_renameat, SYS_renameat2,
        SYS_link, SYS_linkat, SYS_symlink, SYS_symlinkat, SYS_readlink, SYS_readlinkat,
        SYS_chmod, SYS_fchmod, SYS_fchmodat, SYS_fchmodat2, SYS_chown, SYS_fchown,
        SYS_lchown, SYS_fchownat, SYS_utime, SYS_utimes, SYS_futimesat, SYS_utimensat,
        SYS_umask, SYS_getxattr, SYS_lgetxattr, SYS_fgetxattr, SYS_listxattr,
        SYS_llistxattr, SYS_flistxattr, SYS_setxattr, SYS_lsetxattr, SYS_fsetxattr,
        SYS_removexattr, SYS_lremovexattr, SYS_fremovexattr, SYS_copy_file_range,
        SYS_sendfile, SYS_splice, SYS_tee, SYS_vmsplice, SYS_memfd_create, SYS_pipe,
        SYS_pipe2,
        // waiting for events
        SYS_select, SYS_pselect6, SYS_poll, SYS_ppoll, SYS_epoll_create, SYS_epoll_create1,
        SYS_epoll_ctl, SYS_epoll_wait, SYS_epoll_pwait, SYS_epoll_pwait2, SYS_eventfd,
        SYS_eventfd2, SYS_signalfd, SYS_signalfd4, SYS_timerfd_create, SYS_timerfd_settime,
        SYS_timerfd_gettime, SYS_inotify_init, SYS_inotify_init1, SYS_inotify_add_watch,
        SYS_inotify_rm_watch,
        // memory
        SYS_mmap, SYS_munmap, SYS_mprotect, SYS_mremap, SYS_madvise, SYS_brk, SYS_msync,
        SYS_mincore, SYS_mlock, SYS_mlock2, SYS_munlock, SYS_mlockall, SYS_munlockall,
        SYS_membarrier, SYS_pkey_alloc, SYS_pkey_free, SYS_pkey_mprotect, SYS_mseal,
        SYS_remap_file_pages,
        // processes and threads
        SYS_execve, SYS_execveat, SYS_exit, SYS_exit_group, SYS_wait4, SYS_waitid, SYS_fork,
        SYS_vfork, SYS_getpid, SYS_getppid, SYS_gettid, SYS_getpgid, SYS_getpgrp, SYS_getsid,
        SYS_set_tid_address, SYS_set_robust_list, SYS_rseq, SYS_futex, SYS_futex_waitv,
        SYS_arch_prctl, SYS_set_thread_area, SYS_get_thread_area, SYS_prctl, SYS_seccomp,
        SYS_landlock_create_ruleset, SYS_landlock_add_rule, SYS_landlock_restrict_self,
        SYS_capget, SYS_capset, SYS_getrlimit, SYS_setrlimit, SYS_getrusage,
        SYS_getpriority, SYS_sched_yield, SYS_sched_getaffinity, SYS_sched_getparam,
        SYS_sched_getscheduler, SYS_sched_get_priority_max, SYS_sched_get_priority_min,
        SYS_sched_rr_get_interval, SYS_sched_getattr, SYS_getcpu, SYS_ioprio_get,
        SYS_pidfd_open,
        // credentials (without capabilities only the caller's own ids are reachable)
        SYS_getuid, SYS_geteuid, SYS_getgid, SYS_getegid, SYS_getresuid, SYS_getresgid,
        SYS_getgroups, SYS_setuid, SYS_setgid, SYS_setreuid, SYS_setregid, SYS_setresuid,
        SYS_setresgid, SYS_setgroups, SYS_setfsuid, SYS_setfsgid,
        // signals (Landlock's signal scope keeps them inside the jail)
        SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_rt_sigpending,
        SYS_rt_sigsuspend, SYS_rt_sigtimedwait, SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo,
        SYS_sigaltstack, SYS_tkill, SYS_tgkill, SYS_pidfd_send_signal, SYS_pause, SYS_alarm,
        // time
        SYS_nanosleep, SYS_clock_nanosleep, SYS_clock_gettime, SYS_clock_getres,
        SYS_gettimeofday, SYS_time, SYS_times, SYS_getitimer, SYS_setitimer,
        SYS_timer_create, SYS_timer_settime, SYS_timer_gettime, SYS_timer_getoverrun,
        SYS_timer_delete,
        // asynchronous I/O (the old AIO, not io_uring); 333 is io_pgetevents
        SYS_io_setup, SYS_io_destroy, SYS_io_submit, SYS_io_cancel, SYS_io_getevents, 333,
        // sockets that exist already (creation is checked below)
        SYS_bind, SYS_listen, SYS_accept, SYS_accept4, SYS_getsockname, SYS_getpeername,
        SYS_getsockopt, SYS_setsockopt, SYS_shutdown, SYS_recvfrom, SYS_recvmsg,
        SYS_recvmmsg,
        // the rest
        SYS_uname, SYS_sysinfo, SYS_getrandom, SYS_restart_syscall,
        // newer than this libc's table: cachestat, map_shadow_stack, futex_wake/wait/requeue
        451, 453, 454, 455, 456,
    ]
};

#[cfg(not(target_arch = "x86_64"))]
const ALWAYS_ALLOWED: &[libc::c_long] = &[];

/// Namespace flags of `clone` (CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID |
/// NEWNET), as in Docker's profile.
pub const CLONE_NAMESPACE_FLAGS: u64 = 0x7E02_0000;
const SOCK_TYPE_MASK: u64 = 0xf;
const MSG_FASTOPEN: u64 = 0x2000_0000;
const TIOCLINUX: u64 = 0x541C;

fn cond(arg: u8, len: Len, op: Op, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, len, op, value)
        .map_err(|e| SandboxError::Setup(format!("bad seccomp condition: {e}")))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(|e| SandboxError::Setup(format!("bad seccomp rule: {e}")))
}

/// `arg == value` for each value: one rule per value (rules of a syscall are OR-ed).
fn any_of(arg: u8, values: &[u64]) -> Result<Vec<SeccompRule>, SandboxError> {
    values
        .iter()
        .map(|&v| rule(vec![cond(arg, Len::Dword, Op::Eq, v)?]))
        .collect()
}

/// The allow-list with its argument checks.
pub fn allow_list_rules(network: Network) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        ALWAYS_ALLOWED.iter().map(|&nr| (nr, Vec::new())).collect();
    let mut add = |nr: libc::c_long, r: Vec<SeccompRule>| {
        rules.insert(nr, r);
    };

    add(
        libc::SYS_ioctl,
        vec![rule(vec![
            cond(1, Len::Dword, Op::Ne, libc::TIOCSTI)?,
            cond(1, Len::Dword, Op::Ne, TIOCLINUX)?,
        ])?],
    );
    add(
        libc::SYS_clone,
        vec![rule(vec![cond(
            0,
            Len::Qword,
            Op::MaskedEq(CLONE_NAMESPACE_FLAGS),
            0,
        )?])?],
    );
    // kill(-1) would signal every process the uid may signal.
    add(
        libc::SYS_kill,
        vec![rule(vec![cond(
            0,
            Len::Dword,
            Op::Ne,
            u64::from(u32::MAX),
        )?])?],
    );
    // Only the caller itself (pid 0).
    add(
        libc::SYS_prlimit64,
        vec![rule(vec![cond(0, Len::Dword, Op::Eq, 0)?])?],
    );
    for nr in [
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
    ] {
        add(nr, vec![rule(vec![cond(0, Len::Dword, Op::Eq, 0)?])?]);
    }
    // setpriority(PRIO_PROCESS | PRIO_PGRP, 0): the caller or its own (jailed) process group.
    add(
        libc::SYS_setpriority,
        [libc::PRIO_PROCESS as u64, libc::PRIO_PGRP as u64]
            .iter()
            .map(|&which| {
                rule(vec![
                    cond(0, Len::Dword, Op::Eq, which)?,
                    cond(1, Len::Dword, Op::Eq, 0)?,
                ])
            })
            .collect::<Result<_, _>>()?,
    );
    // ioprio_set(IOPRIO_WHO_PROCESS | IOPRIO_WHO_PGRP, 0).
    add(
        libc::SYS_ioprio_set,
        [1u64, 2]
            .iter()
            .map(|&which| {
                rule(vec![
                    cond(0, Len::Dword, Op::Eq, which)?,
                    cond(1, Len::Dword, Op::Eq, 0)?,
                ])
            })
            .collect::<Result<_, _>>()?,
    );
    // Linux personality, the 32-bit and UNAME26 variants, and the query value.
    add(
        libc::SYS_personality,
        any_of(0, &[0, 0x8, 0x20000, 0x20008, 0xffff_ffff])?,
    );

    // Sockets.
    let stream_types = [libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64];
    let unix_rules = stream_types
        .iter()
        .map(|&ty| {
            rule(vec![
                cond(0, Len::Dword, Op::Eq, libc::AF_UNIX as u64)?,
                cond(1, Len::Dword, Op::MaskedEq(SOCK_TYPE_MASK), ty)?,
            ])
        })
        .collect::<Result<Vec<_>, _>>()?;
    add(libc::SYS_socketpair, unix_rules.clone());
    match network {
        Network::None => add(libc::SYS_socket, unix_rules),
        Network::EgressProxy => {
            let mut tcp = Vec::new();
            for family in [libc::AF_INET as u64, libc::AF_INET6 as u64] {
                for protocol in [0, libc::IPPROTO_TCP as u64] {
                    tcp.push(rule(vec![
                        cond(0, Len::Dword, Op::Eq, family)?,
                        cond(
                            1,
                            Len::Dword,
                            Op::MaskedEq(SOCK_TYPE_MASK),
                            libc::SOCK_STREAM as u64,
                        )?,
                        cond(2, Len::Dword, Op::Eq, protocol)?,
                    ])?);
                }
            }
            add(libc::SYS_socket, tcp);
            add(libc::SYS_connect, Vec::new());
        }
    }
    add(
        libc::SYS_sendto,
        vec![rule(vec![cond(4, Len::Qword, Op::Eq, 0)?])?],
    );
    for nr in [libc::SYS_sendmsg, libc::SYS_sendmmsg] {
        let flags_arg = if nr == libc::SYS_sendmsg { 2 } else { 3 };
        add(
            nr,
            vec![rule(vec![cond(
                flags_arg,
                Len::Dword,
                Op::MaskedEq(MSG_FASTOPEN),
                0,
            )?])?],
        );
    }
    Ok(rules)
}

#[cfg(all(test, target_arch = "x86_64"))]
#[path = "seccomp_tests.rs"]
mod tests;
