//! The jailed process itself: scrubbed environment, only fds 0-2, no_new_privs, seccomp, no
//! capabilities, and no view of other processes' /proc entries (warden's environment holds the
//! API keys).

use crate::common::*;
use std::os::unix::process::CommandExt;

fn assert_no_secrets(text: &str) {
    assert!(!text.contains(SECRET_KEY), "API key leaked: {text}");
    assert!(!text.contains(SECRET_TOKEN), "bot token leaked: {text}");
    assert!(!text.contains("ANTHROPIC_API_KEY"), "{text}");
    assert!(!text.contains("TELEGRAM_BOT_TOKEN"), "{text}");
    assert!(!text.contains("WARDEN_CONFIG"), "{text}");
}

#[test]
fn warden_secrets_are_not_in_the_environment() {
    let env = Env::new();
    let r = env.jail(&["env"]);
    assert_eq!(r.status, 0, "{r:?}");
    assert_no_secrets(&r.stdout);
    let mut names: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "GIT_ALLOW_PROTOCOL",
            "GIT_CONFIG_NOSYSTEM",
            "GIT_NO_LAZY_FETCH",
            "GIT_PAGER",
            "GIT_TERMINAL_PROMPT",
            "HOME",
            "LANG",
            "PAGER",
            "PATH",
            "TERM",
            "TMPDIR"
        ]
    );
    let r = env.jail(&["cat", "/proc/self/environ"]);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(
        r.stdout.contains("PATH=/usr/local/bin:/usr/bin:/bin"),
        "{r:?}"
    );
    assert_no_secrets(&r.stdout);
}

#[test]
fn only_fds_0_to_2_are_inherited() {
    let env = Env::new();
    let mut cmd = env.command(&[], &["ls", "-l", "/proc/self/fd"]);
    let leaked = std::fs::File::open("/etc/hostname").unwrap();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&leaked);
    // Leak two descriptors into warden without close-on-exec: 5 (inside the 3-9 range the jail
    // rewires) and 40.
    unsafe {
        cmd.pre_exec(move || {
            for target in [5, 40] {
                if libc::dup2(raw, target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let r = run(cmd);
    assert_eq!(r.status, 0, "{r:?}");
    let fds: Vec<(String, String)> = r
        .stdout
        .lines()
        .filter_map(|l| l.split_once(" -> "))
        .map(|(left, target)| {
            (
                left.split_whitespace().last().unwrap().to_string(),
                target.to_string(),
            )
        })
        .collect();
    let numbers: Vec<&str> = fds.iter().map(|(n, _)| n.as_str()).collect();
    // 3 is ls's own handle on the directory it lists.
    assert_eq!(numbers, ["0", "1", "2", "3"], "{r:?}");
    assert!(fds[3].1.ends_with("/fd"), "{fds:?}");
    assert!(!r.stdout.contains("hostname"), "{r:?}");
}

#[test]
fn no_new_privs_seccomp_and_no_capabilities() {
    let env = Env::new();
    let r = env.jail(&["cat", "/proc/self/status"]);
    assert_eq!(r.status, 0, "{r:?}");
    let field = |name: &str| {
        r.stdout
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_else(|| panic!("{name} missing: {r:?}"))
            .to_string()
    };
    assert_eq!(field("NoNewPrivs:"), "1");
    assert_eq!(field("Seccomp:"), "2");
    for cap in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        assert_eq!(field(cap), "0000000000000000", "{cap}");
    }
    // The jailed process leads its own process group (the one the timeout kills); it has no
    // terminal (`the_command_leads_its_own_group_without_warden_s_terminal`).
    let pid = field("Pid:");
    assert_eq!(field("NSpgid:"), pid);
}

#[test]
fn setuid_binaries_gain_nothing() {
    let env = Env::new();
    // su is setuid root on Debian; with no_new_privs and no bounding set it gets no capability.
    let r = env.jail(&[
        "sh",
        "-c",
        "su -s /bin/sh -c id nobody </dev/null; echo status=$?",
    ]);
    assert!(!r.stdout.contains("uid=65534"), "{r:?}");
    assert!(
        r.stdout.contains("status=") && !r.stdout.contains("status=0"),
        "{r:?}"
    );
}

#[test]
fn other_processes_proc_entries_are_unreadable() {
    let env = Env::new();
    let r = env.jail(&["cat", "/proc/1/environ"]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(r.stderr.contains("Permission denied"), "{r:?}");
    // $PPID of the shell is warden itself, whose environment holds the secrets.
    let r = env.jail(&[
        "sh",
        "-c",
        "cat /proc/$PPID/environ; cat /proc/$PPID/cmdline; ls /proc/$PPID/fd; cat /proc/$PPID/maps | head -1",
    ]);
    assert_no_secrets(&r.stdout);
    assert!(r.stdout.is_empty(), "{r:?}");
    assert!(r.stderr.contains("Permission denied"), "{r:?}");
    // Listing /proc (ps) shows nothing either.
    let r = env.jail(&["ls", "/proc"]);
    assert_ne!(r.status, 0, "{r:?}");
}

#[test]
fn exit_statuses_follow_the_cli_contract() {
    let env = Env::new();
    assert_eq!(env.jail(&["sh", "-c", "exit 7"]).status, 7);
    assert_eq!(env.jail(&["sh", "-c", "kill -TERM $$"]).status, 128 + 15);
    let r = env.jail(&["definitely-not-a-program"]);
    assert_eq!(r.status, 127, "{r:?}");
    assert!(r.stderr.contains("command not found"), "{r:?}");
    let r = run(env.command_raw(&["--workspace", "/nonexistent/ws"], &["true"]));
    assert_eq!(r.status, 125, "{r:?}");
    assert!(r.stderr.contains("workspace"), "{r:?}");
    // A sandbox that cannot be set up (here: no Docker daemon at the configured socket).
    std::fs::write(
        &env.config,
        "[sandbox.docker]\nsocket = \"/nonexistent/docker.sock\"\n",
    )
    .unwrap();
    let r = env.jail_with(&["--backend", "docker"], &["true"]);
    assert_eq!(r.status, 125, "{r:?}");
    assert!(r.stderr.contains("no Docker daemon socket"), "{r:?}");
}

#[test]
fn a_readable_root_can_be_added() {
    let env = Env::new();
    let extra = env.outside("extra");
    std::fs::write(extra.join("data.txt"), "shared data").unwrap();
    let file = extra.join("data.txt").display().to_string();
    let r = env.jail(&["cat", &file]);
    assert_ne!(r.status, 0);
    let root = extra.display().to_string();
    let r = env.jail_with(&["--read", &root], &["cat", &file]);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "shared data");
    let r = env.jail_with(
        &["--read", &root],
        &["sh", "-c", &format!("echo x >> {file}")],
    );
    assert_ne!(r.status, 0, "a readable root must not be writable: {r:?}");
}

#[test]
fn the_command_leads_its_own_group_without_warden_s_terminal() {
    let env = Env::new();
    // warden on a terminal that is its controlling terminal, the command's stdio on it too.
    let mut terminal = crate::support::pty::Pty::spawn(
        env.command(&[], &["sh", "-c", "exec cat /proc/self/stat"]),
    );
    let status = terminal.wait(std::time::Duration::from_secs(20));
    let screen = terminal.screen();
    assert!(status.success(), "{screen}");
    // "pid (comm) state ppid pgrp session tty_nr tpgid ..."
    let line = screen
        .lines()
        .find(|l| l.contains(" (cat) "))
        .unwrap_or_else(|| panic!("{screen}"));
    let (pid, rest) = line.split_once(" (cat) ").unwrap();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (pgrp, tty, tpgid) = (fields[2], fields[4], fields[5]);
    assert_eq!(pgrp, pid.trim(), "not its own process group: {line}");
    assert_eq!((tty, tpgid), ("0", "-1"), "still has a terminal: {line}");
}
