//! Compound commands, brace expansion, `$?` and assignments run by warden's own executor
//! through `warden exec`, on the host jail and (when a daemon answers) the Docker backend:
//! the output must be what bash prints for the same string.

use crate::docker;

use std::process::{Command, Stdio};

/// `(command, what bash prints)` — every expectation was checked against `bash -c`.
const RUNS: &[(&str, &str)] = &[
    ("for f in a.txt b.txt; do cat \"$f\"; done", "A\nB\n"),
    ("for f in *.txt; do echo \"$f\"; done", "a.txt\nb.txt\n"),
    ("if [ -f a.txt ]; then echo yes; else echo no; fi", "yes\n"),
    (
        "if [ -f nope ]; then echo yes; elif [ -d sub ]; then echo sub; fi",
        "sub\n",
    ),
    ("if false; then echo never; fi; echo after", "after\n"),
    (
        "(cd sub && echo inner; cat c.txt); cat a.txt",
        "inner\nC\nA\n",
    ),
    (
        "{ echo one; echo two; } > out.txt && cat out.txt",
        "one\ntwo\n",
    ),
    ("{ echo err >&2; } 2> err.txt; cat err.txt", "err\n"),
    ("false; echo \"status=$?\"", "status=1\n"),
    ("true; echo $?; false || echo $?", "0\n1\n"),
    ("! false && echo negated", "negated\n"),
    ("! true || echo inverted", "inverted\n"),
    (
        "while test ! -f stop; do touch stop; echo round; done",
        "round\n",
    ),
    (
        "until test -f stop2; do touch stop2; echo once; done",
        "once\n",
    ),
    ("[[ -f a.txt && ! -d a.txt ]] && echo file", "file\n"),
    ("[[ -d a.txt || -d sub ]] && echo dir", "dir\n"),
    ("mkdir -p d/{x,y} && ls d", "x\ny\n"),
    ("echo {1..3} a{b,c}", "1 2 3 ab ac\n"),
    ("printf 'b\\nB\\na\\n' | LC_ALL=C sort", "B\na\nb\n"),
    ("TZ=UTC date -d @0 +%H:%M", "00:00\n"),
    ("echo \"$PATH\"", "/usr/local/bin:/usr/bin:/bin\n"),
];

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("a.txt"), "A\n").unwrap();
    std::fs::write(ws.join("b.txt"), "B\n").unwrap();
    std::fs::write(ws.join("sub/c.txt"), "C\n").unwrap();
    dir
}

fn exec(ws: &std::path::Path, backend: &str, command: &str) -> (i32, String, String) {
    let config = ws.parent().unwrap().join(format!(
        "warden-exec-syntax-{}.toml",
        ws.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&config, "").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["exec", "--backend", backend, "--workspace"])
        .arg(ws)
        .args(["--", command])
        .env("WARDEN_CONFIG", &config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&config);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn compound_commands_run_as_bash_runs_them_on_the_host() {
    for (command, expected) in RUNS {
        let ws = workspace();
        let (status, stdout, stderr) = exec(ws.path(), "host", command);
        assert_eq!(
            (status, stdout.as_str()),
            (0, *expected),
            "{command}: {stderr}"
        );
    }
}

#[test]
fn a_loop_is_stopped_by_the_timeout_and_a_subshell_cd_does_not_leak() {
    let ws = workspace();
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["exec", "--timeout", "1", "--workspace"])
        .arg(ws.path())
        .args(["--", "while true; do true; done"])
        .env("WARDEN_CONFIG", "/dev/null")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    let (status, stdout, _) = exec(ws.path(), "host", "(cd sub); pwd");
    assert_eq!(status, 0);
    assert_eq!(
        stdout.trim(),
        ws.path().canonicalize().unwrap().to_string_lossy()
    );
}

#[tokio::test]
async fn compound_commands_run_in_docker_too() {
    let Some(_) = docker::daemon().await else {
        return;
    };
    // busybox in the minimal image: the forms whose programs it has.
    for (command, expected) in [
        ("for f in a.txt b.txt; do cat \"$f\"; done", "A\nB\n"),
        ("if [ -f a.txt ]; then echo yes; else echo no; fi", "yes\n"),
        ("(cd sub && cat c.txt); cat a.txt", "C\nA\n"),
        (
            "{ echo one; echo two; } > out.txt && cat out.txt",
            "one\ntwo\n",
        ),
        ("false; echo \"status=$?\"", "status=1\n"),
        ("[[ -f a.txt && -d sub ]] && echo both", "both\n"),
        ("TZ=UTC date -d @0 +%H", "00\n"),
    ] {
        let ws = docker::Workspace::new();
        std::fs::create_dir(ws.path().join("sub")).unwrap();
        for (file, text) in [("a.txt", "A\n"), ("b.txt", "B\n"), ("sub/c.txt", "C\n")] {
            std::fs::write(ws.path().join(file), text).unwrap();
        }
        let (status, stdout, stderr) = exec(&ws.path(), "docker", command);
        assert_eq!(
            (status, stdout.as_str()),
            (0, expected),
            "{command}: {stderr}"
        );
    }
}
