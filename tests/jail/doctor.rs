//! `warden doctor`: reports what this kernel supports and which backend warden will use, and
//! checks the rest of the setup, each failure with the fix it names.

use crate::common::*;
use crate::support;
use crate::support::fake_llm::{FakeLlm, Turn};
use crate::support::fake_telegram::FakeTelegram;
use std::process::Command;

#[test]
fn doctor_reports_the_kernel_and_the_chosen_backend() {
    let env = Env::new();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(["doctor", "--sandbox", "--json"])
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
    cmd.args(["doctor", "--offline"])
        .env("WARDEN_CONFIG", &env.config)
        .env("ANTHROPIC_API_KEY", SECRET_KEY)
        .env("TELEGRAM_BOT_TOKEN", SECRET_TOKEN)
        .env("TELEGRAM_ALLOWED_USERS", "42");
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

/// `warden doctor --json` with `config` as the config file and `env` set; (exit, setup checks).
fn setup_checks(
    path: &std::path::Path,
    config: &str,
    vars: &[(&str, &str)],
) -> (i32, Vec<serde_json::Value>) {
    std::fs::write(path, config).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(["doctor", "--json"])
        .env("WARDEN_CONFIG", path)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TELEGRAM_BOT_TOKEN")
        .env_remove("TELEGRAM_ALLOWED_USERS")
        .envs(vars.iter().copied());
    let r = run(cmd);
    let report: serde_json::Value =
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    (r.status, report["setup"].as_array().unwrap().clone())
}

/// The check called `name`: (status, detail, fix).
fn check(checks: &[serde_json::Value], name: &str) -> (String, String, String) {
    let c = checks
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {checks:?}"));
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (text("status"), text("detail"), text("fix"))
}

/// [`setup_checks`] off the async threads (the fakes answer on them).
async fn doctor(
    env: &Env,
    config: String,
    vars: Vec<(&'static str, String)>,
) -> (i32, Vec<serde_json::Value>) {
    let path = env.config.clone();
    tokio::task::spawn_blocking(move || {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        setup_checks(&path, &config, &vars)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_whole_setup_and_names_each_fix() {
    let env = Env::new();
    let ws = env.ws.display().to_string();

    // Everything works: the model answers a tiny request, the bot token is accepted.
    let llm = FakeLlm::openai(vec![Turn::text("OK")]).await;
    let tg = FakeTelegram::start("123:doctor-token").await;
    let good = format!(
        "workspace = {ws:?}\n[llm]\nproviders = [\"openai\"]\n[llm.openai]\nbase_url = {:?}\n\
         model = \"tiny\"\n[telegram]\ntoken = \"123:doctor-token\"\nallowed_users = [42]\n\
         api_url = {:?}\n",
        llm.base_url(),
        tg.api_url()
    );
    let (status, checks) = doctor(&env, good.clone(), vec![]).await;
    for name in ["config", "model", "telegram", "binaries", "workspace"] {
        assert_eq!(check(&checks, name).0, "ok", "{name}: {checks:?}");
    }
    assert!(check(&checks, "model").1.contains("answered"), "{checks:?}");
    assert!(
        check(&checks, "telegram").1.contains("@warden_test_bot"),
        "{checks:?}"
    );
    assert_eq!(status, 0, "{checks:?}");
    assert_eq!(llm.request_count(), 1);

    // A config key that does not exist.
    let (status, checks) = doctor(&env, "workspce = \"/x\"\n".into(), vec![]).await;
    assert_eq!(status, 1);
    let (verdict, detail, fix) = check(&checks, "config");
    assert_eq!(verdict, "fail");
    assert!(detail.contains("workspce"), "{detail}");
    assert!(fix.contains("Configuration"), "{fix}");

    // No model at all.
    let (status, checks) = doctor(&env, String::new(), vec![]).await;
    assert_eq!(status, 1);
    let (verdict, _, fix) = check(&checks, "model");
    assert_eq!(verdict, "fail");
    assert!(
        fix.contains("warden init") && fix.contains("ANTHROPIC_API_KEY"),
        "{fix}"
    );

    // A model the server does not have (Ollama's 404).
    let missing = FakeLlm::openai(vec![Turn::error_message(
        404,
        "model \"nope\" not found, try pulling it first",
    )])
    .await;
    let config = format!(
        "[llm]\nproviders = [\"openai\"]\n[llm.openai]\nbase_url = {:?}\nmodel = \"nope\"\n",
        missing.base_url()
    );
    let (_, checks) = doctor(&env, config, vec![]).await;
    let (verdict, _, fix) = check(&checks, "model");
    assert_eq!(verdict, "fail");
    assert!(
        fix.contains("llm.openai.model") && fix.contains("-m MODEL"),
        "{fix}"
    );
    assert!(fix.contains("ollama pull nope"), "{fix}");

    // A server that is not running.
    let refused = support::refused::refused_addr();
    let (_, checks) = doctor(
        &env,
        String::new(),
        vec![("OPENAI_BASE_URL", format!("http://{}/v1", refused.addr))],
    )
    .await;
    let (verdict, _, fix) = check(&checks, "model");
    assert_eq!(verdict, "fail");
    assert!(
        fix.contains("llm.openai.base_url") && fix.contains("running"),
        "{fix}"
    );

    // A bot token Telegram refuses, and one without an allowed user.
    let wrong = good.replace("123:doctor-token", "123:wrong-token");
    let (_, checks) = doctor(&env, wrong, vec![]).await;
    let (verdict, _, fix) = check(&checks, "telegram");
    assert_eq!(verdict, "fail");
    assert!(
        fix.contains("TELEGRAM_BOT_TOKEN") && fix.contains("@BotFather"),
        "{fix}"
    );
    let nobody = good.replace("allowed_users = [42]", "allowed_users = []");
    let (_, checks) = doctor(&env, nobody, vec![]).await;
    let (verdict, _, fix) = check(&checks, "telegram");
    assert_eq!(verdict, "fail");
    assert!(
        fix.contains("telegram.allowed_users") && fix.contains("warden init"),
        "{fix}"
    );

    // A workspace that is a file.
    let file = env.outside("x").join("not-a-folder");
    std::fs::write(&file, "").unwrap();
    let config = good.replace(
        &format!("workspace = {ws:?}"),
        &format!("workspace = {:?}", file.display().to_string()),
    );
    let (status, checks) = doctor(&env, config, vec![]).await;
    assert_eq!(status, 1);
    let (verdict, _, fix) = check(&checks, "workspace");
    assert_eq!(verdict, "fail");
    assert!(fix.contains("`workspace`"), "{fix}");
}

#[test]
fn doctor_names_the_missing_sibling_binaries() {
    let dir = tempfile::tempdir().unwrap();
    let lonely = dir.path().join("warden-full");
    std::fs::copy(env!("CARGO_BIN_EXE_warden-full"), &lonely).unwrap();
    let env = Env::new();
    let mut cmd = Command::new(&lonely);
    cmd.args(["doctor", "--offline", "--json"])
        .env("WARDEN_CONFIG", &env.config);
    let r = run(cmd);
    assert_eq!(r.status, 1, "{r:?}");
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let checks = report["setup"].as_array().unwrap();
    let (verdict, detail, fix) = check(checks, "binaries");
    assert_eq!(verdict, "fail");
    assert!(
        detail.contains("warden-bot") && detail.contains("warden,"),
        "{detail}"
    );
    assert!(fix.contains("cargo install --path ."), "{fix}");
}

#[test]
fn a_reader_that_goes_away_ends_doctor_quietly() {
    let env = Env::new();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{:?} doctor --offline --json | true; echo \"status=${{PIPESTATUS[0]}}\"",
            env!("CARGO_BIN_EXE_warden")
        ))
        .env("WARDEN_CONFIG", &env.config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}
