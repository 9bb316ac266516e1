//! Docker backend latency, in one run against the local daemon:
//!
//! - warm: `true` through warden's own path (one exec in the session's warm container:
//!   create, start, wait for the start, drain, exit code),
//! - the same `true` as a bare bollard round trip (create, start, read to the end, inspect):
//!   the floor the daemon and runc set,
//! - the same `true` through the `docker exec` CLI into the same container,
//! - cold: a fresh session's container created, started and verified, and a cold session's
//!   first `true` (container creation included).
//!
//! `cargo bench --bench docker` (needs a daemon and warden-sandbox:minimal; `.ci/docker-up`).
//! Prints medians; WARDEN_BENCH_RUNS sets the warm sample count (default 50).

use std::path::Path;
use std::time::{Duration, Instant};
use warden::config::DockerConfig;
use warden::sandbox::docker::DockerSandbox;
use warden::sandbox::{JailSpec, ProcessSpec, Sandbox};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn run_true(sandbox: &DockerSandbox, cwd: &Path) {
    let mut process = sandbox
        .spawn(ProcessSpec::silent(&["true"], cwd))
        .await
        .expect("spawn true");
    let status = process.wait().await.expect("wait");
    assert_eq!(status.as_shell_code(), 0);
}

/// One exec of `true` with nothing but the Engine API calls.
async fn raw_true(docker: &bollard::Docker, container: &str, user: &str) {
    use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
    use futures::StreamExt;
    let options = CreateExecOptions {
        cmd: Some(vec!["true"]),
        user: Some(user),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..Default::default()
    };
    let exec = docker
        .create_exec(container, options)
        .await
        .expect("create");
    let started = docker
        .start_exec(&exec.id, Some(StartExecOptions::default()))
        .await
        .expect("start");
    if let StartExecResults::Attached { mut output, .. } = started {
        while output.next().await.is_some() {}
    }
    let inspect = docker.inspect_exec(&exec.id).await.expect("inspect");
    assert_eq!(inspect.exit_code, Some(0));
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runs: usize = std::env::var("WARDEN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let config = DockerConfig::default();
    let workspace = tempfile::tempdir().expect("tempdir");
    let ws = workspace.path().canonicalize().unwrap();
    if nix::unistd::geteuid().is_root() {
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::chown(&ws, Some(nobody), Some(nix::unistd::Gid::from_raw(65534))).unwrap();
    }
    let sandbox = match DockerSandbox::connect(&config, JailSpec::new(ws.clone()), "bench").await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            return;
        }
    };
    sandbox.warm_up().await.expect("warm up");
    let id = sandbox.container_id().await.expect("container");
    for _ in 0..3 {
        run_true(&sandbox, &ws).await;
    }

    let mut warden = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        run_true(&sandbox, &ws).await;
        warden.push(t.elapsed());
    }

    let mut raw = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        raw_true(sandbox.docker(), &id, &sandbox.user().spec()).await;
        raw.push(t.elapsed());
    }

    let mut cli = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let status = tokio::process::Command::new("docker")
            .args(["exec", "-u", &sandbox.user().spec(), &id, "true"])
            .status()
            .await
            .expect("docker exec");
        cli.push(t.elapsed());
        assert!(status.success());
    }
    sandbox.shutdown().await;

    let cold_runs = (runs / 5).max(3);
    let mut create = Vec::new();
    let mut first = Vec::new();
    for i in 0..cold_runs {
        let fresh = DockerSandbox::connect(
            &config,
            JailSpec::new(ws.clone()),
            &format!("bench-cold-{i}"),
        )
        .await
        .expect("connect");
        let t = Instant::now();
        fresh.warm_up().await.expect("create");
        create.push(t.elapsed());
        fresh.shutdown().await;
        let t = Instant::now();
        run_true(&fresh, &ws).await;
        first.push(t.elapsed());
        fresh.shutdown().await;
    }

    println!("docker backend latency (median of {runs} warm, {cold_runs} cold runs)");
    println!(
        "  warm exec `true`, warden (bollard)      {}",
        ms(median(warden))
    );
    println!(
        "  warm exec `true`, bare bollard          {}",
        ms(median(raw))
    );
    println!(
        "  warm exec `true`, docker exec CLI       {}",
        ms(median(cli))
    );
    println!(
        "  cold container create+start+verify     {}",
        ms(median(create))
    );
    println!(
        "  cold session, first `true` (incl. create) {}",
        ms(median(first))
    );
}
