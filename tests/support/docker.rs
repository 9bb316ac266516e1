//! Shared set-up for the Docker tests: a daemon (or a printed reason to skip), the minimal
//! image, a workspace the container user can write, and a way to run one program and collect
//! its output.

#![allow(dead_code)]

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use warden::config::DockerConfig;
use warden::sandbox::docker::{connect, image, DockerSandbox};
use warden::sandbox::{
    ExitStatus, JailSpec, JailedProcess, ProcessSpec, Sandbox, SandboxError, Stdio,
};

/// The daemon the tests use, or `None` after printing why the test skips.
pub async fn daemon() -> Option<bollard::Docker> {
    let config = DockerConfig::default();
    match connect::connect(&config.socket).await {
        Ok(docker) => {
            ensure_image(&docker).await;
            Some(docker)
        }
        Err(e) => {
            eprintln!("SKIPPED: no Docker daemon answers ({e})");
            None
        }
    }
}

/// Build `warden-sandbox:minimal` once per test binary when it is missing.
async fn ensure_image(docker: &bollard::Docker) {
    static BUILT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    BUILT
        .get_or_init(|| async {
            if docker.inspect_image(&image::tag("minimal")).await.is_ok() {
                return;
            }
            let context = image::Context::locate("minimal", None).expect("minimal image context");
            image::build(docker, &context, &mut |_| {})
                .await
                .expect("build warden-sandbox:minimal");
        })
        .await;
}

/// A temporary workspace the container user can write.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        if nix::unistd::geteuid().is_root() {
            // Root's own workspace would make the container run as nobody (see user.rs).
            let nobody = Some(nix::unistd::Uid::from_raw(65534));
            nix::unistd::chown(dir.path(), nobody, Some(nix::unistd::Gid::from_raw(65534)))
                .unwrap();
        }
        Workspace { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    pub fn jail(&self) -> JailSpec {
        JailSpec::new(self.path())
    }
}

/// A sandbox over `jail` with a test-unique session name, on the runtime under test.
pub async fn sandbox(jail: JailSpec, session: &str) -> DockerSandbox {
    sandbox_with(&config(), jail, session).await
}

/// The Docker config the tests use: the default, with the OCI runtime `.ci/run` names in
/// `WARDEN_TEST_DOCKER_RUNTIME` (it runs the escape and network tests again under gVisor).
pub fn config() -> DockerConfig {
    DockerConfig {
        runtime: runtime_under_test(),
        ..DockerConfig::default()
    }
}

pub fn runtime_under_test() -> Option<String> {
    std::env::var("WARDEN_TEST_DOCKER_RUNTIME")
        .ok()
        .filter(|r| !r.is_empty())
}

pub async fn sandbox_with(config: &DockerConfig, jail: JailSpec, session: &str) -> DockerSandbox {
    DockerSandbox::connect(config, jail, &format!("test-{session}"))
        .await
        .expect("docker sandbox")
}

/// What one program did.
#[derive(Debug)]
pub struct Outcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn code(&self) -> i32 {
        self.status.as_shell_code()
    }
}

/// A pipe: (read end, write end).
pub fn pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe().unwrap()
}

/// Collect everything from a read end on a thread.
pub fn collect(fd: OwnedFd) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        std::fs::File::from(fd).read_to_string(&mut text).unwrap();
        text
    })
}

/// Start `argv` in `cwd` with stdout and stderr captured.
pub async fn start(
    sandbox: &dyn Sandbox,
    argv: &[&str],
    cwd: &Path,
) -> (
    Box<dyn JailedProcess>,
    std::thread::JoinHandle<String>,
    std::thread::JoinHandle<String>,
) {
    let (out_r, out_w) = pipe();
    let (err_r, err_w) = pipe();
    let mut spec = ProcessSpec::silent(argv, cwd);
    spec.stdout = Stdio::Fd(out_w);
    spec.stderr = Stdio::Fd(err_w);
    let process = sandbox.spawn(spec).await.expect("spawn");
    (process, collect(out_r), collect(err_r))
}

/// Run `argv` in `cwd` to the end.
pub async fn run(sandbox: &dyn Sandbox, argv: &[&str], cwd: &Path) -> Outcome {
    try_run(sandbox, argv, cwd).await.expect("run")
}

pub async fn try_run(
    sandbox: &dyn Sandbox,
    argv: &[&str],
    cwd: &Path,
) -> Result<Outcome, SandboxError> {
    let (mut process, out, err) = start(sandbox, argv, cwd).await;
    let status = process.wait().await;
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    Ok(Outcome {
        status: status?,
        stdout,
        stderr,
    })
}

/// Processes in the container besides its PID 1 and PID 1's idle `sleep`, as `ps` lines.
pub async fn leftovers(docker: &bollard::Docker, container: &str) -> Vec<String> {
    let inspect = docker.inspect_container(container, None).await.unwrap();
    let init = inspect.state.and_then(|s| s.pid).unwrap().to_string();
    let idle_loop_fork = format!("/bin/sh -c {}", warden::sandbox::docker::plan::IDLE_LOOP);
    let options = bollard::query_parameters::TopOptionsBuilder::new()
        .ps_args("-o pid,ppid,args")
        .build();
    let top = docker
        .top_processes(container, Some(options))
        .await
        .unwrap();
    top.processes
        .unwrap_or_default()
        .into_iter()
        .filter(|row| {
            let is_init = row[0] == init;
            // The idle loop's own sleep, or the loop's fork that is about to exec it again
            // (a kill ends the sleep too; under load that fork is visible for a moment).
            let is_idle_sleep =
                row[1] == init && (row[2] == "sleep 2147483647" || row[2] == idle_loop_fork);
            !(is_init || is_idle_sleep)
        })
        .map(|row| row.join(" "))
        .collect()
}
