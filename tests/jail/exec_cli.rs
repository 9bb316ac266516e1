//! `warden exec`: the policy decides, the checked IR runs in the jail; denials and unanswerable
//! approvals exit 126 with the reason on stderr.

use crate::common::*;
use std::process::Command;
use std::time::Duration;

fn exec(env: &Env, flags: &[&str], command: &str) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.arg("exec")
        .arg("--workspace")
        .arg(&env.ws)
        .args(flags)
        .arg("--")
        .arg(command)
        .env("WARDEN_CONFIG", &env.config)
        .env("ANTHROPIC_API_KEY", SECRET_KEY)
        .stdin(std::process::Stdio::null());
    run(cmd)
}

#[test]
fn allowed_commands_run_with_pipes_redirections_and_cd() {
    let env = Env::new();
    std::fs::create_dir(env.ws.join("sub")).unwrap();
    let r = exec(
        &env,
        &[],
        "echo hello > sub/f.txt && echo world >> sub/f.txt; cd sub && cat f.txt | tr a-z A-Z && pwd",
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        r.stdout,
        format!("HELLO\nWORLD\n{}\n", env.ws.join("sub").display())
    );
    let r = exec(&env, &[], "cat <<EOF\nfrom a here-doc\nEOF");
    assert_eq!(r.stdout, "from a here-doc\n", "{r:?}");
    // The last pipeline's status is warden's.
    let r = exec(&env, &[], "ls does-not-exist");
    assert_eq!(r.status, 2, "{r:?}");
}

#[test]
fn denied_commands_exit_126_with_the_reason() {
    let env = Env::new();
    let r = exec(&env, &[], "cat /etc/shadow");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.starts_with("warden: denied: "), "{r:?}");
    assert!(r.stdout.is_empty());
    let r = exec(&env, &[], "sh -c 'echo hi'");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("shell"), "{r:?}");
}

#[test]
fn ask_is_a_denial_without_an_approver() {
    let env = Env::new();
    std::fs::create_dir(env.ws.join("dir")).unwrap();
    let r = exec(&env, &[], "rm -r dir");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("approval required"), "{r:?}");
    assert!(r.stderr.contains("pass --yes"), "{r:?}");
    assert!(env.ws.join("dir").exists(), "an unapproved command ran");
}

#[test]
fn yes_approves_asks_but_never_denials() {
    let env = Env::new();
    std::fs::create_dir(env.ws.join("dir")).unwrap();
    let r = exec(&env, &["--yes"], "rm -r dir");
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stderr.contains("approved with --yes"), "{r:?}");
    assert!(!env.ws.join("dir").exists());
    let r = exec(&env, &["--yes"], "cat /etc/shadow");
    assert_eq!(r.status, 126, "{r:?}");
}

use crate::support::pty;

#[test]
fn on_a_terminal_an_ask_is_put_to_the_person() {
    let env = Env::new();
    for (answer, removed) in [("n", false), ("y", true)] {
        std::fs::create_dir_all(env.ws.join("dir")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.args(["exec", "--workspace"])
            .arg(&env.ws)
            .args(["--", "rm -r dir"])
            .env("WARDEN_CONFIG", &env.config);
        let mut terminal = pty::Pty::spawn(cmd);
        let asked = terminal.expect("Run it? [y/N] ", Duration::from_secs(20));
        assert!(asked.contains("recursive delete"), "{asked}");
        assert!(asked.contains("rm -r dir"), "{asked}");
        terminal.send(&format!("{answer}\r"));
        let status = terminal.wait(Duration::from_secs(20));
        assert_eq!(status.success(), removed, "{}", terminal.screen());
        assert_eq!(!env.ws.join("dir").exists(), removed);
    }
}

#[test]
fn exec_has_the_timeout_and_scrubbed_environment_of_the_jail() {
    let env = Env::new();
    let r = exec(&env, &["--timeout", "1"], "sleep 30");
    assert_eq!(r.status, 124, "{r:?}");
    assert!(r.elapsed < Duration::from_secs(2), "{r:?}");
    // The default refuses a bare printenv (the whole environment at once); this policy file
    // allows it, to see everything the jail's environment holds.
    let policy = env.outside("p").join("printenv.toml");
    std::fs::write(&policy, "[programs.printenv]\nargs = \"value\"\n").unwrap();
    let r = exec(&env, &["--policy", policy.to_str().unwrap()], "printenv");
    assert_eq!(r.status, 0, "{r:?}");
    assert!(!r.stdout.contains(SECRET_KEY), "{r:?}");
    assert!(r.stdout.contains("HOME="), "{r:?}");
}

#[test]
fn huge_timeouts_are_refused_with_the_setting_named_not_a_panic() {
    let env = Env::new();
    for args in [
        vec!["exec", "--timeout", "18446744073709551615", "--", "true"],
        vec!["jail", "--timeout", "18446744073709551615", "--", "true"],
        vec!["exec", "--timeout", "0", "--", "true"],
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.args(&args).env("WARDEN_CONFIG", &env.config);
        let r = run(cmd);
        assert_eq!(r.status, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains("seconds"), "{args:?}: {r:?}");
        assert!(!r.stderr.contains("panicked"), "{args:?}: {r:?}");
    }
    std::fs::write(
        &env.config,
        "[sandbox]\ntimeout_secs = 18446744073709551615\n",
    )
    .unwrap();
    for sub in ["exec", "jail"] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.args([sub, "--workspace"])
            .arg(&env.ws)
            .args(["--", "true"])
            .env("WARDEN_CONFIG", &env.config);
        let r = run(cmd);
        assert_eq!(r.status, 2, "{sub}: {r:?}");
        assert!(r.stderr.contains("sandbox.timeout_secs"), "{sub}: {r:?}");
        assert!(!r.stderr.contains("panicked"), "{sub}: {r:?}");
    }
}

/// A repository with two commits on `main`, made with git itself (not through warden).
fn two_commit_repo(ws: &std::path::Path) {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
    git(&["commit", "-q", "-a", "-m", "second"]);
}

#[test]
fn read_only_git_runs_and_its_writing_forms_stay_refused() {
    let env = Env::new();
    two_commit_repo(&env.ws);
    let r = exec(&env, &[], "git diff-tree -r --name-only HEAD~1 HEAD");
    assert_eq!((r.status, r.stdout.as_str()), (0, "a.txt\n"), "{r:?}");
    let r = exec(&env, &[], "git show-ref --branches");
    assert!(r.stdout.ends_with(" refs/heads/main\n"), "{r:?}");
    let r = exec(
        &env,
        &[],
        "git merge-base --is-ancestor HEAD~1 HEAD && git name-rev --name-only HEAD~1",
    );
    assert_eq!(r.stdout, "main~1\n", "{r:?}");
    let r = exec(&env, &[], "git annotate -L 2,2 a.txt");
    assert!(r.stdout.contains("two"), "{r:?}");
    // format-patch writes where -o says (checked as a write there).
    let r = exec(&env, &[], "git format-patch -o patches -1");
    assert_eq!(r.stdout, "patches/0001-second.patch\n", "{r:?}");
    assert!(env.ws.join("patches/0001-second.patch").is_file());
    let r = exec(&env, &[], "git format-patch -o /tmp -1");
    assert_eq!(r.status, 126, "{r:?}");
    // What writes objects, refs or worktrees keeps its rule.
    for (command, why) in [
        ("git hash-object -w a.txt", "writes the object"),
        ("git worktree add wt main", "only `git worktree list`"),
        ("git notes remove HEAD", "only `git notes list`"),
        ("git fsck --lost-found", "lost-found"),
        ("git help log", "man"),
    ] {
        let r = exec(&env, &[], command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
    }
    let r = exec(&env, &[], "git count-objects");
    assert!(r.stdout.starts_with("6 objects"), "{r:?}");
}

#[test]
fn cd_goes_into_a_directory_made_earlier_in_the_line() {
    let env = Env::new();
    let r = exec(
        &env,
        &[],
        "mkdir -p a/b && cd a && ls && cd b && echo hi > f.txt && pwd",
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, format!("b\n{}\n", env.ws.join("a/b").display()));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("a/b/f.txt")).unwrap(),
        "hi\n"
    );
    // A directory nothing makes is still refused, and so is one made outside the line's roots.
    let r = exec(&env, &[], "mkdir -p c && cd d");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("cd: d is not a directory"), "{r:?}");
    let r = exec(&env, &[], "touch e && cd e");
    assert_eq!(r.status, 126, "{r:?}");
    // mkdir fails (a file is in the way): the cd fails when it runs, and nothing checked for
    // the directory runs anywhere else.
    std::fs::write(env.ws.join("g"), "").unwrap();
    let r = exec(&env, &[], "mkdir -p g/h; cd g/h; echo here > f.txt");
    assert_ne!(r.status, 0, "{r:?}");
    assert!(!env.ws.join("f.txt").exists());
}

#[test]
fn unset_variables_expand_to_nothing_as_in_bash() {
    let env = Env::new();
    // Quoted: one empty argument; unquoted: no argument at all.
    let r = exec(
        &env,
        &[],
        "test -z \"$GIT_BRANCH\" && printf '[%s]' \"$NAME\" $NAME x && echo",
    );
    assert_eq!((r.status, r.stdout.as_str()), (0, "[][x]\n"), "{r:?}");
    // What was checked is what runs: the path with the empty variable is the one refused.
    let r = exec(&env, &[], "cat \"$PREFIX/etc/passwd\"");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("/etc/passwd is outside"), "{r:?}");
    let r = exec(&env, &[], "$TOOL ls");
    assert_eq!(r.status, 126, "{r:?}");
}

#[test]
fn variables_set_earlier_in_the_line_are_known() {
    let env = Env::new();
    let r = exec(
        &env,
        &[],
        "name=alice; dir=notes/$name; mkdir -p \"$dir\" && cd \"$dir\" && echo \"hi $name\" > f.txt && cat f.txt",
    );
    assert_eq!((r.status, r.stdout.as_str()), (0, "hi alice\n"), "{r:?}");
    assert!(env.ws.join("notes/alice/f.txt").is_file());
    // The value is checked where it is used.
    let r = exec(&env, &[], "f=/etc/passwd; cat \"$f\"");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("/etc/passwd is outside"), "{r:?}");
    // Behind && the assignment may not run; PATH is the sandbox's.
    for command in ["true && x=1; echo $x", "PATH=/tmp; ls"] {
        let r = exec(&env, &[], command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
    }
}

#[test]
fn tilde_and_home_are_the_workspace_as_in_the_jail() {
    let env = Env::new();
    std::fs::write(env.ws.join("notes.txt"), "mine\n").unwrap();
    // warden's own HOME is elsewhere: `~` still means the workspace, as HOME does in the jail.
    let home = env.outside("home");
    std::fs::write(home.join("notes.txt"), "the real home's\n").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(["exec", "--workspace"])
        .arg(&env.ws)
        .args([
            "--",
            "ls ~ && cat ~/notes.txt \"$HOME/notes.txt\" && cd && pwd && echo \"$HOME\"",
        ])
        .env("WARDEN_CONFIG", &env.config)
        .env("HOME", &home)
        .stdin(std::process::Stdio::null());
    let r = run(cmd);
    let ws = env.ws.display();
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        r.stdout,
        format!("notes.txt\nmine\nmine\n{ws}\n{ws}\n"),
        "{r:?}"
    );
    // Out of the workspace through `~`: refused, and the reason says what `~` is here.
    for command in ["cat ~/../home/notes.txt", "ls $HOME/..", "echo x > ~/../x"] {
        let r = exec(&env, &[], command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(
            r.stderr.contains("~ and $HOME are the workspace"),
            "{command}: {r:?}"
        );
    }
    assert!(!env.dir.path().join("x").exists());
}

#[test]
fn command_substitution_runs_first_in_the_jail_and_is_one_argument() {
    let env = Env::new();
    std::fs::create_dir(env.ws.join("sub")).unwrap();
    // A hostile file: its text becomes an argument of printf, never a word of a command.
    std::fs::write(env.ws.join("evil.txt"), "-rf /; $(id) `id` *\n\n").unwrap();
    let r = exec(
        &env,
        &[],
        "printf '[%s]\\n' \"$(cat evil.txt)\" \"x $(cd sub && pwd) y\" \"$(printf 'a\\n\\n')\" && pwd \
         && [ -n \"$(ls sub)\" ] || echo sub-is-empty",
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        r.stdout,
        format!(
            "[-rf /; $(id) `id` *]\n[x {} y]\n[a]\n{}\nsub-is-empty\n",
            env.ws.join("sub").display(),
            env.ws.display()
        ),
        "{r:?}"
    );
    // It runs in the jail: the inner command sees the jail's environment, not warden's.
    let r = exec(&env, &[], "echo \"key=$(printenv ANTHROPIC_API_KEY)\"");
    assert_eq!((r.status, r.stdout.as_str()), (0, "key=\n"), "{r:?}");
    // Too much output: the command does not run with a value cut short.
    let r = exec(&env, &[], "echo \"$(seq 1 20000)\" && echo ran");
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.stderr.contains("more than 65536 bytes"), "{r:?}");
    assert!(!r.stdout.contains("ran"), "{r:?}");
}

#[test]
fn command_substitution_stays_refused_where_its_output_could_be_a_path_or_option() {
    let env = Env::new();
    std::fs::write(env.ws.join("notes.txt"), "n\n").unwrap();
    for (command, why) in [
        ("cat \"$(echo notes.txt)\"", "it could be a path"),
        ("rm \"$(echo notes.txt)\"", "argument 1 of rm"),
        ("ls -la \"$(echo -R)\"", "argument 2 of ls"),
        ("echo x > \"$(echo notes.txt)\"", "not allowed here"),
        ("\"$(echo rm)\" notes.txt", "the command name"),
        ("echo \"$(rm notes.txt)\"", "writes files"),
        ("echo \"$(cat ../x)\"", "outside the workspace"),
        ("echo $(ls)", "quote it"),
    ] {
        let r = exec(&env, &[], command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
    }
    assert_eq!(
        std::fs::read_to_string(env.ws.join("notes.txt")).unwrap(),
        "n\n"
    );
}

#[test]
fn process_substitution_gives_the_program_a_pipe_from_a_command_run_in_the_jail() {
    let env = Env::new();
    std::fs::write(env.ws.join("a"), "pear\napple\nfig\n").unwrap();
    std::fs::write(env.ws.join("b"), "fig\nkiwi\napple\n").unwrap();
    let r = exec(&env, &[], "comm -13 <(sort a) <(sort b)");
    assert_eq!((r.status, r.stdout.as_str()), (0, "kiwi\n"), "{r:?}");
    let r = exec(&env, &[], "diff <(sort a) <(sort b) | grep -c '^[<>]'");
    assert_eq!((r.status, r.stdout.as_str()), (0, "2\n"), "{r:?}");
    // More than a pipe holds, read as it is written; the program sees warden's descriptor.
    let r = exec(&env, &[], "wc -l <(seq 1 200000)");
    assert_eq!(r.stdout, "200000 /dev/fd/9\n", "{r:?}");
    // A program that stops reading ends the writer (EPIPE), not the deadline.
    let r = exec(&env, &["--timeout", "20"], "head -n 1 <(seq 1 100000000)");
    assert_eq!((r.status, r.stdout.as_str()), (0, "1\n"), "{r:?}");
    // The outer command's status is the line's; the inner one's stderr is the command's.
    let r = exec(&env, &[], "cat <(ls missing) <(echo after)");
    assert_eq!((r.status, r.stdout.as_str()), (0, "after\n"), "{r:?}");
    assert!(r.stderr.contains("missing"), "{r:?}");
    let r = exec(&env, &[], "cmp -s <(echo x) <(echo y) || echo differ");
    assert_eq!(r.stdout, "differ\n", "{r:?}");
    // It runs in the jail: warden's environment is not there.
    let r = exec(&env, &[], "cat <(printenv ANTHROPIC_API_KEY) <(echo end)");
    assert_eq!(r.stdout, "end\n", "{r:?}");
    assert!(!r.stdout.contains(SECRET_KEY) && !r.stderr.contains(SECRET_KEY));
}

#[test]
fn process_substitution_stays_refused_where_the_pipe_would_be_written_or_decide_anything() {
    let env = Env::new();
    std::fs::write(env.ws.join("notes.txt"), "n\n").unwrap();
    for (command, why) in [
        ("cat <(rm notes.txt)", "writes files"),
        ("cat <(sort -o notes.txt notes.txt)", "writes files"),
        ("cat <(rm -r notes.txt)", "needs approval"),
        ("cat <(cat ../x)", "outside the workspace"),
        ("cat > <(echo notes.txt)", "not allowed here"),
        ("cat < <(echo hi)", "not allowed here"),
        ("cat notes.txt >(cat)", "output process substitution"),
        ("<(echo rm) notes.txt", "the command name"),
        ("tee <(cat) < notes.txt", "would write to it"),
        ("sort -o <(cat) notes.txt", "would write to it"),
        ("echo <(echo hi)", "reads a file operand"),
        ("sed -f <(echo d) notes.txt", "not supported for sed"),
        ("cp <(echo x) notes.txt", "copies or moves files"),
        ("cat <(cat <(echo hi))", "inside another substitution"),
        ("cat <(echo hi) /dev/fd/9", "only warden's own pipe"),
    ] {
        let r = exec(&env, &[], command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
        assert!(r.stdout.is_empty(), "{command}: {r:?}");
    }
    assert_eq!(
        std::fs::read_to_string(env.ws.join("notes.txt")).unwrap(),
        "n\n"
    );
}

#[test]
fn a_checksum_list_on_stdin_has_its_names_checked_before_the_program_reads_it() {
    let env = Env::new();
    std::fs::write(env.ws.join("notes.txt"), "n\n").unwrap();
    let outside = env.outside("outside");
    std::fs::write(outside.join("secret"), "s\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), env.ws.join("link")).unwrap();
    let sum = "d3b07384d113edec49eaa6238ad5ff00"; // md5 of "foo\n": not the file's
    let r = exec(
        &env,
        &[],
        &format!("printf '%s  notes.txt\\n' {sum} | md5sum -c; echo status $?"),
    );
    assert_eq!(r.stdout, "notes.txt: FAILED\nstatus 1\n", "{r:?}");
    // The list's text is what md5sum gets: the tagged form and escapes are read alike.
    let r = exec(
        &env,
        &[],
        "md5sum notes.txt > sums.md5 && md5sum --tag notes.txt >> sums.md5 && md5sum -c < sums.md5",
    );
    assert_eq!(
        (r.status, r.stdout.as_str()),
        (0, "notes.txt: OK\nnotes.txt: OK\n"),
        "{r:?}"
    );
    // A name outside the roots, directly or through a link: the line stops before md5sum runs.
    for list in [
        format!("{sum}  ../outside/secret"),
        format!("{sum}  link"),
        format!("MD5 (/etc/shadow) = {sum}"),
    ] {
        let command = format!("echo '{list}' | md5sum -c; echo after");
        let r = exec(&env, &[], &command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(
            r.stderr
                .contains("named in the file list on standard input"),
            "{command}: {r:?}"
        );
        assert!(
            !r.stdout.contains("after") && !r.stdout.contains("OK"),
            "{r:?}"
        );
    }
    // A line the policy cannot read as a checksum is refused rather than guessed at.
    let r = exec(&env, &[], "echo 'garbage' | sha256sum -c");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("cannot read as a checksum"), "{r:?}");
}

#[test]
fn xargs_checks_every_batch_it_builds_before_running_it() {
    let env = Env::new();
    std::fs::create_dir(env.ws.join("docs")).unwrap();
    std::fs::write(env.ws.join("docs/a.txt"), "hi a\n").unwrap();
    std::fs::write(env.ws.join("docs/b c.txt"), "no\n").unwrap();
    std::fs::write(env.ws.join("docs/d.txt"), "hi d\n").unwrap();
    let r = exec(
        &env,
        &[],
        "find docs -name '*.txt' -print0 | sort -z | xargs -0 grep -l hi",
    );
    assert_eq!(
        (r.status, r.stdout.as_str()),
        (0, "docs/a.txt\ndocs/d.txt\n"),
        "{r:?}"
    );
    // Batches of -n, quotes and backslashes read as GNU xargs reads them; a batch that fails
    // makes the status 123 and the next still runs.
    let r = exec(
        &env,
        &[],
        "printf '%s\\n' \"'docs/b c.txt'\" docs/a.txt nope docs/d\\\\.txt | xargs -n 2 cat; echo $?",
    );
    assert_eq!(r.stdout, "no\nhi a\nhi d\n123\n", "{r:?}");
    // Empty input: the command runs once, unless -r.
    let r = exec(
        &env,
        &[],
        "true | xargs echo once; true | xargs -r echo never",
    );
    assert_eq!((r.status, r.stdout.as_str()), (0, "once\n"), "{r:?}");
}

#[test]
fn xargs_input_cannot_smuggle_paths_options_or_writes_and_refused_forms_stay_refused() {
    let env = Env::new();
    std::fs::write(env.ws.join("notes.txt"), "n\n").unwrap();
    // Names and options from the input are checked where they land; the first refused batch
    // stops the line before it runs, and nothing after it runs.
    for (command, why) in [
        (
            "echo notes.txt /etc/passwd | xargs cat; echo after",
            "/etc/passwd is outside",
        ),
        (
            "echo -exec rm {} + | xargs find . -name x; echo after",
            "find -exec",
        ),
        (
            "echo --files0-from=/etc/shadow | xargs wc; echo after",
            "/etc/shadow",
        ),
        (
            "echo notes.txt | xargs -n 1 rm; echo after",
            "writes the files its arguments",
        ),
        // An option from the input that makes the batch write.
        (
            "echo -o out.txt | xargs sort notes.txt; echo after",
            "writes files",
        ),
        (
            "echo notes.txt | xargs sort -o out.txt; echo after",
            "writes files",
        ),
    ] {
        let r = exec(&env, &[], command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
        assert!(!r.stdout.contains("after"), "{command}: {r:?}");
    }
    assert!(env.ws.join("notes.txt").exists());
    assert!(!env.ws.join("out.txt").exists());
    // A name like an option stays a name after --, and is an option without it (checked).
    let r = exec(&env, &[], "echo -- -rf | xargs ls; echo $?");
    assert!(r.stdout.ends_with("123\n"), "{r:?}");
    // Refused when checked: a refused command, options warden's xargs does not model.
    for (command, why) in [
        ("echo x | xargs sh -c id", "shell"),
        ("echo x | xargs python3 -c 1", "python3"),
        ("echo x | xargs -I{} cat {}", "-I{}"),
        ("echo x | xargs -P 4 cat", "-P"),
        ("echo x | xargs -a notes.txt cat", "-a"),
        ("echo x | xargs git log", "xargs git"),
        ("echo x | xargs", "needs the command"),
    ] {
        let r = exec(&env, &[], command);
        assert_eq!(r.status, 126, "{command}: {r:?}");
        assert!(r.stderr.contains(why), "{command}: {r:?}");
        assert!(r.stdout.is_empty(), "{command}: {r:?}");
    }
}
