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
//! - with an egress proxy: `connect` allowed, `socket` only AF_INET TCP (AF_UNIX
//!   sockets then cannot be created at all, so the allowed `connect` cannot reach docker.sock);
//!   Landlock limits TCP connects to the proxy's port.
//! - supervised (no namespace could be made): `socket` only TCP over v4/v6, `connect` handed to
//!   warden (`connect.rs`), which connects its own copy of the socket to the proxy or refuses;
//!   `bind` and `listen` refused (the jail shares the host's ports).
//!
//! Argument checks: `ioctl` without TIOCSTI / TIOCLINUX, compared as 32 bits (a 64-bit compare
//! is bypassed by `TIOCSTI | 1 << 32`); `clone` without namespace flags; `kill(-1)` refused;
//! calls that can act on other processes of the same uid (`prlimit64`, `setpriority`,
//! `sched_set*`, `ioprio_set`) only on the caller itself. The jail keeps warden's uid, so for
//! those the uid check in the kernel is no protection.
//!
//! What reaches outside without changing anything (see `table::outside_reach`): `fcntl`
//! without `F_NOTIFY` and `F_SETLEASE`; `pidfd_open` fails with ENOSYS; `flock` is handed to
//! warden through the filter's listener (`flock.rs`), which locks only files beneath the
//! writable roots.
//!
//! `clone3` fails with ENOSYS (not EPERM) so glibc falls back to `clone`, whose flags the filter
//! can see (clone3 passes them in memory, out of a filter's reach).
//!
//! The table (`table.rs`) is written with system call names and resolved per architecture
//! (`arch.rs`: x86_64 and aarch64, both checked against libseccomp's numbers by a test), then
//! compiled by `bpf.rs` into one compact program (a binary search over the numbers) and
//! installed by each child. The compiled programs of both architectures are stored in
//! `stored.rs`, so a jail's start takes its program from there instead of building the table
//! and compiling it again; a test fails while the stored programs differ from what the table
//! compiles to (`WARDEN_WRITE_SECCOMP=1 cargo test --lib seccomp` rewrites them). The architecture is checked: any other
//! (i386 or x32 calls on x86_64, 32-bit ARM on aarch64) is killed; x32 numbers (bit 30 set) lie
//! above every listed number and get the default EPERM — keep it an allow-list. Elsewhere the
//! jail refuses to start.

mod arch;
mod bpf;
mod stored;
mod table;

pub use arch::Arch;
use bpf::Action;
#[cfg(test)]
use bpf::Rule;
use table::table;

use crate::sandbox::SandboxError;
use std::borrow::Cow;
use std::os::fd::RawFd;

/// Whether the jail may reach an egress proxy over TCP, and how that is kept to the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    None,
    /// The jail's own network namespace, where only the proxy listens: `connect` allowed.
    EgressProxy,
    /// The host's network, with every `connect` answered by warden (`connect.rs`).
    Supervised,
}

const EPERM: Action = Action::Errno(libc::EPERM as u16);

/// The compiled filter.
#[derive(Debug)]
pub struct SeccompProgram {
    program: Cow<'static, [libc::sock_filter]>,
}

impl SeccompProgram {
    /// The filter for the architecture warden runs on (parent side, once per `HostSandbox`):
    /// the stored program, compiled when this build has none.
    pub fn new(network: Network) -> Result<SeccompProgram, SandboxError> {
        let arch = Arch::native().ok_or_else(|| {
            SandboxError::Setup(format!(
                "the host jail's seccomp allow-list exists for x86_64 and aarch64, not {}",
                std::env::consts::ARCH
            ))
        })?;
        match stored::program(network, arch) {
            Some(program) => Ok(SeccompProgram {
                program: Cow::Borrowed(program),
            }),
            None => SeccompProgram::for_arch(network, arch),
        }
    }

    /// Compile the filter for `arch` (any host can compile either; tests run both).
    pub fn for_arch(network: Network, arch: &Arch) -> Result<SeccompProgram, SandboxError> {
        let fail =
            |e: String| SandboxError::Setup(format!("compiling the seccomp filter failed: {e}"));
        let table = table(network, arch).map_err(fail)?;
        let program = bpf::compile(&table, &EPERM, arch.audit).map_err(fail)?;
        Ok(SeccompProgram {
            program: Cow::Owned(program),
        })
    }

    /// Child side: install the filter (needs `no_new_privs`) and return its listener, the
    /// descriptor through which warden answers the calls the filter hands over (`flock`,
    /// `connect` when supervised).
    /// `None` when a filter above this one already has a listener (warden itself runs under a
    /// supervisor): the kernel allows one per chain, and without it those calls fail with
    /// ENOSYS. Async-signal-safe.
    ///
    /// # Safety
    /// Call only in the jail's child; afterwards only handing over the listener and `execve`
    /// should follow.
    pub unsafe fn install_in_child(&self) -> Result<Option<RawFd>, i32> {
        let fprog = libc::sock_fprog {
            len: self.program.len() as libc::c_ushort,
            filter: self.program.as_ptr() as *mut libc::sock_filter,
        };
        let install = |flags: libc::c_ulong| {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &fprog as *const libc::sock_fprog,
            )
        };
        let listener = install(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER);
        if listener >= 0 {
            return Ok(Some(listener as RawFd));
        }
        let e = super::fds::errno();
        if e != libc::EBUSY {
            return Err(e);
        }
        if install(0) != 0 {
            return Err(super::fds::errno());
        }
        Ok(None)
    }

    #[cfg(test)]
    fn instructions(&self) -> &[libc::sock_filter] {
        &self.program
    }
}

#[cfg(test)]
mod tests;
