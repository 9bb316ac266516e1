//! The `warden` front binary: `warden jail` on the host backend runs in it; `warden bot` is
//! handed to `warden-bot`, everything else to `warden-full` beside it (same PID, arguments and
//! environment).

mod common;

use common::Env;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn warden() -> Command {
    Command::new(env!("CARGO_BIN_EXE_warden"))
}

#[test]
fn other_commands_reach_warden_full_under_the_name_warden() {
    let out = warden().arg("--version").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "warden 0.1.0");

    let out = warden().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for sub in ["jail", "exec", "doctor", "bot", "policy", "skill"] {
        assert!(help.contains(sub), "`warden --help` lacks {sub}: {help}");
    }
    assert!(help.contains("Usage: warden "), "{help}");

    let out = warden().args(["no-such-command"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn the_bots_help_and_usage_errors_come_from_warden_full() {
    // warden-bot runs only `warden bot`; anything else it hands on, so help stays in one place.
    let out = warden().args(["bot", "--help"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("answers allowed Telegram users"), "{help}");
    assert!(help.contains("Usage: warden bot"), "{help}");

    let out = warden().args(["bot", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-such-flag"));
}

#[test]
fn a_host_jail_runs_in_the_front_binary_itself() {
    let env = Env::new();
    let mut child = env
        .command(&[], &["/bin/sleep", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The jailed sleep is warden's child; warden itself stays the front binary.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut exe = std::path::PathBuf::new();
    while Instant::now() < deadline {
        exe = std::fs::read_link(format!("/proc/{}/exe", child.id())).unwrap_or_default();
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
            .unwrap_or_default();
        if !children.trim().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(exe, Path::new(env!("CARGO_BIN_EXE_warden")));
}

#[test]
fn a_docker_jail_is_handed_to_warden_full() {
    // Only warden-full links the Docker client: its error about the socket proves the hand-off
    // (and that the config and flags arrived intact).
    let env = Env::new();
    std::fs::write(
        &env.config,
        "[sandbox.docker]\nsocket = \"/nonexistent/warden-test.sock\"\n",
    )
    .unwrap();
    let out = env
        .command(&["--backend", "docker"], &["true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/warden-test.sock"), "{stderr}");
}

#[test]
fn without_warden_full_beside_it_the_front_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let lonely = dir.path().join("warden");
    std::fs::copy(env!("CARGO_BIN_EXE_warden"), &lonely).unwrap();
    let out = Command::new(&lonely).arg("doctor").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warden-full"), "{stderr}");
    assert!(stderr.contains("install it beside"), "{stderr}");

    // The jail itself needs nothing else.
    let env = Env::new();
    let out = Command::new(&lonely)
        .env("WARDEN_CONFIG", &env.config)
        .args(["jail", "--workspace"])
        .arg(&env.ws)
        .args(["--", "/bin/sh", "-c", "echo jailed > out.txt"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("out.txt")).unwrap(),
        "jailed\n"
    );
}
