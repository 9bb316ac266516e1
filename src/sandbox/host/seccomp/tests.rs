//! Unit tests of the seccomp rule table: the compiled BPF program is run through a small
//! classic-BPF interpreter against `struct seccomp_data`, so every allow and deny decision is
//! checked without forking, and compared with what seccompiler compiles from the same table.
//! The integration tests (`tests/jail_*.rs`) check the same things against the real kernel.

use super::*;
use libc::sock_filter;

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

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

/// The filter's verdict for a native x86_64 call.
fn kernel_result(p: &SeccompProgram, nr: i64, args: [u64; 6]) -> u32 {
    eval(p.instructions(), AUDIT_ARCH_X86_64, nr, args)
}

fn none() -> SeccompProgram {
    SeccompProgram::new(Network::None).unwrap()
}

fn proxy() -> SeccompProgram {
    SeccompProgram::new(Network::EgressProxy).unwrap()
}

fn call(p: &SeccompProgram, nr: i64, args: &[u64]) -> u32 {
    let mut full = [0u64; 6];
    full[..args.len()].copy_from_slice(args);
    kernel_result(p, nr, full)
}

const EPERM: i32 = libc::EPERM;

#[test]
fn ordinary_calls_are_allowed() {
    let p = none();
    for nr in [
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_openat,
        libc::SYS_execve,
        libc::SYS_mmap,
        libc::SYS_wait4,
        libc::SYS_fork,
        libc::SYS_exit_group,
        libc::SYS_rt_sigaction,
        libc::SYS_getdents64,
    ] {
        assert_eq!(call(&p, nr, &[]), RET_ALLOW, "syscall {nr}");
    }
}

#[test]
fn dangerous_calls_fail_with_eperm() {
    let p = none();
    for nr in [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_userfaultfd,
        libc::SYS_setsid,
        libc::SYS_setpgid,
        libc::SYS_connect,
        libc::SYS_shmget,
        libc::SYS_msgget,
        libc::SYS_semget,
        libc::SYS_mq_open,
        libc::SYS_chroot,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_modify_ldt,
        libc::SYS_reboot,
        libc::SYS_syslog,
    ] {
        assert_eq!(call(&p, nr, &[]), ret_errno(EPERM), "syscall {nr}");
    }
}

#[test]
fn clone3_fails_with_enosys_so_glibc_falls_back() {
    assert_eq!(
        call(&none(), libc::SYS_clone3, &[]),
        ret_errno(libc::ENOSYS)
    );
    assert_eq!(
        call(&proxy(), libc::SYS_clone3, &[]),
        ret_errno(libc::ENOSYS)
    );
}

#[test]
fn clone_with_namespace_flags_is_denied() {
    let p = none();
    let fork_flags = (libc::CLONE_CHILD_CLEARTID | libc::CLONE_CHILD_SETTID | libc::SIGCHLD) as u64;
    let thread_flags = (libc::CLONE_VM
        | libc::CLONE_FS
        | libc::CLONE_FILES
        | libc::CLONE_SIGHAND
        | libc::CLONE_THREAD
        | libc::CLONE_SYSVSEM
        | libc::CLONE_SETTLS
        | libc::CLONE_PARENT_SETTID
        | libc::CLONE_CHILD_CLEARTID) as u64;
    assert_eq!(call(&p, libc::SYS_clone, &[fork_flags]), RET_ALLOW);
    assert_eq!(call(&p, libc::SYS_clone, &[thread_flags]), RET_ALLOW);
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
            call(&p, libc::SYS_clone, &[fork_flags | ns as u64]),
            ret_errno(EPERM),
            "flag {ns:#x}"
        );
    }
}

#[test]
fn tiocsti_and_tioclinux_are_denied_even_with_high_bits() {
    let p = none();
    let tiocsti = libc::TIOCSTI;
    assert_eq!(call(&p, libc::SYS_ioctl, &[0, tiocsti]), ret_errno(EPERM));
    assert_eq!(
        call(&p, libc::SYS_ioctl, &[0, tiocsti | 1 << 32]),
        ret_errno(EPERM)
    );
    assert_eq!(
        call(&p, libc::SYS_ioctl, &[0, u64::from(TIOCLINUX)]),
        ret_errno(EPERM)
    );
    assert_eq!(call(&p, libc::SYS_ioctl, &[1, libc::TCGETS]), RET_ALLOW);
    assert_eq!(call(&p, libc::SYS_ioctl, &[1, libc::FIONREAD]), RET_ALLOW);
}

#[test]
fn only_unix_stream_sockets_without_a_proxy() {
    let p = none();
    let unix = libc::AF_UNIX as u64;
    let stream = libc::SOCK_STREAM as u64;
    let cloexec = libc::SOCK_CLOEXEC as u64;
    assert_eq!(
        call(&p, libc::SYS_socket, &[unix, stream | cloexec, 0]),
        RET_ALLOW
    );
    assert_eq!(
        call(
            &p,
            libc::SYS_socket,
            &[unix, libc::SOCK_SEQPACKET as u64, 0]
        ),
        RET_ALLOW
    );
    assert_eq!(
        call(&p, libc::SYS_socket, &[unix, libc::SOCK_DGRAM as u64, 0]),
        ret_errno(EPERM)
    );
    for family in [
        libc::AF_INET,
        libc::AF_INET6,
        libc::AF_NETLINK,
        libc::AF_PACKET,
    ] {
        assert_eq!(
            call(&p, libc::SYS_socket, &[family as u64, stream, 0]),
            ret_errno(EPERM),
            "family {family}"
        );
    }
    assert_eq!(
        call(&p, libc::SYS_socketpair, &[unix, stream, 0]),
        RET_ALLOW
    );
    assert_eq!(
        call(
            &p,
            libc::SYS_socketpair,
            &[unix, libc::SOCK_DGRAM as u64, 0]
        ),
        ret_errno(EPERM)
    );
    assert_eq!(
        call(&p, libc::SYS_connect, &[3, 0x1000, 16]),
        ret_errno(EPERM)
    );
}

#[test]
fn proxy_mode_allows_tcp_connect_but_no_unix_sockets() {
    let p = proxy();
    let stream = libc::SOCK_STREAM as u64;
    for family in [libc::AF_INET as u64, libc::AF_INET6 as u64] {
        assert_eq!(call(&p, libc::SYS_socket, &[family, stream, 0]), RET_ALLOW);
        assert_eq!(
            call(
                &p,
                libc::SYS_socket,
                &[family, stream, libc::IPPROTO_TCP as u64]
            ),
            RET_ALLOW
        );
        // UDP, and SCTP/MPTCP, which Landlock's TCP rules would not cover.
        assert_eq!(
            call(&p, libc::SYS_socket, &[family, libc::SOCK_DGRAM as u64, 0]),
            ret_errno(EPERM)
        );
        assert_eq!(
            call(&p, libc::SYS_socket, &[family, stream, 132]),
            ret_errno(EPERM)
        );
        assert_eq!(
            call(&p, libc::SYS_socket, &[family, stream, 262]),
            ret_errno(EPERM)
        );
    }
    assert_eq!(
        call(&p, libc::SYS_socket, &[libc::AF_UNIX as u64, stream, 0]),
        ret_errno(EPERM)
    );
    assert_eq!(call(&p, libc::SYS_connect, &[3, 0x1000, 16]), RET_ALLOW);
}

#[test]
fn sending_to_an_address_is_denied() {
    let p = none();
    assert_eq!(
        call(&p, libc::SYS_sendto, &[3, 0x1000, 10, 0, 0, 0]),
        RET_ALLOW
    );
    assert_eq!(
        call(&p, libc::SYS_sendto, &[3, 0x1000, 10, 0, 0x2000, 16]),
        ret_errno(EPERM)
    );
    assert_eq!(call(&p, libc::SYS_sendmsg, &[3, 0x1000, 0]), RET_ALLOW);
    assert_eq!(
        call(&p, libc::SYS_sendmsg, &[3, 0x1000, u64::from(MSG_FASTOPEN)]),
        ret_errno(EPERM)
    );
    assert_eq!(
        call(
            &p,
            libc::SYS_sendmmsg,
            &[3, 0x1000, 1, u64::from(MSG_FASTOPEN)]
        ),
        ret_errno(EPERM)
    );
}

#[test]
fn calls_on_other_processes_are_limited_to_self() {
    let p = none();
    assert_eq!(call(&p, libc::SYS_kill, &[1234, 9]), RET_ALLOW);
    assert_eq!(call(&p, libc::SYS_kill, &[u64::MAX, 9]), ret_errno(EPERM));
    assert_eq!(call(&p, libc::SYS_prlimit64, &[0, 7, 0, 0x1000]), RET_ALLOW);
    assert_eq!(
        call(&p, libc::SYS_prlimit64, &[1, 7, 0x1000, 0]),
        ret_errno(EPERM)
    );
    assert_eq!(call(&p, libc::SYS_setpriority, &[0, 0, 10]), RET_ALLOW);
    assert_eq!(
        call(&p, libc::SYS_setpriority, &[libc::PRIO_USER as u64, 0, 19]),
        ret_errno(EPERM)
    );
    assert_eq!(
        call(&p, libc::SYS_setpriority, &[0, 1, 19]),
        ret_errno(EPERM)
    );
    assert_eq!(
        call(&p, libc::SYS_sched_setaffinity, &[0, 8, 0x1000]),
        RET_ALLOW
    );
    assert_eq!(
        call(&p, libc::SYS_sched_setaffinity, &[1, 8, 0x1000]),
        ret_errno(EPERM)
    );
}

#[test]
fn personality_only_harmless_values() {
    let p = none();
    assert_eq!(call(&p, libc::SYS_personality, &[0xffff_ffff]), RET_ALLOW);
    assert_eq!(call(&p, libc::SYS_personality, &[0]), RET_ALLOW);
    // ADDR_NO_RANDOMIZE would switch off ASLR for what follows.
    assert_eq!(
        call(&p, libc::SYS_personality, &[0x0040000]),
        ret_errno(EPERM)
    );
}

#[test]
fn x32_and_foreign_architectures_never_reach_the_allow_list() {
    let p = none();
    const X32_BIT: i64 = 0x4000_0000;
    // read, write and execve through the x32 ABI: default deny.
    for nr in [0, 1, 59] {
        assert_eq!(
            eval(p.instructions(), AUDIT_ARCH_X86_64, X32_BIT | nr, [0; 6]),
            ret_errno(EPERM)
        );
    }
    // A 32-bit int 0x80 call is killed by the architecture check.
    assert_eq!(
        eval(p.instructions(), AUDIT_ARCH_I386, 3, [0; 6]),
        RET_KILL_PROCESS
    );
}

#[test]
fn the_program_stays_small() {
    // The kernel emulates and JIT-compiles the filter at every spawn; keep it compact.
    for p in [none(), proxy()] {
        assert!(
            p.instructions().len() < 700,
            "{} instructions",
            p.instructions().len()
        );
    }
}

/// seccompiler's program for the same table (clone3 aside: seccompiler has one match action
/// per filter), as a reference implementation of the argument comparisons.
fn seccompiler_reference(network: Network) -> Vec<seccompiler::sock_filter> {
    use seccompiler::{SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op};
    let mut rules = BTreeMap::new();
    for (nr, action) in table(network) {
        let chain = match action {
            Action::Allow => Vec::new(),
            Action::Errno(_) => continue,
            Action::Rules(rs) => rs
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
    let filter = seccompiler::SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        seccompiler::TargetArch::x86_64,
    )
    .unwrap();
    filter.try_into().unwrap()
}

/// Run seccompiler's program through the same interpreter.
fn eval_reference(prog: &[seccompiler::sock_filter], nr: i64, args: [u64; 6]) -> u32 {
    let converted: Vec<sock_filter> = prog
        .iter()
        .map(|i| sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    eval(&converted, AUDIT_ARCH_X86_64, nr, args)
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
    ] {
        values.extend([v, v | 1 << 32, v + 1]);
    }
    let mut checked = 0;
    for network in [Network::None, Network::EgressProxy] {
        let ours = SeccompProgram::new(network).unwrap();
        let reference = seccompiler_reference(network);
        for nr in (0..=470i64).chain([0x4000_0000, 0x4000_0001, 0x4000_003b, -1]) {
            if nr == libc::SYS_clone3 {
                continue;
            }
            for (i, &a) in values.iter().enumerate() {
                let b = values[(i * 7 + 3) % values.len()];
                let c = values[(i * 13 + 5) % values.len()];
                for args in [[a, b, c, 0, 0, 0], [b, a, 0, c, a, 0], [0, a, b, c, 0, 0]] {
                    assert_eq!(
                        kernel_result(&ours, nr, args),
                        eval_reference(&reference, nr, args),
                        "syscall {nr} args {args:x?} ({network:?})"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 10_000);
}
