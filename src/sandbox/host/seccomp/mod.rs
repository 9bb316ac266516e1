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
//! `clone3` fails with ENOSYS (not EPERM) so glibc falls back to `clone`, whose flags the filter
//! can see (clone3 passes them in memory, out of a filter's reach).
//!
//! The table is compiled by `bpf.rs` into one compact program (a binary search over the system
//! call numbers), built once per `HostSandbox` and installed by each child. The architecture is
//! checked (anything but x86_64 is killed); x32 numbers (bit 30 set) lie above every listed
//! number and get the default EPERM — keep it an allow-list. Only x86_64 has a table; elsewhere
//! the jail refuses to start.

mod bpf;

pub use bpf::{Action, Cond, Rule};

use crate::sandbox::SandboxError;
use std::collections::BTreeMap;

/// Whether the jail may reach an egress proxy over TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    None,
    EgressProxy,
}

/// `AUDIT_ARCH_X86_64`.
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const EPERM: Action = Action::Errno(libc::EPERM as u16);

/// The compiled filter.
#[derive(Debug)]
pub struct SeccompProgram {
    program: Vec<libc::sock_filter>,
}

impl SeccompProgram {
    /// Compile the filter (parent side, once per `HostSandbox`).
    pub fn new(network: Network) -> Result<SeccompProgram, SandboxError> {
        if !cfg!(target_arch = "x86_64") {
            return Err(SandboxError::Setup(format!(
                "the host jail's seccomp allow-list exists for x86_64 only, not {}",
                std::env::consts::ARCH
            )));
        }
        let program = bpf::compile(&table(network), &EPERM, AUDIT_ARCH_X86_64).map_err(|e| {
            SandboxError::Setup(format!("compiling the seccomp filter failed: {e}"))
        })?;
        Ok(SeccompProgram { program })
    }

    /// Child side: install the filter (needs `no_new_privs`). Async-signal-safe.
    ///
    /// # Safety
    /// Call only in the jail's child; afterwards only `execve` should follow.
    pub unsafe fn install_in_child(&self) -> Result<(), i32> {
        let fprog = libc::sock_fprog {
            len: self.program.len() as libc::c_ushort,
            filter: self.program.as_ptr() as *mut libc::sock_filter,
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
        Ok(())
    }

    #[cfg(test)]
    fn instructions(&self) -> &[libc::sock_filter] {
        &self.program
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
const SOCK_TYPE_MASK: u32 = 0xf;
const MSG_FASTOPEN: u32 = 0x2000_0000;
const TIOCLINUX: u32 = 0x541C;

fn nr(syscall: libc::c_long) -> u32 {
    syscall as u32
}

fn rules(rules: Vec<Vec<Cond>>) -> Action {
    Action::Rules(rules.into_iter().map(Rule).collect())
}

/// The allow-list with its argument checks.
pub fn table(network: Network) -> BTreeMap<u32, Action> {
    let mut table: BTreeMap<u32, Action> = ALWAYS_ALLOWED
        .iter()
        .map(|&n| (nr(n), Action::Allow))
        .collect();
    let mut set = |syscall: libc::c_long, action: Action| {
        table.insert(nr(syscall), action);
    };

    set(libc::SYS_clone3, Action::Errno(libc::ENOSYS as u16));
    set(
        libc::SYS_ioctl,
        rules(vec![vec![
            Cond::ne32(1, libc::TIOCSTI as u32),
            Cond::ne32(1, TIOCLINUX),
        ]]),
    );
    set(
        libc::SYS_clone,
        rules(vec![vec![Cond::masked_eq64(0, CLONE_NAMESPACE_FLAGS, 0)]]),
    );
    // kill(-1) would signal every process the uid may signal.
    set(libc::SYS_kill, rules(vec![vec![Cond::ne32(0, u32::MAX)]]));
    // Only the caller itself (pid 0).
    set(libc::SYS_prlimit64, rules(vec![vec![Cond::eq32(0, 0)]]));
    for syscall in [
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
    ] {
        set(syscall, rules(vec![vec![Cond::eq32(0, 0)]]));
    }
    // setpriority(PRIO_PROCESS | PRIO_PGRP, 0): the caller or its own (jailed) process group.
    set(
        libc::SYS_setpriority,
        rules(
            [libc::PRIO_PROCESS, libc::PRIO_PGRP]
                .iter()
                .map(|&which| vec![Cond::eq32(0, which), Cond::eq32(1, 0)])
                .collect(),
        ),
    );
    // ioprio_set(IOPRIO_WHO_PROCESS | IOPRIO_WHO_PGRP, 0).
    set(
        libc::SYS_ioprio_set,
        rules(
            [1u32, 2]
                .iter()
                .map(|&which| vec![Cond::eq32(0, which), Cond::eq32(1, 0)])
                .collect(),
        ),
    );
    // Linux personality, the 32-bit and UNAME26 variants, and the query value.
    set(
        libc::SYS_personality,
        rules(
            [0, 0x8, 0x20000, 0x20008, 0xffff_ffff]
                .iter()
                .map(|&p| vec![Cond::eq32(0, p)])
                .collect(),
        ),
    );

    // Sockets.
    let stream_types = [libc::SOCK_STREAM as u32, libc::SOCK_SEQPACKET as u32];
    let unix_streams: Vec<Vec<Cond>> = stream_types
        .iter()
        .map(|&ty| {
            vec![
                Cond::eq32(0, libc::AF_UNIX as u32),
                Cond::masked_eq32(1, SOCK_TYPE_MASK, ty),
            ]
        })
        .collect();
    set(libc::SYS_socketpair, rules(unix_streams.clone()));
    match network {
        Network::None => set(libc::SYS_socket, rules(unix_streams)),
        Network::EgressProxy => {
            let mut tcp = Vec::new();
            for family in [libc::AF_INET as u32, libc::AF_INET6 as u32] {
                for protocol in [0, libc::IPPROTO_TCP as u32] {
                    tcp.push(vec![
                        Cond::eq32(0, family),
                        Cond::masked_eq32(1, SOCK_TYPE_MASK, libc::SOCK_STREAM as u32),
                        Cond::eq32(2, protocol),
                    ]);
                }
            }
            set(libc::SYS_socket, rules(tcp));
            set(libc::SYS_connect, Action::Allow);
        }
    }
    set(libc::SYS_sendto, rules(vec![vec![Cond::eq64(4, 0)]]));
    set(
        libc::SYS_sendmsg,
        rules(vec![vec![Cond::masked_eq32(2, MSG_FASTOPEN, 0)]]),
    );
    set(
        libc::SYS_sendmmsg,
        rules(vec![vec![Cond::masked_eq32(3, MSG_FASTOPEN, 0)]]),
    );
    table
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests;
