//! Unit tests of the seccomp rule table: the compiled BPF program is run through a small
//! classic-BPF interpreter against `struct seccomp_data`, so every allow and deny decision is
//! checked without forking, and compared with what seccompiler compiles from the same table.
//! The integration tests (`tests/jail_*.rs`) check the same things against the real kernel.

use super::table::*;
use super::*;
use libc::sock_filter;
use std::collections::BTreeMap;

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;

fn ret_errno(e: i32) -> u32 {
    0x0005_0000 | e as u32
}

/// Run a seccomp BPF program over `seccomp_data { nr, arch, ip, args }`.
fn eval(prog: &[sock_filter], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&(nr as i32).to_ne_bytes());
    data[4..8].copy_from_slice(&arch.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
    }
    let (mut acc, mut pc) = (0u32, 0usize);
    loop {
        let ins = &prog[pc];
        let k = ins.k;
        match ins.code {
            // BPF_LD | BPF_W | BPF_ABS
            0x20 => {
                let off = k as usize;
                acc = u32::from_ne_bytes(data[off..off + 4].try_into().unwrap());
                pc += 1;
            }
            // BPF_ALU | BPF_AND | BPF_K
            0x54 => {
                acc &= k;
                pc += 1;
            }
            // BPF_JMP | BPF_JA
            0x05 => pc += 1 + k as usize,
            // BPF_JMP | BPF_JEQ / JGT / JGE / JSET | BPF_K
            0x15 | 0x25 | 0x35 | 0x45 => {
                let taken = match ins.code {
                    0x15 => acc == k,
                    0x25 => acc > k,
                    0x35 => acc >= k,
                    _ => acc & k != 0,
                };
                pc += 1 + if taken { ins.jt } else { ins.jf } as usize;
            }
            // BPF_RET | BPF_K
            0x06 => return k,
            other => panic!("instruction {other:#x} not handled by the test interpreter"),
        }
    }
}

/// A compiled filter and the architecture it was compiled for.
struct Filter {
    program: SeccompProgram,
    arch: &'static Arch,
}

/// Both architectures' filters: every test holds on each.
fn filters(network: Network) -> Vec<Filter> {
    [&arch::X86_64, &arch::AARCH64]
        .into_iter()
        .map(|arch| Filter {
            program: SeccompProgram::for_arch(network, arch).unwrap(),
            arch,
        })
        .collect()
}

fn none() -> Vec<Filter> {
    filters(Network::None)
}

fn proxy() -> Vec<Filter> {
    filters(Network::EgressProxy)
}

fn supervised() -> Vec<Filter> {
    filters(Network::Supervised)
}

const ALL_MODES: [Network; 3] = [Network::None, Network::EgressProxy, Network::Supervised];

/// The filter's verdict for a call of its own architecture.
fn kernel_result(p: &Filter, nr: u32, args: [u64; 6]) -> u32 {
    eval(p.program.instructions(), p.arch.audit, i64::from(nr), args)
}

/// What the filter answers to `name(args…)`; `Absent` for a call the filter's architecture
/// does not have (such assertions hold vacuously there: see `X86_64_ONLY`).
#[derive(Debug)]
enum Verdict {
    Ret(u32),
    Absent,
}

impl PartialEq<u32> for Verdict {
    fn eq(&self, expected: &u32) -> bool {
        match self {
            Verdict::Ret(ret) => ret == expected,
            Verdict::Absent => true,
        }
    }
}

fn call(p: &Filter, name: &str, args: &[u64]) -> Verdict {
    let mut full = [0u64; 6];
    full[..args.len()].copy_from_slice(args);
    match p.arch.number(name) {
        Some(nr) => Verdict::Ret(kernel_result(p, nr, full)),
        // A call the other architecture has (modify_ldt, inotify_init…): nothing to allow.
        None if [&arch::X86_64, &arch::AARCH64]
            .iter()
            .any(|other| other.number(name).is_some()) =>
        {
            Verdict::Absent
        }
        None => panic!("{name} is no system call of {}", p.arch.name),
    }
}

const EPERM: i32 = libc::EPERM;

#[test]
fn ordinary_calls_are_allowed() {
    for p in &none() {
        for name in [
            "read",
            "write",
            "openat",
            "execve",
            "mmap",
            "wait4",
            "fork",
            "exit_group",
            "rt_sigaction",
            "getdents64",
        ] {
            assert_eq!(
                call(p, name, &[]),
                RET_ALLOW,
                "syscall {name} ({})",
                p.arch.name
            );
        }
    }
}

#[test]
fn dangerous_calls_fail_with_eperm() {
    for p in &none() {
        for name in [
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
            "unshare",
            "setns",
            "mount",
            "umount2",
            "pivot_root",
            "keyctl",
            "add_key",
            "request_key",
            "bpf",
            "perf_event_open",
            "kexec_load",
            "kexec_file_load",
            "init_module",
            "finit_module",
            "delete_module",
            "userfaultfd",
            "setsid",
            "setpgid",
            "connect",
            "shmget",
            "msgget",
            "semget",
            "mq_open",
            "chroot",
            "open_by_handle_at",
            "name_to_handle_at",
            "modify_ldt",
            "reboot",
            "syslog",
        ] {
            assert_eq!(
                call(p, name, &[]),
                ret_errno(EPERM),
                "syscall {name} ({})",
                p.arch.name
            );
        }
    }
}

#[test]
fn clone3_fails_with_enosys_so_glibc_falls_back() {
    for p in none().iter().chain(&proxy()).chain(&supervised()) {
        assert_eq!(call(p, "clone3", &[]), ret_errno(libc::ENOSYS));
    }
}

#[test]
fn clone_with_namespace_flags_is_denied() {
    for p in &none() {
        let fork_flags =
            (libc::CLONE_CHILD_CLEARTID | libc::CLONE_CHILD_SETTID | libc::SIGCHLD) as u64;
        let thread_flags = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID) as u64;
        assert_eq!(call(p, "clone", &[fork_flags]), RET_ALLOW);
        assert_eq!(call(p, "clone", &[thread_flags]), RET_ALLOW);
        for ns in [
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWNS,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWCGROUP,
        ] {
            assert_eq!(
                call(p, "clone", &[fork_flags | ns as u64]),
                ret_errno(EPERM),
                "flag {ns:#x}"
            );
        }
    }
}

#[test]
fn tiocsti_and_tioclinux_are_denied_even_with_high_bits() {
    for p in &none() {
        let tiocsti = libc::TIOCSTI;
        assert_eq!(call(p, "ioctl", &[0, tiocsti]), ret_errno(EPERM));
        assert_eq!(call(p, "ioctl", &[0, tiocsti | 1 << 32]), ret_errno(EPERM));
        assert_eq!(
            call(p, "ioctl", &[0, u64::from(TIOCLINUX)]),
            ret_errno(EPERM)
        );
        assert_eq!(call(p, "ioctl", &[1, libc::TCGETS]), RET_ALLOW);
        assert_eq!(call(p, "ioctl", &[1, libc::FIONREAD]), RET_ALLOW);
    }
}

#[test]
fn only_unix_stream_sockets_without_a_proxy() {
    for p in &none() {
        let unix = libc::AF_UNIX as u64;
        let stream = libc::SOCK_STREAM as u64;
        let cloexec = libc::SOCK_CLOEXEC as u64;
        assert_eq!(call(p, "socket", &[unix, stream | cloexec, 0]), RET_ALLOW);
        assert_eq!(
            call(p, "socket", &[unix, libc::SOCK_SEQPACKET as u64, 0]),
            RET_ALLOW
        );
        assert_eq!(
            call(p, "socket", &[unix, libc::SOCK_DGRAM as u64, 0]),
            ret_errno(EPERM)
        );
        for family in [
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
            libc::AF_PACKET,
        ] {
            assert_eq!(
                call(p, "socket", &[family as u64, stream, 0]),
                ret_errno(EPERM),
                "family {family}"
            );
        }
        assert_eq!(call(p, "socketpair", &[unix, stream, 0]), RET_ALLOW);
        assert_eq!(
            call(p, "socketpair", &[unix, libc::SOCK_DGRAM as u64, 0]),
            ret_errno(EPERM)
        );
        assert_eq!(call(p, "connect", &[3, 0x1000, 16]), ret_errno(EPERM));
    }
}

#[test]
fn proxy_mode_allows_tcp_connect_but_no_unix_sockets() {
    for p in &proxy() {
        let stream = libc::SOCK_STREAM as u64;
        for family in [libc::AF_INET as u64, libc::AF_INET6 as u64] {
            if family == libc::AF_INET6 as u64 {
                assert_eq!(call(p, "socket", &[family, stream, 0]), ret_errno(EPERM));
                continue;
            }
            assert_eq!(call(p, "socket", &[family, stream, 0]), RET_ALLOW);
            assert_eq!(
                call(p, "socket", &[family, stream, libc::IPPROTO_TCP as u64]),
                RET_ALLOW
            );
            // UDP, and SCTP/MPTCP, which Landlock's TCP rules would not cover.
            assert_eq!(
                call(p, "socket", &[family, libc::SOCK_DGRAM as u64, 0]),
                ret_errno(EPERM)
            );
            assert_eq!(call(p, "socket", &[family, stream, 132]), ret_errno(EPERM));
            assert_eq!(call(p, "socket", &[family, stream, 262]), ret_errno(EPERM));
        }
        assert_eq!(
            call(p, "socket", &[libc::AF_UNIX as u64, stream, 0]),
            ret_errno(EPERM)
        );
        assert_eq!(call(p, "connect", &[3, 0x1000, 16]), RET_ALLOW);
    }
}

#[test]
fn supervised_mode_makes_only_tcp_sockets_and_hands_connect_to_warden() {
    for p in &supervised() {
        let stream = libc::SOCK_STREAM as u64;
        let flags = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u64;
        for family in [libc::AF_INET as u64, libc::AF_INET6 as u64] {
            for protocol in [0, libc::IPPROTO_TCP as u64] {
                for ty in [
                    stream,
                    stream | libc::SOCK_NONBLOCK as u64,
                    stream | libc::SOCK_CLOEXEC as u64,
                    stream | flags,
                ] {
                    assert_eq!(
                        call(p, "socket", &[family, ty, protocol]),
                        RET_ALLOW,
                        "family {family} type {ty:#x} protocol {protocol}"
                    );
                }
            }
            // SCTP and MPTCP come as stream sockets too; UDP, raw, packet and seqpacket do not.
            for protocol in [libc::IPPROTO_SCTP as u64, 262, libc::IPPROTO_UDP as u64] {
                assert_eq!(
                    call(p, "socket", &[family, stream, protocol]),
                    ret_errno(EPERM),
                    "protocol {protocol}"
                );
            }
            for ty in [
                libc::SOCK_DGRAM,
                libc::SOCK_RAW,
                libc::SOCK_SEQPACKET,
                10, // SOCK_PACKET
            ] {
                assert_eq!(
                    call(p, "socket", &[family, ty as u64 | flags, 0]),
                    ret_errno(EPERM),
                    "type {ty}"
                );
            }
            // Only the two flags are masked: any other bit beside SOCK_STREAM is refused.
            assert_eq!(
                call(p, "socket", &[family, stream | 0x100, 0]),
                ret_errno(EPERM)
            );
            assert_eq!(
                call(p, "socket", &[family, stream | 1 << 32, 0]),
                RET_ALLOW,
                "the kernel reads the type as an int"
            );
        }
        for family in [
            libc::AF_UNIX,
            libc::AF_NETLINK,
            libc::AF_PACKET,
            libc::AF_VSOCK,
        ] {
            assert_eq!(
                call(p, "socket", &[family as u64, stream, 0]),
                ret_errno(EPERM),
                "family {family}"
            );
        }
        // socketpair stays as without network: AF_UNIX stream and seqpacket.
        let unix = libc::AF_UNIX as u64;
        assert_eq!(call(p, "socketpair", &[unix, stream, 0]), RET_ALLOW);
        assert_eq!(
            call(p, "socketpair", &[unix, libc::SOCK_DGRAM as u64, 0]),
            ret_errno(EPERM)
        );
        assert_eq!(call(p, "connect", &[3, 0x1000, 16]), RET_USER_NOTIF);
        // A port of the jail's would be a port of the host's.
        assert_eq!(call(p, "bind", &[3, 0x1000, 16]), ret_errno(EPERM));
        assert_eq!(call(p, "listen", &[3, 128]), ret_errno(EPERM));
        assert_eq!(call(p, "accept4", &[3, 0, 0, 0]), RET_ALLOW);
        // flock still goes to warden, through the same listener.
        assert_eq!(call(p, "flock", &[3, 2]), RET_USER_NOTIF);
    }
    // The other modes keep bind and listen (AF_UNIX sockets in the workspace, the namespace).
    for p in none().iter().chain(&proxy()) {
        assert_eq!(call(p, "bind", &[3, 0x1000, 16]), RET_ALLOW);
        assert_eq!(call(p, "listen", &[3, 128]), RET_ALLOW);
    }
}

#[test]
fn sending_to_an_address_is_denied() {
    for p in none().iter().chain(&proxy()).chain(&supervised()) {
        assert_eq!(call(p, "sendto", &[3, 0x1000, 10, 0, 0, 0]), RET_ALLOW);
        assert_eq!(
            call(p, "sendto", &[3, 0x1000, 10, 0, 0x2000, 16]),
            ret_errno(EPERM)
        );
        assert_eq!(call(p, "sendmsg", &[3, 0x1000, 0]), RET_ALLOW);
        assert_eq!(
            call(p, "sendmsg", &[3, 0x1000, u64::from(MSG_FASTOPEN)]),
            ret_errno(EPERM)
        );
        assert_eq!(
            call(p, "sendmmsg", &[3, 0x1000, 1, u64::from(MSG_FASTOPEN)]),
            ret_errno(EPERM)
        );
    }
}

#[test]
fn calls_on_other_processes_are_limited_to_self() {
    for p in &none() {
        assert_eq!(call(p, "kill", &[1234, 9]), RET_ALLOW);
        assert_eq!(call(p, "kill", &[u64::MAX, 9]), ret_errno(EPERM));
        assert_eq!(call(p, "prlimit64", &[0, 7, 0, 0x1000]), RET_ALLOW);
        assert_eq!(call(p, "prlimit64", &[1, 7, 0x1000, 0]), ret_errno(EPERM));
        assert_eq!(call(p, "setpriority", &[0, 0, 10]), RET_ALLOW);
        assert_eq!(
            call(p, "setpriority", &[libc::PRIO_USER as u64, 0, 19]),
            ret_errno(EPERM)
        );
        assert_eq!(call(p, "setpriority", &[0, 1, 19]), ret_errno(EPERM));
        assert_eq!(call(p, "sched_setaffinity", &[0, 8, 0x1000]), RET_ALLOW);
        assert_eq!(
            call(p, "sched_setaffinity", &[1, 8, 0x1000]),
            ret_errno(EPERM)
        );
    }
}

#[test]
fn personality_only_harmless_values() {
    for p in &none() {
        assert_eq!(call(p, "personality", &[0xffff_ffff]), RET_ALLOW);
        assert_eq!(call(p, "personality", &[0]), RET_ALLOW);
        // ADDR_NO_RANDOMIZE would switch off ASLR for what follows.
        assert_eq!(call(p, "personality", &[0x0040000]), ret_errno(EPERM));
    }
}

#[test]
fn x32_and_foreign_architectures_never_reach_the_allow_list() {
    let [x86, arm] = &none()[..] else {
        unreachable!()
    };
    const X32_BIT: i64 = 0x4000_0000;
    // read, write and execve through the x32 ABI: default deny.
    for nr in [0, 1, 59] {
        assert_eq!(
            eval(
                x86.program.instructions(),
                AUDIT_ARCH_X86_64,
                X32_BIT | nr,
                [0; 6]
            ),
            ret_errno(EPERM)
        );
    }
    // A 32-bit int 0x80 call on x86_64, a 32-bit ARM call on aarch64, and each architecture's
    // calls presented to the other's filter: killed by the architecture check.
    for (filter, foreign) in [
        (x86, AUDIT_ARCH_I386),
        (x86, arch::AARCH64.audit),
        (arm, AUDIT_ARCH_ARM),
        (arm, arch::X86_64.audit),
    ] {
        assert_eq!(
            eval(filter.program.instructions(), foreign, 3, [0; 6]),
            RET_KILL_PROCESS,
            "{} filter, arch {foreign:#x}",
            filter.arch.name
        );
    }
}

#[test]
fn the_program_stays_small() {
    // The kernel emulates and JIT-compiles the filter at every spawn; keep it compact.
    for p in none().iter().chain(&proxy()).chain(&supervised()) {
        let length = p.program.instructions().len();
        assert!(length < 500, "{length} instructions ({})", p.arch.name);
    }
}

/// seccompiler's program for the same table (clone3 aside: seccompiler has one match action
/// per filter), as a reference implementation of the argument comparisons. In our instruction
/// type, converted once: the comparison below evaluates it tens of thousands of times.
fn seccompiler_reference(network: Network, arch: &Arch) -> Vec<sock_filter> {
    use seccompiler::{SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op};
    let mut rules = BTreeMap::new();
    for (nr, action) in table(network, arch).unwrap() {
        let chain = match action {
            Action::Allow => Vec::new(),
            Action::Errno(_) | Action::Notify => continue,
            Action::Rules(rs) | Action::RulesElse(rs, _) => rs
                .iter()
                .map(|Rule(conds)| {
                    let conds = conds
                        .iter()
                        .map(|c| {
                            let (arg, kind, mask, value) = c.describe();
                            let (len, op) = match kind {
                                "eq32" => (Len::Dword, Op::Eq),
                                "ne32" => (Len::Dword, Op::Ne),
                                "masked32" => (Len::Dword, Op::MaskedEq(mask)),
                                _ => (Len::Qword, Op::MaskedEq(mask)),
                            };
                            seccompiler::SeccompCondition::new(arg, len, op, value).unwrap()
                        })
                        .collect();
                    seccompiler::SeccompRule::new(conds).unwrap()
                })
                .collect(),
        };
        rules.insert(i64::from(nr), chain);
    }
    let target = match arch.name {
        "aarch64" => seccompiler::TargetArch::aarch64,
        _ => seccompiler::TargetArch::x86_64,
    };
    let filter = seccompiler::SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        target,
    )
    .unwrap();
    let program: Vec<seccompiler::sock_filter> = filter.try_into().unwrap();
    program
        .iter()
        .map(|i| sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}

#[test]
fn the_compact_filter_agrees_with_seccompiler() {
    // Interesting argument values: the constants the rules compare with, their neighbours and
    // high-bit variants.
    let mut values: Vec<u64> = vec![0, 1, 2, 3, 5, 6, 8, 10, 17, 0xffff_ffff, u64::MAX, 1 << 32];
    for v in [
        libc::TIOCSTI,
        TIOCLINUX as u64,
        libc::TCGETS,
        u64::from(MSG_FASTOPEN),
        CLONE_NAMESPACE_FLAGS,
        libc::CLONE_NEWUSER as u64,
        libc::SIGCHLD as u64,
        0x20000,
        0x20008,
        0x40000,
        libc::SOCK_CLOEXEC as u64 | 1,
        libc::SOCK_NONBLOCK as u64 | 5,
        u64::from(O_CREAT),
        u64::from(O_TMPFILE_BIT),
        0o4755,
        0o2644,
        0o1777,
        0o755,
        u64::from(AT_EMPTY_PATH),
        u64::from(MFD_NOEXEC_SEAL),
        u64::from(MFD_EXEC),
        u64::from(FS_IOC_SETFLAGS),
        u64::from(FS_IOC_FSSETXATTR),
        libc::F_NOTIFY as u64,
        libc::F_SETLEASE as u64,
        libc::F_GETLEASE as u64,
    ] {
        values.extend([v, v | 1 << 32, v + 1]);
    }
    let mut checked = 0;
    for network in ALL_MODES {
        for ours in filters(network) {
            let reference = seccompiler_reference(network, ours.arch);
            let actions = table(network, ours.arch).unwrap();
            for nr in (0..=470u32).chain([0x4000_0000, 0x4000_0001, 0x4000_003b, u32::MAX]) {
                // Plain errno and notify actions are checked by their own tests; seccompiler
                // has one match action.
                let action = actions.get(&nr);
                if matches!(action, Some(Action::Errno(_) | Action::Notify)) {
                    continue;
                }
                // seccompiler's mismatch is EPERM; ours is the rule's own errno.
                let otherwise = match action {
                    Some(Action::RulesElse(_, errno)) => Some(ret_errno(i32::from(*errno))),
                    _ => None,
                };
                for (i, &a) in values.iter().enumerate() {
                    let b = values[(i * 7 + 3) % values.len()];
                    let c = values[(i * 13 + 5) % values.len()];
                    for args in [[a, b, c, 0, 0, 0], [b, a, 0, c, a, 0], [0, a, b, c, 0, 0]] {
                        let mut expected =
                            eval(&reference, ours.arch.audit, i64::from(nr as i32), args);
                        if let (Some(otherwise), true) = (otherwise, expected == ret_errno(EPERM)) {
                            expected = otherwise;
                        }
                        assert_eq!(
                            kernel_result(&ours, nr, args),
                            expected,
                            "syscall {nr} args {args:x?} ({network:?}, {})",
                            ours.arch.name
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 20_000);
}

#[test]
fn mode_changes_by_path_and_by_descriptor_do_nothing() {
    for p in &none() {
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
            assert_eq!(
                call(p, name, &[0, 0o755, 0o4755]),
                ret_errno(0),
                "syscall {name} ({})",
                p.arch.name
            );
        }
        // Times through a descriptor (futimens: NULL path) are real; by path they do nothing.
        for name in ["utimensat", "futimesat"] {
            assert_eq!(
                call(p, name, &[3, 0, 0, 0]),
                RET_ALLOW,
                "syscall {name} ({})",
                p.arch.name
            );
            assert_eq!(
                call(p, name, &[3, 0x7fff_0000, 0, 0]),
                ret_errno(0),
                "syscall {name} ({})",
                p.arch.name
            );
        }
    }
}

#[test]
fn no_file_is_created_with_special_bits() {
    for p in &none() {
        let creat = u64::from(O_CREAT) | 1;
        let tmpfile = u64::from(O_TMPFILE_BIT) | 0o200000 | 2;
        // openat(dirfd, path, flags, mode)
        assert_eq!(call(p, "openat", &[0, 0, creat, 0o755]), RET_ALLOW);
        assert_eq!(call(p, "openat", &[0, 0, creat, 0o4755]), ret_errno(EPERM));
        assert_eq!(
            call(p, "openat", &[0, 0, tmpfile, 0o2755]),
            ret_errno(EPERM)
        );
        assert_eq!(call(p, "openat", &[0, 0, tmpfile, 0o600]), RET_ALLOW);
        // Without O_CREAT the mode argument is garbage the kernel ignores.
        assert_eq!(call(p, "openat", &[0, 0, 0, 0o7777]), RET_ALLOW);
        // open(path, flags, mode), creat(path, mode), mknod(path, mode, dev), mknodat(fd, path, mode)
        assert_eq!(call(p, "open", &[0, creat, 0o4700]), ret_errno(EPERM));
        assert_eq!(call(p, "open", &[0, creat, 0o644]), RET_ALLOW);
        assert_eq!(call(p, "creat", &[0, 0o1777]), ret_errno(EPERM));
        assert_eq!(call(p, "creat", &[0, 0o644]), RET_ALLOW);
        assert_eq!(call(p, "mknod", &[0, 0o10644 | 0o4000]), ret_errno(EPERM));
        assert_eq!(call(p, "mknod", &[0, 0o10644]), RET_ALLOW);
        assert_eq!(
            call(p, "mknodat", &[0, 0, 0o10644 | 0o2000]),
            ret_errno(EPERM)
        );
        // openat2 hides its flags in memory: glibc falls back to openat on ENOSYS.
        assert_eq!(call(p, "openat2", &[]), ret_errno(libc::ENOSYS));
    }
}

#[test]
fn nothing_runs_from_memory() {
    for p in &none() {
        let sealed = u64::from(MFD_NOEXEC_SEAL) | 1;
        assert_eq!(call(p, "memfd_create", &[0, sealed]), RET_ALLOW);
        assert_eq!(call(p, "memfd_create", &[0, 1]), ret_errno(EPERM));
        assert_eq!(
            call(p, "memfd_create", &[0, sealed | u64::from(MFD_EXEC)]),
            ret_errno(EPERM)
        );
        assert_eq!(call(p, "execveat", &[3, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(
            call(p, "execveat", &[3, 0, 0, 0, u64::from(AT_EMPTY_PATH)]),
            ret_errno(EPERM)
        );
    }
}

#[test]
fn inode_flags_xattrs_and_watches_are_refused() {
    for p in &none() {
        for request in [FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR] {
            assert_eq!(call(p, "ioctl", &[3, u64::from(request)]), ret_errno(EPERM));
            assert_eq!(
                call(p, "ioctl", &[3, u64::from(request) | 1 << 32]),
                ret_errno(EPERM)
            );
        }
        assert_eq!(call(p, "ioctl", &[3, libc::TCGETS]), RET_ALLOW);
        for name in [
            "setxattr",
            "lsetxattr",
            "fsetxattr",
            "removexattr",
            "lremovexattr",
            "fremovexattr",
            "inotify_init",
            "inotify_init1",
            "inotify_add_watch",
        ] {
            assert_eq!(
                call(p, name, &[]),
                ret_errno(EPERM),
                "syscall {name} ({})",
                p.arch.name
            );
        }
    }
}

#[test]
fn watches_leases_flock_and_foreign_pidfds_are_refused() {
    let enosys = ret_errno(libc::ENOSYS);
    for p in none().iter().chain(&proxy()).chain(&supervised()) {
        for cmd in [libc::F_NOTIFY, libc::F_SETLEASE] {
            let cmd = cmd as u64;
            assert_eq!(call(p, "fcntl", &[3, cmd, 0]), ret_errno(EPERM), "{cmd}");
            // The kernel reads the command as an int: high bits change nothing.
            assert_eq!(call(p, "fcntl", &[3, cmd | 1 << 32]), ret_errno(EPERM));
        }
        for cmd in [
            libc::F_GETFL,
            libc::F_SETFL,
            libc::F_SETFD,
            libc::F_DUPFD_CLOEXEC,
            libc::F_SETLK,
            libc::F_SETLKW,
            libc::F_OFD_SETLK,
            libc::F_GETLEASE,
            libc::F_SETOWN,
        ] {
            assert_eq!(call(p, "fcntl", &[3, cmd as u64, 0]), RET_ALLOW, "{cmd}");
        }
        // flock goes to warden, which locks only files beneath the writable roots.
        for op in [libc::LOCK_EX, libc::LOCK_SH, libc::LOCK_UN] {
            assert_eq!(call(p, "flock", &[3, op as u64]), RET_USER_NOTIF);
        }
        assert_eq!(call(p, "pidfd_open", &[1, 0]), enosys);
        // Pidfds of the jail's own children (clone with CLONE_PIDFD) can still be signalled.
        assert_eq!(call(p, "pidfd_send_signal", &[3, 15, 0, 0]), RET_ALLOW);
        assert_eq!(call(p, "pidfd_getfd", &[3, 0, 0]), ret_errno(EPERM));
    }
}

/// Names libseccomp 2.5.4 (Debian 12) does not know yet, with their number on both tables.
const NEWER_THAN_LIBSECCOMP: &[(&str, u32)] = &[("mseal", 462)];

#[test]
fn every_number_is_the_one_libseccomp_knows() {
    let resolver = std::path::Path::new("/usr/bin/scmp_sys_resolver");
    if !resolver.exists() {
        eprintln!("skipped: scmp_sys_resolver (Debian package seccomp) is not installed");
        return;
    }
    let mut checked = 0;
    for arch in [&arch::X86_64, &arch::AARCH64] {
        for &(name, number) in arch.numbers() {
            let out = std::process::Command::new(resolver)
                .args(["-a", arch.name, name])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let theirs: i64 = text.trim().parse().unwrap_or(-1);
            if theirs < 0 {
                assert!(
                    NEWER_THAN_LIBSECCOMP.contains(&(name, number)),
                    "libseccomp knows no {name} on {}",
                    arch.name
                );
                continue;
            }
            assert_eq!(theirs, i64::from(number), "{name} on {}", arch.name);
            checked += 1;
        }
    }
    assert!(checked > 600, "{checked}");
}

#[test]
fn both_architectures_grant_the_same_names() {
    for network in ALL_MODES {
        let by_name = |arch: &'static Arch| -> BTreeMap<&'static str, Action> {
            let table = table(network, arch).unwrap();
            arch.numbers()
                .iter()
                .filter_map(|&(name, nr)| table.get(&nr).map(|action| (name, action.clone())))
                .collect()
        };
        let x86 = by_name(&arch::X86_64);
        let arm = by_name(&arch::AARCH64);
        for (name, action) in &x86 {
            match arm.get(name) {
                Some(theirs) => assert_eq!(theirs, action, "{name} differs ({network:?})"),
                None => assert!(
                    X86_64_ONLY.iter().any(|(only, _)| only == name),
                    "{name} is allowed on x86_64 only, and not listed in X86_64_ONLY"
                ),
            }
        }
        for name in arm.keys() {
            assert!(x86.contains_key(name), "{name} is allowed on aarch64 only");
        }
    }
    // The list of differences is exact: each name exists on x86_64 and not on aarch64.
    for (name, replacement) in X86_64_ONLY {
        assert!(arch::X86_64.number(name).is_some(), "{name}");
        assert!(arch::AARCH64.number(name).is_none(), "{name}");
        assert!(!replacement.is_empty());
    }
}

/// `stored.rs` as the table and the compiler make it today.
fn render_stored() -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "//! The seccomp programs `bpf.rs` compiles from `table.rs`, for both architectures and every\n\
         //! network mode, kept so that a jail's start takes its program from here instead of building\n\
         //! the table and compiling it again. `tests.rs` fails while this differs from what the table\n\
         //! compiles to; written by `WARDEN_WRITE_SECCOMP=1 cargo test --lib seccomp`. Do not edit.\n\
         \n\
         use super::arch::Arch;\n\
         use super::Network;\n\
         use libc::sock_filter;\n\
         \n\
         /// The stored program for `network` on `arch`, if there is one.\n\
         pub fn program(network: Network, arch: &Arch) -> Option<&'static [sock_filter]> {\n\
         \x20   Some(match (arch.name, network) {\n",
    );
    let programs: Vec<(String, &Arch, Network)> = [&arch::X86_64, &arch::AARCH64]
        .into_iter()
        .flat_map(|arch| ALL_MODES.map(|network| (arch, network)))
        .map(|(arch, network)| {
            let name = format!("{}_{:?}", arch.name, network).to_uppercase();
            (name, arch, network)
        })
        .collect();
    for (name, arch, network) in &programs {
        let _ = writeln!(
            out,
            "        (\"{}\", Network::{network:?}) => {name},",
            arch.name
        );
    }
    out.push_str(
        "        _ => return None,\n    })\n}\n\n\
         const fn i(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {\n\
         \x20   sock_filter { code, jt, jf, k }\n}\n",
    );
    for (name, arch, network) in &programs {
        let program = SeccompProgram::for_arch(*network, arch).unwrap();
        let _ = write!(out, "\n#[rustfmt::skip]\nconst {name}: &[sock_filter] = &[");
        for (n, ins) in program.instructions().iter().enumerate() {
            if n % 4 == 0 {
                out.push_str("\n   ");
            }
            let _ = write!(
                out,
                " i({:#04x}, {}, {}, {:#x}),",
                ins.code, ins.jt, ins.jf, ins.k
            );
        }
        out.push_str("\n];\n");
    }
    out
}

#[test]
fn the_stored_programs_are_what_the_table_compiles_to() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sandbox/host/seccomp/stored.rs");
    let expected = render_stored();
    let actual = std::fs::read_to_string(&path).unwrap();
    if actual != expected {
        if std::env::var_os("WARDEN_WRITE_SECCOMP").is_some() {
            std::fs::write(&path, &expected).unwrap();
        } else {
            panic!(
                "{} is not what the table compiles to: run WARDEN_WRITE_SECCOMP=1 cargo test --lib seccomp",
                path.display()
            );
        }
    }
    // And the jail takes the stored program for the architecture it runs on.
    for network in ALL_MODES {
        let native = Arch::native().unwrap();
        let parts = |p: SeccompProgram| -> Vec<(u16, u8, u8, u32)> {
            p.instructions()
                .iter()
                .map(|i| (i.code, i.jt, i.jf, i.k))
                .collect()
        };
        assert_eq!(
            parts(SeccompProgram::new(network).unwrap()),
            parts(SeccompProgram::for_arch(network, native).unwrap()),
        );
    }
}
