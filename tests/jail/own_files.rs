//! No sandbox root may hand warden's own files to jailed programs: the data directory and the
//! config file (keys, token) stay unreadable, the policy unwritable. Landlock cannot carve a
//! file out of a root, so warden refuses such roots before anything runs — for `jail`, `exec`
//! and the agent alike.

use crate::common::Env;
use std::process::Command;

/// A config file whose secret shows if anything prints it.
fn write_secret_config(path: &std::path::Path) {
    std::fs::write(path, "[telegram]\ntoken = \"fake-bot-token-OWNFILES\"\n").unwrap();
}

/// A home holding warden's data directory with a config full of secrets.
fn home_with_secrets(env: &Env) -> std::path::PathBuf {
    let home = env.outside("home");
    std::fs::create_dir_all(home.join(".warden")).unwrap();
    write_secret_config(&home.join(".warden/config.toml"));
    home
}

/// Refused before anything ran (exit 125, no secret on stdout), with every `reason` part on
/// stderr.
fn assert_refused(out: &std::process::Output, reason: &[&str]) {
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("OWNFILES"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for part in reason {
        assert!(stderr.contains(part), "{stderr}");
    }
}

#[test]
fn a_readable_root_holding_the_data_directory_is_refused() {
    let env = Env::new();
    let home = home_with_secrets(&env);
    let secret = home.join(".warden/config.toml").display().to_string();
    let mut cmd = env.command(&["--read", &home.display().to_string()], &["cat", &secret]);
    // The default data directory is ~/.warden.
    cmd.env("HOME", &home);
    let out = cmd.output().unwrap();
    assert_refused(&out, &["readable sandbox root", "warden's data directory"]);
}

#[test]
fn exec_refuses_a_workspace_holding_the_config_file() {
    let env = Env::new();
    write_secret_config(&env.ws.join("config.toml"));
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .env("WARDEN_CONFIG", env.ws.join("config.toml"))
        .args(["exec", "--workspace"])
        .arg(&env.ws)
        .args(["--", "cat config.toml"])
        .output()
        .unwrap();
    assert_refused(&out, &["writable sandbox root", "config file"]);
}

#[test]
fn the_agent_refuses_a_workspace_holding_its_policy() {
    let env = Env::new();
    let policy = env.ws.join("policy.toml");
    std::fs::write(&policy, "").unwrap();
    let data = env.outside("data");
    std::fs::write(
        &env.config,
        format!(
            "workspace = {:?}\ndata_dir = {:?}\npolicy = {:?}\n",
            env.ws, data, policy
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .env("WARDEN_CONFIG", &env.config)
        .env("ANTHROPIC_API_KEY", "fake-anthropic-key-OWNFILES")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .args(["run", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the command policy"), "{stderr}");
    assert!(stderr.contains("writable sandbox root"), "{stderr}");
}

#[test]
fn a_relative_config_path_is_found_where_warden_reads_it() {
    // `WARDEN_CONFIG=config.toml` from inside the workspace: the file warden reads is the
    // workspace's, whatever the path's spelling.
    let env = Env::new();
    write_secret_config(&env.ws.join("config.toml"));
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .current_dir(&env.ws)
        .env("WARDEN_CONFIG", "config.toml")
        .args(["jail", "--", "cat", "config.toml"])
        .output()
        .unwrap();
    assert_refused(&out, &["config file"]);
}
