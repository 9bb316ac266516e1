//! The commented example config in README.md is parsed by the real config parser, so the
//! documentation cannot drift from the code (unknown keys are errors).

#[test]
fn the_readme_example_config_parses() {
    let readme = include_str!("../../README.md");
    let section = readme
        .split("## Configuration")
        .nth(1)
        .expect("README has a Configuration section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the Configuration section holds a toml block");
    let config = warden::config::Config::parse(block, std::path::Path::new("README.md"))
        .unwrap_or_else(|e| panic!("README example config: {e}"));
    assert_eq!(config.llm.max_iterations, 25);
    assert_eq!(config.sandbox.timeout_secs, 120);
    assert!(config.telegram.allowed_users.is_empty());
    assert!(config.workspace.ends_with(".warden/workspace"));
    assert!(config.skills.enabled && config.skills.bundled);
    assert!(config.skills.hosts.is_empty());
    assert!(
        config.search.provider.is_none(),
        "no search tool by default"
    );
    assert_eq!(config.search.max_results, 5);
    assert!(config.delegate.enabled);
    assert_eq!(config.delegate.max_iterations, 10);
}

#[test]
fn the_readme_mcp_example_parses() {
    let readme = include_str!("../../README.md");
    let section = readme
        .split("\n## MCP\n")
        .nth(1)
        .expect("README has an MCP section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the MCP section holds a toml block");
    let config = warden::config::Config::parse(block, std::path::Path::new("README.md"))
        .unwrap_or_else(|e| panic!("README MCP example: {e}"));
    let notes = &config.mcp.servers["notes"];
    assert_eq!(notes.command.as_deref(), Some("python3"));
    assert_eq!(
        notes.tool_rule("delete"),
        Some(warden::policy::Decision::Deny)
    );
    assert!(config.mcp.servers["docs"].url.is_some());
}

/// The README's Quickstart: its two shell blocks.
fn quickstart() -> (String, String) {
    let readme = include_str!("../../README.md");
    let section = readme
        .split("\n## Quickstart\n")
        .nth(1)
        .expect("README has a Quickstart section");
    let mut blocks = section
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap().trim().to_string());
    (blocks.next().unwrap(), blocks.next().unwrap())
}

#[test]
fn the_quickstart_comes_first_and_its_test_command_is_the_one_ci_runs() {
    let readme = include_str!("../../README.md");
    let first_section = readme.split("\n## ").nth(1).unwrap();
    assert!(first_section.starts_with("Quickstart"), "{first_section}");
    let (setup, tests) = quickstart();
    assert!(
        setup.contains("warden init") && setup.ends_with("warden chat"),
        "{setup}"
    );
    let ci = include_str!("../../.ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == tests),
        ".ci/run must call the README's test command {tests:?}"
    );
}

/// The README's first command as written, on a fresh HOME against the fake model: it installs
/// warden, `warden init` writes the config (stdin is no terminal: the flags' defaults), and
/// `warden chat` answers. One word is added: `cargo install --debug`, into this checkout's own
/// target folder, so the install reuses the build `.ci/run` made a step before instead of
/// compiling every crate again in the release profile (4 minutes of CI for a check of the
/// commands, not of the optimizer). Ignored by `cargo test`; `.ci/run` runs it after
/// `cargo build`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn the_readme_quickstart_sets_up_and_starts_the_agent() {
    use crate::support::fake_llm::{FakeLlm, Turn};
    let llm = FakeLlm::anthropic(vec![Turn::text("Hello from the fake model.")]).await;
    let (setup, _) = quickstart();
    assert!(setup.starts_with("cargo install "), "{setup}");
    let setup = setup.replacen("cargo install ", "cargo install --debug ", 1);
    let home = tempfile::tempdir().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let install = repo.join("target/readme-quickstart");
    let real_home = std::env::var("HOME").unwrap();
    let cargo_home = std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{real_home}/.cargo"));
    let rustup_home =
        std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{real_home}/.rustup"));
    let path = format!(
        "{}:{cargo_home}/bin:{}",
        install.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let base = llm.base_url();
    let home_path = home.path().to_path_buf();
    // What decides whether `cargo build`'s artifacts are fresh for the install (CI builds
    // with clippy's driver as the workspace's rustc wrapper).
    let build_env: Vec<(String, String)> = [
        "CARGO_INCREMENTAL",
        "RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
    .collect();
    let out = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(&setup)
            .current_dir(repo)
            .env_clear()
            .env("HOME", &home_path)
            .env("PATH", path)
            .env("CARGO_HOME", cargo_home)
            .env("RUSTUP_HOME", rustup_home)
            .envs(build_env)
            .env("CARGO_INSTALL_ROOT", &install)
            .env("CARGO_TARGET_DIR", repo.join("target"))
            .env("ANTHROPIC_BASE_URL", base)
            .env("ANTHROPIC_API_KEY", "test-key")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"hello\n/exit\n")
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Hello from the fake model."),
        "{stdout}\n{stderr}"
    );
    assert!(home.path().join(".warden/config.toml").is_file());
    assert_eq!(llm.request_count(), 1);
}
