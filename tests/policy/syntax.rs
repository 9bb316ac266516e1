//! The shell syntax ordinary work needs — `[ ]`, `[[ ]]`, `( )`, `{ }`, `if`, `for`, `while`,
//! `!`, brace expansion, `$?`, reading `$PATH`-style variables, harmless assignments — each
//! with the attacks it opens: brace expansion reaching outside, a subshell's `cd`, a loop or
//! branch that changes directory, assignments that load code, `[[` pattern matching.

use std::path::PathBuf;
use std::sync::Arc;
use warden::policy::ir::{Builtin, Compound};
use warden::policy::{Checker, Decision, Policy};

use Decision::{Allow, Deny};

struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().canonicalize().unwrap();
    let ws = r.join("ws");
    for dir in ["src", "docs", "sub/deeper"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    for (file, text) in [
        ("notes.txt", "one\n"),
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("src/main.rs", "fn main() {}\n"),
    ] {
        std::fs::write(ws.join(file), text).unwrap();
    }
    std::fs::write(r.join("secret"), "s\n").unwrap();
    std::os::unix::fs::symlink("sub/deeper", ws.join("deep")).unwrap();
    Fixture {
        workspace: ws,
        _root: root,
    }
}

fn checker(fx: &Fixture) -> Checker {
    Arc::new(Policy::embedded_default())
        .checker(&fx.workspace, &[], &fx.workspace)
        .unwrap()
}

/// (command, decision, a substring the reason must contain)
const CASES: &[(&str, Decision, &str)] = &[
    // ---- [ ] and [[ ]] ---------------------------------------------------------------------
    (
        "[ -f notes.txt ] && cat notes.txt",
        Allow,
        "allowed: [, cat",
    ),
    ("[ \"$PWD\" = x ] || echo no", Allow, "allowed: [, echo"),
    ("[ -f ../secret ]", Deny, "outside"),
    ("[ a < b ]", Deny, "shell syntax to bash"),
    ("[[ -f notes.txt && -d src ]]", Allow, "allowed: test, test"),
    (
        "[[ ! -e missing || -s notes.txt ]]",
        Allow,
        "allowed: test, test",
    ),
    ("[[ -f ../secret ]]", Deny, "outside"),
    ("[[ $PWD == *ws ]]", Deny, "pattern"),
    ("[[ $PWD == $HOME ]]", Deny, "matches a pattern"),
    ("[[ x == \"*\" ]]", Allow, "allowed: test"),
    ("[[ a =~ b ]]", Deny, "not supported"),
    ("[[ a < b ]]", Deny, "not supported"),
    ("[[ -v HOME ]]", Deny, "shell state"),
    // ---- groups and subshells --------------------------------------------------------------
    (
        "(cd src && ls) && cat notes.txt",
        Allow,
        "allowed: cd, ls, cat",
    ),
    ("(cd src && cat main.rs); cat src/main.rs", Allow, "allowed"),
    // After the subshell the cwd is back: main.rs is not in the workspace root.
    ("(cd src); cat ../secret", Deny, "outside"),
    (
        "{ echo a; echo b; } > out.txt",
        Allow,
        "allowed: echo, echo",
    ),
    ("{ cd src; }; cat main.rs", Allow, "allowed: cd, cat"),
    (
        "{ echo a; } > /etc/x",
        Deny,
        "writing /etc/x is not allowed",
    ),
    ("{ echo a; } > .git/config", Deny, ".git/"),
    ("(ls) | wc -l", Deny, "inside a pipeline"),
    ("{ echo a; } 3> x", Deny, "descriptor"),
    // ---- if, while, for ---------------------------------------------------------------------
    (
        "if [ -f notes.txt ]; then cat notes.txt; else echo none; fi",
        Allow,
        "allowed",
    ),
    (
        "if test -d src; then ls src; elif test -d docs; then ls docs; fi",
        Allow,
        "allowed",
    ),
    ("if true; then cat ../secret; fi", Deny, "outside"),
    (
        "if true; then cd src; fi; cat main.rs",
        Deny,
        "depending on which branch",
    ),
    (
        "if true; then (cd src && cat main.rs); fi",
        Allow,
        "allowed",
    ),
    (
        "while test ! -f done.txt; do touch done.txt; done",
        Allow,
        "allowed: test, touch",
    ),
    (
        "until test -f done.txt; do touch done.txt; done",
        Allow,
        "allowed: test, touch",
    ),
    (
        "while true; do cd src; done",
        Deny,
        "next round somewhere else",
    ),
    (
        "for f in a.txt b.txt; do wc -l \"$f\"; done",
        Allow,
        "allowed: wc, wc",
    ),
    (
        "for f in *.txt; do cat \"$f\"; done > all.txt",
        Allow,
        "allowed: cat, cat, cat",
    ),
    (
        "for d in src docs; do (cd \"$d\" && ls); done",
        Allow,
        "allowed",
    ),
    (
        "for f in notes.txt ../secret; do cat \"$f\"; done",
        Deny,
        "outside",
    ),
    ("for f in a b; do echo $f; done; echo $f", Deny, "$f"),
    ("for f; do echo; done", Deny, "without `in WORDS`"),
    ("for ((i=0;i<3;i++)); do echo; done", Deny, "arithmetic"),
    ("case x in x) ls;; esac", Deny, "case"),
    ("for x in {1..5000}; do echo $x; done", Deny, "more than"),
    ("for f in 'a b'; do cat $f; done", Deny, "quote it"),
    ("select x in a; do echo; done", Deny, "select"),
    ("! grep -q x notes.txt", Allow, "allowed: grep"),
    // ---- brace expansion -------------------------------------------------------------------
    ("mkdir -p out/{a,b}/{x,y}", Allow, "allowed: mkdir"),
    ("cat {notes,a}.txt", Allow, "allowed: cat"),
    ("cat {notes.txt,../secret}", Deny, "outside"),
    ("cat /etc/{passwd,hostname}", Deny, "outside"),
    ("echo {1..3}", Allow, "allowed: echo"),
    ("cat {~,x}/secret", Allow, "allowed: cat"),
    ("cat {~,x}/../secret", Deny, "~ and $HOME are the workspace"),
    ("echo a=~/x", Allow, "allowed: echo"),
    // bash expands `~` after `=` in an assignment-shaped word: the argument names a path
    // under a folder `x=` in the workspace, not the home directory.
    ("cat x=~/.ssh/id_rsa", Allow, "allowed: cat"),
    ("echo {1..100000}", Deny, "more than"),
    // ---- variables ---------------------------------------------------------------------------
    ("echo $PATH $USER $LANG", Allow, "allowed: echo"),
    ("ls; echo \"status: $?\"", Allow, "allowed: ls, echo"),
    ("false; [ $? -eq 1 ] && echo one", Allow, "allowed"),
    ("cat $?", Deny, "$? may only be"),
    ("echo $? > $?", Deny, "not allowed here"),
    ("echo $SHELL", Deny, "$SHELL"),
    // Not in the sandbox's environment: nothing, as bash expands an unset variable.
    ("echo $ANTHROPIC_API_KEY", Allow, "allowed: echo"),
    ("echo ${HOME:-x}", Deny, "not allowed"),
    // ---- assignments before a command --------------------------------------------------------
    ("LANG=C sort notes.txt", Allow, "allowed: sort"),
    ("LC_ALL=C TZ=UTC date", Allow, "allowed: date"),
    ("NO_COLOR=1 COLUMNS=80 ls", Allow, "allowed: ls"),
    ("LD_PRELOAD=./x.so ls", Deny, "LD_PRELOAD"),
    ("LD_LIBRARY_PATH=. ls", Deny, "LD_LIBRARY_PATH"),
    ("PATH=.:$PATH ls", Deny, "PATH"),
    ("GIT_DIR=/tmp git status", Deny, "GIT_DIR"),
    ("HTTPS_PROXY=http://x curl y", Deny, "HTTPS_PROXY"),
    ("PAGER=sh git log", Deny, "PAGER"),
    ("TZ=/etc/shadow date", Deny, "TZ"),
    ("LANG=../../tmp/x sort notes.txt", Deny, "LANG"),
    ("x=1", Allow, "allowed"),
    ("x=1 && ls", Allow, "allowed: ls"),
    ("printf -v PATH /tmp; ls", Deny, "printf -v"),
    ("read x < notes.txt", Deny, "read: sets shell variables"),
    ("for f in a b; do break; done", Deny, "loop control"),
    ("x=1; echo $x", Allow, "allowed: echo"),
    (
        "for f in a b; do true; done; f=c; echo $f",
        Allow,
        "allowed",
    ),
    (
        "for a in 1; do for b in 2; do true; done; done; echo $b",
        Deny,
        "loop that has ended",
    ),
];

#[test]
fn shell_syntax_cases() {
    let fx = fixture();
    let mut checker = checker(&fx);
    let mut failures = Vec::new();
    for (command, want, reason_part) in CASES {
        let verdict = checker.check(command);
        if verdict.decision != *want || !verdict.reason.contains(reason_part) {
            failures.push(format!(
                "{command:?}: got {} ({:?}), want {want} containing {reason_part:?}",
                verdict.decision, verdict.reason
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_ir_holds_the_structure_that_will_run() {
    let fx = fixture();
    let mut c = checker(&fx);
    let ws = fx.workspace.clone();

    // A for loop is unrolled: one checked command per value.
    let v = c.check("for f in *.txt; do wc -l \"$f\"; done");
    assert_eq!(v.decision, Allow, "{}", v.reason);
    let argv: Vec<_> = v.script.commands().map(|c| c.argv.clone()).collect();
    assert_eq!(
        argv,
        [
            ["wc", "-l", "a.txt"],
            ["wc", "-l", "b.txt"],
            ["wc", "-l", "notes.txt"]
        ]
    );
    let command = &v.script.steps[0].pipeline.commands[0];
    assert!(matches!(
        command.builtin.as_ref(),
        Some(Builtin::Compound(c)) if matches!(**c, Compound::Group(_))
    ));

    // A subshell's cd does not reach the command after it.
    let v = c.check("(cd src && ls); ls");
    let cwds: Vec<_> = v.script.commands().map(|c| c.cwd.clone()).collect();
    assert_eq!(cwds, [ws.clone(), ws.join("src"), ws.clone()]);

    // A backslash quotes what follows, as in bash: `\*` is a star, `\~` a tilde, `\{a,b}`
    // no brace expansion (the fuzzer's bash differential found `\*` globbed).
    let v = c.check(r"echo \* \~ \{a,b} a\*b");
    assert_eq!(v.decision, Allow, "{}", v.reason);
    let argv: Vec<_> = v.script.commands().map(|c| c.argv.clone()).collect();
    assert_eq!(argv, [["echo", "*", "~", "{a,b}", "a*b"]]);

    // A class negated with `^` is negated, as in bash (the glob crate reads `^` literally, so
    // `.[^.]*` matched `..`), and no pattern matches `.` or `..` (bash 5.2's globskipdots).
    std::fs::write(ws.join(".hidden"), "h\n").unwrap();
    for pattern in [".[^.]*", ".[!.]*", ".*"] {
        let v = c.check(&format!("ls {pattern}"));
        assert_eq!(v.decision, Allow, "{pattern}: {}", v.reason);
        let argv: Vec<_> = v.script.commands().map(|c| c.argv.clone()).collect();
        assert_eq!(argv, [["ls", ".hidden"]], "{pattern}");
    }
    std::fs::remove_file(ws.join(".hidden")).unwrap();

    // Brace expansion happens before the check; every word is checked.
    let v = c.check("echo x{a,b}y {1..3}");
    let argv: Vec<_> = v.script.commands().map(|c| c.argv.clone()).collect();
    assert_eq!(argv, [["echo", "xay", "xby", "1", "2", "3"]]);

    // `~` is the workspace, as in the jail.
    let home = &fx.workspace;
    let v = c.check("echo a=~/x --p=~/x");
    let argv: Vec<_> = v.script.commands().map(|c| c.argv.clone()).collect();
    assert_eq!(
        argv,
        [vec![
            "echo".to_string(),
            format!("a={}/x", home.display()),
            "--p=~/x".to_string()
        ]]
    );

    // $? is recorded where it stands; assignments become the command's environment.
    let v = c.check("true; echo \"s=$?\" $?");
    let echo = v.script.commands().nth(1).unwrap();
    assert_eq!(echo.argv, ["echo", "s=0", "0"]);
    assert_eq!(echo.argv_with_status(42), ["echo", "s=42", "42"]);
    let v = c.check("LANG=C LC_ALL=C sort notes.txt");
    let sort = v.script.commands().next().unwrap();
    assert_eq!(
        sort.env,
        [
            ("LANG".to_string(), "C".to_string()),
            ("LC_ALL".to_string(), "C".to_string())
        ]
    );

    // [[ ]] is test commands with bash's precedence: a || (b && c).
    let v = c.check("[[ -f x || -d src && -s notes.txt ]]");
    assert_eq!(v.decision, Allow, "{}", v.reason);
    let argv: Vec<_> = v.script.commands().map(|c| c.argv.clone()).collect();
    assert_eq!(
        argv,
        [
            ["test", "-f", "x"],
            ["test", "-d", "src"],
            ["test", "-s", "notes.txt"]
        ]
    );
}
