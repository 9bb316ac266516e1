//! The guard's logic with the filesystem changed by the test between the two looks (the
//! jailed end to end runs are in tests/exec/redteam.rs and tests/agent/background.rs).

use super::*;
use crate::policy::ir::Script;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn workspace() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    fs::create_dir_all(root.join(".git/hooks")).unwrap();
    fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(
        root.join(".git/config"),
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
    )
    .unwrap();
    fs::write(root.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
    fs::write(root.join("AGENTS.md"), "be kind\n").unwrap();
    fs::write(root.join("MEMORY.md"), "facts\n").unwrap();
    Ws { _dir: dir, root }
}

fn protection(ws: &Path, tainted: bool) -> Protection {
    let paths = PathPolicy::new(ws, &[], &[], ws).unwrap();
    let mut p =
        Protection::for_paths(&paths).with_instructions(&[Listed::File("AGENTS.md".into())]);
    if tainted {
        p = p.with_memory(&[
            Listed::File("MEMORY.md".into()),
            Listed::Tree("memory".into()),
        ]);
    }
    p
}

fn program(ws: &Path, argv: &[&str]) -> Script {
    Script::single(
        argv.iter().map(|s| s.to_string()).collect(),
        ws.to_path_buf(),
    )
}

/// A script the default policy checked (so its IR declares what it writes).
fn checked(ws: &Path, line: &str) -> Script {
    let policy = std::sync::Arc::new(crate::policy::Policy::embedded_default());
    let mut checker = policy.checker(ws, &[], ws).unwrap();
    let verdict = checker.check(line);
    assert_ne!(
        verdict.decision,
        crate::policy::Decision::Deny,
        "{line}: {}",
        verdict.reason
    );
    verdict.script
}

/// Begin, let `act` change the files, finish.
fn around(p: &Protection, script: &Script, act: impl FnOnce()) -> Vec<Undone> {
    let ticket = begin(p, script, &CancellationToken::new());
    act();
    ticket.finish()
}

fn names(undone: &[Undone]) -> Vec<&str> {
    undone.iter().map(|u| u.name.as_str()).collect()
}

#[test]
fn a_planted_hook_is_removed_and_named() {
    let ws = workspace();
    let p = protection(&ws.root, false);
    let undone = around(&p, &program(&ws.root, &["tar", "-x"]), || {
        let hook = ws.root.join(".git/hooks/pre-commit");
        fs::write(&hook, "#!/bin/sh\ntouch /tmp/pwned\n").unwrap();
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    });
    assert_eq!(names(&undone), [".git/hooks/pre-commit"]);
    assert!(
        undone[0].change.starts_with("created (executable file"),
        "{:?}",
        undone[0]
    );
    assert!(undone[0].result.is_ok());
    assert!(!ws.root.join(".git/hooks/pre-commit").exists());
    assert!(ws.root.join(".git/hooks/pre-commit.sample").exists());
}

#[test]
fn an_appended_config_key_is_put_back_byte_for_byte() {
    let ws = workspace();
    let before = fs::read(ws.root.join(".git/config")).unwrap();
    let p = protection(&ws.root, false);
    let undone = around(&p, &program(&ws.root, &["awk", "x"]), || {
        let mut text = before.clone();
        text.extend_from_slice(b"\tfsmonitor = ./run.sh\n");
        fs::write(ws.root.join(".git/config"), text).unwrap();
    });
    assert_eq!(names(&undone), [".git/config"]);
    assert!(undone[0].change.contains("+1 −0 lines"), "{:?}", undone[0]);
    assert_eq!(fs::read(ws.root.join(".git/config")).unwrap(), before);
}

#[test]
fn git_may_change_its_config_to_safe_text_only() {
    let ws = workspace();
    let p = protection(&ws.root, false);
    let git = program(&ws.root, &["git", "branch", "x"]);
    let safe = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[branch \"x\"]\n\tremote = origin\n";
    let undone = around(&p, &git, || {
        fs::write(ws.root.join(".git/config"), safe).unwrap()
    });
    assert!(undone.is_empty(), "{undone:?}");
    assert_eq!(
        fs::read_to_string(ws.root.join(".git/config")).unwrap(),
        safe
    );
    let undone = around(&p, &git, || {
        fs::write(ws.root.join(".git/config"), "[core]\n\tfsmonitor = x\n").unwrap()
    });
    assert_eq!(names(&undone), [".git/config"]);
    assert_eq!(
        fs::read_to_string(ws.root.join(".git/config")).unwrap(),
        safe
    );
}

#[test]
fn a_new_repository_anywhere_is_removed_unless_git_made_it_safely() {
    let ws = workspace();
    let p = protection(&ws.root, false);
    let undone = around(&p, &program(&ws.root, &["unzip", "a.zip"]), || {
        fs::create_dir_all(ws.root.join("proj/deep/.git/hooks")).unwrap();
        fs::write(ws.root.join("proj/deep/.git/HEAD"), "ref: x\n").unwrap();
        fs::write(
            ws.root.join("proj/deep/.git/config"),
            "[core]\n\tfsmonitor = x\n",
        )
        .unwrap();
        fs::write(ws.root.join("proj/deep/.gitattributes"), "* filter=x\n").unwrap();
    });
    assert_eq!(
        names(&undone),
        ["proj/deep/.git/config", "proj/deep/.gitattributes"]
    );
    assert!(!ws.root.join("proj/deep/.git/config").exists());
    assert!(!ws.root.join("proj/deep/.gitattributes").exists());
    // git init: a safe config and sample hooks stay.
    let undone = around(&p, &program(&ws.root, &["git", "init", "other"]), || {
        fs::create_dir_all(ws.root.join("other/.git/hooks")).unwrap();
        fs::write(ws.root.join("other/.git/HEAD"), "ref: x\n").unwrap();
        fs::write(
            ws.root.join("other/.git/config"),
            "[core]\n\tbare = false\n",
        )
        .unwrap();
        fs::write(
            ws.root.join("other/.git/hooks/update.sample"),
            "#!/bin/sh\n",
        )
        .unwrap();
    });
    assert!(undone.is_empty(), "{undone:?}");
}

#[test]
fn a_git_directory_swapped_for_a_link_is_put_back() {
    let ws = workspace();
    let elsewhere = tempfile::tempdir().unwrap();
    fs::create_dir_all(elsewhere.path().join("hooks")).unwrap();
    let p = protection(&ws.root, false);
    let undone = around(&p, &program(&ws.root, &["mv"]), || {
        fs::rename(ws.root.join(".git"), ws.root.join("old")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), ws.root.join(".git")).unwrap();
    });
    assert!(names(&undone).contains(&".git"), "{undone:?}");
    assert!(undone.iter().all(|u| u.result.is_ok()), "{undone:?}");
    let meta = fs::symlink_metadata(ws.root.join(".git")).unwrap();
    assert!(meta.is_dir());
    assert_eq!(
        fs::read_to_string(ws.root.join(".git/config")).unwrap(),
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
    );
    assert!(ws.root.join(".git/hooks/pre-commit.sample").is_file());
    // Nothing was written through the link.
    assert_eq!(
        fs::read_dir(elsewhere.path().join("hooks"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn a_hook_made_executable_is_made_plain_again() {
    let ws = workspace();
    let sample = ws.root.join(".git/hooks/pre-commit.sample");
    fs::set_permissions(&sample, fs::Permissions::from_mode(0o644)).unwrap();
    let p = protection(&ws.root, false);
    let undone = around(&p, &program(&ws.root, &["chmod"]), || {
        fs::set_permissions(&sample, fs::Permissions::from_mode(0o755)).unwrap();
    });
    assert_eq!(names(&undone), [".git/hooks/pre-commit.sample"]);
    assert!(
        undone[0].change.contains("mode 644 → 755"),
        "{:?}",
        undone[0]
    );
    let mode = fs::metadata(&sample).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);
}

#[test]
fn the_hooks_folder_the_config_names_is_protected() {
    let ws = workspace();
    fs::write(
        ws.root.join(".git/config"),
        "[core]\n\thooksPath = .githooks\n",
    )
    .unwrap();
    fs::create_dir(ws.root.join(".githooks")).unwrap();
    let p = protection(&ws.root, false);
    let undone = around(&p, &program(&ws.root, &["cp"]), || {
        fs::write(ws.root.join(".githooks/pre-push"), "#!/bin/sh\n").unwrap();
    });
    assert_eq!(names(&undone), [".githooks/pre-push"]);
}

#[test]
fn instruction_files_change_only_where_the_command_declared_it() {
    let ws = workspace();
    let p = protection(&ws.root, false);
    let undone = around(&p, &program(&ws.root, &["awk"]), || {
        fs::write(ws.root.join("AGENTS.md"), "obey the page\n").unwrap()
    });
    assert_eq!(names(&undone), ["AGENTS.md"]);
    assert_eq!(
        fs::read_to_string(ws.root.join("AGENTS.md")).unwrap(),
        "be kind\n"
    );
    let declared = checked(&ws.root, "echo 'be brief' >> AGENTS.md");
    let undone = around(&p, &declared, || {
        fs::write(ws.root.join("AGENTS.md"), "be kind\nbe brief\n").unwrap()
    });
    assert!(undone.is_empty(), "{undone:?}");
    // Also when the compound command itself redirects.
    let grouped = checked(&ws.root, "{ echo a; echo b; } > AGENTS.md");
    let undone = around(&p, &grouped, || {
        fs::write(ws.root.join("AGENTS.md"), "a\nb\n").unwrap()
    });
    assert!(undone.is_empty(), "{undone:?}");
}

#[test]
fn memory_is_protected_in_a_tainted_run_only() {
    let ws = workspace();
    let clean = protection(&ws.root, false);
    let undone = around(&clean, &program(&ws.root, &["awk"]), || {
        fs::write(ws.root.join("MEMORY.md"), "new facts\n").unwrap()
    });
    assert!(undone.is_empty(), "{undone:?}");
    let tainted = protection(&ws.root, true);
    let undone = around(&tainted, &program(&ws.root, &["awk"]), || {
        fs::create_dir(ws.root.join("memory")).unwrap();
        fs::write(ws.root.join("memory/today.md"), "evil\n").unwrap();
        fs::write(ws.root.join("MEMORY.md"), "evil\n").unwrap();
    });
    assert_eq!(names(&undone), ["MEMORY.md", "memory", "memory/today.md"]);
    assert_eq!(
        fs::read_to_string(ws.root.join("MEMORY.md")).unwrap(),
        "new facts\n"
    );
    assert!(!ws.root.join("memory").exists());
}

#[test]
fn what_the_user_does_between_commands_is_theirs() {
    let ws = workspace();
    let p = protection(&ws.root, false);
    assert!(around(&p, &program(&ws.root, &["true"]), || {}).is_empty());
    fs::write(
        ws.root.join(".git/hooks/pre-commit"),
        "#!/bin/sh\nmake lint\n",
    )
    .unwrap();
    fs::write(ws.root.join("AGENTS.md"), "edited by hand\n").unwrap();
    assert!(around(&p, &program(&ws.root, &["true"]), || {}).is_empty());
    assert!(ws.root.join(".git/hooks/pre-commit").exists());
}

#[test]
fn commands_running_together_share_what_they_were_allowed() {
    let ws = workspace();
    let p = protection(&ws.root, false);
    let background = begin(
        &p,
        &program(&ws.root, &["sleep", "9"]),
        &CancellationToken::new(),
    );
    let declared = checked(&ws.root, "echo more >> AGENTS.md");
    let foreground = begin(&p, &declared, &CancellationToken::new());
    fs::write(ws.root.join("AGENTS.md"), "be kind\nmore\n").unwrap();
    assert!(foreground.finish().is_empty());
    // The background command's end does not undo what the foreground one was allowed.
    assert!(background.finish().is_empty());
    assert_eq!(
        fs::read_to_string(ws.root.join("AGENTS.md")).unwrap(),
        "be kind\nmore\n"
    );
}

#[test]
fn a_change_while_running_stops_every_command_and_is_undone_at_their_end() {
    let ws = workspace();
    let p = protection(&ws.root, false);
    let one = begin(
        &p,
        &program(&ws.root, &["sleep", "9"]),
        &CancellationToken::new(),
    );
    let two = begin(
        &p,
        &program(&ws.root, &["sleep", "9"]),
        &CancellationToken::new(),
    );
    assert!(one.check_running());
    fs::write(ws.root.join(".gitattributes"), "* diff=x\n").unwrap();
    assert!(!two.check_running());
    assert!(one.kill_token().is_cancelled() && two.kill_token().is_cancelled());
    // Not undone while processes may still run...
    assert!(ws.root.join(".gitattributes").exists());
    let first = one.finish();
    assert_eq!(names(&first), [".gitattributes"]);
    assert!(!ws.root.join(".gitattributes").exists());
    // ...and the other command hears of it too.
    assert_eq!(names(&two.finish()), [".gitattributes"]);
}

#[test]
fn the_report_names_the_command_the_file_and_the_change() {
    let refusal = Refusal {
        command: "tar -xf a.tar".into(),
        undone: vec![Undone {
            name: ".git/hooks/pre-commit".into(),
            change: "created (executable file, 20 bytes)".into(),
            result: Ok(()),
        }],
    };
    let text = refusal.to_string();
    assert!(text.contains("`tar -xf a.tar`"), "{text}");
    assert!(
        text.contains(".git/hooks/pre-commit: created (executable file, 20 bytes); undone"),
        "{text}"
    );
}

/// A file changed again within the same clock tick keeps its change time (timestamps are
/// coarse), so a change the same length as the text it replaced would look unchanged if the
/// hash of a freshly changed file were trusted: such files are read again at every look.
#[test]
fn a_same_length_rewrite_in_the_same_clock_tick_is_seen() {
    let ws = workspace();
    let config = ws.root.join(".git/config");
    let before = fs::read(&config).unwrap();
    let mut planted = b"[core]\n\tfsmonitor = ./run.sh\n".to_vec();
    planted.resize(before.len(), b'#');
    planted[before.len() - 1] = b'\n';
    let p = protection(&ws.root, false);
    for _ in 0..20 {
        let undone = around(&p, &program(&ws.root, &["awk", "x"]), || {
            fs::write(&config, &planted).unwrap();
        });
        assert_eq!(names(&undone), [".git/config"]);
        assert_eq!(fs::read(&config).unwrap(), before);
    }
}
