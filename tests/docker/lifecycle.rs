//! The session container's life: created on first use, verified, removed when idle, on
//! shutdown, on drop, and by the next warden when its owner crashed.

use crate::support::*;
use std::collections::HashMap;
use std::time::Duration;
use warden::config::DockerConfig;
use warden::sandbox::docker::container;
use warden::sandbox::docker::orphans::remove_orphans;
use warden::sandbox::docker::owner::{Owner, MANAGED};
use warden::sandbox::docker::plan::ContainerPlan;
use warden::sandbox::docker::user::ContainerUser;
use warden::sandbox::docker::DockerSandbox;
use warden::sandbox::{ProcessSpec, Sandbox, SandboxError};

async fn exists(docker: &bollard::Docker, id: &str) -> bool {
    docker.inspect_container(id, None).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_container_is_created_on_first_use_with_every_restriction() {
    let Some(docker) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "restrictions").await;
    assert_eq!(
        sandbox.container_id().await,
        None,
        "created before first use"
    );
    assert_eq!(run(&sandbox, &["true"], &ws.path()).await.code(), 0);
    let id = sandbox.container_id().await.unwrap();
    let inspect = docker.inspect_container(&id, None).await.unwrap();
    let host = inspect.host_config.unwrap();
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(host.readonly_rootfs, Some(true));
    assert_eq!(
        host.security_opt,
        Some(vec!["no-new-privileges".to_string()])
    );
    assert_eq!(host.pids_limit, Some(256));
    assert_eq!(host.memory, Some(2 << 30));
    assert_eq!(host.memory_swap, Some(2 << 30));
    assert_eq!(host.nano_cpus, Some(1_000_000_000));
    assert!(host.binds.unwrap_or_default().is_empty());
    let core = host.ulimits.unwrap_or_default();
    assert!(
        core.iter()
            .any(|u| u.name.as_deref() == Some("core") && u.hard == Some(0)),
        "{core:?}"
    );
    let mounts = inspect.mounts.unwrap();
    assert_eq!(mounts.len(), 1);
    assert_eq!(mounts[0].destination.as_deref(), Some("/workspace"));
    let labels = inspect.config.unwrap().labels.unwrap();
    assert_eq!(labels.get(MANAGED).map(String::as_str), Some("true"));
    assert_eq!(
        labels.get("warden.owner_pid"),
        Some(&std::process::id().to_string())
    );
    sandbox.shutdown().await;
    assert!(
        !exists(&docker, &id).await,
        "shutdown removes the container"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_roots_are_mounted_read_only_at_their_own_path() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let shared = tempfile::tempdir().unwrap();
    std::fs::write(shared.path().join("data.txt"), "shared data\n").unwrap();
    let root = shared.path().canonicalize().unwrap();
    let mut jail = ws.jail();
    jail.read_roots.push(root.clone());
    let sandbox = sandbox(jail, "readroots").await;
    let file = root.join("data.txt");
    let out = run(&sandbox, &["cat", file.to_str().unwrap()], &ws.path()).await;
    assert_eq!(out.stdout, "shared data\n");
    let out = run(
        &sandbox,
        &["touch", root.join("new").to_str().unwrap()],
        &ws.path(),
    )
    .await;
    assert!(out.stderr.contains("Read-only file system"), "{out:?}");
    assert_eq!(sandbox.guest_path(&file), Some(file.clone()));
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_loses_its_container_and_gets_a_new_one() {
    let Some(docker) = daemon().await else { return };
    let ws = Workspace::new();
    let config = DockerConfig {
        idle_secs: 1,
        ..DockerConfig::default()
    };
    let sandbox = sandbox_with(&config, ws.jail(), "idle").await;
    // A running command keeps the session busy, however long it takes.
    let (mut process, _out, _err) = start(&sandbox, &["sleep", "3"], &ws.path()).await;
    let first = sandbox.container_id().await.unwrap();
    assert_eq!(process.wait().await.unwrap().as_shell_code(), 0);
    assert!(exists(&docker, &first).await, "removed while a command ran");
    let mut gone = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !exists(&docker, &first).await {
            gone = true;
            break;
        }
    }
    assert!(gone, "the idle container was not removed");
    assert_eq!(sandbox.container_id().await, None);
    assert_eq!(run(&sandbox, &["true"], &ws.path()).await.code(), 0);
    let second = sandbox.container_id().await.unwrap();
    assert_ne!(first, second);
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_sandbox_removes_its_container() {
    let Some(docker) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "drop").await;
    sandbox.warm_up().await.unwrap();
    let id = sandbox.container_id().await.unwrap();
    assert!(exists(&docker, &id).await);
    drop(sandbox);
    assert!(!exists(&docker, &id).await, "drop left the container");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_container_is_replaced_transparently() {
    let Some(docker) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "replace").await;
    sandbox.warm_up().await.unwrap();
    let id = sandbox.container_id().await.unwrap();
    docker.kill_container(&id, None).await.unwrap();
    let out = run(&sandbox, &["echo", "still here"], &ws.path()).await;
    assert_eq!(out.stdout, "still here\n");
    assert_ne!(sandbox.container_id().await.unwrap(), id);
    assert!(!exists(&docker, &id).await);
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_of_dead_wardens_go_and_live_wardens_keep_theirs() {
    let Some(docker) = daemon().await else { return };
    let ws = Workspace::new();
    let me = Owner::current().unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let dead = Owner {
        pid: dead_pid,
        ..me.clone()
    };
    let user = ContainerUser::for_workspace(&ws.path()).unwrap();
    let config = DockerConfig::default();
    let plan = |owner: &Owner| {
        ContainerPlan::new(&config, &ws.jail(), user, owner.labels("orphan-test")).unwrap()
    };
    let tag = std::process::id();
    let orphan = container::create(&docker, &plan(&dead), &format!("warden-orphan-{tag}"))
        .await
        .unwrap()
        .id;
    let alive = container::create(&docker, &plan(&me), &format!("warden-alive-{tag}"))
        .await
        .unwrap()
        .id;
    let removed = remove_orphans(&docker, &me).await.unwrap();
    assert!(removed.contains(&orphan), "{removed:?}");
    assert!(!removed.contains(&alive));
    assert!(!exists(&docker, &orphan).await);
    assert!(exists(&docker, &alive).await);
    container::remove(&docker, &alive).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_enforced_is_refused_with_a_reason() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let no_image = DockerConfig {
        image: "warden-sandbox:does-not-exist".into(),
        ..DockerConfig::default()
    };
    let err = DockerSandbox::connect(&no_image, ws.jail(), "refuse")
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("warden image build does-not-exist"),
        "{err}"
    );
    let no_runtime = DockerConfig {
        runtime: Some("no-such-runtime".into()),
        ..DockerConfig::default()
    };
    let err = DockerSandbox::connect(&no_runtime, ws.jail(), "refuse")
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("no-such-runtime"), "{err}");
    let no_socket = DockerConfig {
        socket: "/nonexistent/docker.sock".into(),
        ..DockerConfig::default()
    };
    let err = DockerSandbox::connect(&no_socket, ws.jail(), "refuse")
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("no Docker daemon socket"), "{err}");
    // A memory limit the kernel cannot apply fails at creation, not silently.
    let mut jail = ws.jail();
    jail.limits.memory_bytes = 1 << 20;
    let err = DockerSandbox::connect(&DockerConfig::default(), jail, "refuse")
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("memory_bytes"), "{err}");
    // Descriptors beyond 0-2 cannot reach a container program.
    let sandbox = sandbox(ws.jail(), "refuse").await;
    let (_r, w) = pipe();
    let mut s = ProcessSpec::silent(&["true"], &ws.path());
    s.extra_fds.push((3, w));
    let err = sandbox.spawn(s).await.err().unwrap();
    assert!(
        matches!(&err, SandboxError::Setup(m) if m.contains("descriptor 3")),
        "{err}"
    );
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_volume_is_refused() {
    let Some(docker) = daemon().await else { return };
    // An image declaring a VOLUME would get a writable mount outside the plan.
    let dockerfile = "FROM warden-sandbox:minimal\nVOLUME /data\n";
    let mut archive = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(dockerfile.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    archive
        .append_data(&mut header, "Dockerfile", dockerfile.as_bytes())
        .unwrap();
    let tar = archive.into_inner().unwrap();
    let options = bollard::query_parameters::BuildImageOptionsBuilder::new()
        .dockerfile("Dockerfile")
        .t("warden-test-volume:latest")
        .rm(true)
        .build();
    let mut build = docker.build_image(options, None, Some(bollard::body_full(tar.into())));
    while let Some(step) = futures::StreamExt::next(&mut build).await {
        step.unwrap();
    }
    let ws = Workspace::new();
    let config = DockerConfig {
        image: "warden-test-volume:latest".into(),
        ..DockerConfig::default()
    };
    let sandbox = sandbox_with(&config, ws.jail(), "volume").await;
    let err = sandbox
        .spawn(ProcessSpec::silent(&["true"], &ws.path()))
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("unexpected mount at /data"),
        "{err}"
    );
    assert_eq!(sandbox.container_id().await, None);
    let labels = HashMap::from([("label", vec!["warden.session=test-volume".to_string()])]);
    let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&labels)
        .build();
    assert!(docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .is_empty());
}
