//! A kernel without Landlock: the host jail fails closed (exit 125 with the reason) unless the
//! caller opted into weak mode, which then runs with a loud warning. The missing Landlock is
//! simulated with a seccomp filter on warden that makes `landlock_create_ruleset` fail with
//! ENOSYS, as on a kernel built without it.

use crate::common::*;
use std::os::unix::process::CommandExt;

/// Make `landlock_create_ruleset` (444 on x86_64) fail with ENOSYS in `cmd` and its children.
fn without_landlock(cmd: &mut std::process::Command) {
    unsafe {
        cmd.pre_exec(|| {
            let filter = [
                // A = seccomp_data.nr
                libc::sock_filter {
                    code: 0x20,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                // if A == 444: return ERRNO(ENOSYS) else: return ALLOW
                libc::sock_filter {
                    code: 0x15,
                    jt: 0,
                    jf: 1,
                    k: 444,
                },
                libc::sock_filter {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: 0x0005_0000 | libc::ENOSYS as u32,
                },
                libc::sock_filter {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: 0x7fff_0000,
                },
            ];
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn without_landlock_the_jail_refuses_to_run() {
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: the simulated filter uses x86_64 system call numbers");
        return;
    }
    let env = Env::new();
    let marker = env.ws.join("ran");
    let script = format!("touch {}", marker.display());
    let mut cmd = env.command(&[], &["sh", "-c", &script]);
    without_landlock(&mut cmd);
    let r = run(cmd);
    assert_eq!(r.status, 125, "{r:?}");
    assert!(r.stderr.contains("Landlock is not available"), "{r:?}");
    assert!(r.stderr.contains("--allow-without-landlock"), "{r:?}");
    assert!(!marker.exists(), "something ran without the jail");
}

#[test]
fn weak_mode_runs_with_a_loud_warning_and_keeps_seccomp() {
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: the simulated filter uses x86_64 system call numbers");
        return;
    }
    let env = Env::new();
    let mut cmd = env.command(&["--allow-without-landlock"], &["cat", "/proc/self/status"]);
    without_landlock(&mut cmd);
    let r = run(cmd);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("WARNING: running the host jail WITHOUT Landlock"),
        "{r:?}"
    );
    assert!(r.stdout.contains("NoNewPrivs:\t1"), "{r:?}");
    assert!(r.stdout.contains("CapEff:\t0000000000000000"), "{r:?}");
    // warden's filter plus the jail's.
    assert!(r.stdout.contains("Seccomp_filters:\t2"), "{r:?}");
}
