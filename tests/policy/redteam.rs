//! What a red team chained from allowed commands, one class at a time: each case is a form the
//! old policy allowed (or mis-checked), with the decision and the reason it must now give.
//!
//! Classes: writes that create git config or attributes (directly, through a copied directory,
//! a hard link, or an archive's members, links and renames); git config read the way git reads
//! it; options of programs that do not use getopt; abbreviations of listed flags; file lists
//! whose names were never checked; `sed -i` backup suffixes that are paths; remote tar archives;
//! extraction restoring setuid modes; `cd` through a symlink and `..`.

use crate::support::archives::{self, Member};
use std::path::PathBuf;
use std::sync::Arc;
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
    for dir in [
        "src",
        "out",
        ".git/hooks",
        "cfgcopy/git",
        "repo-copy/.git",
        "sub/deeper",
        "git",
        "attrs",
    ] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    for (file, text) in [
        ("notes.txt", "one\ntwo\n"),
        ("src/main.rs", "fn main() {}\n"),
        (".git/HEAD", "ref: refs/heads/main\n"),
        (".git/config", "[core]\n\tbare = false\n"),
        // A config that hides a filter behind a comment ending in a backslash.
        (
            "cfgcopy/git/config",
            "[core]\n# see \\\n[filter \"x\"]\n\tclean = sh\n",
        ),
        ("git/config", "[core]\n\tpager = sh\n"),
        ("attrs/.gitattributes", "* filter=x\n"),
        ("repo-copy/.git/config", "[core]\n\tbare = false\n"),
        ("names0", "notes.txt\0src/main.rs\0"),
        ("bad-names0", "notes.txt\0../secret\0"),
        ("bad-names.txt", "notes.txt\n../secret\n"),
        ("option-names.txt", "notes.txt\n-C\n/\n"),
        ("xz.tar.xz", "\u{fd}7zXZ\0 not really"),
    ] {
        std::fs::write(ws.join(file), text).unwrap();
    }
    // The xz magic must be the raw bytes, not UTF-8.
    std::fs::write(ws.join("xz.tar.xz"), b"\xfd7zXZ\x00rest").unwrap();
    std::fs::write(r.join("secret"), "s3cret\n").unwrap();
    std::os::unix::fs::symlink(".git", ws.join("gitlink")).unwrap();
    std::os::unix::fs::symlink("sub/deeper", ws.join("deep")).unwrap();
    std::os::unix::fs::symlink("src", ws.join("inner")).unwrap();
    std::fs::hard_link(ws.join(".git/config"), ws.join("hardlinked.txt")).unwrap();
    // A repository whose config hides `core.pager` behind a comment ending in a backslash.
    std::fs::create_dir_all(ws.join("tricky/.git")).unwrap();
    std::fs::write(ws.join("tricky/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        ws.join("tricky/.git/config"),
        "[core]\n\tbare = false\n# harmless \\\n\tpager = sh -c id\n",
    )
    .unwrap();
    // The form the red team used: a value whose trailing comment ends in a backslash. git
    // ignores the backslash (it is in a comment); the old inspector took it as a continuation
    // and skipped the [filter] header on the next line.
    std::fs::create_dir_all(ws.join("tricky2/.git")).unwrap();
    std::fs::write(ws.join("tricky2/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        ws.join("tricky2/.git/config"),
        "[core]\n\tbare = false # see below \\\n[filter \"x\"]\n\tclean = sh -c id\n",
    )
    .unwrap();
    archives::write(
        &ws.join("ok.tgz"),
        &[Member::Dir("pkg"), Member::File("pkg/a.txt", "a\n")],
    );
    archives::write(
        &ws.join("dotgit.tar"),
        &[Member::File(".git/config", "[core]\n\tpager = sh\n")],
    );
    archives::write(
        &ws.join("nested.tgz"),
        &[Member::File("x/.git/hooks/post-checkout", "sh\n")],
    );
    archives::write(
        &ws.join("config-home.tar"),
        &[Member::File(".config/git/config", "[core]\n\tpager = sh\n")],
    );
    archives::write(
        &ws.join("attributes.tar"),
        &[Member::File("src/.gitattributes", "* filter=x\n")],
    );
    archives::write(
        &ws.join("through-link.tar"),
        &[Member::File("gitlink/config", "[core]\n\tpager = sh\n")],
    );
    archives::write(
        &ws.join("hardlink.tar"),
        &[Member::HardLink("innocent.txt", ".git/config")],
    );
    archives::write(&ws.join("device.tar"), &[Member::CharDevice("null2")]);
    archives::write(
        &ws.join("strip.tar"),
        &[Member::File("top/.gitconfig", "[core]\n\tpager = sh\n")],
    );
    archives::write(&ws.join("a:b.tar"), &[Member::File("f", "f\n")]);
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
    // ---- writes that create git config or attributes ----------------------------------------
    ("cp -r cfgcopy .config", Deny, "git's global config"),
    ("cp -r cfgcopy/git .config", Deny, "git's global config"),
    ("mv cfgcopy .config", Deny, "git's global config"),
    ("cp -r repo-copy copy", Deny, ".git/"),
    ("cp -r attrs elsewhere", Deny, ".gitattributes"),
    ("cp -R -t out cfgcopy repo-copy", Deny, ".git/"),
    (
        "cp --parents git/config .config",
        Deny,
        "git's global config",
    ),
    ("cp -r src src2", Allow, "allowed: cp"),
    ("mv src renamed", Allow, "allowed: mv"),
    ("cp -r src out", Allow, "allowed: cp"),
    // Onto an existing file: the file is replaced; what a directory there would receive is
    // still checked by name (an earlier command of the line could make it one).
    ("cp notes.txt src/main.rs", Allow, "allowed: cp"),
    ("mv notes.txt src/main.rs", Allow, "allowed: mv"),
    ("cp -r repo-copy notes.txt", Deny, ".git/"),
    (
        "rm notes.txt; mkdir notes.txt; cp -r attrs notes.txt",
        Deny,
        ".gitattributes",
    ),
    ("echo '* filter=x' > .gitattributes", Deny, ".gitattributes"),
    (
        "echo '* diff=x' >> src/.gitattributes",
        Deny,
        ".gitattributes",
    ),
    ("cp notes.txt sub/.gitattributes", Deny, ".gitattributes"),
    ("echo x > gitlink/config", Deny, ".git/"),
    ("cp -s notes.txt link", Deny, "symbolic links"),
    ("cp -l notes.txt hard", Deny, "hard links"),
    ("cp --link notes.txt hard", Deny, "hard links"),
    ("echo x > hardlinked.txt", Deny, "hard links"),
    ("sed -i s/a/b/ hardlinked.txt", Deny, "hard links"),
    ("cat hardlinked.txt", Allow, "allowed: cat"),
    // ---- archive extraction: the members are what is written --------------------------------
    ("tar -xzf ok.tgz", Allow, "allowed: tar"),
    ("tar xzf ok.tgz -C out", Allow, "allowed: tar"),
    ("tar -xf dotgit.tar", Deny, "holds .git/config"),
    ("tar -xzf nested.tgz", Deny, ".git/"),
    ("tar -xf config-home.tar", Deny, "git's global config"),
    ("tar -xf attributes.tar", Deny, ".gitattributes"),
    ("tar -xf through-link.tar", Deny, "gitlink/config"),
    ("tar -xf hardlink.tar", Deny, "links to .git/config"),
    ("tar -xf device.tar", Deny, "device node"),
    (
        "tar -xf strip.tar --strip-components=1",
        Deny,
        "git's global config",
    ),
    ("tar -xJf xz.tar.xz", Deny, "xz-compressed"),
    ("cat ok.tgz | tar -xz", Deny, "standard input"),
    (
        "tar -xf ok.tgz --transform s/pkg/.git/",
        Deny,
        "renaming members",
    ),
    ("tar -xf ok.tgz --xform=s/a/b/", Deny, "renaming members"),
    ("tar -xpf ok.tgz", Deny, "restoring"),
    ("tar --same-permissions -xf ok.tgz", Deny, "restoring"),
    (
        "tar -xf ok.tgz --same-owner",
        Deny,
        "not in the policy's list",
    ),
    ("tar -czf b.tgz --mode=u+s src", Deny, "setuid"),
    ("tar -czf b.tgz --mode=go-w src", Allow, "allowed: tar"),
    ("mkdir x && tar -xzf ok.tgz -C x", Deny, "its own command"),
    // ---- remote archives ---------------------------------------------------------------------
    ("tar -tf a:b.tar", Deny, "host:path"),
    ("tar -xf evil@host:x.tar", Deny, "host:path"),
    ("tar --file=host:x.tar -c src", Deny, "host:path"),
    ("tar -tf ./a:b.tar", Allow, "allowed: tar"),
    ("tar --force-local -tf a:b.tar", Allow, "allowed: tar"),
    // ---- git config read as git reads it -----------------------------------------------------
    ("git -C tricky status", Deny, "core.pager"),
    ("cd tricky && git log", Deny, "core.pager"),
    ("git -C tricky2 status", Deny, "[filter]"),
    ("git status", Allow, "allowed: git"),
    // ---- file lists ----------------------------------------------------------------------------
    ("wc --files0-from=names0", Allow, "allowed: wc"),
    (
        "wc --files0-from=bad-names0",
        Deny,
        "named in the file list",
    ),
    (
        "du --files0-from=bad-names0",
        Deny,
        "named in the file list",
    ),
    (
        "sort --files0-from=bad-names0",
        Deny,
        "named in the file list",
    ),
    ("printf 'x' | wc --files0-from=-", Deny, "standard input"),
    ("file -f bad-names.txt", Deny, "named in the file list"),
    (
        "file --files-from=bad-names.txt",
        Deny,
        "named in the file list",
    ),
    (
        "tar -cf l.tar -T bad-names.txt",
        Deny,
        "named in the file list",
    ),
    (
        "tar -cf l.tar --files-from=option-names.txt",
        Deny,
        "as an option",
    ),
    ("tar -cf l.tar -T names0 --null", Allow, "allowed: tar"),
    // ---- programs that do not use getopt -----------------------------------------------------
    ("xxd -ps ../secret", Deny, "outside"),
    ("xxd -s 10 notes.txt", Allow, "allowed: xxd"),
    ("xxd -ps notes.txt", Allow, "allowed: xxd"),
    // ---- abbreviations of listed flags ---------------------------------------------------------
    ("grep --lab x ../secret", Deny, "write the flag in full"),
    ("sort --out=x notes.txt", Deny, "write the flag in full"),
    ("du --files0 bad-names0", Deny, "write the flag in full"),
    (
        "sort --compress-prog=sh notes.txt",
        Deny,
        "runs a compression program",
    ),
    (
        "tar -x --direc out -f ok.tgz",
        Deny,
        "write the flag in full",
    ),
    // ---- sed -i backup suffixes ----------------------------------------------------------------
    ("sed -i.bak s/one/1/ notes.txt", Allow, "allowed: sed"),
    ("sed -i'../../*' s/one/1/ notes.txt", Deny, "outside"),
    (
        "sed --in-place='../*.bak' s/one/1/ notes.txt",
        Deny,
        "outside",
    ),
    ("sed -i'.git/*' s/one/1/ notes.txt", Deny, ".git/"),
    // ---- cd: bash is logical, the executor physical ------------------------------------------
    ("cd deep/.. && ls", Deny, "bash's cd"),
    ("cd deep && cd .. && ls", Deny, "bash's cd"),
    ("cd -P deep/.. && ls", Allow, "allowed: cd, ls"),
    ("cd inner && ls", Allow, "allowed: cd, ls"),
    ("cd sub/deeper/.. && ls", Allow, "allowed: cd, ls"),
];

#[test]
fn red_team_classes_are_closed() {
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
fn extraction_never_restores_owners_or_modes() {
    let fx = fixture();
    let mut checker = checker(&fx);
    for command in [
        "tar -xzf ok.tgz",
        "tar xzf ok.tgz -C out",
        "tar -x -z -f ok.tgz -- pkg",
    ] {
        let verdict = checker.check(command);
        assert_eq!(verdict.decision, Allow, "{command}: {}", verdict.reason);
        let argv = &verdict.script.commands().next().unwrap().argv;
        let end = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
        for flag in ["-o", "--no-same-permissions"] {
            assert!(argv[..end].iter().any(|a| a == flag), "{command}: {argv:?}");
        }
    }
}

#[test]
fn one_checker_decides_each_command_on_its_own_after_a_parse_given_up() {
    let fx = fixture();
    let policy = Policy::from_user_toml(
        "[settings]\nmax_input_bytes = 8388608\nparse_budget_ms = 20\n",
        "test",
    )
    .unwrap();
    let mut checker = Arc::new(policy)
        .checker(&fx.workspace, &[], &fx.workspace)
        .unwrap();
    let long = format!("echo {}", "'a' \"b\" ".repeat(300_000));
    for _ in 0..3 {
        let verdict = checker.check(&long);
        assert_eq!(verdict.decision, Deny);
        assert!(
            verdict.reason.contains("took too long"),
            "{}",
            verdict.reason
        );
        let verdict = checker.check("cat notes.txt");
        assert_eq!(verdict.decision, Allow, "{}", verdict.reason);
        let argv: Vec<_> = verdict.script.commands().map(|c| c.argv.clone()).collect();
        assert_eq!(argv, [["cat", "notes.txt"]]);
    }
}
