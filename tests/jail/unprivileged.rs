//! A subset of the jail tests with warden running as an unprivileged user (uid 65534 through
//! `setpriv`), on a workspace that user owns — the way warden runs under a dedicated system
//! account. Here no pids cgroup is writable, so RLIMIT_NPROC limits processes, and plain file
//! permissions would allow much of what Landlock must still deny (the "outside" directory is
//! owned by the same user).

use crate::common::*;
use std::process::Command;
use std::time::Duration;

const NOBODY: u32 = 65534;

/// `setpriv … warden jail --workspace WS FLAGS -- ARGV`, or None when this cannot run here.
fn as_nobody(env: &Env, flags: &[&str], argv: &[&str]) -> Option<Run> {
    if !is_root() {
        eprintln!("skipped: switching to uid {NOBODY} needs root");
        return None;
    }
    if !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return None;
    }
    let mut cmd = Command::new("/usr/bin/setpriv");
    cmd.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        "--",
        env!("CARGO_BIN_EXE_warden"),
        "jail",
        "--workspace",
    ])
    .arg(&env.ws)
    .args(flags)
    .arg("--")
    .args(argv)
    .env("WARDEN_CONFIG", &env.config)
    .env("TMPDIR", "/tmp")
    .env("ANTHROPIC_API_KEY", SECRET_KEY)
    .env("TELEGRAM_BOT_TOKEN", SECRET_TOKEN)
    .stdin(std::process::Stdio::null());
    Some(run(cmd))
}

fn unprivileged_env() -> Env {
    let env = Env::new();
    env.outside("outside");
    env.chown_all(NOBODY);
    env
}

#[test]
fn unprivileged_jail_is_confined_and_works() {
    let env = unprivileged_env();
    let Some(r) = as_nobody(&env, &[], &["cat", "/proc/self/status"]) else {
        return;
    };
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("Uid:\t65534"), "{r:?}");
    assert!(r.stdout.contains("NoNewPrivs:\t1"), "{r:?}");
    assert!(r.stdout.contains("Seccomp:\t2"), "{r:?}");
    // The bounding set cannot be cleared without CAP_SETPCAP; with no_new_privs no execve can
    // gain from it anyway.
    for cap in ["CapEff", "CapPrm", "CapAmb", "CapInh"] {
        assert!(
            r.stdout.contains(&format!("{cap}:\t0000000000000000")),
            "{cap}: {r:?}"
        );
    }

    // The outside directory belongs to the same user: only Landlock stops this.
    let outside = env.dir.path().join("outside/f");
    let r = as_nobody(
        &env,
        &[],
        &["sh", "-c", &format!("echo x > {}", outside.display())],
    )
    .unwrap();
    assert_ne!(r.status, 0, "{r:?}");
    assert!(!outside.exists());

    // warden's own environment, readable by its uid without the jail.
    let r = as_nobody(&env, &[], &["sh", "-c", "env; cat /proc/$PPID/environ"]).unwrap();
    assert!(
        !r.stdout.contains(SECRET_KEY) && !r.stdout.contains(SECRET_TOKEN),
        "{r:?}"
    );
    assert!(r.stderr.contains("Permission denied"), "{r:?}");

    let r = as_nobody(
        &env,
        &[],
        &["sh", "-c", "echo a > f && echo b >> f && cat f | wc -l"],
    )
    .unwrap();
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "2");
}

#[test]
fn unprivileged_timeout_and_process_limit() {
    let env = unprivileged_env();
    let m = marker();
    let Some(r) = as_nobody(
        &env,
        &["--timeout", "2"],
        &["sh", "-c", &format!("sleep {m} & (sleep {m} &); sleep {m}")],
    ) else {
        return;
    };
    assert_eq!(r.status, 124, "{r:?}");
    assert!(r.elapsed < Duration::from_secs(3), "{r:?}");
    assert_eq!(survivors(&format!("sleep {m}")), Vec::<u32>::new());

    let bomb = format!("m={m}; b() {{ b | b & }}; b; sleep 30");
    let r = as_nobody(&env, &["--timeout", "3"], &["bash", "-c", &bomb]).unwrap();
    assert_eq!(r.status, 124, "{r:?}");
    assert!(
        r.stderr.contains("Resource temporarily unavailable"),
        "{}",
        r.stderr
    );
    assert_eq!(survivors(&format!("m={m}")), Vec::<u32>::new());
}

/// The red team's jail gaps as the user warden runs as: a file of that user outside every root
/// keeps its mode and times, no memfd runs, no watch is placed, `flock` locks workspace files
/// only (warden, unprivileged too, reaches the jail's descriptors to lock them).
#[test]
fn unprivileged_jail_gaps_stay_closed() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let env = unprivileged_env();
    let secret = env.dir.path().join("outside/secret");
    std::fs::write(&secret, "k").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let status = Command::new("chown")
        .arg(format!("{NOBODY}:{NOBODY}"))
        .arg(&secret)
        .status()
        .unwrap();
    assert!(status.success());
    let before = std::fs::metadata(&secret).unwrap();
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed for raw syscalls");
        return;
    }
    let s = secret.display();
    let code = format!(
        "import ctypes, os\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         os.chmod('{s}', 0o4777); os.utime('{s}', (0, 0)); print('calls returned')\n\
         try:\n    os.memfd_create('x', 0); print('exec memfd made')\n\
         except OSError as e:\n    print('memfd', e.errno)\n\
         r = libc.syscall(294, 0); print('inotify', r, ctypes.get_errno())\n\
         import fcntl\n\
         for path in ('/etc/passwd', 'lock'):\n    \
             f = os.open(path, os.O_RDONLY | os.O_CREAT, 0o600)\n    \
             try:\n        fcntl.flock(f, fcntl.LOCK_EX); print('flock', path, 'ok')\n    \
             except OSError as e:\n        print('flock', path, e.errno)\n"
    );
    let Some(r) = as_nobody(&env, &[], &["python3", "-c", &code]) else {
        return;
    };
    let eperm = libc::EPERM;
    assert_eq!(
        r.stdout,
        format!(
            "calls returned\nmemfd {eperm}\ninotify -1 {eperm}\nflock /etc/passwd {}\n\
             flock lock ok\n",
            libc::ENOSYS
        ),
        "{r:?}"
    );
    let after = std::fs::metadata(&secret).unwrap();
    assert_eq!(
        after.mode() & 0o7777,
        0o600,
        "the jail changed a mode outside"
    );
    assert_eq!(
        after.mtime(),
        before.mtime(),
        "the jail changed a time outside"
    );
}
