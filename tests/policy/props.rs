//! Property test: grammar-shaped random command strings (programs, flags, paths inside and
//! outside the workspace, five quoting styles, redirections, pipes, lists, here-documents)
//! never make the checker panic, and every allowed verdict passes the independent invariant
//! (`warden::policy::invariant::verify`): listed programs only, every path inside the roots,
//! no argument reaching a secret. The same invariant runs in the cargo-fuzz target.

use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use warden::policy::{invariant, Checker, Decision, Policy};

struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    secrets: Vec<PathBuf>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        let r = root.path().canonicalize().unwrap();
        let ws = r.join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("notes.txt"), "a TODO\n").unwrap();
        std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(r.join("secret"), "s\n").unwrap();
        std::fs::create_dir_all(r.join("home/.ssh")).unwrap();
        std::fs::write(r.join("home/.ssh/id_rsa"), "k\n").unwrap();
        std::os::unix::fs::symlink(r.join("secret"), ws.join("link_secret")).unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("escape")).unwrap();
        std::os::unix::fs::symlink(r.join("home"), ws.join("homelink")).unwrap();
        // What a red team used: git config and attributes to copy or extract into place, a
        // hard link to .git/config, symlinks through which `cd ..` differs, file lists.
        for dir in [
            ".git",
            "cfgcopy/git",
            "repo-copy/.git",
            "attrs",
            "sub/deeper",
        ] {
            std::fs::create_dir_all(ws.join(dir)).unwrap();
        }
        for (file, text) in [
            (".git/config", "[core]\n\tbare = false\n"),
            ("cfgcopy/git/config", "[core]\n# x \\\n\tpager = sh\n"),
            ("repo-copy/.git/config", "[core]\n\tbare = false\n"),
            ("attrs/.gitattributes", "* filter=x\n"),
            ("names0", "notes.txt\0../secret\0"),
            ("names.txt", "notes.txt\n/etc/shadow\n"),
        ] {
            std::fs::write(ws.join(file), text).unwrap();
        }
        std::os::unix::fs::symlink(".git", ws.join("gitlink")).unwrap();
        std::os::unix::fs::symlink("sub/deeper", ws.join("deep")).unwrap();
        std::fs::hard_link(ws.join(".git/config"), ws.join("hardlinked.txt")).unwrap();
        let secrets = vec![
            r.join("secret"),
            r.join("home/.ssh/id_rsa"),
            PathBuf::from("/etc/shadow"),
            PathBuf::from("/etc/passwd"),
        ];
        Fixture {
            workspace: ws,
            secrets,
            _root: root,
        }
    })
}

fn checker() -> Checker {
    let fx = fixture();
    Arc::new(Policy::embedded_default())
        .checker(&fx.workspace, &[], &fx.workspace)
        .unwrap()
}

const PROGRAMS: &[&str] = &[
    "ls", "cat", "grep", "sort", "sed", "find", "git", "echo", "cp", "mv", "rm", "tar", "head",
    "wc", "tee", "chmod", "printf", "uniq", "diff", "touch", "mkdir", "cd", "sh", "bash",
    "python3", "env", "xargs", "awk", "curl", "eval", "/bin/cat", "./run", "c\\at", "s\\h", "xxd",
    "du", "file", "jq",
];
const FLAGS: &[&str] = &[
    "-l",
    "-a",
    "-rn",
    "-o",
    "-e",
    "-exec",
    "--output",
    "-i",
    "-c",
    "-f",
    "-C",
    "-I",
    "-n",
    "-p",
    "--to-command=sh",
    "-delete",
    "--output=/etc/x",
    "-o/tmp/x",
    "--file=/etc/shadow",
    "-r",
    "-R",
    "-ps",
    "-s",
    "--outp",
    "--lab",
    "--files0-from=names0",
    "--files0-from",
    "-T",
    "--transform=s/x/.git/",
    "-i'../*'",
    "-i.git/*",
    "--parents",
    "-t",
    "-l",
];
const PATHS: &[&str] = &[
    "notes.txt",
    "src",
    "src/main.rs",
    "../secret",
    "/etc/passwd",
    "/etc/shadow",
    "~/.ssh/id_rsa",
    "$HOME/.ssh/id_rsa",
    "~/../home/.ssh/id_rsa",
    "$HOME/../secret",
    "link_secret",
    "escape/passwd",
    "escape/shadow",
    "/tmp/x",
    "*.txt",
    "/e*c/p*d",
    "sub/../../secret",
    "sub/../notes.txt",
    ".git/config",
    "/dev/null",
    "$PWD/notes.txt",
    "homelink/.ssh/id_rsa",
    "src/*",
    "../*",
    "~",
    ".",
    "..",
    "/",
    ".gitattributes",
    "src/.gitattributes",
    ".config",
    ".config/git/config",
    ".gitconfig",
    "cfgcopy",
    "cfgcopy/git",
    "repo-copy",
    "attrs",
    "gitlink/config",
    "hardlinked.txt",
    "names0",
    "names.txt",
    "deep/..",
    "deep",
];
const ASSIGNMENTS: &[&str] = &[
    "LANG=C",
    "TZ=UTC",
    "LD_PRELOAD=./x.so",
    "PATH=.",
    "GIT_DIR=/tmp",
    "TZ=/etc/shadow",
    "x=1",
    "LC_ALL=$HOME",
];
const VALUES: &[&str] = &[
    "x", "TODO", "s/a/b/", "s/a/b/e", "e id", "w out", "1,5p", "*.rs", "a b", "{a,b}", "$(id)",
    "`id`", "${IFS}", "$SECRET", "-", "--",
];

fn quote(word: &str, style: u8) -> String {
    match style % 5 {
        0 => word.to_string(),
        1 => format!("'{}'", word.replace('\'', "'\\''")),
        2 => format!("\"{}\"", word.replace(['"', '\\'], "")),
        3 => word
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    format!("\\{c}")
                } else {
                    c.to_string()
                }
            })
            .collect(),
        _ => {
            let mid = word.len() / 2;
            if word.is_char_boundary(mid) && mid > 0 {
                format!("{}'{}'", &word[..mid], &word[mid..].replace('\'', ""))
            } else {
                word.to_string()
            }
        }
    }
}

fn arg() -> impl Strategy<Value = String> {
    prop_oneof![
        (proptest::sample::select(FLAGS), any::<u8>()).prop_map(|(w, q)| quote(w, q)),
        (proptest::sample::select(PATHS), any::<u8>()).prop_map(|(w, q)| quote(w, q)),
        (proptest::sample::select(VALUES), any::<u8>()).prop_map(|(w, q)| quote(w, q)),
    ]
}

fn redirect() -> impl Strategy<Value = String> {
    let ops = proptest::sample::select(&[">", ">>", "<", "2>", "&>", "2>&1", ">&2", "2>>"][..]);
    (ops, proptest::sample::select(PATHS)).prop_map(|(op, path)| {
        if op.contains('&') && op != "&>" {
            format!(" {op}")
        } else {
            format!(" {op} {path}")
        }
    })
}

fn simple_command() -> impl Strategy<Value = String> {
    (
        proptest::sample::select(PROGRAMS),
        any::<u8>(),
        proptest::collection::vec(arg(), 0..4),
        proptest::option::of(redirect()),
    )
        .prop_map(|(program, q, args, redirect)| {
            let mut s = if q % 3 == 0 {
                quote(program, q / 3)
            } else {
                program.to_string()
            };
            for a in args {
                s.push(' ');
                s.push_str(&a);
            }
            s.push_str(&redirect.unwrap_or_default());
            s
        })
}

fn script() -> impl Strategy<Value = String> {
    let pipeline = proptest::collection::vec(simple_command(), 1..3).prop_flat_map(|cmds| {
        proptest::collection::vec(proptest::sample::select(&[" | ", " |& "][..]), cmds.len())
            .prop_map(move |pipes| {
                let mut s = cmds[0].clone();
                for (c, p) in cmds[1..].iter().zip(pipes) {
                    s.push_str(p);
                    s.push_str(c);
                }
                s
            })
    });
    let heredoc = (
        proptest::sample::select(PATHS),
        proptest::sample::select(VALUES),
    )
        .prop_map(|(target, body)| format!("cat <<'EOF' > {target}\n{body}\nEOF"));
    let copy = (
        proptest::sample::select(&["cp -r", "cp -R", "mv", "cp -a", "cp -r --parents"][..]),
        proptest::sample::select(&["cfgcopy", "cfgcopy/git", "repo-copy", "attrs", "src"][..]),
        proptest::sample::select(&[".config", ".", "out", "sub", ".config/git", "newdir"][..]),
    )
        .prop_map(|(cp, from, to)| format!("{cp} {from} {to}"));
    let cd = proptest::sample::select(
        &["cd deep", "cd deep/..", "cd ..", "cd sub", "cd -P deep/.."][..],
    )
    .prop_map(str::to_string);
    // Compound commands and the syntax issue 16 allowed, around generated commands.
    let compound = (
        0u8..9,
        simple_command(),
        simple_command(),
        proptest::sample::select(PATHS),
        proptest::sample::select(ASSIGNMENTS),
    )
        .prop_map(|(kind, a, b, path, assign)| match kind {
            0 => format!("( {a} )"),
            1 => format!("{{ {a}; {b}; }} > {path}"),
            2 => format!("if {a}; then {b}; else cd {path}; fi"),
            3 => format!("for f in {path} src/*; do {a} \"$f\"; done"),
            4 => format!("while {a}; do {b}; done"),
            5 => format!("[[ -f {path} || -n $f ]] && {a}"),
            6 => format!("! {a} || echo $?"),
            7 => format!("{assign} {a}"),
            _ => format!("cat {{{path},notes.txt}} {{a,b}}{{1..2}}"),
        });
    let step = prop_oneof![4 => pipeline, 1 => heredoc, 1 => copy, 1 => cd, 2 => compound];
    (
        proptest::collection::vec(step, 1..4),
        proptest::collection::vec(
            proptest::sample::select(&[" && ", " || ", "; ", "\n"][..]),
            3,
        ),
    )
        .prop_map(|(steps, ops)| {
            let mut s = steps[0].clone();
            for (step, op) in steps[1..].iter().zip(ops) {
                s.push_str(op);
                s.push_str(step);
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn allowed_commands_keep_the_invariant(command in script()) {
        thread_local!(static CHECKER: std::cell::RefCell<Checker> = std::cell::RefCell::new(checker()));
        let fx = fixture();
        CHECKER.with(|c| {
            let mut c = c.borrow_mut();
            let verdict = c.check(&command);
            prop_assert!(!verdict.reason.is_empty(), "no reason for {command:?}");
            if let Err(violation) = invariant::verify(&verdict, c.policy(), c.paths(), &fx.secrets) {
                prop_assert!(false, "{command:?} was {} but {violation}", verdict.decision);
            }
            Ok(())
        })?;
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let mut c = checker();
        let verdict = c.check(&text);
        prop_assert!(!verdict.reason.is_empty());
        if verdict.decision != Decision::Deny {
            let fx = fixture();
            prop_assert!(invariant::verify(&verdict, c.policy(), c.paths(), &fx.secrets).is_ok());
        }
    }
}

#[test]
fn the_generator_reaches_all_three_decisions() {
    // Guards against a generator that only ever produces denials (a vacuous property).
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::HashSet::new();
    let mut c = checker();
    for _ in 0..3000 {
        let command = script().new_tree(&mut runner).unwrap().current();
        seen.insert(c.check(&command).decision);
    }
    assert!(
        seen.contains(&Decision::Allow),
        "no allowed command generated"
    );
    assert!(seen.contains(&Decision::Deny));
    assert!(seen.contains(&Decision::Ask));
}

#[test]
fn long_inputs_that_hit_the_parse_budget_leave_the_checker_sound() {
    // One checker, a tiny parse budget: commands given up for time never change how the next
    // command is decided (the parser once resumed the abandoned parse).
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let fx = fixture();
    let policy = Policy::from_user_toml(
        "[settings]\nmax_input_bytes = 8388608\nparse_budget_ms = 20\n",
        "t",
    )
    .unwrap();
    let mut slow = Arc::new(policy)
        .checker(&fx.workspace, &[], &fx.workspace)
        .unwrap();
    let mut fresh = checker();
    let mut runner = TestRunner::deterministic();
    let long = format!("echo {}", "'a' \"b\" ".repeat(300_000));
    for _ in 0..200 {
        let command = script().new_tree(&mut runner).unwrap().current();
        assert_eq!(slow.check(&long).decision, Decision::Deny);
        let verdict = slow.check(&command);
        let expected = fresh.check(&command);
        if verdict.reason.contains("took too long") {
            continue; // a loaded machine may give up a short parse too; that is a denial
        }
        assert_eq!(
            (verdict.decision, &verdict.reason),
            (expected.decision, &expected.reason),
            "{command:?}"
        );
        invariant::verify(&verdict, slow.policy(), slow.paths(), &fx.secrets)
            .unwrap_or_else(|v| panic!("{command:?} was {} but {v}", verdict.decision));
    }
}

#[test]
fn counterexamples_the_property_once_found_stay_fixed() {
    // `-exec` is the cluster -e -x -e -c, whose -c takes the next word as a byte count: the
    // invariant once read that count as a path reaching /etc/shadow while the checker did not.
    let fx = fixture();
    let mut c = checker();
    for command in [
        "head -exec '--file=/etc/shadow' 2> src/x",
        "head -qc /etc/shadow",
    ] {
        let verdict = c.check(command);
        invariant::verify(&verdict, c.policy(), c.paths(), &fx.secrets)
            .unwrap_or_else(|v| panic!("{command:?} was {} but {v}", verdict.decision));
    }
    // A byte count that is a path is still not a read: the file operand is what head reads.
    let verdict = c.check("head -c 5 /etc/shadow");
    assert_eq!(verdict.decision, Decision::Deny, "{}", verdict.reason);
}
