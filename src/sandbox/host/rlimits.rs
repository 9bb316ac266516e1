//! Resource limits of a jailed process, from [`Limits`]: processes, address space, file size,
//! CPU time, open files, and no core dumps (a core file would copy memory into the workspace).
//!
//! Soft and hard limits are equal so the jail cannot raise them, except CPU time, whose hard
//! limit sits a little above the soft one: the soft limit sends SIGXCPU, the hard one SIGKILL.
//!
//! `RLIMIT_NPROC` counts every task of the real user id, and the kernel ignores it for root. As
//! root the pids cgroup (`cgroup.rs`) does the counting; as another user the limit is set to the
//! user's current task count plus `max_processes`, so a busy desktop session does not leave the
//! jail unable to fork at all.

use crate::sandbox::Limits;
use std::os::unix::fs::MetadataExt;

/// Extra CPU seconds between SIGXCPU (soft) and SIGKILL (hard).
const CPU_GRACE_SECS: u64 = 5;

#[derive(Clone, Debug, PartialEq)]
pub struct RlimitPlan {
    entries: [(libc::__rlimit_resource_t, libc::rlimit); 6],
}

impl RlimitPlan {
    /// `nproc_baseline`: tasks the real user already runs (0 for root, see module docs).
    pub fn new(limits: &Limits, nproc_baseline: u64) -> RlimitPlan {
        let both = |v: u64| libc::rlimit {
            rlim_cur: v,
            rlim_max: v,
        };
        RlimitPlan {
            entries: [
                (
                    libc::RLIMIT_NPROC,
                    both(limits.max_processes.saturating_add(nproc_baseline)),
                ),
                (libc::RLIMIT_AS, both(limits.memory_bytes)),
                (libc::RLIMIT_FSIZE, both(limits.file_size_bytes)),
                (
                    libc::RLIMIT_CPU,
                    libc::rlimit {
                        rlim_cur: limits.cpu_seconds,
                        rlim_max: limits.cpu_seconds.saturating_add(CPU_GRACE_SECS),
                    },
                ),
                (libc::RLIMIT_NOFILE, both(limits.open_files)),
                (libc::RLIMIT_CORE, both(0)),
            ],
        }
    }

    /// (resource, soft, hard).
    #[cfg(test)]
    pub fn entries(&self) -> impl Iterator<Item = (libc::__rlimit_resource_t, u64, u64)> + '_ {
        self.entries
            .iter()
            .map(|(r, l)| (*r, l.rlim_cur, l.rlim_max))
    }

    /// Child side: set every limit. Async-signal-safe. Returns the failing errno.
    ///
    /// # Safety
    /// Call only in the jail's child before `execve`.
    pub unsafe fn apply_in_child(&self) -> Result<(), i32> {
        for (resource, limit) in &self.entries {
            if libc::setrlimit(*resource, limit) != 0 {
                return Err(super::fds::errno());
            }
        }
        Ok(())
    }
}

/// Tasks (processes and threads) currently owned by `uid`, counted from `/proc` (processes
/// whose effective uid differs, such as running setuid programs, are not counted).
pub fn tasks_of_user(uid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0u64;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        // /proc/<pid> belongs to the process's effective uid: skip other users without reading.
        if entry.metadata().map(|m| m.uid() != uid).unwrap_or(true) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if field("Uid:") == Some(u64::from(uid)) {
            total += field("Threads:").unwrap_or(1);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_follows_limits_and_disables_core_dumps() {
        let limits = Limits {
            max_processes: 64,
            memory_bytes: 1 << 30,
            file_size_bytes: 1 << 20,
            cpu_seconds: 10,
            open_files: 256,
            cpus: 1.0,
        };
        let plan = RlimitPlan::new(&limits, 100);
        let got: Vec<_> = plan.entries().collect();
        assert_eq!(
            got,
            vec![
                (libc::RLIMIT_NPROC, 164, 164),
                (libc::RLIMIT_AS, 1 << 30, 1 << 30),
                (libc::RLIMIT_FSIZE, 1 << 20, 1 << 20),
                (libc::RLIMIT_CPU, 10, 15),
                (libc::RLIMIT_NOFILE, 256, 256),
                (libc::RLIMIT_CORE, 0, 0),
            ]
        );
    }

    #[test]
    fn this_process_is_counted_for_its_user() {
        let uid = nix::unistd::getuid().as_raw();
        assert!(tasks_of_user(uid) >= 1);
    }
}
