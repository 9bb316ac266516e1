//! The Docker backend through the real CLI: `warden jail --backend docker`, escape probes, the
//! timeout, and a crashed warden's container removed by the next warden.

use crate::support::{daemon, Workspace};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECRET_KEY: &str = "fake-anthropic-key-CLI-SECRET-31d9";
const SECRET_TOKEN: &str = "fake-bot-token-TELEGRAM-CLI-SECRET-77aa";

struct Cli {
    ws: Workspace,
    config: tempfile::NamedTempFile,
}

#[derive(Debug)]
struct Run {
    status: i32,
    stdout: String,
    stderr: String,
}

impl Cli {
    fn new() -> Cli {
        Cli {
            ws: Workspace::new(),
            config: tempfile::NamedTempFile::new().unwrap(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.args(args)
            .current_dir(self.ws.path())
            .env("WARDEN_CONFIG", self.config.path())
            .env("ANTHROPIC_API_KEY", SECRET_KEY)
            .env("TELEGRAM_BOT_TOKEN", SECRET_TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// `warden jail --backend docker [FLAGS] -- ARGV` in the workspace.
    fn jail(&self, flags: &[&str], argv: &[&str]) -> Run {
        self.jail_input(flags, argv, None)
    }

    fn jail_input(&self, flags: &[&str], argv: &[&str], input: Option<&str>) -> Run {
        let mut args = vec!["jail", "--backend", "docker"];
        args.extend_from_slice(flags);
        args.push("--");
        args.extend_from_slice(argv);
        let mut cmd = self.command(&args);
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().unwrap();
        if let Some(text) = input {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        finish(child.wait_with_output().unwrap())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.ws.path().join(name)
    }
}

fn finish(out: std::process::Output) -> Run {
    use std::os::unix::process::ExitStatusExt;
    Run {
        status: out
            .status
            .code()
            .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0)),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Host processes whose command line starts with `needle`.
fn host_processes(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.starts_with(needle) {
            found.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// Containers labelled as owned by warden process `pid`.
async fn containers_of(docker: &bollard::Docker, pid: u32) -> Vec<String> {
    let filters = HashMap::from([("label", vec![format!("warden.owner_pid={pid}")])]);
    let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_work_through_the_cli_is_visible_on_the_host() {
    let Some(_) = daemon().await else { return };
    let cli = Cli::new();
    let r = cli.jail(
        &[],
        &["sh", "-c", "echo one > notes.txt && echo two >> notes.txt"],
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(cli.path("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    let r = cli.jail_input(&[], &["tr", "a-z", "A-Z"], Some("piped through\n"));
    assert_eq!(
        (r.status, r.stdout.as_str()),
        (0, "PIPED THROUGH\n"),
        "{r:?}"
    );
    let r = cli.jail(&[], &["sh", "-c", "exit 7"]);
    assert_eq!(r.status, 7);
    let r = cli.jail(&[], &["definitely-not-a-program"]);
    assert_eq!(r.status, 127, "{r:?}");
    assert!(r.stderr.contains("command not found"), "{r:?}");
    let r = cli.jail(&[], &["pwd"]);
    assert_eq!(r.stdout, "/workspace\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_probes_through_the_cli() {
    let Some(_) = daemon().await else { return };
    let cli = Cli::new();
    // Secrets in warden's environment.
    let r = cli.jail(
        &["--timeout", "30"],
        &["sh", "-c", "env; cat /proc/*/environ"],
    );
    assert_eq!(r.status, 0, "{r:?}");
    assert!(!r.stdout.contains("SECRET"), "{}", r.stdout);
    // The root filesystem.
    let r = cli.jail(&[], &["sh", "-c", "echo x > /etc/passwd"]);
    assert_ne!(r.status, 0);
    assert!(r.stderr.contains("Read-only file system"), "{r:?}");
    let r = cli.jail(&[], &["touch", "/owned"]);
    assert_ne!(r.status, 0);
    // A host file outside the workspace.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "top secret").unwrap();
    let secret = outside.path().join("secret");
    let r = cli.jail(&[], &["cat", secret.to_str().unwrap()]);
    assert_ne!(r.status, 0);
    assert!(!r.stdout.contains("top secret"));
    // The network: a listener on the host's loopback is not reachable.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let r = cli.jail(&[], &["nc", "-w", "2", "127.0.0.1", &port]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(listener.accept().is_err());
    // The Docker socket.
    let r = cli.jail(&[], &["ls", "/var/run/docker.sock", "/run/docker.sock"]);
    assert_ne!(r.status, 0);
    assert!(r.stderr.contains("No such file"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeout_leaves_no_process_and_no_container() {
    let Some(docker) = daemon().await else { return };
    let cli = Cli::new();
    let tag = 7000 + std::process::id() % 1000;
    let script = format!(
        "sleep {tag}1 & (sleep {tag}2 &); (setsid sh -c 'sleep {tag}3 &' &); exec sleep {tag}4"
    );
    let mut child = cli
        .command(&[
            "jail",
            "--backend",
            "docker",
            "--timeout",
            "3",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    while host_processes(&format!("sleep {tag}")).len() < 4
        && started.elapsed() < Duration::from_secs(20)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        host_processes(&format!("sleep {tag}")).len(),
        4,
        "the probe did not start"
    );
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(124));
    assert_eq!(
        host_processes(&format!("sleep {tag}")),
        Vec::<String>::new()
    );
    assert_eq!(containers_of(&docker, pid).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_wardens_container_is_removed_by_the_next_warden() {
    let Some(docker) = daemon().await else { return };
    let cli = Cli::new();
    let mut victim = cli
        .command(&["jail", "--backend", "docker", "--", "sleep", "60"])
        .spawn()
        .unwrap();
    let pid = victim.id();
    let started = Instant::now();
    let mut orphans = Vec::new();
    while started.elapsed() < Duration::from_secs(30) {
        orphans = containers_of(&docker, pid).await;
        if !orphans.is_empty() && !host_processes("sleep 60").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(orphans.len(), 1, "warden never started its container");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    victim.wait().unwrap();
    assert_eq!(
        containers_of(&docker, pid).await,
        orphans,
        "SIGKILL leaves the container"
    );
    // The next warden removes it while starting up.
    let r = cli.jail(&[], &["true"]);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(containers_of(&docker, pid).await, Vec::<String>::new());
    let running = docker.inspect_container(&orphans[0], None).await;
    assert!(running.is_err(), "the orphan still exists");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_and_image_build_through_the_cli() {
    let Some(_) = daemon().await else { return };
    let cli = Cli::new();
    let out = finish(
        cli.command(&["doctor", "--sandbox", "--json"])
            .output()
            .unwrap(),
    );
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let docker = &report["docker"];
    assert_eq!(docker["available"], true, "{docker}");
    assert_eq!(docker["report"]["image"], "warden-sandbox:minimal");
    assert!(docker["report"]["api_version"].is_string());
    let out = finish(
        cli.command(&["image", "build", "no-such-image"])
            .output()
            .unwrap(),
    );
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.contains("no sandbox image \"no-such-image\""),
        "{out:?}"
    );
    // A context whose host file is missing names the package to install.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        "FROM scratch\nCOPY tool /tool\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("host-files"),
        "tool /nonexistent/tool busybox-static\n",
    )
    .unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let out = finish(
        cli.command(&["image", "build", "custom", "--dir", dir_arg])
            .output()
            .unwrap(),
    );
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.contains("apt-get install busybox-static"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warden_exec_runs_the_checked_ir_in_the_container() {
    let Some(_) = daemon().await else { return };
    let cli = Cli::new();
    let exec = |command: &str| {
        finish(
            cli.command(&["exec", "--backend", "docker", "--", command])
                .output()
                .unwrap(),
        )
    };
    let r = exec("echo hello docker | tr a-z A-Z > upper.txt && cat upper.txt; pwd");
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "HELLO DOCKER\n/workspace\n");
    assert_eq!(
        std::fs::read_to_string(cli.path("upper.txt")).unwrap(),
        "HELLO DOCKER\n"
    );
    let r = exec("false || echo fallback");
    assert_eq!((r.status, r.stdout.as_str()), (0, "fallback\n"), "{r:?}");
    // A container program gets no descriptor beyond 0-2: a process substitution is refused
    // before anything of the line runs.
    let r = exec("echo ran > ran.txt; cat <(echo hi)");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("host backend only"), "{r:?}");
    assert!(!cli.path("ran.txt").exists(), "{r:?}");
    // Denied by the policy: nothing runs.
    let r = exec("cat /etc/shadow");
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("denied"), "{r:?}");
}
