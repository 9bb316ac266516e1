//! `warden policy check` through the real binary: exit codes, --json, --batch, errors.

use std::io::Write;
use std::process::{Command, Output, Stdio};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws/src")).unwrap();
        std::fs::write(dir.path().join("ws/notes.txt"), "one\ntwo\n").unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Env { dir }
    }

    fn workspace(&self) -> std::path::PathBuf {
        self.dir.path().join("ws")
    }

    fn warden(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.args(args)
            .current_dir(self.workspace())
            .env("HOME", self.dir.path().join("home"))
            .env_remove("WARDEN_CONFIG");
        cmd
    }

    fn check(&self, args: &[&str]) -> Output {
        self.warden(args).output().unwrap()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn exit_codes_follow_the_contract() {
    let env = Env::new();
    let allow = env.check(&["policy", "check", "--", "cat notes.txt"]);
    assert_eq!(allow.status.code(), Some(0), "{}", stdout(&allow));
    assert!(stdout(&allow).starts_with("allow: "));

    let deny = env.check(&["policy", "check", "--", "cat /etc/shadow"]);
    assert_eq!(deny.status.code(), Some(1));
    assert!(
        stdout(&deny).contains("/etc/shadow is outside the workspace"),
        "{}",
        stdout(&deny)
    );

    let ask = env.check(&["policy", "check", "--", "rm -r src"]);
    assert_eq!(ask.status.code(), Some(3));
    assert!(stdout(&ask).contains("recursive delete"));

    // The command may also be given as several words after `--`.
    let words = env.check(&["policy", "check", "--", "cat", "notes.txt"]);
    assert_eq!(words.status.code(), Some(0));
}

#[test]
fn json_lists_decision_reason_and_argv() {
    let env = Env::new();
    let out = env.check(&[
        "policy",
        "check",
        "--json",
        "--",
        "grep -c one notes.txt | sort",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["reason"], "allowed: grep, sort");
    assert_eq!(
        v["commands"][0]["argv"],
        serde_json::json!(["grep", "-c", "one", "notes.txt"])
    );
    assert_eq!(v["commands"][1]["argv"], serde_json::json!(["sort"]));

    // What runs is what was checked, with the rule's added words (npm checks no registry).
    let out = env.check(&["policy", "check", "--json", "--", "npm ls"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        v["commands"][0]["argv"],
        serde_json::json!(["npm", "--no-update-notifier", "ls"])
    );
}

#[test]
fn batch_answers_one_line_per_line_in_order() {
    let env = Env::new();
    let input = "cat notes.txt\ncat /etc/shadow\n\nrm -r src\necho $(id)\n";
    let file = env.dir.path().join("batch.txt");
    std::fs::write(&file, input).unwrap();
    for source in [file.to_str().unwrap(), "-"] {
        let mut child = env
            .warden(&["policy", "check", "--batch", source])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let decisions: Vec<String> = stdout(&out)
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["decision"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            decisions,
            ["allow", "deny", "deny", "ask", "deny"],
            "from {source}"
        );
    }
}

#[test]
fn invalid_utf8_on_one_batch_line_is_denied_and_the_batch_goes_on() {
    let env = Env::new();
    let file = env.dir.path().join("batch.bin");
    let mut input = b"cat notes.txt\ncat \xff\xfe.txt\n".to_vec();
    input.extend_from_slice(b"cat notes.txt\r\nrm -r src\n");
    std::fs::write(&file, &input).unwrap();
    let out = env.check(&["policy", "check", "--batch", file.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let decisions: Vec<&str> = lines
        .iter()
        .map(|v| v["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["allow", "deny", "allow", "ask"]);
    assert!(
        lines[1]["reason"]
            .as_str()
            .unwrap()
            .contains("not valid UTF-8"),
        "{}",
        lines[1]
    );
}

/// Several threads answer a batch byte for byte as one does, in the input's order, across
/// many chunks of lines (empty lines, CRLF, invalid UTF-8 and a last line without its newline
/// included).
#[test]
fn a_batch_on_several_threads_answers_exactly_as_one_thread_does() {
    let env = Env::new();
    let lines: [&[u8]; 10] = [
        b"cat notes.txt\n",
        b"cat /etc/shadow\n",
        b"\n",
        b"rm -r src\n",
        b"echo $(id)\n",
        b"ls -la src | grep x | sort\r\n",
        b"cat \xff.txt\n",
        b"find . -name '*.rs' -newer notes.txt\n",
        b"git log --oneline -3\n",
        b"cd src && wc -l ../notes.txt\n",
    ];
    let mut input = Vec::new();
    for i in 0..1_500 {
        input.extend_from_slice(lines[i % lines.len()]);
    }
    input.extend_from_slice(b"cat notes.txt");
    let file = env.dir.path().join("batch.txt");
    std::fs::write(&file, &input).unwrap();
    let run = |jobs: Option<&str>| {
        let mut args = vec!["policy", "check", "--batch", file.to_str().unwrap()];
        if let Some(jobs) = jobs {
            args.extend(["--jobs", jobs]);
        }
        let out = env.check(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let one = run(Some("1"));
    assert_eq!(one.iter().filter(|&&b| b == b'\n').count(), 1_501);
    let decisions: Vec<String> = String::from_utf8(one.clone())
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["decision"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(decisions[..3], ["allow", "deny", "deny"]);
    assert_eq!(decisions.last().unwrap(), "allow");
    for jobs in [Some("3"), Some("2"), None] {
        assert!(run(jobs) == one, "--jobs {jobs:?} answered otherwise");
    }
    let refused = env.check(&["policy", "check", "--jobs", "2", "--", "ls"]);
    assert_eq!(refused.status.code(), Some(2), "--jobs needs --batch");
    // No thread count the machine cannot give, for the batch or the fuzz.
    let path = file.to_str().unwrap();
    for jobs in ["0", "257", "100000", "two"] {
        for args in [
            &["policy", "check", "--batch", path, "--jobs", jobs][..],
            &["policy", "fuzz", "--seconds", "1", "--jobs", jobs],
        ] {
            let out = env.check(args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains("a number of threads from 1 to 256"),
                "{args:?}: {stderr}"
            );
        }
    }
}

#[test]
fn a_parse_given_up_for_time_does_not_leak_into_the_next_line() {
    // A policy with a tiny parse budget and room for a long input: the long line is refused
    // for time, and the short lines after it are decided on their own trees.
    let env = Env::new();
    let policy = env.dir.path().join("slow.toml");
    std::fs::write(
        &policy,
        "[settings]\nmax_input_bytes = 8388608\nparse_budget_ms = 20\n",
    )
    .unwrap();
    let long = format!("echo {}", "'a' \"b\" $'c' ".repeat(200_000));
    let input = format!("{long}\ncat notes.txt\n{long}\nrm -r src\n");
    let file = env.dir.path().join("batch.txt");
    std::fs::write(&file, input).unwrap();
    let out = env.check(&[
        "policy",
        "check",
        "--policy",
        policy.to_str().unwrap(),
        "--batch",
        file.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0]["reason"]
            .as_str()
            .unwrap()
            .contains("took too long"),
        "{}",
        lines[0]["reason"]
    );
    assert_eq!(lines[1]["decision"], "allow");
    assert_eq!(
        lines[1]["commands"][0]["argv"],
        serde_json::json!(["cat", "notes.txt"])
    );
    assert_eq!(lines[2]["decision"], "deny");
    assert_eq!(lines[3]["decision"], "ask");
    assert_eq!(
        lines[3]["commands"][0]["argv"],
        serde_json::json!(["rm", "-r", "src"])
    );
}

#[test]
fn usage_and_config_errors_exit_2() {
    let env = Env::new();
    let no_command = env.check(&["policy", "check"]);
    assert_eq!(no_command.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_command.stderr).contains("give a command"));

    let bad_flag = env.check(&["policy", "check", "--frobnicate", "--", "ls"]);
    assert_eq!(bad_flag.status.code(), Some(2));

    let missing = env.check(&[
        "policy",
        "check",
        "--policy",
        "/nonexistent.toml",
        "--",
        "ls",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent.toml"));

    let bad_policy = env.dir.path().join("bad.toml");
    std::fs::write(&bad_policy, "[programs.ls]\nargz = 1\n").unwrap();
    let out = env.check(&[
        "policy",
        "check",
        "--policy",
        bad_policy.to_str().unwrap(),
        "--",
        "ls",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("argz"));

    let missing_batch = env.check(&["policy", "check", "--batch", "/nonexistent-batch"]);
    assert_eq!(missing_batch.status.code(), Some(2));
}

#[test]
fn a_user_policy_file_extends_the_default() {
    let env = Env::new();
    let file = env.dir.path().join("mine.toml");
    std::fs::write(
        &file,
        "[programs.python3]\ndecision = \"ask\"\nreason = \"runs my scripts\"\n",
    )
    .unwrap();
    let out = env.check(&[
        "policy",
        "check",
        "--policy",
        file.to_str().unwrap(),
        "--",
        "python3 x.py",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    assert!(stdout(&out).contains("runs my scripts"));
    // The rest of the default policy still applies.
    let out = env.check(&[
        "policy",
        "check",
        "--policy",
        file.to_str().unwrap(),
        "--",
        "cat notes.txt",
    ]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn workspace_flag_sets_the_roots() {
    let env = Env::new();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("f.txt"), "x").unwrap();
    let ws = other.path().to_str().unwrap();
    let out = env.check(&["policy", "check", "--workspace", ws, "--", "cat f.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = env.check(&[
        "policy",
        "check",
        "--workspace",
        ws,
        "--",
        "cat ../ws/notes.txt",
    ]);
    assert_eq!(out.status.code(), Some(1));
}
