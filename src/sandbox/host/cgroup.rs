//! A pids cgroup per jailed process: the process-count limit that also holds for root (the
//! kernel does not enforce `RLIMIT_NPROC` for uid 0), and a list of every descendant for
//! `kill()`, whatever process group it ended up in.
//!
//! Layout: `<pids hierarchy>/<warden's own cgroup>/warden/<warden pid>-<n>/` with `pids.max` set
//! to `Limits::max_processes`. The parent creates the directory and opens its join file
//! (write-only, close-on-exec); the child writes "0" to it, which moves itself, before
//! anything else runs. After the process group is dead the directory is removed.
//!
//! The join file is `tasks` on cgroup v1, not `cgroup.procs`: moving a whole thread group
//! write-locks a global percpu rwsem, which waits for an RCU grace period (~10 ms here) whenever
//! no other migration happened just before — every jailed command would pay it. Moving only the
//! calling thread skips that lock, and the child is single-threaded at that point, so it moves
//! the whole process. cgroup v2 (`cgroup.procs`) has no such file outside threaded subtrees.
//!
//! cgroup v1 (a `pids` hierarchy) is used when mounted; cgroup v2 only where the pids controller
//! is delegated to warden's cgroup (`cgroup.subtree_control` lists `pids`). Without either, a
//! root warden still runs but records why (`warden doctor` shows it).

use super::fds::errno;
use crate::sandbox::SandboxError;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

/// The directory under which warden creates one cgroup per jailed process.
#[derive(Debug)]
pub struct PidsCgroupRoot {
    pub version: CgroupVersion,
    pub dir: PathBuf,
}

/// Numbers the per-process cgroups of this warden process (shared by all its sandboxes).
static NEXT_CGROUP: AtomicU64 = AtomicU64::new(0);

impl PidsCgroupRoot {
    /// Find a pids hierarchy warden can write to and prepare its `warden` directory.
    pub fn detect() -> Result<PidsCgroupRoot, String> {
        let own = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        // The usual v1 mount point first; the mount table only when it is elsewhere.
        let usual = v1_pids_at_usual_place(&own);
        let mounts = match usual {
            Some(_) => String::new(),
            None => fs::read_to_string("/proc/self/mountinfo")
                .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?,
        };

        let (version, base) = if let Some(base) = usual.or_else(|| v1_pids_dir(&own, &mounts)) {
            (CgroupVersion::V1, base)
        } else if let Some(base) = v2_dir(&own, &mounts) {
            let control =
                fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
            if !control.split_whitespace().any(|c| c == "pids") {
                return Err(format!(
                    "cgroup v2 without a delegated pids controller ({} does not list pids in cgroup.subtree_control)",
                    base.display()
                ));
            }
            (CgroupVersion::V2, base)
        } else {
            return Err("no pids cgroup hierarchy is mounted".into());
        };
        let dir = base.join("warden");
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
        // It may exist (made by root) without being ours to write.
        nix::unistd::access(
            &dir,
            nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
        )
        .map_err(|e| format!("cannot create cgroups in {}: {e}", dir.display()))?;
        remove_stale(&dir, version);
        Ok(PidsCgroupRoot { version, dir })
    }

    /// Create the cgroup for one process (parent side).
    pub fn create(&self, max_processes: u64) -> Result<ProcessCgroup, SandboxError> {
        let n = NEXT_CGROUP.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join(format!("{}-{n}", std::process::id()));
        let setup = |what: &str, e: io::Error| {
            SandboxError::Setup(format!("pids cgroup {}: {what}: {e}", dir.display()))
        };
        fs::create_dir(&dir).map_err(|e| setup("create", e))?;
        // From here on, dropping `cgroup` removes the directory again.
        let mut cgroup = ProcessCgroup {
            dir: dir.clone(),
            join: None,
            version: self.version,
        };
        fs::write(dir.join("pids.max"), max_processes.to_string())
            .map_err(|e| setup("set pids.max", e))?;
        let join_file = match self.version {
            CgroupVersion::V1 => "tasks",
            CgroupVersion::V2 => "cgroup.procs",
        };
        let join = fs::OpenOptions::new()
            .write(true)
            .open(dir.join(join_file))
            .map_err(|e| setup(&format!("open {join_file}"), e))?;
        cgroup.join =
            Some(super::fds::dup_private(&join).map_err(|e| setup("duplicate the join file", e))?);
        Ok(cgroup)
    }
}

/// The cgroup of one jailed process.
#[derive(Debug)]
pub struct ProcessCgroup {
    dir: PathBuf,
    /// `tasks` (v1) or `cgroup.procs` (v2), opened for the child to write "0" to.
    join: Option<OwnedFd>,
    version: CgroupVersion,
}

impl ProcessCgroup {
    /// The descriptor the child writes "0" to.
    pub fn join_fd(&self) -> Option<RawFd> {
        self.join.as_ref().map(|fd| fd.as_raw_fd())
    }

    /// Close the parent's copy once the child has joined.
    pub fn close_join_fd(&mut self) {
        self.join = None;
    }

    /// Pids currently in the cgroup (zombies are not listed).
    pub fn pids(&self) -> Vec<i32> {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// SIGKILL everything in the cgroup; returns how many processes were still listed.
    pub fn kill_all(&self) -> usize {
        if self.version == CgroupVersion::V2 && fs::write(self.dir.join("cgroup.kill"), "1").is_ok()
        {
            return self.pids().len();
        }
        let pids = self.pids();
        for &pid in &pids {
            // SAFETY: plain kill(2); the pid is in our cgroup, so it is one of ours.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        pids.len()
    }

    /// Remove the directory if no live process is in it; false if it holds one (EBUSY), or
    /// is gone already or cannot be removed (then nothing can be told about what is left).
    pub fn remove_if_empty(&self) -> bool {
        fs::remove_dir(&self.dir).is_ok()
    }

    /// Remove the directory; fails (EBUSY) while a process is still in it.
    pub fn remove(&self) -> io::Result<()> {
        match fs::remove_dir(&self.dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ProcessCgroup {
    fn drop(&mut self) {
        // Normally removed by the process's wait/kill; this is the last resort.
        if self.dir.exists() {
            self.kill_all();
            if let Err(e) = self.remove() {
                tracing::debug!(dir = %self.dir.display(), error = %e, "pids cgroup left behind");
            }
        }
    }
}

/// Child side: move the calling (single-threaded) process into the cgroup. Async-signal-safe.
///
/// # Safety
/// Call only in the jail's child.
pub unsafe fn join_in_child(join_fd: RawFd) -> Result<(), i32> {
    if libc::write(join_fd, b"0".as_ptr().cast(), 1) != 1 {
        return Err(errno());
    }
    Ok(())
}

/// `/sys/fs/cgroup/pids/<our path>` when that is a cgroup v1 mount (checked with statfs).
fn v1_pids_at_usual_place(own: &str) -> Option<PathBuf> {
    const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
    let mount = Path::new("/sys/fs/cgroup/pids");
    let stat = nix::sys::statfs::statfs(mount).ok()?;
    if stat.filesystem_type().0 as i64 != CGROUP_SUPER_MAGIC {
        return None;
    }
    let path = own_v1_pids_path(own)?;
    Some(mount.join(path.trim_start_matches('/')))
}

/// Our path in the v1 pids hierarchy, from `/proc/self/cgroup`.
fn own_v1_pids_path(own: &str) -> Option<&str> {
    own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == "pids").then_some(path)
    })
}

/// `<mount point of the v1 pids hierarchy>/<our path in it>`.
fn v1_pids_dir(own: &str, mountinfo: &str) -> Option<PathBuf> {
    let path = own_v1_pids_path(own)?;
    let mount = mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let mut post = post.split_whitespace();
        let (fstype, _source, options) = (post.next()?, post.next()?, post.next()?);
        (fstype == "cgroup" && options.split(',').any(|o| o == "pids"))
            .then(|| pre.split_whitespace().nth(4))
            .flatten()
    })?;
    Some(Path::new(mount).join(path.trim_start_matches('/')))
}

/// `<cgroup2 mount point>/<our path in it>`.
fn v2_dir(own: &str, mountinfo: &str) -> Option<PathBuf> {
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mount = mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        (post.split_whitespace().next()? == "cgroup2")
            .then(|| pre.split_whitespace().nth(4))
            .flatten()
    })?;
    Some(Path::new(mount).join(path.trim_start_matches('/')))
}

/// Clean up after warden processes that no longer exist (crashed or SIGKILLed): kill whatever
/// their jails left running and remove the cgroups.
fn remove_stale(dir: &Path, version: CgroupVersion) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .map(|(p, _)| p)
        else {
            continue;
        };
        if pid.parse::<u32>().is_err() || Path::new("/proc").join(pid).exists() {
            continue;
        }
        let stale = ProcessCgroup {
            dir: entry.path(),
            join: None,
            version,
        };
        let left = stale.kill_all();
        if left > 0 {
            tracing::warn!(cgroup = %stale.dir.display(), processes = left, "killed processes a dead warden left behind");
            // Give the kills a moment; whatever is still there is retried next time.
            for _ in 0..20 {
                if stale.pids().is_empty() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        // Dropping `stale` removes the directory.
    }
}

/// The `pids.max` of a cgroup directory.
pub fn read_pids_max(dir: &Path) -> io::Result<String> {
    Ok(fs::read_to_string(dir.join("pids.max"))?.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
25 1 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
33 25 0:30 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
34 25 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 25 0:33 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_v1_pids_and_v2_directories() {
        let own = "8:pids:/user.slice\n4:memory:/x\n0::/user.slice/session-1.scope\n";
        assert_eq!(
            v1_pids_dir(own, MOUNTINFO),
            Some(PathBuf::from("/sys/fs/cgroup/pids/user.slice"))
        );
        assert_eq!(
            v2_dir(own, MOUNTINFO),
            Some(PathBuf::from(
                "/sys/fs/cgroup/unified/user.slice/session-1.scope"
            ))
        );
        assert_eq!(v1_pids_dir("0::/\n", MOUNTINFO), None);
        assert_eq!(
            v2_dir("8:pids:/\n", "1 0 0:1 / / rw - ext4 /dev/sda rw\n"),
            None
        );
    }

    /// The pids cgroup root, or None (having said why the test is skipped).
    fn usable_root() -> Option<PidsCgroupRoot> {
        if !super::super::kernel::is_root() {
            eprintln!("skipped: creating pids cgroups needs root here");
            return None;
        }
        PidsCgroupRoot::detect()
            .map_err(|why| eprintln!("skipped: no usable pids cgroup: {why}"))
            .ok()
    }

    #[test]
    fn per_process_cgroup_is_created_limited_and_removed() {
        let Some(root) = usable_root() else {
            return;
        };
        let cg = root.create(17).unwrap();
        assert_eq!(read_pids_max(cg.dir()).unwrap(), "17");
        assert!(cg.join_fd().unwrap() >= super::super::fds::FIRST_PRIVATE_FD);
        assert!(cg.pids().is_empty());
        cg.remove().unwrap();
        assert!(!cg.dir().exists());
    }

    #[test]
    fn a_cgroup_is_removed_if_empty_once_its_last_process_is_a_zombie() {
        let Some(root) = usable_root() else {
            return;
        };
        let cg = root.create(4).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        fs::write(cg.dir().join("cgroup.procs"), child.id().to_string()).unwrap();
        // Alive: the cgroup stays, and so does whatever the jail would have to kill.
        assert!(!cg.remove_if_empty());
        assert!(cg.dir().exists());
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        // Dead but not reaped (what the jail's leader is when it is checked).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid for our own child, leaving the zombie in place (WNOWAIT).
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                child.id(),
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        assert_eq!(r, 0);
        assert!(cg.remove_if_empty(), "a zombie kept its cgroup");
        assert!(!cg.dir().exists());
        // Gone already: nothing can be told about it.
        assert!(!cg.remove_if_empty());
        child.wait().unwrap();
    }

    #[test]
    fn leftovers_of_a_dead_warden_are_killed_and_removed() {
        let Some(root) = usable_root() else {
            return;
        };
        // A pid that no longer exists stands in for a crashed warden.
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = gone.id();
        gone.wait().unwrap();
        let dir = root.dir.join(format!("{dead_pid}-0"));
        let mut orphan = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        // Another test's detect() may sweep the stale folder between its creation and the
        // move (that is what it is for): then it is made again.
        let mut moved = false;
        for _ in 0..20 {
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => panic!("{e}"),
            }
            match fs::write(dir.join("cgroup.procs"), orphan.id().to_string()) {
                Ok(()) => {
                    moved = true;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(moved, "the orphan was never moved into the stale cgroup");

        PidsCgroupRoot::detect().unwrap();
        let status = orphan.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        for _ in 0..100 {
            if !dir.exists() {
                break;
            }
            PidsCgroupRoot::detect().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!dir.exists(), "stale cgroup not removed");
    }
}
