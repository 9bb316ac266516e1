//! The `warden` front binary: `warden jail` on the host backend runs in it; `warden bot` is
//! handed to `warden-bot`, everything else to `warden-full` beside it (same PID, arguments and
//! environment).

use crate::common::Env;
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

/// `warden ARGS` with HOME (and the XDG config home) in `home`.
fn warden_at(home: &Path, args: &[&str]) -> std::process::Output {
    warden()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("WARDEN_CONFIG")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn completions_and_man_pages_come_from_the_command_line_definition() {
    let home = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef warden"),
        ("fish", "complete -c warden"),
    ] {
        let out = warden_at(home.path(), &["completions", shell]);
        assert!(out.status.success(), "{out:?}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(
            script.contains("chat") && script.contains("non-interactive"),
            "{shell}"
        );
    }
    let out = warden_at(home.path(), &["man"]);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.starts_with(".ie") || page.contains(".TH"), "{page}");
    assert!(page.contains("init") && page.contains("doctor"), "{page}");
    let dir = home.path().join("man");
    let out = warden_at(home.path(), &["man", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(dir.join("warden-exec.1").is_file());
    // A closed reader ends a printing command quietly.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{:?} completions bash | head -c 10 >/dev/null",
            env!("CARGO_BIN_EXE_warden")
        ))
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
}

#[test]
fn service_install_writes_a_hardened_user_unit_once() {
    let home = tempfile::tempdir().unwrap();
    let out = warden_at(home.path(), &["service", "install"]);
    assert!(out.status.success(), "{out:?}");
    let unit = home.path().join(".config/systemd/user/warden-bot.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    let exec = Path::new(env!("CARGO_BIN_EXE_warden"));
    assert!(
        text.contains(&format!("ExecStart={} bot", exec.display())),
        "{text}"
    );
    assert!(text.contains("NoNewPrivileges=yes"), "{text}");
    let again = warden_at(home.path(), &["service", "install"]);
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    let out = warden_at(home.path(), &["service", "uninstall"]);
    assert!(out.status.success() && !unit.exists(), "{out:?}");
}

#[test]
fn audit_shows_what_ran_filtered_by_session_and_time() {
    let home = tempfile::tempdir().unwrap();
    let db = warden::schema::open_in(&home.path().join(".warden")).unwrap();
    for (session, command, decision, reason) in [
        (
            "terminal:default",
            "ls",
            warden::audit::AuditDecision::Allow,
            "allowed: ls",
        ),
        (
            "telegram:42",
            "cat /etc/shadow",
            warden::audit::AuditDecision::Deny,
            "outside the workspace",
        ),
    ] {
        warden::audit::record(
            &db,
            &warden::audit::AuditEntry {
                session: session.into(),
                tool: "bash".into(),
                input: serde_json::json!({"command": command}).to_string(),
                decision,
                reason: reason.into(),
                exit_code: None,
                duration_ms: 2,
                network: None,
            },
        )
        .unwrap();
    }
    drop(db);
    let out = warden_at(home.path(), &["audit"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("terminal:default  bash") && text.contains("ls"),
        "{text}"
    );
    assert!(text.contains("why: outside the workspace"), "{text}");
    let out = warden_at(
        home.path(),
        &[
            "audit",
            "--session",
            "telegram:42",
            "--since",
            "1h",
            "--json",
        ],
    );
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["input"]["command"], "cat /etc/shadow");
    assert_eq!(rows[0]["decision"], "deny");
    let out = warden_at(home.path(), &["audit", "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RFC 3339"));
}
