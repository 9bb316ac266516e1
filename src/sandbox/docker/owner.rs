//! Which warden process owns a container, written into its labels, so that a later warden can
//! tell its own crashed predecessors' containers from those of a warden still running.
//!
//! A pid alone is not enough (pids are reused, and wardens in other pid namespaces share the
//! daemon), so the labels also carry the process start time, the kernel boot id and the pid
//! namespace.

use std::collections::HashMap;

/// Every container warden creates carries `warden.managed=true`.
pub const MANAGED: &str = "warden.managed";
pub const SESSION: &str = "warden.session";
const PID: &str = "warden.owner_pid";
const START: &str = "warden.owner_start";
const BOOT: &str = "warden.owner_boot";
const PIDNS: &str = "warden.owner_pidns";

/// One warden process, as far as labels can identify it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    /// Start time in clock ticks after boot (`/proc/PID/stat` field 22).
    pub start: u64,
    pub boot_id: String,
    /// The pid namespace (`/proc/self/ns/pid` link text) the pid is meaningful in.
    pub pidns: String,
}

/// What a later warden concludes about a labelled container's owner.
#[derive(Debug, PartialEq, Eq)]
pub enum Liveness {
    /// The owner runs (or may run): leave the container alone.
    Alive,
    /// The owner process is gone.
    Dead,
    /// The machine has rebooted since; the owner is gone, but the container may belong to a
    /// warden on another kernel sharing this daemon, so only stopped containers are removed.
    OtherBoot,
    /// Labels missing or from another pid namespace: nothing can be concluded.
    Unknown,
}

impl Owner {
    /// This process.
    pub fn current() -> std::io::Result<Owner> {
        let pid = std::process::id();
        Ok(Owner {
            pid,
            start: start_time(pid)?,
            boot_id: boot_id()?,
            pidns: pid_namespace()?,
        })
    }

    /// The labels a container created by this owner carries.
    pub fn labels(&self, session: &str) -> HashMap<String, String> {
        HashMap::from([
            (MANAGED.to_string(), "true".to_string()),
            (SESSION.to_string(), session.to_string()),
            (PID.to_string(), self.pid.to_string()),
            (START.to_string(), self.start.to_string()),
            (BOOT.to_string(), self.boot_id.clone()),
            (PIDNS.to_string(), self.pidns.clone()),
        ])
    }

    /// Whether the owner recorded in `labels` is still running, judged from this process.
    pub fn judge(&self, labels: &HashMap<String, String>) -> Liveness {
        let (Some(pid), Some(start), Some(boot), Some(pidns)) = (
            labels.get(PID).and_then(|p| p.parse::<u32>().ok()),
            labels.get(START).and_then(|s| s.parse::<u64>().ok()),
            labels.get(BOOT),
            labels.get(PIDNS),
        ) else {
            return Liveness::Unknown;
        };
        if *boot != self.boot_id {
            return Liveness::OtherBoot;
        }
        if *pidns != self.pidns {
            return Liveness::Unknown;
        }
        match start_time(pid) {
            Ok(now) if now == start => Liveness::Alive,
            Ok(_) => Liveness::Dead,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Liveness::Dead,
            Err(_) => Liveness::Unknown,
        }
    }
}

/// Start time of `pid` in clock ticks after boot.
fn start_time(pid: u32) -> std::io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may contain spaces and parentheses: count after the last ')'.
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    after_name
        .split_whitespace()
        .nth(19)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("/proc/{pid}/stat has no start time"),
            )
        })
}

fn boot_id() -> std::io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?
        .trim()
        .to_string())
}

fn pid_namespace() -> std::io::Result<String> {
    Ok(std::fs::read_link("/proc/self/ns/pid")?
        .to_string_lossy()
        .into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_dead() {
        let me = Owner::current().unwrap();
        let mut labels = me.labels("s");
        assert_eq!(me.judge(&labels), Liveness::Alive);
        labels.insert(START.into(), (me.start + 1).to_string());
        assert_eq!(me.judge(&labels), Liveness::Dead);
    }

    #[test]
    fn a_vanished_pid_is_dead() {
        let me = Owner::current().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let mut labels = me.labels("s");
        labels.insert(PID.into(), pid.to_string());
        assert_eq!(me.judge(&labels), Liveness::Dead);
    }

    #[test]
    fn other_boots_and_namespaces_are_not_judged_dead() {
        let me = Owner::current().unwrap();
        let mut labels = me.labels("s");
        labels.insert(BOOT.into(), "another-boot".into());
        assert_eq!(me.judge(&labels), Liveness::OtherBoot);
        let mut labels = me.labels("s");
        labels.insert(PIDNS.into(), "pid:[1]".into());
        assert_eq!(me.judge(&labels), Liveness::Unknown);
        labels.remove(PID);
        assert_eq!(me.judge(&labels), Liveness::Unknown);
    }
}
