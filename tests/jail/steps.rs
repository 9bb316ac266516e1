//! `WARDEN_JAIL_TRACE=1`: `warden jail` reports each step of the jail's start and end on stderr,
//! warden's steps and the jailed child's, without changing what the command prints or returns.

use crate::common::*;

#[test]
fn the_trace_names_every_step_in_order_and_leaves_the_output_alone() {
    let env = Env::new();
    let mut cmd = env.command(&[], &["sh", "-c", "echo out; exit 3"]);
    cmd.env("WARDEN_JAIL_TRACE", "1");
    let r = run(cmd);
    assert_eq!(r.status, 3, "{r:?}");
    assert_eq!(r.stdout, "out\n", "{r:?}");
    let steps: Vec<&str> = r
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("warden:   "))
        .collect();
    let position = |name: &str| {
        steps
            .iter()
            .position(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no step {name:?} in {r:?}"))
    };
    let order = [
        "before main",
        "config",
        "private TMPDIR",
        "Landlock rule table",
        "seccomp program",
        "pids cgroup root",
        "jail ready",
        "Landlock ruleset",
        "child: process group, signals",
        "child: fds",
        "child: rlimits",
        "child: drop capabilities",
        "child: no_new_privs",
        "child: seccomp install",
        "execve (until it returned)",
        "program ran",
        "group killed, reaped, cgroup removed",
        "sandbox closed",
        "total after main",
    ];
    let positions: Vec<usize> = order.iter().map(|name| position(name)).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{r:?}");
    // Each line has a wall and a CPU figure; the child's steps have no CPU figure of warden's.
    let seccomp = steps[position("child: seccomp install")];
    assert!(
        seccomp.contains(" wall ") && seccomp.trim_end().ends_with("cpu       -"),
        "{seccomp}"
    );
    let total = steps[position("total after main")];
    let wall: u64 = total
        .split_whitespace()
        .skip_while(|w| *w != "wall")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{total}"));
    assert!(wall > 0, "{total}");
}

#[test]
fn without_the_variable_nothing_is_reported() {
    let env = Env::new();
    for value in [None, Some("0"), Some("")] {
        let mut cmd = env.command(&[], &["true"]);
        if let Some(value) = value {
            cmd.env("WARDEN_JAIL_TRACE", value);
        }
        let r = run(cmd);
        assert_eq!(r.status, 0, "{r:?}");
        assert_eq!(r.stderr, "", "{value:?}: {r:?}");
    }
}

/// Where glibc's static archives are installed, build.rs links the front static-pie: no program
/// interpreter (no dynamic loader runs before a jailed command), still position-independent
/// (ASLR) and with RELRO.
#[test]
fn the_front_runs_no_dynamic_loader_where_glibc_static_is_installed() {
    let libc = std::process::Command::new("cc")
        .arg("-print-file-name=libc.a")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    // cc prints the bare name when it finds no such file.
    if !std::path::Path::new(&libc).is_absolute() {
        eprintln!("skipped: cc finds no libc.a, so build.rs links the front dynamically");
        return;
    }
    let Ok(headers) = std::process::Command::new("readelf")
        .args(["-hlW", env!("CARGO_BIN_EXE_warden")])
        .output()
    else {
        eprintln!("skipped: no readelf to read the front's program headers");
        return;
    };
    let text = String::from_utf8_lossy(&headers.stdout);
    assert!(text.contains("LOAD"), "{text}");
    assert!(!text.contains("INTERP"), "the front names a loader: {text}");
    assert!(
        text.contains("Type:                              DYN"),
        "not PIE: {text}"
    );
    assert!(text.contains("GNU_RELRO"), "no RELRO: {text}");
}
