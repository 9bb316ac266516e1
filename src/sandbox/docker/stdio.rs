//! How the descriptors the executor hands in become an exec's standard streams.
//!
//! `/dev/null` needs no pumping at all. stdout and stderr that are one and the same open file
//! (`2>&1`, or the executor's shared stderr pipe) are merged *inside* the container: the daemon
//! copies an exec's stdout and stderr on separate paths and loses their relative order, so the
//! exec runs `sh -c 'exec "$@" 2>&1' warden ARGV…` instead. That shell sees only its constant
//! script; the argv are positional parameters, never parsed, and `exec` replaces the shell with
//! the program. A missing program is then reported by that shell (status 127, message in the
//! output) rather than by `spawn`.

use super::pump::Descriptors;
use crate::sandbox::Stdio;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// The script that merges stderr into stdout and becomes the program.
const MERGE: &str = "exec \"$@\" 2>&1";

/// An exec's command line and streams.
pub struct Streams {
    /// What the exec runs: the argv, or the merging wrapper around it.
    pub cmd: Vec<String>,
    pub fds: Descriptors,
}

/// Prepare `argv` with these descriptors.
pub fn prepare(argv: Vec<String>, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> Streams {
    let stdin = pumped(stdin);
    let stdout = pumped(stdout);
    let stderr = pumped(stderr);
    // A leading '-' would be taken as an option of `exec`; such a program keeps two streams.
    let mergeable = !argv[0].starts_with('-');
    match (stdout, stderr) {
        (Some(out), Some(err)) if mergeable && same_open_file(&out, &err) => {
            let mut cmd = vec!["/bin/sh".into(), "-c".into(), MERGE.into(), "warden".into()];
            cmd.extend(argv);
            Streams {
                cmd,
                fds: Descriptors {
                    stdin,
                    stdout: Some(out),
                    stderr: None,
                    merged: true,
                },
            }
        }
        (stdout, stderr) => Streams {
            cmd: argv,
            fds: Descriptors {
                stdin,
                stdout,
                stderr,
                merged: false,
            },
        },
    }
}

/// The descriptor to pump, or `None` for `/dev/null` (as `Stdio::Null` or an open `/dev/null`).
fn pumped(stdio: Stdio) -> Option<OwnedFd> {
    match stdio {
        Stdio::Null => None,
        Stdio::Fd(fd) if is_dev_null(&fd) => None,
        Stdio::Fd(fd) => Some(fd),
    }
}

fn is_dev_null(fd: &OwnedFd) -> bool {
    match nix::sys::stat::fstat(fd) {
        Ok(st) => st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3),
        Err(_) => false,
    }
}

/// Whether writes to `a` and `b` land in one stream: the same pipe or socket, or the same open
/// file description (a `dup`, so one shared offset).
fn same_open_file(a: &OwnedFd, b: &OwnedFd) -> bool {
    let (Ok(sa), Ok(sb)) = (
        nix::sys::stat::fstat(a.as_fd()),
        nix::sys::stat::fstat(b.as_fd()),
    ) else {
        return false;
    };
    if (sa.st_dev, sa.st_ino) != (sb.st_dev, sb.st_ino) {
        return false;
    }
    let kind = sa.st_mode & libc::S_IFMT;
    if kind == libc::S_IFIFO || kind == libc::S_IFSOCK {
        return true;
    }
    const KCMP_FILE: libc::c_int = 0;
    let pid = std::process::id() as libc::pid_t;
    // SAFETY: kcmp only compares two descriptors of this process; no memory is passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            pid,
            pid,
            KCMP_FILE,
            a.as_raw_fd(),
            b.as_raw_fd(),
        )
    };
    rc == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn one_pipe_for_both_streams_is_merged_in_the_container() {
        let (_r, w) = nix::unistd::pipe().unwrap();
        let w2 = w.try_clone().unwrap();
        let streams = prepare(
            argv(&["make", "all"]),
            Stdio::Null,
            Stdio::Fd(w),
            Stdio::Fd(w2),
        );
        assert_eq!(
            streams.cmd,
            argv(&["/bin/sh", "-c", MERGE, "warden", "make", "all"])
        );
        assert!(streams.fds.merged && streams.fds.stderr.is_none());
    }

    #[test]
    fn separate_pipes_and_dev_null_stay_apart() {
        let (_r1, w1) = nix::unistd::pipe().unwrap();
        let (_r2, w2) = nix::unistd::pipe().unwrap();
        let streams = prepare(argv(&["ls"]), Stdio::Null, Stdio::Fd(w1), Stdio::Fd(w2));
        assert_eq!(streams.cmd, argv(&["ls"]));
        assert!(!streams.fds.merged && streams.fds.stderr.is_some());
        let null = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        let streams = prepare(argv(&["ls"]), Stdio::Fd(null), Stdio::Null, Stdio::Null);
        assert!(streams.fds.stdin.is_none() && streams.fds.stdout.is_none());
    }

    #[test]
    fn the_same_file_opened_twice_is_not_one_stream() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let a = OwnedFd::from(std::fs::File::create(&path).unwrap());
        let b = OwnedFd::from(std::fs::OpenOptions::new().write(true).open(&path).unwrap());
        let dup = a.try_clone().unwrap();
        assert!(!same_open_file(&a, &b));
        assert!(same_open_file(&a, &dup));
        let streams = prepare(argv(&["-x"]), Stdio::Null, Stdio::Fd(a), Stdio::Fd(dup));
        assert_eq!(streams.cmd, argv(&["-x"]), "a leading '-' is never merged");
    }
}
