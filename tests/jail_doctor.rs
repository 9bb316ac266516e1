//! `warden doctor`: reports what this kernel supports and which backend warden will use.

mod common;
use common::*;
use std::process::Command;

#[test]
fn doctor_reports_the_kernel_and_the_chosen_backend() {
    let env = Env::new();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(["doctor", "--json"])
        .env("WARDEN_CONFIG", &env.config);
    let r = run(cmd);
    assert_eq!(r.status, 0, "{r:?}");
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(report["backend"], "host");
    assert_eq!(report["usable"], true);
    assert_eq!(report["landlock"]["abi"], landlock_abi());
    assert_eq!(report["seccomp"]["available"], true);
    assert_eq!(report["root"], is_root());
    assert!(report["kernel"]
        .as_str()
        .unwrap()
        .chars()
        .next()
        .unwrap()
        .is_ascii_digit());
    assert!(report["user_namespaces"]["available_to_warden"].is_boolean());
    // The Docker section exists for the Docker backend to fill.
    assert!(report["docker"]["detail"].is_string());

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.arg("doctor")
        .env("WARDEN_CONFIG", &env.config)
        .env("ANTHROPIC_API_KEY", SECRET_KEY)
        .env("TELEGRAM_BOT_TOKEN", SECRET_TOKEN);
    let r = run(cmd);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(
        r.stdout.contains("landlock") && r.stdout.contains("backend"),
        "{r:?}"
    );
    // No secret from the environment is printed.
    assert!(!r.all().contains(SECRET_KEY) && !r.all().contains(SECRET_TOKEN));
}

#[test]
fn doctor_is_not_usable_with_a_missing_or_broken_policy() {
    // Every other command refuses such a policy; doctor must not call the setup usable.
    let env = Env::new();
    let broken = env.outside("policy").join("broken.toml");
    std::fs::write(&broken, "[programs.ls]\nargz = 1\n").unwrap();
    let missing = env.outside("policy").join("missing.toml");
    for (config, expected) in [
        (
            format!("policy = {:?}\n", missing.display().to_string()),
            "No such file",
        ),
        (
            format!("policy = {:?}\n", broken.display().to_string()),
            "argz",
        ),
    ] {
        std::fs::write(&env.config, config).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.args(["doctor", "--json"])
            .env("WARDEN_CONFIG", &env.config);
        let r = run(cmd);
        assert_eq!(r.status, 1, "{r:?}");
        let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(report["usable"], false);
        assert_eq!(report["policy"]["loaded"], false);
        assert!(
            report["reason"]
                .as_str()
                .unwrap()
                .contains("cannot be loaded"),
            "{report}"
        );
        assert!(
            report["policy"]["detail"]
                .as_str()
                .unwrap()
                .contains(expected),
            "{report}"
        );
        // exec agrees: it refuses to run under that policy.
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.args(["exec", "--workspace"])
            .arg(&env.ws)
            .args(["--", "true"])
            .env("WARDEN_CONFIG", &env.config);
        assert_ne!(run(cmd).status, 0);
    }
    // The same file given with --policy.
    std::fs::write(&env.config, "").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(["doctor", "--policy"])
        .arg(&broken)
        .env("WARDEN_CONFIG", &env.config);
    let r = run(cmd);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.stdout.contains("BROKEN"), "{r:?}");
}
