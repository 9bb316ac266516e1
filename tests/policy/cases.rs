//! Table-driven policy cases: every case checks the decision AND the reason.
//!
//! The fixture workspace has ordinary files, a symlink planted to a secret outside, a symlink to
//! /etc, a benign `.git`, and a repository whose config sets `core.fsmonitor`; `~` is a fake
//! home outside the workspace holding `.ssh/id_rsa`.

use crate::support::archives::{self, Member};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use warden::policy::{Checker, Decision, Policy};

use Decision::{Allow, Ask, Deny};

struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let ws = r.join("ws");
    for dir in ["src", "docs", "out", ".git", "evil-repo/.git", "sub/deeper"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    for (file, text) in [
        ("notes.txt", "line one\nline two TODO\n"),
        ("other.txt", "line one\n"),
        ("data.json", "{\"a\": 1}\n"),
        ("src/main.rs", "// TODO main\nfn main() {}\n"),
        ("src/lib.rs", "// lib\n"),
        ("docs/readme.md", "# readme\n"),
        (".git/HEAD", "ref: refs/heads/main\n"),
        (
            ".git/config",
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
        ),
        ("evil-repo/.git/HEAD", "ref: refs/heads/main\n"),
        ("evil-repo/.git/config", "[core]\n\tfsmonitor = ./pwn.sh\n"),
        (
            "sums.sha256",
            "d41d8cd98f00b204e9800998ecf8427e  notes.txt\n",
        ),
        ("out/w.sed", "s/a/b/\nw out/copy.txt\n"),
        ("out/e.sed", "1e id\n"),
        ("out/leak.sed", "w /tmp/x\n"),
        ("bad.md5", "d41d8cd98f00b204e9800998ecf8427e  ../secret\n"),
        ("odd.sha1", "not a checksum line\n"),
        ("tool.py", "print(1)\n"),
    ] {
        std::fs::write(ws.join(file), text).unwrap();
    }
    archives::write(
        &ws.join("backup.tgz"),
        &[
            Member::Dir("src"),
            Member::File("src/main.rs", "fn main() {}\n"),
        ],
    );
    // Archives whose members reach .git only as GNU tar reads them.
    let hook = "#!/bin/sh\ntouch /tmp/pwned\n";
    for (name, members) in [
        (
            "through-link.tar",
            &[
                Member::Symlink("lnk", ".git/hooks"),
                Member::File("lnk/pre-commit", hook),
            ][..],
        ),
        (
            "after-zeros.tar",
            &[
                Member::File("a.txt", "a\n"),
                Member::ZeroBlock,
                Member::File(".git/hooks/pre-commit", hook),
            ],
        ),
        (
            "global-path.tar",
            &[
                Member::PaxGlobal(&[("path", ".git/hooks/pre-commit")]),
                Member::File("innocent.txt", hook),
            ],
        ),
        (
            "sparse-name.tar",
            &[
                Member::PaxLocal(&[("GNU.sparse.name", "src/.gitattributes")]),
                Member::File("innocent.txt", "* filter=pwn\n"),
            ],
        ),
        (
            "hidden.tar",
            &[
                Member::LinkClaimingData("harmless", "notes.txt"),
                Member::File(".git/config", "[core]\n\tfsmonitor = sh\n"),
            ],
        ),
        (
            "safe-links.tar",
            &[
                Member::Symlink("latest", "src/main.rs"),
                Member::File("docs2/a.md", "a\n"),
            ],
        ),
    ] {
        archives::write(&ws.join(name), members);
    }
    std::fs::write(r.join("secret"), "s3cret\n").unwrap();
    std::fs::create_dir_all(r.join("home/.ssh")).unwrap();
    std::fs::write(r.join("home/.ssh/id_rsa"), "KEY\n").unwrap();
    std::os::unix::fs::symlink(r.join("secret"), ws.join("link_secret")).unwrap();
    std::os::unix::fs::symlink("/etc", ws.join("escape")).unwrap();
    std::os::unix::fs::symlink("src", ws.join("inner")).unwrap();
    Fixture {
        workspace: ws,
        _root: root,
    }
}

/// The checker `warden exec` and the agent use: `~` is the workspace, as in the jail.
fn checker(fx: &Fixture) -> Checker {
    Arc::new(Policy::embedded_default())
        .checker(&fx.workspace, &[], &fx.workspace)
        .unwrap()
}

/// The user's own home beside the workspace (holding `.ssh/id_rsa`).
fn real_home(fx: &Fixture) -> PathBuf {
    fx.workspace.parent().unwrap().join("home")
}

/// The Claude Code hook's checker: its commands run in the user's own shell, where `~` is the
/// user's real home.
fn real_shell_checker(fx: &Fixture) -> Checker {
    Arc::new(Policy::embedded_default())
        .checker(&fx.workspace, &[], &real_home(fx))
        .unwrap()
        .for_a_real_shell()
}

/// (command, decision, a substring the reason must contain)
const CASES: &[(&str, Decision, &str)] = &[
    // ---- benign work in the workspace -------------------------------------------------------
    ("ls", Allow, "allowed: ls"),
    ("ls -la", Allow, "allowed: ls"),
    ("ls -la src docs", Allow, "allowed: ls"),
    ("cat notes.txt", Allow, "allowed: cat"),
    ("head -n 5 notes.txt", Allow, "allowed: head"),
    ("head -5 notes.txt", Allow, "allowed: head"),
    ("tail -n 20 notes.txt", Allow, "allowed: tail"),
    ("wc -l notes.txt src/main.rs", Allow, "allowed: wc"),
    ("grep -rn TODO src", Allow, "allowed: grep"),
    ("grep -e foo -e bar notes.txt", Allow, "allowed: grep"),
    ("grep -c line notes.txt > n.txt", Allow, "allowed: grep"),
    ("sort notes.txt | uniq -c", Allow, "allowed: sort, uniq"),
    ("cut -d: -f1 notes.txt", Allow, "allowed: cut"),
    ("tr a-z A-Z < notes.txt", Allow, "allowed: tr"),
    ("echo hello world", Allow, "allowed: echo"),
    ("printf '%s\\n' a b", Allow, "allowed: printf"),
    ("find . -name '*.rs'", Allow, "allowed: find"),
    (
        "find src -type f -newer notes.txt -print",
        Allow,
        "allowed: find",
    ),
    ("sed -n '1,5p' notes.txt", Allow, "allowed: sed"),
    ("sed -i 's/one/ONE/g' notes.txt", Allow, "allowed: sed"),
    ("sed -e 's/a/b/' -e '/x/d' notes.txt", Allow, "allowed: sed"),
    ("diff notes.txt other.txt", Allow, "allowed: diff"),
    ("cp notes.txt copy.txt", Allow, "allowed: cp"),
    ("cp -r src src2", Allow, "allowed: cp"),
    ("mv other.txt moved.txt", Allow, "allowed: mv"),
    ("rm notes.txt", Allow, "allowed: rm"),
    ("mkdir -p a/b/c", Allow, "allowed: mkdir"),
    ("touch new.txt", Allow, "allowed: touch"),
    ("stat notes.txt", Allow, "allowed: stat"),
    ("du -sh src", Allow, "allowed: du"),
    ("date +%Y-%m-%d", Allow, "allowed: date"),
    ("pwd", Allow, "allowed: pwd"),
    ("basename /a/b.txt .txt", Allow, "allowed: basename"),
    ("dirname /a/b/c", Allow, "allowed: dirname"),
    ("md5sum notes.txt", Allow, "allowed: md5sum"),
    ("sha256sum notes.txt other.txt", Allow, "allowed: sha256sum"),
    ("nl notes.txt", Allow, "allowed: nl"),
    ("true", Allow, "allowed: true"),
    ("false || true", Allow, "allowed: false, true"),
    ("git status", Allow, "allowed: git"),
    ("git log --oneline -n 5", Allow, "allowed: git"),
    ("git diff HEAD~1 -- src", Allow, "allowed: git"),
    ("git show HEAD --stat", Allow, "allowed: git"),
    ("git branch -a", Allow, "allowed: git"),
    ("git -C src log -p", Allow, "allowed: git"),
    ("cd src && ls", Allow, "allowed: cd, ls"),
    ("cd sub/deeper; pwd", Allow, "allowed: cd, pwd"),
    (
        "grep -rn TODO src | sort | uniq -c > todo.txt",
        Allow,
        "allowed: grep, sort, uniq",
    ),
    ("cat 2>/dev/null notes.txt", Allow, "allowed: cat"),
    ("cat notes.txt > /dev/null 2>&1", Allow, "allowed: cat"),
    ("ls missing 2>&1 | head -3", Allow, "allowed: ls, head"),
    ("ls |& head -3", Allow, "allowed: ls, head"),
    ("echo done >> log.txt", Allow, "allowed: echo"),
    (
        "cat <<'EOF' > out.txt\nhello $HOME\nEOF",
        Allow,
        "allowed: cat",
    ),
    (
        "cat <<EOF > out.txt\nprice \\$5\nEOF",
        Allow,
        "allowed: cat",
    ),
    ("cat <<< 'here string'", Allow, "allowed: cat"),
    ("sort -o sorted.txt notes.txt", Allow, "allowed: sort"),
    ("ls *.txt", Allow, "allowed: ls"),
    ("wc -l src/*.rs", Allow, "allowed: wc"),
    ("cat inner/main.rs", Allow, "allowed: cat"),
    ("echo \"$PWD\"", Allow, "allowed: echo"),
    ("/bin/ls -l", Allow, "allowed: ls"),
    ("/usr/bin/cat notes.txt", Allow, "allowed: cat"),
    ("tar czf backup.tgz src docs", Allow, "allowed: tar"),
    ("tar -xzf backup.tgz -C out", Allow, "allowed: tar"),
    ("tar tf backup.tgz", Allow, "allowed: tar"),
    (
        "test -f notes.txt && cat notes.txt",
        Allow,
        "allowed: test, cat",
    ),
    (
        "grep x notes.txt || echo none",
        Allow,
        "allowed: grep, echo",
    ),
    ("ls; pwd\necho next", Allow, "allowed: ls, pwd, echo"),
    ("ls -la # list everything", Allow, "allowed: ls"),
    ("echo 'quoted; rm -rf /'", Allow, "allowed: echo"),
    ("c\\at notes.txt", Allow, "allowed: cat"),
    ("\"ca\"t notes.txt", Allow, "allowed: cat"),
    ("echo $'tab\\there'", Allow, "allowed: echo"),
    ("jq .a data.json", Allow, "allowed: jq"),
    ("chmod 644 notes.txt", Allow, "allowed: chmod"),
    ("chmod u+x notes.txt", Allow, "allowed: chmod"),
    ("sleep 1", Allow, "allowed: sleep"),
    // ---- ask ----------------------------------------------------------------------------------
    ("rm -r src", Ask, "recursive delete"),
    ("rm -rf docs", Ask, "recursive delete"),
    ("rm --recursive docs", Ask, "recursive delete"),
    ("rm -fR docs", Ask, "recursive delete"),
    // ---- paths: outside, .., absolute, ~, $HOME, symlinks ---------------------------------------
    (
        "cat /etc/shadow",
        Deny,
        "/etc/shadow is outside the workspace",
    ),
    ("cat /etc/passwd", Deny, "outside the workspace"),
    ("cat ../secret", Deny, "../secret is outside the workspace"),
    ("cat ../../../../etc/passwd", Deny, "outside the workspace"),
    ("cat src/../../secret", Deny, "outside the workspace"),
    ("ls /root", Deny, "outside the workspace"),
    // `~` and $HOME are the workspace (in the jail HOME is the workspace); the user's own home
    // stays out of reach (REAL_SHELL_HOME_CASES: where `~` is the real home).
    ("cat ~/.ssh/id_rsa", Allow, "allowed: cat"),
    ("cat $HOME/.ssh/id_rsa", Allow, "allowed: cat"),
    ("cat \"$HOME/notes.txt\"", Allow, "allowed: cat"),
    ("cat ${HOME}/notes.txt", Allow, "allowed: cat"),
    ("ls ~", Allow, "allowed: ls"),
    (
        "cat ~/../home/.ssh/id_rsa",
        Deny,
        "~ and $HOME are the workspace",
    ),
    (
        "cat $HOME/../secret",
        Deny,
        "../secret is outside the workspace",
    ),
    ("ls ~/..", Deny, "in the jail HOME is the workspace"),
    ("echo x > ~/../x", Deny, "~ and $HOME are the workspace"),
    ("cat ../home/.ssh/id_rsa", Deny, "outside the workspace"),
    ("cat ~root/.bashrc", Deny, "~user"),
    ("cat ~+/x", Deny, "~user"),
    ("cat link_secret", Deny, "resolves to"),
    ("cat escape/shadow", Deny, "resolves to /etc/shadow"),
    (
        "echo x > escape/cron",
        Deny,
        "writing escape/cron is not allowed",
    ),
    ("echo x > link_secret", Deny, "resolves to"),
    ("cp link_secret stolen.txt", Deny, "resolves to"),
    ("cp notes.txt /tmp/x", Deny, "writing /tmp/x is not allowed"),
    ("mv notes.txt ../x", Deny, "writing ../x is not allowed"),
    ("rm -f /etc/passwd", Deny, "outside the workspace"),
    ("rm -r .", Deny, "root"),
    ("touch /tmp/x", Deny, "writing /tmp/x is not allowed"),
    (
        "mkdir /tmp/newdir",
        Deny,
        "writing /tmp/newdir is not allowed",
    ),
    (
        "tee /etc/x < notes.txt",
        Deny,
        "writing /etc/x is not allowed",
    ),
    (
        "uniq notes.txt /etc/x",
        Deny,
        "writing /etc/x is not allowed",
    ),
    (
        "echo x > /etc/cron.d/x",
        Deny,
        "writing /etc/cron.d/x is not allowed",
    ),
    ("echo x >> ~/.bashrc", Allow, "allowed: echo"),
    ("echo x > ~/.gitconfig", Deny, "global config"),
    ("cat < /etc/shadow", Deny, "outside the workspace"),
    (
        "grep -f /etc/shadow notes.txt",
        Deny,
        "outside the workspace",
    ),
    ("grep root /etc/passwd", Deny, "outside the workspace"),
    ("diff /etc/passwd notes.txt", Deny, "outside the workspace"),
    ("find / -name id_rsa", Deny, "outside the workspace"),
    ("find . -newer /etc/shadow", Deny, "outside the workspace"),
    ("wc --files0-from=/etc/x", Deny, "outside the workspace"),
    // Where a program's flag list is closed, an unlisted flag is refused, value and all.
    ("rg --weird=/etc/passwd x", Deny, "not in the policy's list"),
    ("ls --weird=/etc/passwd", Deny, "not in the policy's list"),
    ("echo x > .git/config", Deny, ".git"),
    ("cp notes.txt .git/hooks/pre-commit", Deny, ".git"),
    ("echo x > .gitconfig", Deny, "global config"),
    // ---- globs and braces -----------------------------------------------------------------------
    (
        "cat /e*c/sha*w",
        Deny,
        "the glob /e*c/sha*w lists a directory outside the roots",
    ),
    ("ls /e*", Deny, "glob"),
    ("cat ../*", Deny, "glob"),
    ("ls ~/*", Deny, "escape is outside the workspace"),
    ("ls ~/src/*", Allow, "allowed: ls"),
    ("ls ~/../*", Deny, "glob"),
    ("echo {a,b}", Allow, "allowed: echo"),
    ("cp notes.txt{,.bak}", Allow, "allowed: cp"),
    ("echo {1..3}", Allow, "allowed: echo"),
    ("cat {notes,../secret}.txt", Deny, "outside"),
    ("cat ~/{notes.txt,../secret}", Deny, "outside"),
    // ---- sort / output flags --------------------------------------------------------------------
    (
        "sort -o /etc/x notes.txt",
        Deny,
        "writing /etc/x is not allowed",
    ),
    (
        "sort --output=/etc/x notes.txt",
        Deny,
        "writing /etc/x is not allowed",
    ),
    (
        "sort --outp=/etc/x notes.txt",
        Deny,
        "write the flag in full",
    ),
    (
        "sort -o/etc/x notes.txt",
        Deny,
        "writing /etc/x is not allowed",
    ),
    (
        "sort -ro /etc/x notes.txt",
        Deny,
        "writing /etc/x is not allowed",
    ),
    (
        "sort --compress-program=sh notes.txt",
        Deny,
        "runs a compression program",
    ),
    (
        "sort --compress-prog=sh notes.txt",
        Deny,
        "--compress-program",
    ),
    // ---- redirections -----------------------------------------------------------------------------
    (
        "echo hi > /dev/tcp/10.0.0.1/80",
        Deny,
        "network redirections",
    ),
    ("cat < /dev/udp/10.0.0.1/53", Deny, "network redirections"),
    (
        "cat notes.txt > ../todo.txt",
        Deny,
        "writing ../todo.txt is not allowed",
    ),
    (
        "grep -rn TODO src | sort | uniq -c > ../todo.txt",
        Deny,
        "writing ../todo.txt is not allowed",
    ),
    ("> out.txt", Deny, "a redirection without a command"),
    ("ls 2>&file", Deny, "not supported"),
    ("echo x 10>f", Deny, "descriptor"),
    // ---- here-documents ----------------------------------------------------------------------------
    (
        "cat <<EOF > /etc/x\nhi\nEOF",
        Deny,
        "writing /etc/x is not allowed",
    ),
    (
        "cat <<'EOF' | sh\nid\nEOF",
        Deny,
        "sh: a shell would run code",
    ),
    ("sh <<EOF\nid\nEOF", Deny, "sh: a shell would run code"),
    (
        "bash <<'EOF'\nid\nEOF",
        Deny,
        "bash: a shell would run code",
    ),
    (
        "cat <<EOF > out.txt\n$HOME\nEOF",
        Deny,
        "quote the delimiter",
    ),
    ("cat <<EOF\n`id`\nEOF", Deny, "command substitution"),
    (
        "cat <<EOF && rm -rf /\nx\nEOF",
        Deny,
        "writing / is not allowed",
    ),
    // ---- shells and interpreters (incl. obfuscated names) ---------------------------------------------
    ("sh -c id", Deny, "sh: a shell would run code"),
    ("bash -c 'cat /etc/shadow'", Deny, "bash: a shell"),
    ("/bin/sh -c id", Deny, "sh: a shell"),
    ("cat notes.txt | sh", Deny, "sh: a shell would run code"),
    ("cat notes | bash", Deny, "bash: a shell"),
    ("s\\h -c id", Deny, "sh: a shell"),
    ("\"ba\"sh -c id", Deny, "bash: a shell"),
    ("$'\\x73h' -c id", Deny, "sh: a shell"),
    (
        "python3 -c 'import os'",
        Deny,
        "python3 -c: runs code written",
    ),
    (
        "/usr/bin/python3 -c 1",
        Deny,
        "python3 -c: runs code written",
    ),
    ("python3", Deny, "standard input"),
    ("python3 - < tool.py", Deny, "standard input"),
    ("python3 -i tool.py", Deny, "interactive prompt"),
    ("python3 tool.py ../secret", Deny, "outside the workspace"),
    (
        "python3 tool.py",
        Ask,
        "python3 runs tool.py, code the policy cannot read",
    ),
    ("python3 -m pytest -q", Ask, "runs the module pytest"),
    ("python3 --version", Allow, "allowed: python3"),
    ("node app.js", Ask, "it would run in the jail"),
    ("node --eval 1", Deny, "runs code written"),
    ("perl -e 'system(1)'", Deny, "perl: an interpreter"),
    ("ruby -e 1", Deny, "ruby: an interpreter"),
    ("node -e 1", Deny, "node -e: runs code written"),
    (
        "awk '{system(\"id\")}' notes.txt",
        Deny,
        "system() runs a shell command",
    ),
    ("gawk 1 notes.txt", Allow, "allowed: gawk"),
    ("busybox sh", Deny, "busybox contains a shell"),
    ("./script.sh", Deny, "must be in a system directory"),
    ("src/run", Deny, "must be in a system directory"),
    ("/tmp/evil", Deny, "must be in a system directory"),
    (
        "/usr/bin/../../tmp/x",
        Deny,
        "must be in a system directory",
    ),
    // ---- wrappers -------------------------------------------------------------------------------------
    ("env ls", Deny, "env: a wrapper"),
    ("env LD_PRELOAD=/tmp/x.so ls", Deny, "env: a wrapper"),
    (
        "xargs rm < notes.txt",
        Deny,
        "writes the files its arguments name",
    ),
    (
        "find . -name '*.rs' | xargs grep -n TODO",
        Allow,
        "allowed: find, xargs",
    ),
    (
        "find . -print0 | xargs -0 -n 5 -r wc -l",
        Allow,
        "allowed: find, xargs",
    ),
    ("ls | xargs sh -c id", Deny, "shell"),
    (
        "ls | xargs -I{} cat {}",
        Deny,
        "not one warden's xargs does",
    ),
    ("ls | xargs -P4 cat", Deny, "not one warden's xargs does"),
    ("ls | xargs git log", Deny, "xargs git is not allowed"),
    ("ls | LANG=C xargs sort", Deny, "an assignment before xargs"),
    ("ls | xargs cp -t build", Deny, "writes"),
    ("ls | xargs cat /etc/shadow", Deny, "outside the workspace"),
    ("nice ls", Deny, "nice: a wrapper"),
    ("nohup ls", Deny, "nohup: a wrapper"),
    ("timeout 5 ls", Deny, "timeout: a wrapper"),
    ("command ls", Deny, "command: a wrapper"),
    ("builtin echo x", Deny, "builtin: a wrapper"),
    ("stdbuf -o0 ls", Deny, "stdbuf: a wrapper"),
    ("time ls", Deny, "time: a wrapper"),
    ("sudo ls", Deny, "sudo: changes privileges"),
    ("su root", Deny, "su: changes privileges"),
    ("doas ls", Deny, "doas: changes privileges"),
    // ---- eval, exec, source, functions, aliases, traps --------------------------------------------------
    ("eval ls", Deny, "eval: evaluates a string"),
    ("exec ls", Deny, "exec: replaces the shell"),
    ("source x.sh", Deny, "source: runs a file"),
    (". x.sh", Deny, ".: runs a file"),
    ("f() { ls; }; f", Deny, "defining shell functions"),
    ("function f { ls; }", Deny, "defining shell functions"),
    ("alias ls='rm -rf'", Deny, "alias: aliases change"),
    ("trap 'rm x' EXIT", Deny, "trap: traps run code"),
    // ---- background, assignments, substitutions, variables -----------------------------------------------
    ("ls &", Deny, "background jobs"),
    ("sleep 10 & echo started", Deny, "background jobs"),
    (
        "LD_PRELOAD=/tmp/x.so ls",
        Deny,
        "LD_PRELOAD=… before a command is not allowed",
    ),
    (
        "PATH=/tmp ls",
        Deny,
        "PATH=… before a command is not allowed",
    ),
    ("x=1", Allow, "allowed"),
    ("export FOO=1", Deny, "setting shell variables"),
    // Command substitution: an allowed read-only command, quoted, where any text is harmless.
    ("echo \"$(id)\"", Allow, "allowed: id, echo"),
    ("echo \"today is `date +%F`\"", Allow, "allowed: date, echo"),
    (
        "printf '%s\\n' \"$(wc -l < notes.txt)\"",
        Allow,
        "allowed: wc, printf",
    ),
    (
        "[ -n \"$(ls src)\" ] && echo y",
        Allow,
        "allowed: ls, [, echo",
    ),
    (
        "test \"$(cat notes.txt)\" != x",
        Allow,
        "allowed: cat, test",
    ),
    ("echo $(id)", Deny, "quote it"),
    ("echo `id`", Deny, "quote it"),
    ("ls \"$(echo /)\"", Deny, "argument 1 of ls is not allowed"),
    ("cat \"$(echo /etc/passwd)\"", Deny, "it could be a path"),
    ("rm \"$(echo notes.txt)\"", Deny, "argument 1 of rm"),
    ("[ -f \"$(echo x)\" ]", Deny, "argument 2 of ["),
    ("test x \"$(echo =)\" y", Deny, "argument 2 of test"),
    ("\"$(echo ls)\" src", Deny, "the command name"),
    ("echo hi > \"$(echo out.txt)\"", Deny, "not allowed here"),
    ("x=\"$(date)\"; echo $x", Deny, "not allowed here"),
    (
        "for f in \"$(ls)\"; do echo $f; done",
        Deny,
        "not allowed here",
    ),
    ("echo \"$(rm notes.txt)\"", Deny, "writes files"),
    ("echo \"$(ls > out.txt)\"", Deny, "writes files"),
    ("echo \"$(rm -r src)\"", Deny, "needs approval"),
    ("echo \"$(cat /etc/shadow)\"", Deny, "outside the workspace"),
    (
        "echo \"$(echo \"$(id)\")\"",
        Deny,
        "inside another substitution",
    ),
    ("echo {a,b}\"$(id)\"", Deny, "must stay one argument"),
    ("echo \"$? $(id)\"", Deny, "$? and a command substitution"),
    // Process substitution: an allowed read-only command, given as /dev/fd/N where the
    // program reads a file operand.
    ("cat <(ls)", Allow, "allowed: ls, cat"),
    (
        "comm -13 <(sort notes.txt) <(sort other.txt)",
        Allow,
        "allowed: sort, sort, comm",
    ),
    (
        "diff <(ls src) <(ls docs) > out/d.txt",
        Allow,
        "allowed: ls, ls, diff",
    ),
    (
        "grep -f <(echo TODO) notes.txt",
        Allow,
        "allowed: echo, grep",
    ),
    ("cat <(rm notes.txt)", Deny, "writes files"),
    ("cat <(ls > out/x)", Deny, "writes files"),
    ("cat <(rm -r src)", Deny, "needs approval"),
    ("cat <(cat /etc/shadow)", Deny, "outside the workspace"),
    ("cat > <(ls)", Deny, "not allowed here"),
    ("cat < <(ls)", Deny, "not allowed here"),
    ("cat x<(ls)", Deny, "not allowed here"),
    ("wc --files0-from=<(ls)", Deny, "not allowed here"),
    ("for f in <(ls); do cat $f; done", Deny, "not allowed here"),
    ("cat >(ls)", Deny, "output process substitution"),
    ("<(ls) src", Deny, "the command name"),
    ("tee <(cat)", Deny, "would write to it"),
    ("sort -o <(ls) notes.txt", Deny, "would write to it"),
    ("uniq notes.txt <(ls)", Deny, "would write to it"),
    ("echo <(ls)", Deny, "reads a file operand"),
    ("sed -f <(echo p) notes.txt", Deny, "not supported for sed"),
    ("awk -f <(echo x) notes.txt", Deny, "not supported for awk"),
    ("tar -tf <(cat a.tar)", Deny, "not supported for tar"),
    ("cp <(ls) out/x", Deny, "copies or moves files"),
    ("md5sum -c <(cat sums.md5)", Deny, "list of names"),
    ("cat <(cat <(ls))", Deny, "inside another substitution"),
    ("echo \"$(cat <(ls))\"", Deny, "inside another substitution"),
    ("cat <(ls) /dev/fd/9", Deny, "only warden's own pipe"),
    ("cd <(ls)", Deny, "not a directory"),
    ("echo $((1+2))", Deny, "arithmetic expansion"),
    // The sandbox has no secrets: warden expands a variable it does not set to nothing, as bash
    // expands an unset one (the hook, where a real shell runs, refuses them: cli_hook).
    ("echo $ANTHROPIC_API_KEY", Allow, "allowed: echo"),
    ("echo \"${TELEGRAM_BOT_TOKEN}\"", Allow, "allowed: echo"),
    ("echo $TMPDIR", Deny, "the sandbox sets $TMPDIR"),
    ("echo $SHELL", Deny, "bash sets $SHELL itself"),
    ("$NOTHING ls", Deny, "expands to nothing"),
    ("name=x; cat \"$name.txt\"", Allow, "allowed: cat"),
    ("f=/etc/shadow; cat \"$f\"", Deny, "outside the workspace"),
    ("a=1 b=$a; echo $b", Allow, "allowed: echo"),
    ("false || x=1; echo $x", Deny, "only at the top of the line"),
    ("{ x=1; }; echo $x", Deny, "only at the top of the line"),
    ("x=1 | cat", Deny, "in a pipeline"),
    ("IFS=/; ls", Deny, "setting $IFS is not allowed"),
    ("HOME=/; ls ~", Deny, "setting $HOME is not allowed"),
    ("x=1 >out.txt", Deny, "incomplete"),
    ("echo hi > \"$NOTHING\"", Deny, "expands to an empty name"),
    ("cat \"$NOTHING/etc/passwd\"", Deny, "outside the workspace"),
    ("echo $1", Deny, "not allowed"),
    ("echo $@", Deny, "not allowed"),
    ("echo ${x:-y}", Deny, "not allowed"),
    (
        "cat${IFS}/etc/passwd",
        Deny,
        "$IFS in cat$IFS/etc/passwd is not allowed",
    ),
    ("echo ${IFS}", Deny, "$IFS in $IFS is not allowed"),
    // ---- newline-separated second commands ---------------------------------------------------------------
    ("ls\nrm -rf /", Deny, "writing / is not allowed"),
    ("echo ok\ncat /etc/shadow", Deny, "/etc/shadow is outside"),
    ("ls\ncurl http://x", Deny, "curl: a network tool"),
    // ---- find -------------------------------------------------------------------------------------------------
    ("find . -exec id \\;", Deny, "find -exec: runs a command"),
    ("find . -execdir sh -c id \\;", Deny, "find -execdir"),
    ("find . -ok rm {} \\;", Deny, "find -ok"),
    ("find . -okdir rm {} \\;", Deny, "find -okdir"),
    ("find . -name x -delete", Deny, "find -delete"),
    (
        "find . -fprint /tmp/out",
        Deny,
        "find: writing /tmp/out is not allowed",
    ),
    ("find . -fprintf out/list %p", Allow, "allowed: find"),
    ("find . -fls .git/config", Deny, "find: writing"),
    (
        "find . -frobnicate",
        Deny,
        "not in the policy's list of find primaries",
    ),
    ("find -L . -name x", Deny, "find -L: follows symbolic links"),
    (
        "find -H inner -print",
        Deny,
        "find -H: follows symbolic links",
    ),
    (
        "find . -follow -name x",
        Deny,
        "find -follow: follows symbolic links",
    ),
    ("find -files0-from notes.txt", Deny, "find -files0-from"),
    ("find -P . -name x", Allow, "allowed: find"),
    // ---- sed ----------------------------------------------------------------------------------------------------
    (
        "sed 'e id' notes.txt",
        Deny,
        "the `e` command runs a shell command",
    ),
    ("sed '1e id' notes.txt", Deny, "the `e` command"),
    ("sed 's/a/id/e' notes.txt", Deny, "the s///e flag"),
    (
        "sed 's/a/b/w /tmp/out' notes.txt",
        Deny,
        "sed: writing /tmp/out is not allowed",
    ),
    ("sed 'w out/copy.txt' notes.txt", Allow, "allowed: sed"),
    (
        "sed -n '/x/W .gitattributes' notes.txt",
        Deny,
        "sed: writing",
    ),
    (
        "sed 'r /etc/shadow' notes.txt",
        Deny,
        "outside the workspace",
    ),
    (
        "sed -f missing.sed notes.txt",
        Deny,
        "cannot be read to check it",
    ),
    ("sed -f out/w.sed notes.txt", Allow, "allowed: sed"),
    ("sed -f out/e.sed notes.txt", Deny, "script file out/e.sed"),
    ("sed -f out/leak.sed notes.txt", Deny, "sed: writing /tmp/x"),
    (
        "touch out/x && sed -f out/w.sed notes.txt",
        Deny,
        "own command",
    ),
    ("git commit", Deny, "git would start an editor"),
    ("git commit --amend", Deny, "git would start an editor"),
    ("git commit -am fix", Allow, "allowed: git"),
    ("git commit --amend --no-edit", Allow, "allowed: git"),
    ("printenv", Deny, "whole environment"),
    ("printenv HOME", Allow, "allowed: printenv"),
    ("ls .[^.]*", Allow, "allowed: ls"),
    ("npm ls", Allow, "allowed: npm"),
    ("cargo +nightly build", Ask, "cargo build runs"),
    ("git submodule status", Allow, "allowed: git"),
    (
        "git submodule foreach id",
        Deny,
        "run commands in submodules",
    ),
    (
        "sed -i 's/a/b/' /etc/hosts",
        Deny,
        "writing /etc/hosts is not allowed",
    ),
    (
        "sed --expression='s/x/y/e' notes.txt",
        Deny,
        "the s///e flag",
    ),
    (
        "sed -n -e '$!{e date' -e '}' notes.txt",
        Deny,
        "the `e` command",
    ),
    // ---- names a program derives: backups, chunks, decompressed files ---------------------------------------------
    ("cp -b -S g notes.txt .gitconfi", Deny, "writing .gitconfig"),
    ("cp -b -S g notes.txt .gitconf", Allow, "allowed: cp"),
    ("cp --suffix=ig notes.txt .gitconf", Deny, ".gitconfig"),
    ("mv -b -S g other.txt .gitconfi", Deny, ".gitconfig"),
    ("cp -b notes.txt other.txt", Allow, "allowed: cp"),
    ("cp -r -b -S g src out", Allow, "allowed: cp"),
    ("cp -S /../x notes.txt other.txt", Deny, "backup suffix"),
    (
        "split -a 1 notes.txt .gi",
        Deny,
        "split: a file it writes could be named .git",
    ),
    (
        "split -a 1 --additional-suffix=ig notes.txt .gitcon",
        Deny,
        "could be named .gitconfig",
    ),
    ("split -l 1 -d notes.txt out/part-", Allow, "allowed: split"),
    ("gzip -S onfig notes.txt", Allow, "allowed: gzip"),
    ("gzip -S onfig .gitc", Deny, "writing .gitconfig"),
    ("gzip -r -S attributes src", Allow, "allowed: gzip"),
    ("gunzip -N backup.tgz", Deny, "header"),
    ("gunzip -c -N backup.tgz", Allow, "allowed: gunzip"),
    ("gunzip backup.tgz", Allow, "allowed: gunzip"),
    (
        "xz -d -S .x .gitattributes.x",
        Deny,
        "writing .gitattributes",
    ),
    ("bzip2 -d notes.txt", Allow, "allowed: bzip2"),
    (
        "tar --checkpoint=1 --checkpoint-action=exec=sh -cf x.tar src",
        Deny,
        "--checkpoint-action",
    ),
    ("tar -xf backup.tgz --to-command=sh", Deny, "--to-command"),
    (
        "tar -I sh -xf backup.tgz",
        Deny,
        "tar -I: runs a compression program",
    ),
    (
        "tar --use-compress-program=sh -xf backup.tgz",
        Deny,
        "--use-compress-program",
    ),
    (
        "tar --use-compress=sh -xf backup.tgz",
        Deny,
        "--use-compress-program",
    ),
    ("tar -xPf backup.tgz", Deny, "absolute paths"),
    (
        "tar -xf backup.tgz -C /etc",
        Deny,
        "writing /etc is not allowed",
    ),
    (
        "tar cf /tmp/x.tar src",
        Deny,
        "writing /tmp/x.tar is not allowed",
    ),
    ("tar czf out.tgz /etc", Deny, "outside the workspace"),
    ("tar -F script.sh -cf x.tar src", Deny, "runs a script"),
    (
        "tar -xf through-link.tar",
        Deny,
        "lnk/pre-commit, at or beneath the symbolic link lnk",
    ),
    ("tar -xf after-zeros.tar", Allow, "allowed: tar"),
    ("tar -xif after-zeros.tar", Deny, ".git/hooks/pre-commit"),
    (
        "tar --ignore-zeros -xf after-zeros.tar",
        Deny,
        ".git/hooks/pre-commit",
    ),
    ("tar -xf global-path.tar", Deny, ".git/hooks/pre-commit"),
    ("tar -xf sparse-name.tar", Deny, "src/.gitattributes"),
    ("tar -xf hidden.tar", Deny, ".git/config"),
    ("tar -xf safe-links.tar", Allow, "allowed: tar"),
    ("tar -tf global-path.tar", Allow, "allowed: tar"),
    ("tar --xattrs -xf backup.tgz", Deny, "extended attributes"),
    // ---- a later command through a link an earlier one makes ---------------------------------
    (
        "tar -xf safe-links.tar && cat latest",
        Deny,
        "a symbolic link an earlier command of this line makes",
    ),
    ("tar -xf safe-links.tar && echo x > latest", Deny, "echo: "),
    (
        "tar -xf safe-links.tar; cp notes.txt latest/x",
        Deny,
        "cp: ",
    ),
    (
        "tar -xf safe-links.tar && mv latest moved && cat moved/x",
        Deny,
        "cannot check what copying latest creates",
    ),
    ("tar -xf safe-links.tar && cd latest", Deny, "cd: "),
    (
        "tar -xf safe-links.tar && rm latest",
        Allow,
        "allowed: tar, rm",
    ),
    (
        "tar -xf safe-links.tar && cat docs2/a.md",
        Allow,
        "allowed: tar, cat",
    ),
    (
        "tar -xf safe-links.tar && { cat; } < latest",
        Deny,
        "redirection",
    ),
    // ---- git ------------------------------------------------------------------------------------------------------
    (
        "git -c core.pager=sh log",
        Deny,
        "git -c: sets configuration",
    ),
    ("git --exec-path=/tmp status", Deny, "--exec-path"),
    ("git -p log", Deny, "git -p: runs a pager"),
    ("git --paginate log", Deny, "runs a pager"),
    ("git --git-dir=/tmp/x status", Deny, "--git-dir"),
    ("git --work-tree=/ status", Deny, "--work-tree"),
    ("git commit -m x", Allow, "allowed: git"),
    ("git commit -S -m x", Deny, "signs with gpg"),
    ("git commit --gpg-sign=KEY -m x", Deny, "signs with gpg"),
    ("git commit -e -m x", Deny, "runs an editor"),
    ("git add -p", Allow, "allowed: git"),
    ("git init --template=/tmp/t repo", Deny, "copies files"),
    ("git init ../repo", Deny, "outside the workspace"),
    (
        "git mv notes.txt .config/git/config",
        Deny,
        "git's global config",
    ),
    ("git mv notes.txt .gitattributes", Deny, "writing"),
    ("git rm ../secret", Deny, "outside the workspace"),
    ("git checkout -- .git/config", Deny, "writing"),
    ("git merge -s pwn main", Deny, "git-merge-pwn"),
    ("git merge --strategy=ours main", Allow, "allowed: git"),
    ("git tag -s v1 -m x", Deny, "signs with gpg"),
    (
        "git config core.fsmonitor ./x",
        Deny,
        "only reading configuration",
    ),
    ("git config user.email a@example.com", Allow, "allowed: git"),
    (
        "git reset --hard HEAD && git status",
        Deny,
        "must run as its own command",
    ),
    ("git add -A && git commit -m x", Allow, "allowed: git, git"),
    ("git submodule update", Deny, "clone, fetch or run commands"),
    (
        "git remote add x https://example.com",
        Ask,
        "git remote add: changes where the repository's remotes point",
    ),
    (
        "git remote set-url origin ext::sh",
        Ask,
        "git remote set-url",
    ),
    ("git remote -v", Allow, "allowed: git"),
    (
        "git submodule set-url lib ../x",
        Ask,
        "git submodule set-url",
    ),
    ("git remote prune origin", Deny, "reach the network"),
    ("git push", Deny, "git push is not allowed"),
    (
        "git config core.pager sh",
        Deny,
        "only reading configuration",
    ),
    ("git branch evil", Allow, "allowed: git"),
    ("git branch -D main", Allow, "allowed: git"),
    ("git branch --edit-description", Deny, "runs an editor"),
    ("git log --ext-diff", Deny, "runs an external diff"),
    ("git diff --textconv", Deny, "textconv"),
    ("git log --show-signature", Deny, "runs gpg"),
    (
        "git diff --output=/etc/x",
        Deny,
        "writing /etc/x is not allowed",
    ),
    ("git -C /etc status", Deny, "outside the workspace"),
    ("git -C evil-repo status", Deny, "core.fsmonitor"),
    ("cd evil-repo && git log", Deny, "core.fsmonitor"),
    (
        "echo x > f.txt && git status",
        Deny,
        "must run as its own command",
    ),
    ("git help log", Deny, "runs man and a pager"),
    ("git --help", Deny, "runs man or a pager"),
    // ---- control flow and groups -------------------------------------------------------------------------------
    ("if true; then ls; fi", Allow, "allowed: true, ls"),
    ("for f in src/*; do rm $f; done", Allow, "allowed: rm, rm"),
    ("for f in *; do rm $f; done", Deny, "the glob * matches"),
    ("while true; do ls; done", Allow, "allowed: true, ls"),
    (
        "case x in x) ls;; esac",
        Deny,
        "case statements are not supported",
    ),
    ("[[ -f notes.txt ]]", Allow, "allowed: test"),
    (
        "[ -f notes.txt ] && cat notes.txt",
        Allow,
        "allowed: [, cat",
    ),
    ("! ls", Allow, "allowed: ls"),
    ("(cd src; ls)", Allow, "allowed: cd, ls"),
    ("ls && (rm -rf /)", Deny, "writing / is not allowed"),
    // ---- parse errors -------------------------------------------------------------------------------------------
    ("ls ((", Deny, "could not be parsed"),
    ("echo \"unterminated", Deny, "parse"),
    ("ls |", Deny, "incomplete"),
    ("&& ls", Deny, "parsed"),
    ("ls <>file", Deny, "could not be parsed"),
    ("cat <<A <<B\na\nA\nb\nB", Deny, "could not be parsed"),
    // ---- cd --------------------------------------------------------------------------------------------------------
    ("cd /etc && cat shadow", Deny, "cd: /etc is outside"),
    ("cd .. && cat secret", Deny, "cd: .. is outside"),
    ("cd", Allow, "allowed: cd"),
    ("cd -", Deny, "cd - is not supported"),
    ("cd src | ls", Deny, "cd inside a pipeline"),
    ("cd notes.txt", Deny, "not a directory"),
    ("cd src && cat ../../secret", Deny, "outside the workspace"),
    // ---- other tools --------------------------------------------------------------------------------------------------
    (
        "frobnicate --now",
        Deny,
        "frobnicate is not in the allowlist",
    ),
    ("curl http://example.com", Deny, "curl: a network tool"),
    ("wget http://example.com", Deny, "wget: a network tool"),
    ("nc 127.0.0.1 80", Deny, "nc: a network tool"),
    ("ssh host", Deny, "ssh: a network tool"),
    ("scp a host:b", Deny, "scp: a network tool"),
    ("rsync -a src host:", Deny, "rsync: a network tool"),
    ("make", Ask, "make runs what the project's files say"),
    ("make --eval='x:;id'", Deny, "make --eval"),
    (
        "cargo build",
        Ask,
        "cargo build runs what the project's files say",
    ),
    ("cargo run -- ../secret", Deny, "outside the workspace"),
    ("cargo --config x build", Deny, "cargo --config"),
    ("cargo install ripgrep", Deny, "cargo install: downloads"),
    (
        "npm test",
        Ask,
        "npm test runs what the project's files say",
    ),
    ("npm install", Deny, "npm install: downloads packages"),
    ("pip install x", Deny, "pip: downloads packages"),
    ("kill -9 1", Deny, "kill: signals processes"),
    ("dd if=/etc/shadow of=x", Deny, "dd: its if=/of= operands"),
    ("ln -s /etc/passwd p", Deny, "ln: links"),
    ("chmod 4755 notes.txt", Deny, "setuid"),
    ("chmod u+s notes.txt", Deny, "setuid"),
    (
        "chmod 644 /etc/passwd",
        Deny,
        "writing /etc/passwd is not allowed",
    ),
    ("date -s 2020-01-01", Deny, "sets the system clock"),
    ("awk '{print $1}' notes.txt", Allow, "allowed: awk"),
    ("gawk -v n=2 '$2 > n' notes.txt", Allow, "allowed: gawk"),
    (
        "awk 'BEGIN{system(\"id\")}'",
        Deny,
        "system() runs a shell command",
    ),
    (
        "awk '{print | \"sh\"}' notes.txt",
        Deny,
        "a pipe or coprocess",
    ),
    (
        "awk 'BEGIN{\"id\" | getline x}'",
        Deny,
        "a pipe or coprocess",
    ),
    (
        "awk '{print > \"/etc/passwd\"}' notes.txt",
        Deny,
        "outside the workspace",
    ),
    ("awk '{print > $1}' notes.txt", Deny, "string literal"),
    ("awk 'BEGIN{getline l < \"/etc/shadow\"}'", Deny, "outside"),
    (
        "awk -f prog.awk notes.txt",
        Deny,
        "awk -f: runs a program file",
    ),
    ("awk '{print}' ../secret", Deny, "outside the workspace"),
    ("awk 'BEGIN{f=\"system\"; @f(\"id\")}'", Deny, "gawk's @"),
    ("mawk -W exec x", Deny, "mawk -W exec"),
    ("awk link_secret", Deny, "is the name of an existing file"),
    ("rg -n TODO src", Allow, "allowed: rg"),
    ("rg --pre cat TODO", Deny, "runs a preprocessor"),
    ("rg -L TODO", Deny, "follows symbolic links"),
    ("rg TODO ../secret", Deny, "outside the workspace"),
    ("fd -e rs src", Allow, "allowed: fd"),
    ("fd -x rm -rf {}", Deny, "runs a command"),
    ("fdfind --exec-batch sh", Deny, "runs a command"),
    ("bc -l notes.txt", Allow, "allowed: bc"),
    ("zip -r out/src.zip src", Allow, "allowed: zip"),
    (
        "zip -TT 'sh -c id' out/a.zip notes.txt",
        Deny,
        "names a program",
    ),
    (
        "zip -T --unzip-command=sh out/a.zip notes.txt",
        Deny,
        "names a program",
    ),
    ("zip -m out/a.zip notes.txt", Deny, "deletes the files"),
    ("zip ../a.zip notes.txt", Deny, "outside the workspace"),
    ("unzip -K a.zip", Deny, "setuid"),
    ("unzip -: a.zip", Deny, "climb out"),
    ("sha256sum -c sums.sha256", Allow, "allowed: sha256sum"),
    (
        "md5sum --check bad.md5",
        Deny,
        "named in the file list bad.md5",
    ),
    ("sha1sum -c odd.sha1", Deny, "cannot read as a checksum"),
    // A list on stdin: warden's executor checks its names when it reads them.
    ("sha256sum -c < sums.sha256", Allow, "allowed: sha256sum"),
    ("cat sums.sha256 | md5sum -c", Allow, "allowed: cat, md5sum"),
    ("less notes.txt", Deny, "less: an interactive pager"),
    ("vim notes.txt", Deny, "vim: an interactive editor"),
    (
        "split --filter='sh' notes.txt",
        Deny,
        "runs a shell command",
    ),
    ("crontab -l", Deny, "crontab: installs persistent jobs"),
];

/// The refusals of the user's real home, where `~` means it: the Claude Code hook, whose
/// commands run in the user's own shell.
const REAL_SHELL_HOME_CASES: &[(&str, Decision, &str)] = &[
    (
        "cat ~/.ssh/id_rsa",
        Deny,
        ".ssh/id_rsa is outside the workspace",
    ),
    (
        "cat $HOME/.ssh/id_rsa",
        Deny,
        ".ssh/id_rsa is outside the workspace",
    ),
    ("cat \"$HOME/.ssh/id_rsa\"", Deny, "outside the workspace"),
    ("cat ${HOME}/.ssh/id_rsa", Deny, "outside the workspace"),
    ("ls ~", Deny, "outside the workspace"),
    ("echo x >> ~/.bashrc", Deny, "writing"),
    ("ls ~/*", Deny, "glob"),
    ("cat ~/{.ssh/id_rsa,x}", Deny, "outside"),
    ("cat ~root/.bashrc", Deny, "~user"),
    ("cd", Deny, "cd needs a directory"),
    // A real shell's md5sum reads the list unchecked, and its xargs runs batches unchecked.
    ("md5sum -c < notes.txt", Deny, "standard input"),
    ("ls | xargs cat", Deny, "every batch unchecked"),
    // A real shell would run a process substitution itself, unchecked.
    ("cat <(ls)", Deny, "would run it unchecked"),
    ("cat notes.txt", Allow, "allowed: cat"),
];

#[test]
fn the_real_home_stays_refused_where_tilde_means_it() {
    let fx = fixture();
    let mut checker = real_shell_checker(&fx);
    for (command, want, reason_part) in REAL_SHELL_HOME_CASES {
        let verdict = checker.check(command);
        assert_eq!(verdict.decision, *want, "{command}: {}", verdict.reason);
        assert!(
            verdict.reason.contains(reason_part),
            "{command}: {}",
            verdict.reason
        );
        // The note about `~` is for the jail only: here it is the user's home.
        assert!(
            !verdict.reason.contains("HOME is the workspace"),
            "{command}: {}",
            verdict.reason
        );
    }
}

#[test]
fn policy_cases_check_decision_and_reason() {
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
    assert!(
        CASES.len() >= 150,
        "the table must hold at least 150 cases, has {}",
        CASES.len()
    );
}

fn argv_of(checker: &mut Checker, command: &str) -> Vec<Vec<String>> {
    let verdict = checker.check(command);
    assert_ne!(verdict.decision, Deny, "{command}: {}", verdict.reason);
    verdict.script.commands().map(|c| c.argv.clone()).collect()
}

#[test]
fn the_ir_holds_fully_resolved_words() {
    let fx = fixture();
    let mut c = checker(&fx);
    assert_eq!(argv_of(&mut c, "c\\at notes.txt"), [["cat", "notes.txt"]]);
    assert_eq!(argv_of(&mut c, "\"ca\"'t' \"a b\"c"), [["cat", "a bc"]]);
    assert_eq!(argv_of(&mut c, "echo a\\\nb"), [["echo", "ab"]]);
    assert_eq!(argv_of(&mut c, "echo $'\\x41\\n'"), [["echo", "A\n"]]);
    assert_eq!(
        argv_of(&mut c, "cat 2>/dev/null notes.txt"),
        [["cat", "notes.txt"]]
    );
    assert_eq!(
        argv_of(&mut c, "echo 1 2>&1 a=b --x=y"),
        [["echo", "1", "a=b", "--x=y"]]
    );
    assert_eq!(
        argv_of(&mut c, "ls *.txt"),
        [["ls", "notes.txt", "other.txt"]]
    );
    assert_eq!(argv_of(&mut c, "ls '*.txt'"), [["ls", "*.txt"]]);
    assert_eq!(argv_of(&mut c, "ls *.nomatch"), [["ls", "*.nomatch"]]);
    let pwd = fx.workspace.canonicalize().unwrap();
    assert_eq!(
        argv_of(&mut c, "echo \"$PWD\""),
        [["echo", pwd.to_str().unwrap()]]
    );
}

#[test]
fn redirections_are_resolved_and_ordered_like_bash() {
    use warden::policy::ir::{OpenMode, RedirectTarget};
    let fx = fixture();
    let mut c = checker(&fx);
    let ws = fx.workspace.canonicalize().unwrap();
    let v = c.check("PATH=/tmp; true");
    assert_eq!(v.decision, Deny);
    let v = c.check("grep -c line notes.txt > n.txt 2>&1 && cat n.txt");
    assert_eq!(v.decision, Allow, "{}", v.reason);
    let cmds: Vec<_> = v.script.commands().collect();
    assert_eq!(cmds.len(), 2);
    assert_eq!(cmds[0].redirects[0].fd, 1);
    assert_eq!(
        cmds[0].redirects[0].target,
        RedirectTarget::File {
            path: ws.join("n.txt"),
            mode: OpenMode::Write
        }
    );
    assert_eq!(cmds[0].redirects[1].target, RedirectTarget::Dup(1));
    // A trailing redirect belongs to the last simple command, not the whole list.
    let v = c.check("ls | sort && echo x > out.txt");
    let cmds: Vec<_> = v.script.commands().collect();
    assert!(cmds[0].redirects.is_empty() && cmds[1].redirects.is_empty());
    assert_eq!(cmds[2].redirects.len(), 1);
    // Here-documents keep their body, with <<- stripping leading tabs.
    let v = c.check("cat <<-'EOF'\n\t\tindented\n\tEOF");
    let cmds: Vec<_> = v.script.commands().collect();
    assert_eq!(
        cmds[0].redirects[0].target,
        RedirectTarget::Text("indented\n".into())
    );
}

#[test]
fn cd_changes_the_checked_cwd_of_what_follows() {
    use warden::policy::ir::Builtin;
    let fx = fixture();
    let mut c = checker(&fx);
    let ws = fx.workspace.canonicalize().unwrap();
    let v = c.check("cd src && cat main.rs");
    assert_eq!(v.decision, Allow, "{}", v.reason);
    let cmds: Vec<_> = v.script.commands().collect();
    assert_eq!(cmds[0].builtin, Some(Builtin::Cd(ws.join("src"))));
    assert_eq!(cmds[1].cwd, ws.join("src"));
    // The relative path is checked against the new cwd.
    assert_eq!(c.check("cd src && cat notes.txt").decision, Allow);
    assert_eq!(c.check("cd src && cat ../../secret").decision, Deny);
}

#[test]
fn git_runs_with_its_hooks_switched_off() {
    let fx = fixture();
    let mut c = checker(&fx);
    let argv = &argv_of(&mut c, "git log -p")[0];
    for expected in [
        "--no-pager",
        "--no-replace-objects",
        "core.fsmonitor=false",
        "core.hooksPath=/dev/null",
        "--no-ext-diff",
        "--no-textconv",
    ] {
        assert!(
            argv.iter().any(|a| a == expected),
            "{expected} missing from {argv:?}"
        );
    }
}

#[test]
fn non_ascii_input_never_reaches_the_scanner_and_survives_intact() {
    let fx = fixture();
    let mut c = checker(&fx);
    // U+10FFFF after `{` crashed tree-sitter-bash's scanner (isdigit on a code point).
    for text in [
        "echo {\u{10FFFF}",
        "echo {1..\u{10FFFF}}",
        "ls {\u{10FFFF}\u{10FFFF}",
    ] {
        assert!(!c.check(text).reason.is_empty());
    }
    assert_eq!(
        argv_of(&mut c, "echo héllo 'wörld' \"日本\""),
        [["echo", "héllo", "wörld", "日本"]]
    );
    // A Unicode space is a word character for bash, and so for the policy.
    assert_eq!(argv_of(&mut c, "echo a\u{3000}b"), [["echo", "a\u{3000}b"]]);
}

#[test]
fn oversized_input_is_denied() {
    let fx = fixture();
    let mut c = checker(&fx);
    let long = format!("echo {}", "a".repeat(70_000));
    let v = c.check(&long);
    assert_eq!(v.decision, Deny);
    assert!(v.reason.contains("limit"), "{}", v.reason);
}

#[test]
fn user_policy_can_ask_or_allow_more() {
    let fx = fixture();
    let policy = Policy::from_user_toml(
        "[programs.python3]\ndecision = \"ask\"\nreason = \"runs code\"\n\
         [settings]\nunknown_programs = \"ask\"\n",
        "test",
    )
    .unwrap();
    let mut c = Arc::new(policy)
        .checker(&fx.workspace, &[], &fx.workspace)
        .unwrap();
    let v = c.check("python3 script.py");
    assert_eq!(v.decision, Ask);
    assert!(v.reason.contains("python3: runs code"), "{}", v.reason);
    let v = c.check("frobnicate notes.txt");
    assert_eq!(v.decision, Ask);
    assert!(v.reason.contains("frobnicate is not in the allowlist"));
    // Unknown programs under `ask` still have their paths checked.
    assert_eq!(c.check("frobnicate /etc/shadow").decision, Deny);
}

/// Derived names (backups, chunks, decompressed files) are the program's, whoever wrote the
/// rule: a user's own rules for ln, install, csplit and unxz get them checked too.
#[test]
fn derived_names_hold_for_a_users_own_rules() {
    let fx = fixture();
    let policy = Policy::from_user_toml(
        "[programs.ln]\nlast_arg = \"write\"\nflags = { \"-S\" = \"value\", \"-b\" = \"flag\" }\n\
         [programs.install]\nlast_arg = \"write\"\n\
         [programs.csplit]\nflags = { \"-f\" = \"value\", \"-n\" = \"value\", \"-b\" = \"value\" }\n\
         [programs.unxz]\nargs = \"consume\"\nflags = { \"-S\" = \"value\" }\n",
        "test",
    )
    .unwrap();
    let mut c = Arc::new(policy)
        .checker(&fx.workspace, &[], &fx.workspace)
        .unwrap();
    for (command, want, why) in [
        ("ln -b -S g notes.txt .gitconfi", Deny, "writing .gitconfig"),
        ("ln -b notes.txt other.txt", Allow, "allowed: ln"),
        // The rule does not say -S takes a value: the backup name is unknown.
        (
            "install -S g notes.txt .gitconfi",
            Deny,
            "does not say it takes one",
        ),
        ("csplit -f .gi -n 1 notes.txt 1", Allow, "allowed: csplit"),
        ("csplit -f .gitmodule notes.txt 1", Allow, "allowed: csplit"),
        ("csplit -b %.0d -f .git notes.txt 1", Deny, "printf format"),
        (
            "unxz -S .x .gitattributes.x",
            Deny,
            "writing .gitattributes",
        ),
        ("unxz data.json.xz", Allow, "allowed: unxz"),
        // A link made earlier on the line cannot be resolved by what follows.
        (
            "ln -s .git/hooks h && cp notes.txt h/pre-commit",
            Deny,
            "earlier command",
        ),
        (
            "ln -s .git/hooks src && cp notes.txt src/hooks/pre-commit",
            Deny,
            "earlier command",
        ),
        (
            "ln -s .git/hooks src && cp notes.txt src/pre-commit",
            Allow,
            "allowed: ln, cp",
        ),
        (
            "ln -s notes.txt n && cat other.txt",
            Allow,
            "allowed: ln, cat",
        ),
    ] {
        let v = c.check(command);
        assert_eq!(v.decision, want, "{command}: {}", v.reason);
        assert!(v.reason.contains(why), "{command}: {}", v.reason);
    }
}

#[test]
fn read_roots_widen_reads_but_not_writes() {
    let fx = fixture();
    let extra = fx.workspace.parent().unwrap().join("home");
    let mut c = Arc::new(Policy::embedded_default())
        .checker(
            &fx.workspace,
            std::slice::from_ref(&extra),
            Path::new("/nonexistent"),
        )
        .unwrap();
    assert_eq!(
        c.check(&format!("cat {}/.ssh/id_rsa", extra.display()))
            .decision,
        Allow
    );
    let v = c.check(&format!("touch {}/x", extra.display()));
    assert_eq!(v.decision, Deny);
    assert!(v.reason.contains("read-only root"), "{}", v.reason);
}

/// A real repository (made with git) whose branches hold what the policy keeps read-only:
/// every command that would check such a tree out, stage it or merge it is refused; what
/// discards uncommitted work asks. Run once on loose objects and once packed (deltas).
#[test]
fn git_tree_switches_are_checked_against_the_tree_they_write() {
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: git is not installed");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(&ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", root.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let write = |name: &str, text: &str| {
        let path = ws.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    git(&["init", "-q"]);
    write("README.md", "hello\n");
    write("src/a.rs", "fn a() {}\n");
    write("docs/.gitattributes", "*.md text\n");
    git(&["add", "-A"]);
    git(&["commit", "-qm", "base"]);
    for (branch, file, text) in [
        (
            "evil",
            ".gitconfig",
            "[core]\n\tfsmonitor = touch /tmp/pwned\n",
        ),
        ("attrs", "docs/.gitattributes", "* filter=pwn\n"),
        (
            "modules",
            ".gitmodules",
            "[submodule \"x\"]\n\turl = ext::sh\n",
        ),
        ("globalcfg", ".config/git/config", "[core]\n\tpager = sh\n"),
        ("safe", "src/a.rs", "fn a() { /* changed */ }\n"),
    ] {
        git(&["checkout", "-q", "-b", branch, "main"]);
        write(file, text);
        if branch == "safe" {
            std::os::unix::fs::symlink("src", ws.join("lnk")).unwrap();
        }
        git(&["add", "-A"]);
        git(&["commit", "-qm", branch]);
    }
    git(&["checkout", "-q", "main"]);
    // A stash whose changes touch the attributes (made by the user, outside warden).
    write("docs/.gitattributes", "* filter=pwn\n");
    git(&["stash", "-q"]);
    let evil = git(&["rev-parse", "evil"]);
    let policy = Arc::new(Policy::embedded_default());
    let cases: Vec<(String, Decision, &str)> = vec![
        (
            "git checkout evil".into(),
            Deny,
            "checking out evil would write .gitconfig",
        ),
        ("git switch evil".into(), Deny, ".gitconfig"),
        ("git checkout -b x evil".into(), Deny, ".gitconfig"),
        ("git switch -c x attrs".into(), Deny, "docs/.gitattributes"),
        ("git checkout modules".into(), Deny, ".gitmodules"),
        ("git checkout globalcfg".into(), Deny, ".config/git/config"),
        ("git reset --hard evil".into(), Deny, ".gitconfig"),
        ("git reset --soft evil".into(), Deny, ".gitconfig"),
        ("git reset evil -- .gitconfig".into(), Deny, ".gitconfig"),
        ("git checkout evil -- .".into(), Deny, ".gitconfig"),
        (
            "git restore --source evil .gitconfig".into(),
            Deny,
            ".gitconfig",
        ),
        (
            "git restore -s attrs --staged docs".into(),
            Deny,
            ".gitattributes",
        ),
        ("git merge evil".into(), Deny, ".gitconfig"),
        ("git merge -X subtree=.config safe".into(), Deny, "subtree"),
        ("git merge -s subtree safe".into(), Deny, "subtree"),
        ("git stash apply".into(), Deny, "docs/.gitattributes"),
        (
            "git stash pop stash@{0}".into(),
            Deny,
            "docs/.gitattributes",
        ),
        ("git stash branch b".into(), Deny, "docs/.gitattributes"),
        (format!("git checkout {}", &evil[..8]), Deny, ".gitconfig"),
        ("git checkout evil~0".into(), Deny, ".gitconfig"),
        ("git checkout safe".into(), Allow, "allowed: git"),
        ("git switch -c y safe".into(), Allow, "allowed: git"),
        ("git merge safe".into(), Allow, "allowed: git"),
        ("git checkout evil~1".into(), Allow, "allowed: git"),
        (
            "git checkout evil -- src".into(),
            Ask,
            "git checkout of paths",
        ),
        ("git reset --hard".into(), Ask, "git reset --hard discards"),
        ("git checkout src/a.rs".into(), Ask, "git checkout of paths"),
        (
            "git checkout -- src/a.rs".into(),
            Ask,
            "git checkout of paths",
        ),
        // Neither a commit nor a file: git fails, nothing is discarded.
        ("git checkout no-such-branch".into(), Allow, "allowed: git"),
        (
            "git checkout README.md".into(),
            Ask,
            "git checkout of paths",
        ),
        ("git checkout '*.md'".into(), Ask, "git checkout of paths"),
        (
            "git checkout --track origin/x".into(),
            Allow,
            "allowed: git",
        ),
        ("git checkout -f safe".into(), Ask, "git checkout --force"),
        (
            "git switch --discard-changes safe".into(),
            Ask,
            "git switch --force",
        ),
        (
            "git restore src/a.rs".into(),
            Ask,
            "restore of the work tree",
        ),
        (
            "git restore --staged src/a.rs".into(),
            Allow,
            "allowed: git",
        ),
        ("git clean -f".into(), Ask, "git clean -f"),
        ("git clean -n".into(), Allow, "allowed: git"),
        ("git clean -ffd".into(), Deny, "nested repositories"),
        ("git stash drop".into(), Ask, "git stash drop/clear"),
        ("git stash clear".into(), Ask, "git stash drop/clear"),
        ("git rm -r src".into(), Ask, "git rm -r/-f"),
        ("git rm --cached -r src".into(), Allow, "allowed: git"),
        ("git merge".into(), Deny, "name the branch"),
        ("git merge FETCH_HEAD".into(), Deny, "instead of FETCH_HEAD"),
        (
            "git checkout safe --pathspec-from-file=README.md".into(),
            Ask,
            "git checkout of paths",
        ),
        (
            "git checkout main@{yesterday}".into(),
            Deny,
            "cannot tell which commit",
        ),
        // What a checkout makes a link is not resolved by later commands of the line.
        (
            "git checkout safe && cat lnk/a.rs".into(),
            Deny,
            "earlier command",
        ),
        // Links it restores from the index or HEAD are not read: nothing beneath the work tree
        // is resolved after a command that writes it.
        (
            "git stash && cat README.md".into(),
            Deny,
            "may make symbolic links",
        ),
        ("git switch -c z && ls".into(), Allow, "allowed: git, ls"),
        (
            "git status && cat README.md".into(),
            Allow,
            "allowed: git, cat",
        ),
    ];
    let run = |label: &str| {
        let mut c = policy.checker(&ws, &[], &ws).unwrap();
        let mut failures = Vec::new();
        for (command, want, why) in &cases {
            let v = c.check(command);
            if v.decision != *want || !v.reason.contains(why) {
                failures.push(format!(
                    "{label}: {command:?}: got {} ({}), want {want} containing {why:?}",
                    v.decision, v.reason
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    };
    run("loose objects");
    git(&["pack-refs", "--all"]);
    git(&["repack", "-adq", "--depth=50", "--window=50"]);
    git(&["prune-packed"]);
    run("packed");
    // Objects borrowed from elsewhere are not read: what needs a tree is refused, saying why;
    // what needs none is as before.
    std::fs::write(ws.join(".git/objects/info/alternates"), "/elsewhere\n").unwrap();
    let mut c = policy.checker(&ws, &[], &ws).unwrap();
    let v = c.check("git checkout safe");
    assert_eq!(v.decision, Deny, "{}", v.reason);
    assert!(v.reason.contains("alternates"), "{}", v.reason);
    assert_eq!(c.check("git restore --staged src/a.rs").decision, Allow);
    assert_eq!(c.check("git reset --hard").decision, Ask);
}
