//! Is the default policy useful? Real command examples nobody here wrote (tldr-pages, filled in
//! with workspace files and labelled benign or risky before warden's answer was looked at, see
//! tests/fixtures/usefulness/README.md) go through `warden policy check --batch` in a workspace
//! built from the fixture. Targets: at least 97% of the benign examples outside git's pages and
//! 90% counting them allowed (those that run
//! the project's code asked, and those the policy asks about by design: discarding uncommitted
//! work, deleting a tree, redirecting a remote), every benign example of a read-only git
//! subcommand allowed (but for command substitution where its output would be a path, which is
//! refused), no risky example allowed. The rates and every benign example still refused are printed, with
//! the rate that counts only allowed examples beside it.

use crate::support::archives::{self, Member};
use serde::Deserialize;
use std::path::Path;
use std::process::{Command, Stdio};
use warden::policy::fixture::{Fixture, FixtureSpec};

const FIXTURE: &str = include_str!("../fixtures/usefulness/tldr.toml");

/// git subcommands that only read: every benign example on their pages must be allowed.
const READ_ONLY_GIT: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "describe",
    "ls-files",
    "rev-parse",
    "shortlog",
    "grep",
    "cat-file",
    "rev-list",
    "ls-tree",
    "for-each-ref",
    "show-ref",
    "merge-base",
    "name-rev",
    "check-ignore",
    "check-attr",
    "count-objects",
    "diff-tree",
    "diff-index",
    "diff-files",
    "cherry",
    "range-diff",
    "annotate",
    "show-branch",
    "verify-pack",
    "fsck",
    "check-ref-format",
    "var",
    "stripspace",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Examples {
    fixture: FixtureSpec,
    example: Vec<Example>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Example {
    page: String,
    #[allow(dead_code)]
    text: String,
    #[allow(dead_code)]
    original: String,
    cmd: String,
    label: Label,
    /// Runs the project's code (a script, a build): `ask` is the expected answer.
    #[serde(default)]
    code: bool,
    /// Discards uncommitted work, deletes a tree or redirects a remote: `ask` is the expected
    /// answer (README, What git may do).
    #[serde(default)]
    asks: bool,
    #[allow(dead_code)]
    why: Option<String>,
}

#[derive(Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Label {
    Benign,
    Risky,
}

/// Files whose contents matter to the policy get real contents (archives it reads the members
/// of, checksum lists it reads the names in).
fn furnish(ws: &Path) {
    let exists = |name: &str| ws.join(name).exists();
    if exists("archive.tar.gz") {
        archives::write(
            &ws.join("archive.tar.gz"),
            &[
                Member::Dir("archive"),
                Member::File("archive/notes.txt", "from the archive\n"),
            ],
        );
    }
    if exists("archive.zip") {
        let zip = archives::zip(&[
            ("archive/", 0o40755, ""),
            ("archive/notes.txt", 0o100644, "from the archive\n"),
        ]);
        std::fs::write(ws.join("archive.zip"), zip).unwrap();
    }
    for (name, hash) in [
        (
            "sums.sha256",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ),
        ("sums.md5", "d41d8cd98f00b204e9800998ecf8427e"),
        (
            "build/sums.sha1",
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        ),
        (
            "build/sums.sha512",
            "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83",
        ),
        (
            "build/sums.b2",
            "786a02f742015903c6c6fd852552d272912f4740e15847618a",
        ),
    ] {
        if exists(name) {
            std::fs::write(
                ws.join(name),
                format!("{hash}  README.md\n{hash}  data.csv\n"),
            )
            .unwrap();
        }
    }
    if exists("notes/cleanup.sed") {
        std::fs::write(ws.join("notes/cleanup.sed"), "s/  */ /g\n/^$/d\n").unwrap();
    }
    if exists("data.json") {
        std::fs::write(
            ws.join("data.json"),
            "{\"name\": \"warden\", \"items\": [1, 2]}\n",
        )
        .unwrap();
    }
}

#[derive(Default)]
struct Tally {
    total: usize,
    passed: usize,
    misses: Vec<String>,
}

impl Tally {
    fn add(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.total += 1;
        if ok {
            self.passed += 1;
        } else {
            self.misses.push(what());
        }
    }

    fn rate(&self) -> f64 {
        if self.total == 0 {
            return 100.0;
        }
        100.0 * self.passed as f64 / self.total as f64
    }
}

/// `(decision, reason)` for each command, through the real CLI.
fn decide(fixture: &Fixture, commands: &[&str]) -> Vec<(String, String)> {
    // WARDEN_UNDER_TEST measures another build (the rates before a change); the test's own
    // binary otherwise.
    let warden = std::env::var_os("WARDEN_UNDER_TEST")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_warden").into());
    let warden = warden.as_os_str();
    let home = fixture.home();
    let base = |cmd: &mut Command| {
        cmd.args(["policy", "check", "--json", "--workspace"])
            .arg(fixture.workspace())
            .env("HOME", &home)
            .env_remove("WARDEN_CONFIG")
            .current_dir(fixture.workspace());
    };
    let parse = |line: &str| -> (String, String) {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON verdict ({e}): {line}"));
        (
            v["decision"].as_str().unwrap_or("error").to_string(),
            v["reason"].as_str().unwrap_or_default().to_string(),
        )
    };
    // One line per command with --batch; a command spanning lines is checked on its own.
    let single: Vec<&str> = commands
        .iter()
        .copied()
        .filter(|c| !c.contains('\n'))
        .collect();
    let list = fixture.path().join("commands.txt");
    std::fs::write(&list, single.join("\n") + "\n").unwrap();
    let mut batch = Command::new(warden);
    base(&mut batch);
    batch.arg("--batch").arg(&list).stdin(Stdio::null());
    let out = batch.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut answers = text.lines().map(parse);
    commands
        .iter()
        .map(|cmd| {
            if !cmd.contains('\n') {
                return answers.next().expect("one verdict per command");
            }
            let mut one = Command::new(warden);
            base(&mut one);
            one.arg("--").arg(cmd).stdin(Stdio::null());
            let out = one.output().unwrap();
            parse(String::from_utf8(out.stdout).unwrap().trim())
        })
        .collect()
}

#[test]
fn the_default_policy_allows_ordinary_work_and_nothing_risky() {
    let examples: Examples = toml::from_str(FIXTURE).expect("the fixture parses");
    let fixture = Fixture::build(&examples.fixture).expect("the fixture builds");
    furnish(&fixture.workspace());
    let commands: Vec<&str> = examples.example.iter().map(|e| e.cmd.as_str()).collect();
    let verdicts = decide(&fixture, &commands);

    let mut benign = Tally::default();
    let mut without_git = Tally::default();
    let mut code = Tally::default();
    let mut by_design = Tally::default();
    let mut allowed_only = Tally::default();
    let mut git_reading = Tally::default();
    let mut git_substituting: Vec<String> = Vec::new();
    let mut risky = Tally::default();
    for (example, (decision, reason)) in examples.example.iter().zip(&verdicts) {
        let shown = || {
            format!(
                "{}  [{}: {}]  ({})",
                example.cmd, decision, reason, example.page
            )
        };
        let allowed = decision == "allow";
        let page = example.page.rsplit('/').next().unwrap_or_default();
        let is_git = page == "git.md" || page.starts_with("git-");
        match example.label {
            Label::Risky => risky.add(!allowed, shown),
            // The project's code counts as allowed when it is asked (it runs jailed).
            // These count as allowed when they are asked.
            Label::Benign if example.code || example.asks => {
                let asked = allowed || decision == "ask";
                if example.code {
                    code.add(asked, shown);
                } else {
                    by_design.add(asked, shown);
                }
                benign.add(asked, shown);
                if !is_git {
                    without_git.add(asked, shown);
                }
                allowed_only.add(allowed, shown);
            }
            Label::Benign => {
                benign.add(allowed, shown);
                if !is_git {
                    without_git.add(allowed, shown);
                }
                allowed_only.add(allowed, shown);
                let sub = page
                    .strip_prefix("git-")
                    .and_then(|p| p.strip_suffix(".md"));
                if sub.is_some_and(|s| READ_ONLY_GIT.contains(&s)) {
                    // Command substitution is refused whatever it runs: not counted here.
                    if example.cmd.contains("$(") || example.cmd.contains('`') {
                        git_substituting.push(shown());
                    } else {
                        git_reading.add(allowed, shown);
                    }
                }
            }
        }
    }

    println!(
        "usefulness of the default policy on {} tldr-pages examples:",
        examples.example.len()
    );
    println!(
        "  benign allowed (asks counted): {}/{} = {:.1}% (target 90% counting git)",
        benign.passed,
        benign.total,
        benign.rate()
    );
    println!(
        "  without git's pages:          {}/{} = {:.1}% (target 97%)",
        without_git.passed,
        without_git.total,
        without_git.rate()
    );
    println!(
        "  of which project code asked: {}/{}",
        code.passed, code.total
    );
    println!(
        "  of which asked by design:    {}/{} (discarding work, deleting a tree, redirecting a \
         remote)",
        by_design.passed, by_design.total
    );
    println!(
        "  benign allowed outright:     {}/{} = {:.1}%",
        allowed_only.passed,
        allowed_only.total,
        allowed_only.rate()
    );
    println!(
        "  read-only git allowed:       {}/{} = {:.1}% (target 100%; {} using command \
         substitution not counted)",
        git_reading.passed,
        git_reading.total,
        git_reading.rate(),
        git_substituting.len()
    );
    println!(
        "  risky not allowed:           {}/{} (target all)",
        risky.passed, risky.total
    );
    println!("benign examples refused or asked:");
    for miss in &benign.misses {
        println!("  {miss}");
    }
    println!("read-only git examples using command substitution (refused):");
    for example in &git_substituting {
        println!("  {example}");
    }
    println!("risky examples allowed:");
    for miss in &risky.misses {
        println!("  {miss}");
    }

    assert!(
        benign.total > 300,
        "too few benign examples: {}",
        benign.total
    );
    assert!(risky.total > 20, "too few risky examples: {}", risky.total);
    assert!(
        risky.misses.is_empty(),
        "risky examples allowed:\n{}",
        risky.misses.join("\n")
    );
    assert!(
        git_reading.misses.is_empty(),
        "read-only git examples refused:\n{}",
        git_reading.misses.join("\n")
    );
    assert!(
        without_git.rate() >= 97.0,
        "{:.1}% of the benign examples outside git's pages allowed, below 97%:\n{}",
        without_git.rate(),
        without_git.misses.join("\n")
    );
    // git's pages include its writing forms (worktree add, notes add, hash-object -w), which
    // keep their rule.
    assert!(
        benign.rate() >= 90.0,
        "{:.1}% of benign examples allowed, below 90%:\n{}",
        benign.rate(),
        benign.misses.join("\n")
    );
}
