//! `warden policy fuzz` through the binary: planted holes are found and minimized into
//! `[[tests]]` entries, the default policy stays clean, and the bash differential reports a
//! checker whose IR differs from what bash runs.

use crate::common::*;
use std::collections::BTreeSet;
use std::path::Path;

fn fuzz(env: &Env, args: &[&str]) -> Run {
    let mut all = vec!["policy", "fuzz"];
    all.extend_from_slice(args);
    warden_in(env, &all)
}

fn have_strace() -> bool {
    let found = Path::new("/usr/bin/strace").exists();
    if !found {
        eprintln!("skipped: strace is not installed (the real-behaviour oracle needs it)");
    }
    found
}

/// A policy file with one deliberately wrong rule; the fuzzer must find it within 60 s, as one
/// of the kinds of finding in `what`.
fn finds_the_hole(rule: &str, program: &str, what: &[&str]) {
    let env = Env::new();
    let policy = env.outside("p").join("holed.toml");
    std::fs::write(&policy, rule).unwrap();
    let r = fuzz(
        &env,
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--seconds",
            "60",
            "--max-findings",
            "1",
            "--seed",
            "1",
        ],
    );
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.stdout.contains("(d) real behaviour"), "{r:?}");
    assert!(what.iter().any(|w| r.stdout.contains(w)), "{r:?}");
    // The minimized input, as a ready test entry naming the program.
    let entry = r
        .stdout
        .split("[[tests]]\ncmd = ")
        .nth(1)
        .unwrap_or_default();
    assert!(entry.contains(program), "{r:?}");
    assert!(entry.contains("expect = \"deny\""), "{r:?}");
}

#[test]
fn a_program_whose_argument_runs_code_is_found() {
    if have_strace() {
        // Program text checked as a path: awk runs a shell, or writes or reads where it was
        // not checked; any of them is the hole.
        finds_the_hole(
            "[programs.awk]\nargs = \"read\"\n",
            "awk",
            &[
                "ran /bin/sh",
                "outside the writable roots",
                "a secret outside the workspace",
            ],
        );
    }
}

#[test]
fn a_rule_with_a_wrong_path_role_is_found() {
    if have_strace() {
        finds_the_hole(
            "[programs.tee]\nargs = \"read\"\n",
            "tee",
            &["the policy checked it as read-only"],
        );
    }
}

#[test]
fn the_default_policy_runs_clean_and_reports_in_junit() {
    let env = Env::new();
    let junit = env.outside("r").join("fuzz.xml");
    let r = fuzz(
        &env,
        &[
            "--seconds",
            "15",
            "--seed",
            "7",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("0 findings"), "{r:?}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"0\""), "{xml}");
    // Without the sampled oracles the run says so.
    let r = fuzz(&env, &["--seconds", "2", "--no-behaviour", "--json"]);
    assert_eq!(r.status, 0, "{r:?}");
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(report["cases"].as_u64().unwrap() > 1000, "{report}");
    assert!(report["skipped"][0]
        .as_str()
        .unwrap()
        .contains("switched off"));
}

/// The differential oracle is fed a known mismatch: bash runs one command string, the IR
/// comes from another (a checker that misread it). It must report the difference, and report
/// none when the IR is the real one.
#[test]
fn the_bash_differential_reports_a_checker_whose_ir_differs() {
    let env = Env::new();
    let root = env.dir.path().canonicalize().unwrap();
    let ws = &env.ws;
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("notes.txt"), "n").unwrap();
    let bash = warden::fuzzing::Bash {
        warden: env!("CARGO_BIN_EXE_warden").into(),
    };
    let policy = std::sync::Arc::new(warden::policy::Policy::embedded_default());
    let mut checker = policy.checker(ws, &[], ws).unwrap();
    let names: BTreeSet<String> = ["ls", "cat", "echo", "wc"].map(String::from).into();
    let command = "ls src && cat 'notes.txt' | wc -l; echo a\\ b";
    // Recording runs bash under strace in the jail; on a loaded machine a run can come back
    // short (the fuzzer counts such a run as inconclusive), so the recording gets three tries.
    let mut recorded = Vec::new();
    for _ in 0..3 {
        recorded = bash.record(command, &root, &names).unwrap();
        if recorded.len() == 4 {
            break;
        }
    }
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    let honest = checker.check(command);
    assert_eq!(
        honest.decision,
        warden::policy::Decision::Allow,
        "{}",
        honest.reason
    );
    warden::fuzzing::compare_with_bash(&recorded, &honest.script).unwrap();
    // A checker that read `a\ b` as two words (a classic parser differential).
    let misread = checker.check("ls src && cat 'notes.txt' | wc -l; echo a b");
    let err = warden::fuzzing::compare_with_bash(&recorded, &misread.script).unwrap_err();
    assert!(err.contains("[\"echo\", \"a b\"]"), "{err}");
}
