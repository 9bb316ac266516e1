//! Capabilities: a jailed process has none, even when warden runs as root.
//!
//! The jail keeps warden's uid (workspace files keep their owner) but loses every capability,
//! in this order, because each step needs CAP_SETPCAP until the last one drops it:
//!
//! 1. securebits `NOROOT | NO_SETUID_FIXUP | NO_CAP_AMBIENT_RAISE`, each with its `_LOCKED` bit,
//!    and `KEEP_CAPS_LOCKED`: uid 0 no longer gains capabilities on `execve`, and nothing can undo
//!    that;
//! 2. `PR_CAPBSET_DROP` for every capability up to `cap_last_cap`: even a setuid-root binary
//!    cannot get one back;
//! 3. `PR_CAP_AMBIENT_CLEAR_ALL`;
//! 4. `capset` with empty effective, permitted and inheritable sets.
//!
//! A non-root warden without CAP_SETPCAP skips 1-2 (it cannot do them, and `no_new_privs`
//! already stops setuid binaries) and still clears the ambient and ordinary sets.

use super::fds::errno;
use crate::sandbox::SandboxError;

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;

/// Securebits that make uid 0 an ordinary user for capability purposes, locked.
pub const JAIL_SECUREBITS: libc::c_int = libc::SECBIT_NOROOT
    | libc::SECBIT_NOROOT_LOCKED
    | libc::SECBIT_NO_SETUID_FIXUP
    | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
    | libc::SECBIT_KEEP_CAPS_LOCKED
    | libc::SECBIT_NO_CAP_AMBIENT_RAISE
    | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapabilityPlan {
    /// Whether warden holds CAP_SETPCAP (root): then securebits and the bounding set are set.
    pub lock_securebits_and_bounding: bool,
    /// Highest capability number of this kernel.
    pub last_cap: u32,
}

impl CapabilityPlan {
    /// Inspect warden's own capabilities (parent side).
    pub fn for_current_process() -> Result<CapabilityPlan, SandboxError> {
        let last_cap = super::kernel::cap_last_cap()
            .map_err(|e| SandboxError::Setup(format!("cannot read cap_last_cap: {e}")))?;
        let effective =
            effective_caps().map_err(|e| SandboxError::Setup(format!("capget failed: {e}")))?;
        Ok(CapabilityPlan {
            lock_securebits_and_bounding: effective & (1u64 << CAP_SETPCAP) != 0,
            last_cap,
        })
    }

    /// Child side: drop everything. Async-signal-safe. Returns the failing errno.
    ///
    /// # Safety
    /// Call only in the jail's child before `execve`.
    pub unsafe fn drop_all_in_child(&self) -> Result<(), i32> {
        if self.lock_securebits_and_bounding {
            if libc::prctl(
                libc::PR_SET_SECUREBITS,
                JAIL_SECUREBITS as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(errno());
            }
            let mut cap = 0;
            while cap <= self.last_cap {
                // EINVAL: a capability this kernel does not know; nothing to drop.
                if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0
                    && errno() != libc::EINVAL
                {
                    return Err(errno());
                }
                cap += 1;
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
            && errno() != libc::EINVAL
        {
            return Err(errno());
        }
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            return Err(errno());
        }
        Ok(())
    }
}

/// The effective capability set of this thread as a bit mask.
pub fn effective_caps() -> std::io::Result<u64> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: header and a two-element data array, as the v3 ABI requires.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u64::from(data[0].effective) | (u64::from(data[1].effective) << 32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn securebits_lock_every_bit_they_set() {
        // Each set bit's lock bit (the next one up) is set as well, and KEEP_CAPS itself is off.
        for bit in [
            libc::SECBIT_NOROOT,
            libc::SECBIT_NO_SETUID_FIXUP,
            libc::SECBIT_NO_CAP_AMBIENT_RAISE,
        ] {
            assert_ne!(JAIL_SECUREBITS & bit, 0);
            assert_ne!(JAIL_SECUREBITS & (bit << 1), 0);
        }
        assert_eq!(JAIL_SECUREBITS & libc::SECBIT_KEEP_CAPS, 0);
        assert_ne!(JAIL_SECUREBITS & libc::SECBIT_KEEP_CAPS_LOCKED, 0);
    }

    #[test]
    fn child_ends_with_no_capabilities() {
        let plan = CapabilityPlan::for_current_process().unwrap();
        assert_eq!(
            plan.lock_securebits_and_bounding,
            effective_caps().unwrap() & (1 << CAP_SETPCAP) != 0
        );
        // SAFETY: the child makes raw syscalls only and _exits.
        match unsafe { libc::fork() } {
            0 => unsafe {
                let ok = plan.drop_all_in_child().is_ok()
                    && effective_caps().map(|c| c == 0).unwrap_or(false)
                    && (!plan.lock_securebits_and_bounding
                        || libc::prctl(libc::PR_CAPBSET_READ, 0, 0, 0, 0) == 0);
                libc::_exit(if ok { 0 } else { 1 });
            },
            pid => {
                let mut status = 0;
                unsafe { libc::waitpid(pid, &mut status, 0) };
                assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
            }
        }
    }
}
