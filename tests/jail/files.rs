//! Files: the jail writes only inside the workspace, reads nothing secret outside it, follows no
//! planted symlink out of it, and executes nothing from it. Each check looks from outside.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn writing_outside_the_workspace_fails() {
    let env = Env::new();
    let outside = env.outside("outside");
    let target = outside.join("written");
    let t = target.display().to_string();
    let r = env.jail(&[
        "sh",
        "-c",
        &format!("echo pwned > {t}; touch {t}; cp /etc/hostname {t}; mkdir {t}.d; exit 0"),
    ]);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stderr.contains("Permission denied"), "{r:?}");
    assert!(!target.exists(), "a file appeared outside the workspace");
    assert!(!outside.join("written.d").exists());
    // The system temp dir is outside too.
    let r = env.jail(&["sh", "-c", "echo x > /tmp/warden-jail-escape-test"]);
    assert_ne!(r.status, 0);
    assert!(!std::path::Path::new("/tmp/warden-jail-escape-test").exists());
}

#[test]
fn writing_through_a_planted_symlink_fails() {
    let env = Env::new();
    let outside = env.outside("outside");
    std::os::unix::fs::symlink(&outside, env.ws.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("file"), env.ws.join("file-link")).unwrap();
    let r = env.jail(&[
        "sh",
        "-c",
        "echo a > link/new; echo b > file-link; cp /etc/hostname link/copy; ln -s /etc/passwd link/p; exit 0",
    ]);
    assert!(r.stderr.contains("Permission denied"), "{r:?}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "{r:?}");
}

#[test]
fn reading_a_secret_outside_fails() {
    let env = Env::new();
    let outside = env.outside("secrets");
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "TOPSECRET-VALUE-31337").unwrap();
    std::os::unix::fs::symlink(&secret, env.ws.join("innocent")).unwrap();
    let s = secret.display().to_string();
    for script in [
        format!("cat {s}"),
        "cat innocent".to_string(),
        format!("cat /proc/self/root{s}"),
        format!("ls {}", outside.display()),
        "cat /etc/shadow".to_string(),
        "ls /root /home".to_string(),
    ] {
        let r = env.jail(&["sh", "-c", &script]);
        assert_ne!(r.status, 0, "{script}: {r:?}");
        assert!(!r.stdout.contains("TOPSECRET"), "{script}: {r:?}");
        assert!(!r.stdout.contains("secret.txt"), "{script}: {r:?}");
    }
}

#[test]
fn system_files_programs_need_are_readable() {
    let env = Env::new();
    let r = env.jail(&[
        "sh",
        "-c",
        "id -un && ls /usr/bin/env && cat /etc/passwd | head -1",
    ]);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(
        r.stdout.contains("root:") || r.stdout.contains(":x:"),
        "{r:?}"
    );
}

#[test]
fn nothing_in_the_workspace_can_be_executed() {
    let env = Env::new();
    let script = env.ws.join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy("/bin/true", env.ws.join("mytrue")).unwrap();
    let r = env.jail(&["./script.sh"]);
    assert_eq!(r.status, 126, "{r:?}");
    assert!(!r.stdout.contains("ran"));
    assert!(r.stderr.contains("Permission denied"), "{r:?}");
    let r = env.jail(&["./mytrue"]);
    assert_eq!(r.status, 126, "{r:?}");
    // Interpreting a script is still possible (the jail does not pretend otherwise).
    let r = env.jail(&["sh", "script.sh"]);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "ran\n");
}

#[test]
fn real_work_in_the_workspace_succeeds() {
    let env = Env::new();
    let r = env.jail(&[
        "sh",
        "-c",
        "set -e; mkdir -p src/a; echo hello > src/a/f.txt; echo world >> src/a/f.txt; \
         cat src/a/f.txt | tr a-z A-Z > up.txt; mv up.txt src/; ln -s a/f.txt src/l; \
         cat src/l | wc -l; echo tmp > \"$TMPDIR/t\"; cat \"$TMPDIR/t\"; rm -r src/a; ls src; \
         test \"$HOME\" = \"$PWD\" && echo home-is-workspace",
    ]);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "2\ntmp\nl\nup.txt\nhome-is-workspace\n", "{r:?}");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("src/up.txt")).unwrap(),
        "HELLO\nWORLD\n"
    );
}

#[test]
fn git_and_python_work_inside() {
    let env = Env::new();
    let r = env.jail(&[
        "sh",
        "-c",
        "git init -q repo && cd repo && echo x > f && git add f && \
         git -c user.name=t -c user.email=t@t commit -qm m && git log --oneline | wc -l",
    ]);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "1");
    if have_python() {
        let r = env.jail(&[
            "python3",
            "-c",
            "import json,os; print(json.dumps(sorted(os.listdir('.'))))",
        ]);
        assert_eq!(r.status, 0, "{r:?}");
        assert_eq!(r.stdout.trim(), "[\"repo\"]");
    }
}

#[test]
fn node_and_npm_start_inside() {
    // node reads /etc/ssl/openssl.cnf at start: without it every npm command died at once.
    if !std::path::Path::new("/usr/bin/npm").exists() {
        eprintln!("skipped: /usr/bin/npm is not installed");
        return;
    }
    let env = Env::new();
    let r = env.jail(&["sh", "-c", "npm --version >/dev/null && npm list"]);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("(empty)"), "{r:?}");
}
