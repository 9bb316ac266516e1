//! Process lifetime and resources: nothing a command starts outlives it — background jobs,
//! `setsid` attempts, double forks — a timeout ends everything within a second, a fork bomb hits
//! the process limit, and memory is capped.

use crate::common::*;
use std::time::{Duration, Instant};

#[test]
fn timeout_kills_background_setsid_and_double_forked_children() {
    let env = Env::new();
    let m = marker();
    let script = format!(
        "sleep {m} & \
         setsid sleep {m} & \
         (sleep {m} &) ; \
         sh -c 'sleep {m} & exec sleep {m}' & \
         sleep {m}"
    );
    let r = env.jail_with(&["--timeout", "2"], &["sh", "-c", &script]);
    assert_eq!(r.status, 124, "{r:?}");
    assert!(r.elapsed < Duration::from_secs(3), "took {:?}", r.elapsed);
    assert!(r.stderr.contains("timed out"), "{r:?}");
    assert_eq!(survivors(&format!("sleep {m}")), Vec::<u32>::new());
}

#[test]
fn python_daemonizing_does_not_escape() {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed for the daemon dance");
        return;
    }
    let env = Env::new();
    let m = marker();
    // The classic double fork with setsid (which fails here), and a process that changes its
    // own process group (also denied).
    let code = format!(
        "import os, time\n\
         if os.fork() == 0:\n    \
             try: os.setsid()\n    \
             except OSError as e: print('setsid', e.errno, flush=True)\n    \
             try: os.setpgid(0, 0)\n    \
             except OSError as e: print('setpgid', e.errno, flush=True)\n    \
             if os.fork() == 0: os.execvp('sleep', ['sleep', '{m}'])\n    \
             os._exit(0)\n\
         time.sleep(0.3)\n"
    );
    let r = env.jail_with(&["--timeout", "10"], &["python3", "-c", &code]);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "setsid 1\nsetpgid 1\n", "{r:?}");
    // The leader exited normally: its group was killed with it.
    assert!(r.elapsed < Duration::from_secs(5), "{r:?}");
    assert_eq!(survivors(&format!("sleep {m}")), Vec::<u32>::new());
}

#[test]
fn background_children_die_when_the_command_exits() {
    let env = Env::new();
    let m = marker();
    let r = env.jail_with(
        &["--timeout", "30"],
        &["sh", "-c", &format!("sleep {m} & echo done")],
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "done\n");
    assert!(
        r.elapsed < Duration::from_secs(2),
        "waited for the background job: {r:?}"
    );
    assert_eq!(survivors(&format!("sleep {m}")), Vec::<u32>::new());
}

/// The teardown takes an empty pids cgroup for a tree with nothing left alive; that holds only
/// if no process of the tree can move itself out of the cgroup (into the root cgroup, where
/// warden's user may write as root). The attempt fails, and the process dies with the command.
#[test]
fn a_background_child_cannot_leave_its_pids_cgroup_and_dies_with_the_command() {
    let env = Env::new();
    let m = marker();
    let escape = format!(
        "for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/pids/cgroup.procs \
         /sys/fs/cgroup/pids/tasks; do echo $$ 2>/dev/null > $f && echo moved to $f; done; \
         touch tried; exec sleep {m}"
    );
    let script = format!("sh -c '{escape}' & until [ -e tried ]; do sleep 0.05; done; echo done");
    let r = env.jail_with(&["--timeout", "30"], &["sh", "-c", &script]);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        r.stdout, "done\n",
        "a jailed process left its cgroup: {r:?}"
    );
    assert!(
        r.elapsed < Duration::from_secs(5),
        "waited for the background job: {r:?}"
    );
    assert_eq!(survivors(&format!("sleep {m}")), Vec::<u32>::new());
}

#[test]
fn fork_bomb_hits_the_limit_and_the_host_stays_responsive() {
    let env = Env::new();
    let m = marker();
    let script = format!("m={m}; b() {{ b | b & }}; b; sleep 30");
    let mut child = env
        .command(&["--timeout", "4"], &["bash", "-c", &script])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut peak = 0;
    let mut slowest_true = Duration::ZERO;
    while child.try_wait().unwrap().is_none() {
        peak = peak.max(processes_with(&format!("m={m}")).len());
        let t = Instant::now();
        assert!(std::process::Command::new("/bin/true")
            .status()
            .unwrap()
            .success());
        slowest_true = slowest_true.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the fork bomb was not stopped"
        );
    }
    let elapsed = start.elapsed();
    let status = child.wait().unwrap();
    let stderr = read_all(child.stderr.take().unwrap());
    assert_eq!(status.code(), Some(124), "{stderr}");
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
    eprintln!("fork bomb: peak {peak} processes, slowest /bin/true {slowest_true:?}, {elapsed:?}");
    // Default limit: 256 processes (pids cgroup as root, RLIMIT_NPROC otherwise).
    assert!(peak <= 256, "{peak} processes at once");
    assert!(
        stderr.contains("Resource temporarily unavailable") || stderr.contains("fork"),
        "the bomb never hit the limit: {stderr}"
    );
    assert!(
        slowest_true < Duration::from_secs(1),
        "host unresponsive: {slowest_true:?}"
    );
    assert_eq!(survivors(&format!("m={m}")), Vec::<u32>::new());
}

#[test]
fn allocating_8_gib_fails() {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed to allocate memory");
        return;
    }
    let env = Env::new();
    let r = env.jail(&[
        "python3",
        "-c",
        "b = bytearray(8 << 30); print('allocated')",
    ]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(r.stderr.contains("MemoryError"), "{r:?}");
    assert!(!r.stdout.contains("allocated"));
}

#[test]
fn large_files_are_capped() {
    let env = Env::new();
    // Default file size limit: 1 GiB; writing past it ends with SIGXFSZ (128 + 25).
    let r = env.jail(&["sh", "-c", "head -c 1100M /dev/zero > big"]);
    assert_eq!(r.status, 128 + libc::SIGXFSZ, "{r:?}");
    let size = std::fs::metadata(env.ws.join("big")).unwrap().len();
    assert!(size <= 1 << 30, "{size}");
}

#[test]
fn interrupting_warden_kills_the_jailed_command() {
    let env = Env::new();
    let m = marker();
    let mut child = env
        .command(
            &["--timeout", "60"],
            &["sh", "-c", &format!("sleep {m} & sleep {m}")],
        )
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if processes_with(&format!("sleep {m}")).len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(survivors(&format!("sleep {m}")), Vec::<u32>::new());
}

#[test]
fn an_interrupt_at_any_moment_leaves_nothing_behind() {
    let env = Env::new();
    // Signal warden at increasing delays, from before the jail exists to while it runs.
    for delay_ms in [0u64, 2, 5, 10, 20, 40] {
        let m = marker();
        let mut child = env
            .command(
                &["--timeout", "60"],
                &["sh", "-c", &format!("sleep {m} & sleep {m}")],
            )
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap();
        assert_eq!(
            survivors(&format!("sleep {m}")),
            Vec::<u32>::new(),
            "SIGTERM after {delay_ms} ms left processes"
        );
    }
}
