//! Escape probes against the Docker backend, through the library: what a fooled policy would
//! let a command try, and the container refusing it.

use crate::support::*;
use std::time::Duration;
use warden::sandbox::ExitStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_outside_the_workspace_is_writable() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "rootfs").await;
    for target in [
        "/etc/passwd",
        "/etc/evil",
        "/evil",
        "/bin/evil",
        "/usr/bin/evil",
    ] {
        let out = run(
            &sandbox,
            &["sh", "-c", &format!("echo x > {target}")],
            &ws.path(),
        )
        .await;
        assert_ne!(out.code(), 0, "{target} was writable");
        assert!(
            out.stderr.contains("Read-only file system")
                || out.stderr.contains("Permission denied"),
            "{target}: {out:?}"
        );
    }
    let out = run(&sandbox, &["mkdir", "/newdir"], &ws.path()).await;
    assert_ne!(out.code(), 0);
    // /tmp is writable scratch space, but nothing there can be executed.
    let out = run(
        &sandbox,
        &["sh", "-c", "cp /bin/busybox /tmp/bb && /tmp/bb true"],
        &ws.path(),
    )
    .await;
    assert_ne!(out.code(), 0, "{out:?}");
    assert!(out.stderr.contains("Permission denied"), "{out:?}");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_files_outside_the_workspace_are_invisible() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("secret.txt");
    std::fs::write(&secret, "host-secret-7f3a\n").unwrap();
    let sandbox = sandbox(ws.jail(), "hostfiles").await;
    let out = run(&sandbox, &["cat", secret.to_str().unwrap()], &ws.path()).await;
    assert_ne!(out.code(), 0);
    assert!(!out.stdout.contains("host-secret-7f3a"));
    let out = run(
        &sandbox,
        &[
            "sh",
            "-c",
            "grep -rs host-secret-7f3a / --exclude-dir=proc --exclude-dir=sys; echo done",
        ],
        &ws.path(),
    )
    .await;
    assert_eq!(out.stdout, "done\n", "{out:?}");
    // Only the workspace comes from the host (plus the files Docker itself provides).
    let out = run(&sandbox, &["cat", "/proc/self/mountinfo"], &ws.path()).await;
    let host_mounts: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| {
            let target = l.split(' ').nth(4).unwrap_or("");
            !l.contains(" - overlay ")
                && ![
                    " - proc ",
                    " - tmpfs ",
                    " - sysfs ",
                    " - devpts ",
                    " - mqueue ",
                    " - cgroup",
                ]
                .iter()
                .any(|fs| l.contains(fs))
                && !["/etc/resolv.conf", "/etc/hostname", "/etc/hosts"].contains(&target)
        })
        .collect();
    assert_eq!(host_mounts.len(), 1, "{host_mounts:#?}");
    assert_eq!(host_mounts[0].split(' ').nth(4), Some("/workspace"));
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wardens_environment_never_reaches_the_container() {
    let Some(_) = daemon().await else { return };
    // SAFETY (edition 2021): set before the sandbox exists; nothing reads these concurrently
    // in this test binary except through the process environment, which is the point.
    std::env::set_var("ANTHROPIC_API_KEY", "fake-anthropic-key-test-secret-1234");
    std::env::set_var("TELEGRAM_BOT_TOKEN", "fake-bot-token-secret-5678");
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "env").await;
    let out = run(&sandbox, &["env"], &ws.path()).await;
    assert_eq!(out.code(), 0);
    assert!(!out.stdout.contains("secret"), "{}", out.stdout);
    let mut names: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "GIT_ALLOW_PROTOCOL",
            "GIT_NO_LAZY_FETCH",
            "HOME",
            "HOSTNAME",
            "LANG",
            "PATH",
            "TERM"
        ]
    );
    // Nor can a command read warden's environment through /proc: warden is not in its pid
    // namespace.
    let out = run(
        &sandbox,
        &["sh", "-c", "cat /proc/*/environ | tr '\\0' '\\n'"],
        &ws.path(),
    )
    .await;
    assert!(!out.stdout.contains("secret"), "{}", out.stdout);
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn there_is_no_network() {
    let Some(_) = daemon().await else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "net").await;
    // The host's loopback listener, a public address, and the docker0 gateway.
    for host in ["127.0.0.1", "8.8.8.8", "172.17.0.1"] {
        let out = run(&sandbox, &["nc", "-w", "2", host, &port], &ws.path()).await;
        assert_ne!(out.code(), 0, "{host}: {out:?}");
    }
    assert!(listener.accept().is_err(), "the host listener was reached");
    let out = run(&sandbox, &["cat", "/proc/net/dev"], &ws.path()).await;
    let interfaces: Vec<&str> = out
        .stdout
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(interfaces, ["lo"], "{}", out.stdout);
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_docker_socket_no_privileges() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "privs").await;
    let out = run(
        &sandbox,
        &[
            "sh",
            "-c",
            "find / -xdev -name 'docker*.sock' 2>/dev/null; ls /var/run /run 2>&1; echo end",
        ],
        &ws.path(),
    )
    .await;
    assert!(!out.stdout.contains(".sock"), "{out:?}");
    let out = run(&sandbox, &["cat", "/proc/self/status"], &ws.path()).await;
    let field = |name: &str| {
        out.stdout
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
            .unwrap()
    };
    assert_eq!(field("CapEff:"), "0000000000000000");
    assert_eq!(field("CapPrm:"), "0000000000000000");
    assert_eq!(field("CapBnd:"), "0000000000000000");
    assert_eq!(field("NoNewPrivs:"), "1");
    let out = run(&sandbox, &["id", "-u"], &ws.path()).await;
    assert_ne!(out.stdout.trim(), "0", "runs as root");
    assert_eq!(out.stdout.trim(), sandbox.user().uid.to_string());
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_loop_hits_the_process_limit() {
    let Some(docker) = daemon().await else { return };
    let ws = Workspace::new();
    let mut jail = ws.jail();
    jail.limits.max_processes = 32;
    let sandbox = sandbox(jail, "pids").await;
    let script = "i=0; while [ $i -lt 100 ]; do sleep 60 & i=$((i+1)); done; echo started $i";
    let (mut process, out, err) = start(&sandbox, &["sh", "-c", script], &ws.path()).await;
    let status = tokio::time::timeout(Duration::from_secs(30), process.wait()).await;
    let status = status.expect("the loop ends").unwrap();
    let stderr = err.join().unwrap();
    assert!(stderr.contains("can't fork"), "{status:?} {stderr}");
    let container = sandbox.container_id().await.unwrap();
    let count = leftovers(&docker, &container).await.len();
    assert!(count <= 32, "{count} processes");
    process.kill().await;
    assert!(!out.join().unwrap().contains("started 100"));
    // With every pid taken, `kill -9 -1` may not even start: then the container is replaced.
    if docker.inspect_container(&container, None).await.is_ok() {
        assert!(leftovers(&docker, &container).await.is_empty());
    } else {
        assert_eq!(run(&sandbox, &["true"], &ws.path()).await.code(), 0);
    }
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocating_beyond_the_memory_limit_is_killed() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let mut jail = ws.jail();
    jail.limits.memory_bytes = 64 << 20;
    let sandbox = sandbox(jail, "memory").await;
    // tail must keep everything it reads in memory: /dev/zero has no newlines.
    let out = run(
        &sandbox,
        &[
            "sh",
            "-c",
            "dd if=/dev/zero bs=1M count=512 2>/dev/null | tail > /dev/null",
        ],
        &ws.path(),
    )
    .await;
    assert_eq!(out.code(), 128 + libc::SIGKILL, "{out:?}");
    // The container survives for the next command.
    assert_eq!(run(&sandbox, &["true"], &ws.path()).await.code(), 0);
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_leaves_no_process_behind() {
    let Some(docker) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "kill").await;
    // A backgrounded child, a double fork, a setsid'd session with its own child, and the
    // program itself still running.
    let script = "sleep 1001 & (sleep 1002 &) ; setsid sh -c 'sleep 1003 & exec sleep 1004' & \
                  (setsid sh -c 'sleep 1005 &' &) ; echo ready; exec sleep 1006";
    let (mut process, out, _err) = start(&sandbox, &["sh", "-c", script], &ws.path()).await;
    let container = sandbox.container_id().await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = leftovers(&docker, &container).await;
        if seen.len() >= 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.len() >= 6, "the probe did not start: {seen:#?}");
    // What an executor does on timeout.
    let timed_out = tokio::time::timeout(Duration::from_millis(300), process.wait()).await;
    assert!(timed_out.is_err(), "the program ended by itself");
    process.kill().await;
    assert_eq!(leftovers(&docker, &container).await, Vec::<String>::new());
    let status = process.wait().await.unwrap();
    assert_eq!(status.as_shell_code(), 128 + libc::SIGKILL);
    assert_eq!(out.join().unwrap(), "ready\n");
    process.kill().await; // idempotent
                          // The session goes on in the same container.
    assert_eq!(
        run(&sandbox, &["true"], &ws.path()).await.status,
        ExitStatus::Code(0)
    );
    assert_eq!(
        sandbox.container_id().await.as_deref(),
        Some(container.as_str())
    );
    sandbox.shutdown().await;
}
