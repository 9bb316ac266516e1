//! The red team's chains, run as an attacker runs them: one `warden exec` after another on the
//! host backend, with only commands the default policy claims to allow. Each chain must stop
//! at the step that opens the door, and the effect (a program run by git, a write through a
//! hard link, a setuid file) must never happen.

use crate::common::*;
use crate::support::archives::{self, Member};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn exec(env: &Env, command: &str) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.arg("exec")
        .arg("--workspace")
        .arg(&env.ws)
        .arg("--")
        .arg(command)
        .env("WARDEN_CONFIG", &env.config)
        .stdin(std::process::Stdio::null());
    run(cmd)
}

fn have_git() -> bool {
    let found = Command::new("git").arg("--version").output().is_ok();
    if !found {
        eprintln!("skipped: git is not installed on this machine");
    }
    found
}

/// A repository in the workspace, made by the test (as the user would have one).
fn init_repo(env: &Env) {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&env.ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", env.outside("home"))
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(env.ws.join("data.txt"), "one\n").unwrap();
    git(&["add", "data.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "init",
    ]);
    std::fs::write(env.ws.join("data.txt"), "two\n").unwrap();
}

#[test]
fn the_git_filter_chain_stops_at_every_door() {
    if !have_git() {
        return;
    }
    let env = Env::new();
    init_repo(&env);
    let marker = env.outside("out").join("filter-ran");
    let filter = format!("touch {}", marker.display());

    // 1. Attributes naming a filter driver: refused.
    let r = exec(&env, "printf '* filter=pwn\\n' > .gitattributes");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains(".gitattributes"), "{r:?}");
    assert!(!env.ws.join(".gitattributes").exists());

    // 2. A config hiding the filter behind a comment ending in a backslash is just a file...
    let write_config = format!(
        "mkdir -p stage/git && cat > stage/git/config <<'EOF'\n[core]\n\tbare = false # see \\\n\
         [filter \"pwn\"]\n\tclean = {filter}\n\tsmudge = {filter}\nEOF"
    );
    let r = exec(&env, &write_config);
    assert_eq!(r.status, 0, "{r:?}");
    // 3. ...until it is copied to where git reads its global config (HOME is the workspace).
    for copy in [
        "cp -r stage .config",
        "mv stage .config",
        "cp -r stage/git .config",
    ] {
        let r = exec(&env, copy);
        assert_eq!(r.status, 126, "{copy}: {r:?}");
        assert!(r.stderr.contains("git's global config"), "{copy}: {r:?}");
    }
    assert!(!env.ws.join(".config/git/config").exists());

    // 4. Planted anyway (by hand, as if an earlier hole had let it in): git refuses to run,
    //    whatever the comment trick.
    std::fs::create_dir_all(env.ws.join(".config")).unwrap();
    std::fs::rename(env.ws.join("stage/git"), env.ws.join(".config/git")).unwrap();
    std::fs::write(env.ws.join(".gitattributes"), "* filter=pwn\n").unwrap();
    let r = exec(&env, "git diff");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("[filter]"), "{r:?}");
    assert!(!marker.exists(), "git ran the planted filter");

    // Without the planted config, git works in the jail.
    std::fs::remove_dir_all(env.ws.join(".config")).unwrap();
    std::fs::remove_file(env.ws.join(".gitattributes")).unwrap();
    let r = exec(&env, "git diff --stat");
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("data.txt"), "{r:?}");
    assert!(!marker.exists());
}

#[test]
fn an_archive_cannot_write_through_links_or_restore_setuid() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.join(".git")).unwrap();
    let config = "[core]\n\tbare = false\n";
    std::fs::write(env.ws.join(".git/config"), config).unwrap();
    std::os::unix::fs::symlink(".git", env.ws.join("gitlink")).unwrap();
    archives::write(
        &env.ws.join("hard.tar"),
        &[Member::HardLink("innocent.txt", ".git/config")],
    );
    archives::write(
        &env.ws.join("through.tar"),
        &[Member::File("gitlink/config", "[core]\n\tpager = sh\n")],
    );
    for (command, why) in [
        ("tar -xf hard.tar", "links to .git/config"),
        ("tar -xf through.tar", "gitlink/config"),
        ("tar -xf hard.tar --transform s/x/y/", "renaming"),
    ] {
        let r = exec(&env, command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
    }
    assert!(!env.ws.join("innocent.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.ws.join(".git/config")).unwrap(),
        config
    );

    // A member with the setuid bit: extraction is allowed, the bit is not restored.
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o4755);
    header.set_size(3);
    builder
        .append_data(&mut header, "tool", &b"hi\n"[..])
        .unwrap();
    std::fs::write(env.ws.join("suid.tar"), builder.into_inner().unwrap()).unwrap();
    let r = exec(&env, "tar -xpf suid.tar");
    assert_eq!(r.status, 126, "{r:?}");
    let r = exec(&env, "tar -xf suid.tar");
    assert_eq!(r.status, 0, "{r:?}");
    let mode = std::fs::metadata(env.ws.join("tool"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7000, 0, "extracted with mode {mode:o}");
    assert_ne!(mode & 0o100, 0, "the executable bit was lost: {mode:o}");
}

fn mode_of(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// The jail's own chmod calls do nothing (Landlock cannot confine them by path): warden applies
/// checked chmod commands itself, on exactly the checked files, never adding special bits.
#[test]
fn chmod_works_on_checked_files_and_nowhere_else() {
    let env = Env::new();
    let ws = &env.ws;
    std::fs::write(ws.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::create_dir_all(ws.join("tree/sub")).unwrap();
    std::fs::write(ws.join("tree/a"), "a").unwrap();
    std::fs::write(ws.join("tree/sub/b"), "b").unwrap();
    for path in ["run.sh", "tree/a", "tree/sub/b"] {
        std::fs::set_permissions(ws.join(path), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let outside = env.outside("keys").join("secret");
    std::fs::write(&outside, "k").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();

    let r = exec(&env, "chmod u+x run.sh && chmod -R go-rwx tree");
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(mode_of(&ws.join("run.sh")), 0o744);
    assert_eq!(mode_of(&ws.join("tree/a")), 0o600);
    assert_eq!(mode_of(&ws.join("tree/sub")), 0o700);
    assert_eq!(mode_of(&ws.join("tree/sub/b")), 0o600);

    let r = exec(&env, "chmod -v 640 run.sh | cat");
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        r.stdout,
        "mode of 'run.sh' changed from 0744 (rwxr--r--) to 0640 (rw-r-----)\n"
    );
    let r = exec(&env, "chmod 600 missing; echo status $?");
    assert!(r.stdout.contains("status 1"), "{r:?}");
    assert!(r.stderr.contains("cannot access 'missing'"), "{r:?}");

    for (command, why) in [
        ("chmod u+s run.sh", "setuid"),
        ("chmod 2755 tree", "setuid"),
        ("chmod 644 link", "outside"),
        ("chmod -R -L 700 tree", "symbolic links"),
    ] {
        let r = exec(&env, command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
    }
    assert_eq!(mode_of(&outside), 0o600);
    assert_eq!(mode_of(&ws.join("run.sh")), 0o640);
}

#[test]
fn lists_backups_remote_archives_and_cd_are_checked_before_running() {
    let env = Env::new();
    std::fs::write(env.ws.join("notes.txt"), "one\n").unwrap();
    let secret = env.outside("out").join("secret.txt");
    std::fs::write(&secret, "s3cret\n").unwrap();
    std::fs::write(
        env.ws.join("names0"),
        format!("notes.txt\0{}\0", secret.display()),
    )
    .unwrap();
    std::fs::create_dir_all(env.ws.join("sub/deeper")).unwrap();
    std::os::unix::fs::symlink("sub/deeper", env.ws.join("deep")).unwrap();
    for (command, why) in [
        ("wc --files0-from=names0", "named in the file list"),
        ("sed -i'../*' s/one/1/ notes.txt", "outside"),
        ("tar -cf backup:host.tar notes.txt", "host:path"),
        ("cd deep/.. && pwd", "bash's cd"),
        ("xxd -ps ../out/secret.txt", "outside"),
    ] {
        let r = exec(&env, command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
        assert!(!r.stdout.contains("s3cret"), "{command}: {r:?}");
    }
    assert!(
        !env.ws.parent().unwrap().join("notes.txt").exists(),
        "a backup landed outside"
    );
    // The benign forms run.
    std::fs::write(env.ws.join("ok0"), "notes.txt\0").unwrap();
    let r = exec(&env, "wc -l --files0-from=ok0");
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("1 notes.txt"), "{r:?}");
    let r = exec(
        &env,
        "sed -i.bak s/one/1/ notes.txt && cat notes.txt notes.txt.bak",
    );
    assert_eq!(r.stdout, "1\none\n", "{r:?}");
    let r = exec(&env, "cd -P deep/.. && pwd");
    assert_eq!(r.status, 0, "{r:?}");
}

#[test]
fn local_git_writes_work_and_run_no_program_of_the_repository() {
    if !have_git() {
        return;
    }
    let env = Env::new();
    let ok = |command: &str| {
        let r = exec(&env, command);
        assert_eq!(r.status, 0, "{command}: {r:?}");
        r
    };
    ok("git init -q");
    ok("git config user.name Alice && git config user.email alice@example.com");
    // A hook the user's repository holds (made executable outside the jail): git in the jail
    // runs it neither on commit nor on merge.
    let marker = env.outside("out").join("hook-ran");
    for hook in [
        "pre-commit",
        "commit-msg",
        "post-commit",
        "post-merge",
        "post-checkout",
    ] {
        let path = env.ws.join(".git/hooks").join(hook);
        std::fs::write(&path, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(env.ws.join("notes.txt"), "one\n").unwrap();
    ok("git add -A && git commit -q -m first");
    ok("git switch -q -c feature");
    std::fs::write(env.ws.join("notes.txt"), "one\ntwo\n").unwrap();
    ok("git commit -q -am second");
    ok("git switch -q -");
    ok("git merge -q --no-edit feature");
    ok("git tag v1");
    let log = ok("git log --oneline --decorate");
    assert!(
        log.stdout.contains("second") && log.stdout.contains("tag: v1"),
        "{log:?}"
    );
    assert!(!marker.exists(), "a hook ran");
    // No editor runs: a commit without a message fails instead of starting one.
    let r = exec(&env, "git commit --allow-empty");
    assert_ne!(r.status, 0, "{r:?}");
    assert!(r.stderr.contains("editor"), "{r:?}");
    // The network and programs named on the command line stay out of reach.
    for (command, why) in [
        ("git push origin main", "git push is not allowed"),
        ("git merge -s pwn feature", "git-merge-pwn"),
        ("git commit -S -m x", "gpg"),
        (
            "git config core.hooksPath .git/hooks",
            "only reading configuration",
        ),
    ] {
        let r = exec(&env, command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
    }
}

/// The control: run `command` with the real program, without warden, in a scratch copy of a
/// repository holding `archive`, and return whether it wrote `.git/hooks/pre-commit`, changed
/// `.git/config` or made the link `lnk` (the archive is a real attack, refused for what it
/// does; a link into .git is what the next command writes through).
fn unchecked_run_plants(archive: &std::path::Path, command: &str) -> bool {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join(".git/hooks")).unwrap();
    std::fs::write(dir.join(".git/config"), "[core]\n").unwrap();
    std::fs::copy(archive, dir.join(archive.file_name().unwrap())).unwrap();
    Command::new("sh")
        .args(["-c", command])
        .current_dir(dir)
        .output()
        .unwrap();
    dir.join(".git/hooks/pre-commit").exists()
        || std::fs::read_to_string(dir.join(".git/config")).unwrap() != "[core]\n"
        || dir.join("lnk").is_symlink()
}

/// `warden exec COMMAND` must refuse (exit 126) with a reason naming `names`.
fn refused(env: &Env, command: &str, names: &str) {
    let r = exec(env, command);
    assert_eq!(r.status, 126, "{command}: {r:?}");
    assert!(r.stderr.contains(names), "{command}: {r:?}");
}

/// Archives whose members reach .git only as GNU tar and unzip read them: a link member and a
/// member through it, members after zero blocks (-i), a pax global `path=`, `GNU.sparse.name`,
/// a member hidden in a link's "data", unzip links from an Atari host, a Unicode Path field and
/// a control character in a name. Each extraction is refused naming the file; the user's git
/// then runs nothing.
#[test]
fn archives_cannot_plant_what_git_runs() {
    use crate::support::archives::{unicode_path, zip_entries, ZipEntry};
    use crate::support::marked_repo::MarkedRepo;
    if !have_git() {
        return;
    }
    let env = Env::new();
    let repo = MarkedRepo::init(&env.ws, &env.outside("out"));
    let hook = repo.hook();
    let config = repo.fsmonitor();
    let tars: Vec<(&str, Vec<Member>, &str)> = vec![
        (
            "link.tar",
            vec![
                Member::Symlink("lnk", ".git/hooks"),
                Member::File("lnk/pre-commit", &hook),
            ],
            "lnk/pre-commit",
        ),
        (
            "zeros.tar",
            vec![
                Member::File("a.txt", "a\n"),
                Member::ZeroBlock,
                Member::File(".git/hooks/pre-commit", &hook),
            ],
            ".git/hooks/pre-commit",
        ),
        (
            "global.tar",
            vec![
                Member::PaxGlobal(&[("path", ".git/config")]),
                Member::File("innocent.txt", &config),
            ],
            ".git/config",
        ),
        (
            "sparse.tar",
            vec![
                Member::PaxLocal(&[("GNU.sparse.name", ".git/hooks/pre-commit")]),
                Member::File("innocent.txt", &hook),
            ],
            ".git/hooks/pre-commit",
        ),
        (
            "hidden.tar",
            vec![
                Member::LinkClaimingData("harmless", "notes.txt"),
                Member::File(".git/config", &config),
            ],
            ".git/config",
        ),
    ];
    for (name, members, _) in &tars {
        archives::write(&env.ws.join(name), members);
    }
    for (name, _, file) in &tars {
        let flags = if *name == "zeros.tar" { "-xif" } else { "-xf" };
        let command = format!("tar {flags} {name}");
        assert!(
            unchecked_run_plants(&env.ws.join(name), &command),
            "control: {command} plants nothing"
        );
        refused(&env, &command, file);
    }
    // Without -i, GNU tar ends at the zero block: the first member alone is extracted.
    let r = exec(&env, "tar -xf zeros.tar");
    assert_eq!(r.status, 0, "{r:?}");
    assert!(env.ws.join("a.txt").exists());

    let zips: Vec<(&str, Vec<ZipEntry>, &str)> = vec![
        (
            "atari.zip",
            // unzip makes its links last, so the link is what a later command writes through.
            vec![ZipEntry {
                host: 5,
                ..ZipEntry::unix("lnk", 0o120_777, ".git/hooks")
            }],
            "symbolic link",
        ),
        (
            "unicode.zip",
            vec![ZipEntry {
                central_extra: unicode_path("innocent.txt", ".git/hooks/pre-commit"),
                ..ZipEntry::unix("innocent.txt", 0o100_755, &hook)
            }],
            ".git/hooks/pre-commit",
        ),
        (
            "control.zip",
            vec![ZipEntry::unix(".gi\u{1}t/config", 0o100_644, &config)],
            ".git/config",
        ),
    ];
    for (name, entries, file) in &zips {
        std::fs::write(env.ws.join(name), zip_entries(entries)).unwrap();
        let command = format!("unzip -o {name}");
        assert!(
            unchecked_run_plants(&env.ws.join(name), &command),
            "control: {command} plants nothing"
        );
        refused(&env, &command, file);
    }
    for leftover in ["lnk", "innocent.txt", "harmless"] {
        assert!(
            env.ws.join(leftover).symlink_metadata().is_err(),
            "{leftover}"
        );
    }
    repo.assert_untouched("archives");
}

/// A link one command of a line makes is not resolved by the commands after it.
#[test]
fn a_link_made_earlier_on_the_line_is_not_followed() {
    use crate::support::marked_repo::MarkedRepo;
    if !have_git() {
        return;
    }
    let env = Env::new();
    let repo = MarkedRepo::init(&env.ws, &env.outside("out"));
    std::fs::write(env.ws.join("payload"), repo.hook()).unwrap();
    std::fs::write(env.ws.join("config.txt"), repo.fsmonitor()).unwrap();
    archives::write(
        &env.ws.join("hooks.tar"),
        &[Member::Symlink("lnk", ".git/hooks")],
    );
    archives::write(&env.ws.join("git.tar"), &[Member::Symlink("g", ".git")]);
    refused(
        &env,
        "tar -xf hooks.tar && cp payload lnk/pre-commit",
        "lnk/pre-commit",
    );
    refused(
        &env,
        "tar -xf git.tar; cat config.txt >> g/config",
        "g/config",
    );
    refused(
        &env,
        "tar -xf git.tar && cd g && cp ../payload hooks/pre-commit",
        "g",
    );
    for leftover in ["lnk", "g"] {
        assert!(
            env.ws.join(leftover).symlink_metadata().is_err(),
            "{leftover}"
        );
    }
    repo.assert_untouched("links made earlier on the line");
}

/// awk file names are decoded as awk decodes them; names a program derives (a backup suffix,
/// a split chunk, a decompressed file, a name in a gzip header) are checked; `find -L` and
/// `chmod -R` do not reach into .git.
#[test]
fn names_a_program_derives_are_checked() {
    use crate::support::marked_repo::MarkedRepo;
    use std::io::Write;
    if !have_git() {
        return;
    }
    let env = Env::new();
    let repo = MarkedRepo::init(&env.ws, &env.outside("out"));
    let config = repo.fsmonitor();
    let ws = &env.ws;
    std::fs::write(ws.join(".gitconfi"), &config).unwrap();
    std::fs::write(ws.join("lines.txt"), format!("1\n2\n3\n4\n5\n{config}")).unwrap();
    let gzip = |name: Option<&str>| {
        let mut builder = flate2::GzBuilder::new();
        if let Some(name) = name {
            builder = builder.filename(name);
        }
        let mut gz = builder.write(Vec::new(), flate2::Compression::fast());
        gz.write_all(config.as_bytes()).unwrap();
        gz.finish().unwrap()
    };
    std::fs::write(ws.join(".gitconfigz"), gzip(None)).unwrap();
    std::fs::write(ws.join("named.gz"), gzip(Some(".gitconfig"))).unwrap();
    let awk = format!(
        "awk 'BEGIN {{ printf \"{}\" >> \".git\\057config\" }}'",
        config.trim_end().replace('"', "\\\"")
    );
    for (command, names) in [
        (awk.as_str(), ".git/config"),
        ("cp -b -S g notes.txt .gitconfi", ".gitconfig"),
        (
            "split -l 1 -a 1 --additional-suffix=ig lines.txt .gitcon",
            ".gitconfig",
        ),
        ("gunzip -S z .gitconfigz", ".gitconfig"),
        ("gunzip -N named.gz", "header"),
        ("find -L . -name config", "find -L"),
    ] {
        refused(&env, command, names);
    }
    // The forms that name what they write run.
    let r = exec(
        &env,
        "gunzip -c named.gz > out.txt && cp -b notes.txt out.txt",
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert!(ws.join("out.txt~").exists());

    // A hook the user keeps switched off (not executable) stays off through `chmod -R +x .`.
    let hook = ws.join(".git/hooks/pre-commit");
    std::fs::write(&hook, repo.hook()).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = exec(&env, "chmod -R +x .");
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stderr.contains("'./.git' unchanged"), "{r:?}");
    assert_eq!(mode_of(&hook), 0o644);
    assert_eq!(mode_of(&ws.join("lines.txt")) & 0o111, 0o111);
    repo.git(&["commit", "-qam", "with the hook in place", "--allow-empty"]);
    assert!(!repo.marker.exists(), "the hook ran");
    std::fs::remove_file(&hook).unwrap();
    std::fs::remove_file(ws.join(".gitconfi")).unwrap();
    repo.assert_untouched("derived names");
}

/// Trees git would check out are read first: a branch whose tree writes a root `.gitconfig`
/// (git's global config inside the jail) is refused by every subcommand that would write it;
/// merging by subtree is refused; remote changes and discarding work ask.
#[test]
fn git_checks_the_trees_it_would_write() {
    use crate::support::marked_repo::MarkedRepo;
    if !have_git() {
        return;
    }
    let env = Env::new();
    let repo = MarkedRepo::init(&env.ws, &env.outside("out"));
    repo.branch("evil", &[(".gitconfig", &repo.fsmonitor())]);
    repo.branch("sub", &[("git/config", &repo.fsmonitor())]);
    for (command, names) in [
        ("git checkout evil", ".gitconfig"),
        ("git switch evil", ".gitconfig"),
        ("git reset --hard evil", ".gitconfig"),
        ("git checkout evil -- .", ".gitconfig"),
        ("git restore --source evil .gitconfig", ".gitconfig"),
        ("git merge evil", ".gitconfig"),
        ("git merge -X subtree=.config sub", "subtree"),
        ("git remote add up ext::sh", "approval"),
        ("git reset --hard", "approval"),
    ] {
        refused(&env, command, names);
    }
    // What writes nothing protected runs.
    let r = exec(&env, "git switch -q -c work");
    assert_eq!(r.status, 0, "{r:?}");
    let r = exec(&env, "git merge -q --no-edit sub");
    assert_eq!(r.status, 0, "{r:?}");
    assert!(env.ws.join("git/config").exists());
    std::fs::remove_dir_all(env.ws.join("git")).unwrap();
    repo.assert_untouched("git trees");
}

/// A repository whose config makes a remote a promisor reachable over `ext::` (a lazy fetch
/// would run it): git is refused by the policy, and even run in the jail without the policy it
/// fetches nothing (GIT_NO_LAZY_FETCH, GIT_ALLOW_PROTOCOL).
#[test]
fn a_promisor_remote_never_runs_its_transport() {
    use crate::support::marked_repo::MarkedRepo;
    if !have_git() {
        return;
    }
    let env = Env::new();
    let repo = MarkedRepo::init(&env.ws, &env.outside("out"));
    let transport = format!("ext::sh -c touch% {}", repo.marker.display());
    for (key, value) in [
        ("extensions.partialClone", "origin"),
        ("remote.origin.promisor", "true"),
        ("remote.origin.url", transport.as_str()),
        ("protocol.ext.allow", "always"),
    ] {
        repo.git(&["config", key, value]);
    }
    let missing = "1111111111111111111111111111111111111111";
    refused(
        &env,
        &format!("git cat-file -p {missing}"),
        "names a transport",
    );
    let r = env.jail(&["git", "cat-file", "-p", missing]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(!repo.marker.exists(), "the ext:: transport ran in the jail");
    // The same lazy fetch from the user's own git does run it: the setup is a real attack.
    let out = Command::new("git")
        .args(["cat-file", "-p", missing])
        .current_dir(&env.ws)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", env.outside("home"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        repo.marker.exists(),
        "the control fetch did not run the transport"
    );
}
