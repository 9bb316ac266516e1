//! A team's policy tooling, through the binary: `warden policy test`, `explain`, `diff`, the
//! Claude Code hook with recorded hook inputs, and the CI templates' commands.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn warden(env: &Env, args: &[&str]) -> Run {
    warden_in(env, args)
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

/// A policy with a deliberately planted hole: `awk` allowed with its program text, which can
/// call system().
const HOLED: &str = r#"
[programs.awk]
args = "read"

[fixture]
files = ["data.csv"]

[[tests]]
cmd = "awk -F, '{print $1}' data.csv"
expect = "allow"

[[tests]]
cmd = "awk 'BEGIN{system(\"id\")}'"
expect = "deny"
reason_contains = "awk"
"#;

#[test]
fn policy_test_passes_the_default_and_reports_wrong_expectations() {
    let env = Env::new();
    let r = warden(&env, &["policy", "test"]);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains(" passed, 0 failed"), "{r:?}");

    let policy = write(&env.outside("p").join("holed.toml"), HOLED);
    let junit = env.outside("reports").join("junit.xml");
    let r = warden(
        &env,
        &[
            "policy",
            "test",
            "--policy",
            policy.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(r.status, 1, "{r:?}");
    assert!(
        r.stdout.contains("#2: awk 'BEGIN{system(\"id\")}'")
            && r.stdout.contains("expected deny, got allow"),
        "{r:?}"
    );
    assert!(
        r.stdout.contains("policy test: 1 passed, 1 failed"),
        "{r:?}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");

    // A separate test file; a missing one is a usage error, not a pass.
    let tests = write(
        &env.outside("p").join("more.toml"),
        "[[tests]]\ncmd = \"cat ../outside/x\"\nexpect = \"deny\"\nreason_contains = \"outside\"\n",
    );
    let r = warden(&env, &["policy", "test", tests.to_str().unwrap()]);
    assert_eq!(r.status, 0, "{r:?}");
    let r = warden(&env, &["policy", "test", "/nonexistent/tests.toml"]);
    assert_eq!(r.status, 2, "{r:?}");
    assert!(r.stderr.contains("cannot read test file"), "{r:?}");
}

#[test]
fn policy_diff_reports_a_widening_and_fails_unless_allowed() {
    let env = Env::new();
    let policy = write(&env.outside("p").join("holed.toml"), HOLED);
    let corpus = write(
        &env.outside("p").join("corpus.txt"),
        "awk 'BEGIN{system(\"id\")}'\nls\ncat data.csv\n",
    );
    let args = [
        "policy",
        "diff",
        "@default",
        policy.to_str().unwrap(),
        "--corpus",
        corpus.to_str().unwrap(),
    ];
    let r = warden(&env, &args);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.stdout.contains("[awk]"), "{r:?}");
    assert!(r.stdout.contains("WIDENS deny -> allow: awk"), "{r:?}");
    assert!(
        r.stdout
            .contains("1 of 3 commands change decision, 1 widen"),
        "{r:?}"
    );
    let mut allowed = args.to_vec();
    allowed.push("--allow-widening");
    assert_eq!(warden(&env, &allowed).status, 0);
    // The other way round it narrows: no failure.
    let r = warden(
        &env,
        &[
            "policy",
            "diff",
            policy.to_str().unwrap(),
            "@default",
            "--corpus",
            corpus.to_str().unwrap(),
        ],
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("narrows allow -> deny"), "{r:?}");
}

#[test]
fn policy_explain_shows_rules_paths_and_ir() {
    let env = Env::new();
    std::fs::create_dir(env.ws.join("src")).unwrap();
    std::fs::write(env.ws.join("src/a.txt"), "a").unwrap();
    std::os::unix::fs::symlink("src", env.ws.join("link")).unwrap();
    let r = warden(
        &env,
        &[
            "policy",
            "explain",
            "--",
            "grep -n x link/a.txt > out.txt && chmod +x out.txt",
        ],
    );
    assert_eq!(r.status, 0, "{r:?}");
    let ws = env.ws.display();
    assert!(r.stdout.starts_with("decision: allow"), "{r:?}");
    assert!(
        r.stdout.contains("rule: [programs.grep] decision allow"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("rule: [programs.chmod] decision allow, analyzer chmod"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains(&format!("path: \"link/a.txt\" -> {ws}/src/a.txt (Read)")),
        "{r:?}"
    );
    assert!(r.stdout.contains("IR: {\"steps\""), "{r:?}");
    let r = warden(
        &env,
        &["policy", "explain", "--json", "--", "cat ../../etc/shadow"],
    );
    assert_eq!(r.status, 1, "{r:?}");
    let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(json["decision"], "deny");
    assert!(json["reason"].as_str().unwrap().contains("outside"));
    assert!(
        json["why"]["decided_by"]
            .as_str()
            .unwrap()
            .starts_with("paths: the workspace"),
        "{json}"
    );
    // The path as it resolves from the workspace; a file that does not exist: its folder.
    let etc = env.ws.parent().unwrap().parent().unwrap().join("etc");
    assert_eq!(
        json["why"]["change"],
        format!("[paths]\nread = [{:?}]", etc.display().to_string())
    );

    // A denied program: the rule that decided, and a policy file that makes it ask; that file
    // really does.
    let r = warden(
        &env,
        &["policy", "explain", "--", "curl -s https://example.com"],
    );
    assert_eq!(r.status, 1, "{r:?}");
    assert!(
        r.stdout
            .contains("decided by: [programs.curl] decision = \"deny\""),
        "{r:?}"
    );
    let change: String = r
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("to let it through"))
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", l.trim_start()))
        .collect();
    let policy = write(&env.outside("p").join("curl.toml"), &change);
    let r = warden(
        &env,
        &[
            "policy",
            "check",
            "--policy",
            policy.to_str().unwrap(),
            "--",
            "curl -s https://example.com",
        ],
    );
    assert_eq!(r.status, 3, "the suggested change makes it ask: {r:?}");
}

fn hook(env: &Env, recorded: &str, policy: Option<&Path>) -> Run {
    let input = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hooks/claude-code")
            .join(recorded),
    )
    .unwrap()
    .replace("__CWD__", env.ws.to_str().unwrap());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(["hook", "claude-code"]);
    if let Some(policy) = policy {
        cmd.arg("--policy").arg(policy);
    }
    cmd.env("WARDEN_CONFIG", &env.config).env_remove("CDPATH");
    run_with_stdin(cmd, &input)
}

/// The hook asked about one Bash command, with HOME a directory beside the workspace.
fn hook_bash(env: &Env, command: &str) -> Run {
    let input = serde_json::json!({
        "session_id": "s", "cwd": env.ws, "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": command},
    });
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(["hook", "claude-code"])
        .env("WARDEN_CONFIG", &env.config)
        .env("HOME", env.outside("home"))
        .env_remove("CDPATH");
    run_with_stdin(cmd, &input.to_string())
}

fn decision(r: &Run) -> (String, String) {
    let json: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let out = &json["hookSpecificOutput"];
    assert_eq!(out["hookEventName"], "PreToolUse", "{r:?}");
    (
        out["permissionDecision"].as_str().unwrap().to_string(),
        out["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .to_string(),
    )
}

#[test]
fn the_claude_code_hook_answers_allow_deny_and_ask_in_its_format() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.join("src")).unwrap();
    std::fs::create_dir_all(env.ws.join(".git/refs/heads")).unwrap();
    std::fs::create_dir_all(env.ws.join(".git/objects")).unwrap();
    std::fs::write(env.ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(env.ws.join(".git/config"), "[core]\n\tbare = false\n").unwrap();

    let r = hook(&env, "bash_git_status.json", None);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(decision(&r).0, "allow", "{r:?}");

    let r = hook(&env, "bash_exfiltrate.json", None);
    assert_eq!(r.status, 0, "{r:?}");
    let (verdict, reason) = decision(&r);
    assert_eq!(verdict, "deny", "{r:?}");
    assert!(reason.starts_with("warden (policy only"), "{reason}");

    // Claude Code runs the command in the user's own shell: there `~` is the real home, and
    // its secrets stay refused (in warden's jail `~` is the workspace instead).
    for command in [
        "cat ~/.ssh/id_ed25519",
        "ls ~",
        "cat \"$HOME/.aws/credentials\"",
    ] {
        let r = hook_bash(&env, command);
        let (verdict, reason) = decision(&r);
        assert_eq!(verdict, "deny", "{command}: {r:?}");
        assert!(
            reason.contains("outside the workspace"),
            "{command}: {reason}"
        );
        assert!(
            !reason.contains("HOME is the workspace"),
            "{command}: {reason}"
        );
    }
    // A real shell would run a command substitution itself, unchecked.
    let (verdict, reason) = decision(&hook_bash(&env, "echo \"$(date)\""));
    assert_eq!(verdict, "deny", "{reason}");
    assert!(reason.contains("would run it unchecked"), "{reason}");
    // And a process substitution.
    let (verdict, reason) = decision(&hook_bash(&env, "comm -13 <(sort a) <(sort b)"));
    assert_eq!(verdict, "deny", "{reason}");
    assert!(
        reason.contains("process substitution") && reason.contains("would run it unchecked"),
        "{reason}"
    );

    // make is not in the default allowlist; a team's policy asks for it.
    let policy = write(
        &env.outside("p").join("ask.toml"),
        "[programs.make]\ndecision = \"ask\"\nreason = \"runs the Makefile's recipes\"\n",
    );
    let r = hook(&env, "bash_make.json", Some(&policy));
    let (verdict, reason) = decision(&r);
    assert_eq!(verdict, "ask", "{r:?}");
    assert!(reason.contains("Makefile"), "{reason}");

    // A file inside the workspace: Claude Code's own permissions decide (no output, exit 0).
    for inside in ["read_file.json", "write_inside.json", "edit_inside.json"] {
        let r = hook(&env, inside, None);
        assert_eq!(r.status, 0, "{inside}: {r:?}");
        assert_eq!(r.stdout, "", "{inside}: {r:?}");
    }
}

#[test]
fn the_hook_checks_file_tools_paths_and_asks_for_the_network() {
    let env = Env::new();
    env.outside("outside");
    // Read, Write and Edit outside the workspace: refused by the path validator.
    for (recorded, tool) in [
        ("read_ssh_key.json", "Read"),
        ("write_bashrc.json", "Write"),
        ("edit_outside.json", "Edit"),
    ] {
        let r = hook(&env, recorded, None);
        assert_eq!(r.status, 0, "{r:?}");
        let (verdict, reason) = decision(&r);
        assert_eq!(verdict, "deny", "{recorded}: {r:?}");
        assert!(reason.contains(&format!("{tool}: ")), "{reason}");
        assert!(reason.contains("outside the workspace"), "{reason}");
    }
    // Network tools ask: the command would run in Claude Code's shell, which has a network.
    for recorded in ["bash_curl.json", "webfetch.json"] {
        let r = hook(&env, recorded, None);
        let (verdict, reason) = decision(&r);
        assert_eq!(verdict, "ask", "{recorded}: {r:?}");
        assert!(reason.contains("not sandboxed"), "{reason}");
        assert!(!reason.contains("the sandbox has no network"), "{reason}");
    }
    // An ask for project code says where it would really run.
    std::fs::write(env.ws.join("build.py"), "print(1)\n").unwrap();
    let input = serde_json::json!({
        "session_id": "s", "cwd": env.ws, "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": "python3 build.py"},
    });
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(["hook", "claude-code"])
        .env("WARDEN_CONFIG", &env.config)
        .env_remove("CDPATH");
    let r = run_with_stdin(cmd, &input.to_string());
    let (verdict, reason) = decision(&r);
    assert_eq!(verdict, "ask", "{r:?}");
    assert!(
        reason.contains("Claude Code's own shell, NOT sandboxed"),
        "{reason}"
    );
    assert!(!reason.contains("in the jail"), "{reason}");
}

/// In Claude Code's shell a variable warden does not know may be set (to a key, a path
/// elsewhere): the hook refuses it, where `warden exec` expands it to nothing.
#[test]
fn the_hook_refuses_variables_a_real_shell_may_have_set() {
    let env = Env::new();
    let input = serde_json::json!({
        "session_id": "s", "cwd": env.ws, "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": "cat \"$SECRET_FILE\""},
    });
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(["hook", "claude-code"])
        .env("WARDEN_CONFIG", &env.config)
        .env_remove("CDPATH");
    let r = run_with_stdin(cmd, &input.to_string());
    let (verdict, reason) = decision(&r);
    assert_eq!(verdict, "deny", "{r:?}");
    assert!(
        reason.contains("a real shell runs this command"),
        "{reason}"
    );
}

/// Every `warden …` command in the CI templates is a real command line of this binary.
#[test]
fn the_ci_templates_run_real_commands() {
    let env = Env::new();
    let policy = write(
        &env.ws.join("warden-policy.toml"),
        "[[tests]]\ncmd = \"ls\"\nexpect = \"allow\"\n",
    );
    write(&env.ws.join("base-policy.toml"), "");
    let mut seen = 0;
    for template in ["github-actions.yml", "gitlab-ci.yml"] {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("templates/ci")
                .join(template),
        )
        .unwrap();
        for line in text.lines() {
            // A command: at the start of a step, after `run:`, or after a shell `then`.
            let Some(start) = line.find("warden policy ") else {
                continue;
            };
            let before = line[..start].trim();
            if !["", "-", "run:", "- run:"].contains(&before) && !before.ends_with("then") {
                continue;
            }
            let command = line[start..].trim_end_matches("; fi").trim_end();
            // A bounded run stays bounded, only shorter here.
            let words = shell_words::split(
                &command
                    .replace("\"$POLICY\"", policy.to_str().unwrap())
                    .replace("$POLICY", policy.to_str().unwrap())
                    .replace("--seconds 60", "--seconds 2"),
            )
            .unwrap_or_else(|e| panic!("{template}: {command}: {e}"));
            assert_eq!(words[0], "warden", "{template}: {line}");
            let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
            let r = warden(&env, &args);
            assert_eq!(r.status, 0, "{template}: {command}: {r:?}");
            seen += 1;
        }
    }
    assert!(seen >= 6, "{seen} commands found in the templates");
}

/// An agent's history, written into the audit log of a fresh HOME: what ran, what was
/// approved (by a person, once by a chat's standing rule), refused and rejected; one approval
/// older than 30 days.
fn history() -> (tempfile::TempDir, PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join(".warden/workspace");
    for dir in ["build", "src"] {
        std::fs::create_dir_all(workspace.join(dir)).unwrap();
    }
    std::fs::write(workspace.join("a.py"), "print(1)\n").unwrap();
    std::fs::write(workspace.join("a.txt"), "x\n").unwrap();
    let db = warden::schema::open(&home.path().join(".warden/warden.db")).unwrap();
    let call = |command: &str, decision: &str, reason: &str, at: Option<&str>| {
        db.conn()
            .execute(
                "INSERT INTO audit (at, session, tool, input, decision, reason, duration_ms)
                 VALUES (COALESCE(?1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), 'telegram:7',
                         'bash', ?2, ?3, ?4, 1)",
                rusqlite::params![
                    at,
                    serde_json::json!({ "command": command }).to_string(),
                    decision,
                    reason
                ],
            )
            .unwrap();
    };
    call(
        "rm -r build",
        "approved",
        "old",
        Some("2020-01-01T00:00:00.000Z"),
    );
    for _ in 0..2 {
        call(
            "rm -r build",
            "approved",
            "needs approval: rm -r: recursive delete",
            None,
        );
    }
    call(
        "rm -r build",
        "approved",
        "needs approval; approved by this chat's standing rule #1 (\"Always in this chat\")",
        None,
    );
    call("python3 a.py", "approved", "runs code", None);
    call("python3 a.py", "approved", "runs code", None);
    call("rm -r src", "rejected", "denied by Ann in Telegram", None);
    call("cat a.txt", "allow", "allowed", None);
    call(
        "curl https://example.com",
        "deny",
        "curl: a network tool",
        None,
    );
    // Another tool's calls are not commands.
    db.conn()
        .execute(
            "INSERT INTO audit (session, tool, input, decision, reason, duration_ms)
             VALUES ('telegram:7', 'read', '{\"path\":\"a.txt\"}', 'allow', 'ok', 1)",
            [],
        )
        .unwrap();
    (home, workspace)
}

fn warden_home(home: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.code().is_some(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap(), stdout)
}

#[test]
fn approvals_suggest_counts_repeated_approvals_and_shows_each_change_as_a_diff() {
    let (home, _) = history();
    let (code, out) = warden_home(home.path(), &["approvals", "suggest"]);
    assert_eq!(code, 0, "{out}");
    // The approval older than 30 days does not count.
    assert!(
        out.contains("3× approved (2 by a person, 1 by a chat's standing rule): rm -r build"),
        "{out}"
    );
    assert!(
        out.contains("asked because: rm -r: recursive delete"),
        "{out}"
    );
    assert!(
        out.contains("a copy of the current rule where -r no longer asks"),
        "{out}"
    );
    assert!(out.contains("    -r = \"flag\""), "{out}");
    // What the snippet widens beyond the approved command is in the diff over the history.
    assert!(out.contains("WIDENS ask -> allow: rm -r build"), "{out}");
    assert!(out.contains("WIDENS ask -> allow: rm -r src"), "{out}");
    assert!(
        out.contains("2 of 5 commands change decision, 2 widen"),
        "{out}"
    );
    // Code the policy cannot read gets no snippet.
    assert!(out.contains("2× approved (2 by a person, 0 by a chat's standing rule): python3 a.py"));
    assert!(
        out.contains("no policy change suggested: python3 runs code"),
        "{out}"
    );

    // The threshold and the window.
    let (_, out) = warden_home(home.path(), &["approvals", "suggest", "--min", "3"]);
    assert!(
        out.contains("rm -r build") && !out.contains("python3 a.py"),
        "{out}"
    );
    let (_, out) = warden_home(home.path(), &["approvals", "suggest", "--since", "5000d"]);
    assert!(out.contains("4× approved (3 by a person"), "{out}");
    let (code, out) = warden_home(home.path(), &["approvals", "suggest", "--min", "5"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("Nothing was approved 5 times or more"),
        "{out}"
    );

    // The suggested snippet as a policy file parses and stops the ask.
    let (_, out) = warden_home(home.path(), &["approvals", "suggest", "--min", "3"]);
    let snippet: String = out
        .lines()
        .skip_while(|l| !l.contains("suggested policy"))
        .skip(1)
        .take_while(|l| !l.starts_with("  policy diff"))
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    let file = write(&home.path().join("suggested.toml"), &snippet);
    let (code, out) = warden_home(
        home.path(),
        &[
            "policy",
            "check",
            "--policy",
            file.to_str().unwrap(),
            "--workspace",
            home.path().join(".warden/workspace").to_str().unwrap(),
            "--",
            "rm -r build",
        ],
    );
    assert_eq!(code, 0, "{out}\n{snippet}");
}

#[test]
fn policy_replay_rechecks_the_audit_log_and_gates_on_widening() {
    let (home, _) = history();
    let widen = write(
        &home.path().join("widen.toml"),
        "[programs.curl]\nargs = \"read\"\n",
    );
    let (code, out) = warden_home(home.path(), &["policy", "replay", widen.to_str().unwrap()]);
    assert_eq!(code, 1, "a widening fails the gate: {out}");
    assert!(
        out.contains("WIDENS deny -> allow: curl https://example.com"),
        "{out}"
    );
    assert!(out.contains("then: deny ×1"), "{out}");
    assert!(
        out.contains("5 commands (9 calls) in ")
            && out.contains("now 2 allowed, 3 asked, 0 refused; 1 change decision"),
        "{out}"
    );
    let (code, _) = warden_home(
        home.path(),
        &[
            "policy",
            "replay",
            widen.to_str().unwrap(),
            "--allow-widening",
        ],
    );
    assert_eq!(code, 0);

    // Narrowing passes, and says what it narrows and what happened then.
    let narrow = write(
        &home.path().join("narrow.toml"),
        "[programs.cat]\ndecision = \"deny\"\nreason = \"no cat here\"\n",
    );
    let (code, out) = warden_home(home.path(), &["policy", "replay", narrow.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("narrows allow -> deny: cat a.txt"), "{out}");
    assert!(out.contains("then: allow ×1"), "{out}");
    assert!(out.contains("now 0 allowed, 3 asked, 2 refused"), "{out}");

    // The window: only the old approval.
    let (code, out) = warden_home(
        home.path(),
        &[
            "policy",
            "replay",
            "@default",
            "--since",
            "2019-12-31T00:00:00Z",
        ],
    );
    assert_eq!(code, 0);
    assert!(out.contains("0 change decision"), "{out}");
    let (code, _) = warden_home(home.path(), &["policy", "replay", "missing.toml"]);
    assert_eq!(code, 2, "an unreadable policy is a usage error");
}
