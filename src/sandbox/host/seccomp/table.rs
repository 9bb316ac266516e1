//! The allow-list itself: system call names with their argument checks, resolved to numbers
//! for one architecture. Both architectures get the same decisions; the names only x86_64 has
//! are listed once, in [`X86_64_ONLY`], with what replaces them in the generic table.

use super::arch::Arch;
use super::bpf::{Action, Cond, Rule};
use super::Network;
use std::collections::BTreeMap;

/// System calls allowed with any arguments.
#[rustfmt::skip]
const ALWAYS_ALLOWED: &[&str] = &[
        // files and descriptors (open, creat and mknod are checked below: no setuid files)
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv",
        "pwritev", "preadv2", "pwritev2", "lseek", "close", "close_range", "dup",
        "dup2", "dup3", "fsync", "fdatasync", "sync",
        "syncfs", "sync_file_range", "ftruncate", "truncate", "fallocate",
        "fadvise64", "readahead", "access", "faccessat", "faccessat2", "stat",
        "lstat", "fstat", "newfstatat", "statx", "statfs", "fstatfs",
        "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir",
        "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
        "renameat2", "link", "linkat", "symlink", "symlinkat", "readlink",
        "readlinkat", "umask", "getxattr", "lgetxattr", "fgetxattr",
        "listxattr", "llistxattr", "flistxattr", "copy_file_range", "sendfile",
        "splice", "tee", "vmsplice", "pipe", "pipe2",
        // waiting for events (not inotify: a watch reports activity on paths outside)
        "select", "pselect6", "poll", "ppoll", "epoll_create", "epoll_create1",
        "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd",
        "eventfd2", "signalfd", "signalfd4", "timerfd_create", "timerfd_settime",
        "timerfd_gettime",
        // memory
        "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "msync",
        "mincore", "mlock", "mlock2", "munlock", "mlockall", "munlockall",
        "membarrier", "pkey_alloc", "pkey_free", "pkey_mprotect", "mseal",
        "remap_file_pages",
        // processes and threads
        "execve", "exit", "exit_group", "wait4", "waitid", "fork",
        "vfork", "getpid", "getppid", "gettid", "getpgid", "getpgrp", "getsid",
        "set_tid_address", "set_robust_list", "rseq", "futex", "futex_waitv",
        "arch_prctl", "set_thread_area", "get_thread_area", "prctl", "seccomp",
        "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
        "capget", "capset", "getrlimit", "setrlimit", "getrusage",
        "getpriority", "sched_yield", "sched_getaffinity", "sched_getparam",
        "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
        "sched_rr_get_interval", "sched_getattr", "getcpu", "ioprio_get",
        // credentials (without capabilities only the caller's own ids are reachable)
        "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
        "getgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid",
        "setresgid", "setgroups", "setfsuid", "setfsgid",
        // signals (Landlock's signal scope keeps them inside the jail)
        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
        "rt_sigsuspend", "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
        "sigaltstack", "tkill", "tgkill", "pidfd_send_signal", "pause", "alarm",
        // time
        "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres",
        "gettimeofday", "time", "times", "getitimer", "setitimer",
        "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
        "timer_delete",
        // asynchronous I/O (the old AIO, not io_uring)
        "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
        // sockets that exist already (creation is checked below)
        "bind", "listen", "accept", "accept4", "getsockname", "getpeername",
        "getsockopt", "setsockopt", "shutdown", "recvfrom", "recvmsg",
        "recvmmsg",
        // the rest
        "uname", "sysinfo", "getrandom", "restart_syscall",
        "cachestat", "map_shadow_stack", "futex_wake", "futex_wait", "futex_requeue",
    ];

/// Names the x86_64 table has and the generic one (aarch64) does not, and why nothing is lost:
/// each was replaced there by a call this list allows or checks the same way.
pub const X86_64_ONLY: &[(&str, &str)] = &[
    ("open", "openat (same mode check)"),
    ("creat", "openat with O_CREAT (same mode check)"),
    ("mknod", "mknodat (same mode check)"),
    ("access", "faccessat"),
    ("stat", "newfstatat"),
    ("lstat", "newfstatat"),
    ("getdents", "getdents64"),
    ("mkdir", "mkdirat"),
    ("rmdir", "unlinkat"),
    ("unlink", "unlinkat"),
    ("rename", "renameat, renameat2"),
    ("link", "linkat"),
    ("symlink", "symlinkat"),
    ("readlink", "readlinkat"),
    ("chmod", "fchmodat (does nothing in both)"),
    ("chown", "fchownat (does nothing in both)"),
    ("lchown", "fchownat (does nothing in both)"),
    ("utime", "utimensat (by path does nothing in both)"),
    ("utimes", "utimensat (by path does nothing in both)"),
    ("futimesat", "utimensat (same check)"),
    ("dup2", "dup3"),
    ("pipe", "pipe2"),
    ("select", "pselect6"),
    ("poll", "ppoll"),
    ("epoll_create", "epoll_create1"),
    ("epoll_wait", "epoll_pwait"),
    ("eventfd", "eventfd2"),
    ("signalfd", "signalfd4"),
    ("fork", "clone (same namespace-flag check)"),
    ("vfork", "clone (same namespace-flag check)"),
    ("getpgrp", "getpgid(0)"),
    ("pause", "ppoll / rt_sigsuspend"),
    ("alarm", "setitimer"),
    ("time", "clock_gettime"),
    (
        "arch_prctl",
        "nothing: aarch64 sets its thread pointer without a system call",
    ),
    ("set_thread_area", "nothing: x86 thread-local storage only"),
    ("get_thread_area", "nothing: x86 thread-local storage only"),
];

/// Collects the table, resolving names for one architecture.
struct Builder<'a> {
    arch: &'a Arch,
    table: BTreeMap<u32, Action>,
    unknown: Vec<&'static str>,
}

impl Builder<'_> {
    fn set(&mut self, name: &'static str, action: Action) {
        match self.arch.number(name) {
            Some(nr) => {
                self.table.insert(nr, action);
            }
            None if X86_64_ONLY.iter().any(|(only, _)| *only == name) => {}
            None => self.unknown.push(name),
        }
    }
}

/// The allow-list with its argument checks, for `arch`. A name neither in `arch`'s table nor
/// a listed x86_64-only name is an error (a typo must not silently drop a rule).
pub fn table(network: Network, arch: &Arch) -> Result<BTreeMap<u32, Action>, String> {
    let mut builder = Builder {
        arch,
        table: BTreeMap::new(),
        unknown: Vec::new(),
    };
    for &name in ALWAYS_ALLOWED {
        builder.set(name, Action::Allow);
    }
    rules_for(network, &mut |name, action| builder.set(name, action));
    if !builder.unknown.is_empty() {
        return Err(format!(
            "system calls unknown on {}: {}",
            arch.name,
            builder.unknown.join(", ")
        ));
    }
    Ok(builder.table)
}

/// Namespace flags of `clone` (CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID |
/// NEWNET), as in Docker's profile.
pub const CLONE_NAMESPACE_FLAGS: u64 = 0x7E02_0000;
pub(super) const SOCK_TYPE_MASK: u32 = 0xf;
/// Mode bits that give a file to someone else's privileges: setuid, setgid, sticky.
pub(super) const SPECIAL_MODE_BITS: u32 = 0o7000;
/// `O_CREAT`, and the bit that makes `O_TMPFILE` (with `O_DIRECTORY`).
pub(super) const O_CREAT: u32 = 0o100;
pub(super) const O_TMPFILE_BIT: u32 = 0o20000000;
pub(super) const AT_EMPTY_PATH: u32 = 0x1000;
pub(super) const MFD_NOEXEC_SEAL: u32 = 0x8;
pub(super) const MFD_EXEC: u32 = 0x10;
/// `FS_IOC_SETFLAGS` (and its 32-bit twin) and `FS_IOC_FSSETXATTR`: inode flags an owner may set
/// (no-dump, no-atime, project ids) on any file it can open, however read-only.
pub(super) const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
pub(super) const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
pub(super) const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
/// "Succeed, having done nothing".
pub(super) const DONE_NOTHING: u16 = 0;
pub(super) const MSG_FASTOPEN: u32 = 0x2000_0000;
pub(super) const TIOCLINUX: u32 = 0x541C;

fn rules(rules: Vec<Vec<Cond>>) -> Action {
    Action::Rules(rules.into_iter().map(Rule).collect())
}

/// The calls allowed only with some arguments, or answered without running.
fn rules_for(network: Network, set: &mut dyn FnMut(&'static str, Action)) {
    set("clone3", Action::Errno(libc::ENOSYS as u16));
    set(
        "ioctl",
        rules(vec![vec![
            Cond::ne32(1, libc::TIOCSTI as u32),
            Cond::ne32(1, TIOCLINUX),
            Cond::ne32(1, FS_IOC_SETFLAGS),
            Cond::ne32(1, FS_IOC32_SETFLAGS),
            Cond::ne32(1, FS_IOC_FSSETXATTR),
        ]]),
    );
    set(
        "clone",
        rules(vec![vec![Cond::masked_eq64(0, CLONE_NAMESPACE_FLAGS, 0)]]),
    );
    // kill(-1) would signal every process the uid may signal.
    set("kill", rules(vec![vec![Cond::ne32(0, u32::MAX)]]));
    // Only the caller itself (pid 0).
    set("prlimit64", rules(vec![vec![Cond::eq32(0, 0)]]));
    for name in [
        "sched_setaffinity",
        "sched_setscheduler",
        "sched_setparam",
        "sched_setattr",
    ] {
        set(name, rules(vec![vec![Cond::eq32(0, 0)]]));
    }
    // setpriority(PRIO_PROCESS | PRIO_PGRP, 0): the caller or its own (jailed) process group.
    set(
        "setpriority",
        rules(
            [libc::PRIO_PROCESS, libc::PRIO_PGRP]
                .iter()
                .map(|&which| vec![Cond::eq32(0, which), Cond::eq32(1, 0)])
                .collect(),
        ),
    );
    // ioprio_set(IOPRIO_WHO_PROCESS | IOPRIO_WHO_PGRP, 0).
    set(
        "ioprio_set",
        rules(
            [1u32, 2]
                .iter()
                .map(|&which| vec![Cond::eq32(0, which), Cond::eq32(1, 0)])
                .collect(),
        ),
    );
    // Linux personality, the 32-bit and UNAME26 variants, and the query value.
    set(
        "personality",
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
    set("socketpair", rules(unix_streams.clone()));
    match network {
        Network::None => set("socket", rules(unix_streams)),
        Network::EgressProxy => {
            let mut tcp = Vec::new();
            // IPv4 only: the proxy listens on 127.0.0.1 in the jail's network namespace.
            for family in [libc::AF_INET as u32] {
                for protocol in [0, libc::IPPROTO_TCP as u32] {
                    tcp.push(vec![
                        Cond::eq32(0, family),
                        Cond::masked_eq32(1, SOCK_TYPE_MASK, libc::SOCK_STREAM as u32),
                        Cond::eq32(2, protocol),
                    ]);
                }
            }
            set("socket", rules(tcp));
            set("connect", Action::Allow);
        }
        Network::Supervised => supervised(set),
    }
    set("sendto", rules(vec![vec![Cond::eq64(4, 0)]]));
    set(
        "sendmsg",
        rules(vec![vec![Cond::masked_eq32(2, MSG_FASTOPEN, 0)]]),
    );
    set(
        "sendmmsg",
        rules(vec![vec![Cond::masked_eq32(3, MSG_FASTOPEN, 0)]]),
    );
    files(set);
    outside_reach(set);
}

/// The jail shares warden's network namespace, so only warden may connect anything: TCP
/// sockets (v4, or v6 for a client that asks the v4-mapped proxy address) can be made, and
/// each `connect` goes to warden (`connect.rs`), which connects its own copy of the socket to
/// the proxy or refuses. Exact socket types: with `SOCK_NONBLOCK`/`SOCK_CLOEXEC` masked off
/// the type is `SOCK_STREAM` and nothing else; protocol 0 or TCP (SCTP and MPTCP are stream
/// sockets too). No AF_UNIX socket can be made (a path socket would need `connect`, which
/// warden refuses anyway, and an abstract one reaches the host's). `bind` and `listen` are
/// refused: here a port would be the host's (`listen` on an unbound socket binds one itself).
fn supervised(set: &mut dyn FnMut(&'static str, Action)) {
    let flags = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32;
    let mut tcp = Vec::new();
    for family in [libc::AF_INET as u32, libc::AF_INET6 as u32] {
        for protocol in [0, libc::IPPROTO_TCP as u32] {
            tcp.push(vec![
                Cond::eq32(0, family),
                Cond::masked_eq32(1, !flags, libc::SOCK_STREAM as u32),
                Cond::eq32(2, protocol),
            ]);
        }
    }
    set("socket", rules(tcp));
    set("connect", Action::Notify);
    set("bind", Action::Errno(libc::EPERM as u16));
    set("listen", Action::Errno(libc::EPERM as u16));
}

/// Calls through which a jailed process could watch, hold or learn about files and processes
/// outside the jail, although it can change none of them.
///
/// - `fcntl(F_NOTIFY)` (dnotify) reports activity in any directory the jail may open for
///   reading (`/usr`, `/etc/ssl/certs`, a read root); `fcntl(F_SETLEASE)` on a file the uid
///   owns reports other openers and stalls a writer for up to `lease-break-time` (45 s). Both
///   are refused; every other `fcntl` command stays (its command is an `int`: 32-bit compare).
///   POSIX and OFD record locks stay too: the kernel allows a write lock only on a descriptor
///   open for writing (which Landlock confines), and a read lock is part of reading (SQLite).
/// - `flock` locks any descriptor, however read-only: an exclusive lock on `/etc/passwd` or a
///   read root would stall every host process that locks it. Seccomp cannot tell which file a
///   descriptor names, so the call goes to warden (`flock.rs`), which locks the same open file
///   when it lies beneath a writable root (cargo's and rustc's locks in the workspace) and
///   answers ENOSYS otherwise, a kernel's answer without `flock`: cargo and Go then go on
///   without locking, python's `filelock` says so.
/// - `pidfd_open` takes any pid: a pidfd of a host process reports its exit and, through
///   `PIDFD_GET_INFO`, its parent, uids and cgroup. Without a pid namespace of its own the jail
///   cannot limit it to its own processes, so it fails with ENOSYS (Go and asyncio probe it and
///   fall back to plain pids). Pidfds of the jail's own children still come from
///   `clone(CLONE_PIDFD)`; `pidfd_send_signal` on them stays (Landlock's signal scope covers it),
///   `pidfd_getfd` stays refused (the default).
fn outside_reach(set: &mut dyn FnMut(&'static str, Action)) {
    set(
        "fcntl",
        rules(vec![vec![
            Cond::ne32(1, libc::F_NOTIFY as u32),
            Cond::ne32(1, libc::F_SETLEASE as u32),
        ]]),
    );
    set("flock", Action::Notify);
    set("pidfd_open", Action::Errno(libc::ENOSYS as u16));
}

/// File calls Landlock does not confine by path, or that could make a file run with someone
/// else's rights or run from memory.
///
/// - `chmod`, `chown` and `utime` by path act on any path the uid owns, inside the roots or
///   not: they "succeed" having done nothing (tar, cp -p and git call them as a matter of
///   course; warden's own `chmod` runs outside the jail on checked paths). `fchmod` and
///   `fchown` likewise: an fd may be open read-only on a file outside the writable roots.
///   `utimensat`/`futimesat` on a descriptor (NULL path) stay: `touch` needs them, and the
///   descriptor was opened through Landlock.
/// - `open`/`openat`/`creat`/`mknod` may not create a file with setuid, setgid or sticky bits.
///   `openat2` passes its flags in memory: ENOSYS, so glibc and others fall back to `openat`.
/// - `memfd_create` only with `MFD_NOEXEC_SEAL` (a memfd lives outside every Landlock rule:
///   executable, it would run code that was never on disk); `execveat` never with
///   `AT_EMPTY_PATH` (running an open descriptor).
fn files(set: &mut dyn FnMut(&'static str, Action)) {
    for name in [
        "chmod",
        "fchmod",
        "fchmodat",
        "fchmodat2",
        "chown",
        "fchown",
        "lchown",
        "fchownat",
        "utime",
        "utimes",
    ] {
        set(name, Action::Errno(DONE_NOTHING));
    }
    for name in ["utimensat", "futimesat"] {
        set(
            name,
            Action::RulesElse(vec![Rule(vec![Cond::eq64(1, 0)])], DONE_NOTHING),
        );
    }
    let no_special_bits = |mode_arg: u8| Cond::masked_eq32(mode_arg, SPECIAL_MODE_BITS, 0);
    // Without O_CREAT or O_TMPFILE the mode is ignored; with them it may not be special.
    let opening = |flags_arg: u8, mode_arg: u8| {
        rules(vec![
            vec![
                Cond::masked_eq32(flags_arg, O_CREAT, 0),
                Cond::masked_eq32(flags_arg, O_TMPFILE_BIT, 0),
            ],
            vec![no_special_bits(mode_arg)],
        ])
    };
    set("open", opening(1, 2));
    set("openat", opening(2, 3));
    set("creat", rules(vec![vec![no_special_bits(1)]]));
    set("mknod", rules(vec![vec![no_special_bits(1)]]));
    set("mknodat", rules(vec![vec![no_special_bits(2)]]));
    set("openat2", Action::Errno(libc::ENOSYS as u16));
    set(
        "memfd_create",
        rules(vec![vec![
            Cond::masked_eq32(1, MFD_NOEXEC_SEAL, MFD_NOEXEC_SEAL),
            Cond::masked_eq32(1, MFD_EXEC, 0),
        ]]),
    );
    set(
        "execveat",
        rules(vec![vec![Cond::masked_eq32(4, AT_EMPTY_PATH, 0)]]),
    );
}
