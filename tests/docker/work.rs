//! Real work through the Docker backend: files in /workspace, pipes between execs,
//! redirections, stdin, exit codes; all visible on the host afterwards.

use crate::support::*;
use std::io::Write;
use std::os::fd::OwnedFd;
use warden::sandbox::{ExitStatus, ProcessSpec, Sandbox, SandboxError, Stdio};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_created_and_appended_in_the_container_are_on_the_host() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "files").await;
    let cwd = ws.path();
    let out = run(&sandbox, &["sh", "-c", "echo one > notes.txt"], &cwd).await;
    assert_eq!(out.code(), 0, "{out:?}");
    let out = run(&sandbox, &["sh", "-c", "echo two >> notes.txt"], &cwd).await;
    assert_eq!(out.code(), 0, "{out:?}");
    assert_eq!(
        run(&sandbox, &["mkdir", "-p", "sub/dir"], &cwd)
            .await
            .code(),
        0
    );
    let text = std::fs::read_to_string(cwd.join("notes.txt")).unwrap();
    assert_eq!(text, "one\ntwo\n");
    assert!(cwd.join("sub/dir").is_dir());
    // The host user can change what the container wrote.
    std::fs::write(cwd.join("notes.txt"), "edited on the host\n").unwrap();
    let out = run(&sandbox, &["cat", "notes.txt"], &cwd).await;
    assert_eq!(out.stdout, "edited on the host\n");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_working_directory_maps_into_workspace() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    std::fs::create_dir(ws.path().join("project")).unwrap();
    let sandbox = sandbox(ws.jail(), "cwd").await;
    let out = run(&sandbox, &["pwd"], &ws.path().join("project")).await;
    assert_eq!(out.stdout, "/workspace/project\n");
    let out = run(&sandbox, &["sh", "-c", "echo $HOME"], &ws.path()).await;
    assert_eq!(out.stdout, "/workspace\n");
    assert_eq!(
        sandbox.guest_path(&ws.path().join("a/b")),
        Some("/workspace/a/b".into())
    );
    assert_eq!(sandbox.guest_path(std::path::Path::new("/etc")), None);
    let outside = sandbox
        .spawn(ProcessSpec::silent(&["pwd"], std::path::Path::new("/etc")))
        .await;
    assert!(matches!(outside, Err(SandboxError::Setup(_))));
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipe_between_two_execs_and_a_redirect_to_a_host_file() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "pipe").await;
    let cwd = ws.path();
    // echo hello pipe | tr a-z A-Z > upper.txt, wired the way the executor wires it.
    let (pipe_r, pipe_w) = pipe();
    let target = std::fs::File::create(cwd.join("upper.txt")).unwrap();
    let mut first = ProcessSpec::silent(&["echo", "hello pipe"], &cwd);
    first.stdout = Stdio::Fd(pipe_w);
    let mut second = ProcessSpec::silent(&["tr", "a-z", "A-Z"], &cwd);
    second.stdin = Stdio::Fd(pipe_r);
    second.stdout = Stdio::Fd(OwnedFd::from(target));
    let mut a = sandbox.spawn(first).await.unwrap();
    let mut b = sandbox.spawn(second).await.unwrap();
    assert_eq!(a.wait().await.unwrap(), ExitStatus::Code(0));
    assert_eq!(b.wait().await.unwrap(), ExitStatus::Code(0));
    let text = std::fs::read_to_string(cwd.join("upper.txt")).unwrap();
    assert_eq!(text, "HELLO PIPE\n");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_reaches_the_program_and_its_end_closes_it() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "stdin").await;
    let (in_r, in_w) = pipe();
    let (out_r, out_w) = pipe();
    let mut s = ProcessSpec::silent(&["wc", "-c"], &ws.path());
    s.stdin = Stdio::Fd(in_r);
    s.stdout = Stdio::Fd(out_w);
    let mut process = sandbox.spawn(s).await.unwrap();
    let output = collect(out_r);
    let writer = std::thread::spawn(move || {
        let mut input = std::fs::File::from(in_w);
        let block = vec![b'x'; 100_000];
        for _ in 0..10 {
            input.write_all(&block).unwrap();
        }
    });
    writer.join().unwrap();
    assert_eq!(process.wait().await.unwrap(), ExitStatus::Code(0));
    assert_eq!(output.join().unwrap().trim(), "1000000");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_separate_streams() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "codes").await;
    let out = run(
        &sandbox,
        &["sh", "-c", "echo out; echo err >&2; exit 3"],
        &ws.path(),
    )
    .await;
    assert_eq!(out.status, ExitStatus::Code(3));
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    let out = run(&sandbox, &["ls", "/nonexistent"], &ws.path()).await;
    assert_ne!(out.code(), 0);
    assert!(out.stderr.contains("No such file"), "{out:?}");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_unexecutable_program_fails_at_spawn() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "notfound").await;
    let (out_r, out_w) = pipe();
    let mut s = ProcessSpec::silent(&["no-such-program", "x"], &ws.path());
    s.stdout = Stdio::Fd(out_w);
    let result = sandbox.spawn(s).await;
    assert!(
        matches!(&result, Err(SandboxError::NotFound(p)) if p == "no-such-program"),
        "{:?}",
        result.err()
    );
    assert_eq!(
        collect(out_r).join().unwrap(),
        "",
        "the runtime's message leaked"
    );
    std::fs::write(ws.path().join("script.sh"), "#!/bin/sh\necho hi\n").unwrap();
    let result = sandbox
        .spawn(ProcessSpec::silent(&["./script.sh"], &ws.path()))
        .await;
    match result {
        Err(SandboxError::CannotExecute { program, source }) => {
            assert_eq!(program, "./script.sh");
            assert_eq!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied,
                "{source}"
            );
        }
        other => panic!("expected CannotExecute, got {:?}", other.err()),
    }
    // A program that prints the runtime's words itself is still just output.
    let out = run(
        &sandbox,
        &["echo", "OCI runtime exec failed: fake"],
        &ws.path(),
    )
    .await;
    assert_eq!(out.stdout, "OCI runtime exec failed: fake\n");
    assert_eq!(out.code(), 0);
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_reader_ends_the_writer_like_sigpipe() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "sigpipe").await;
    // yes | head -c 5: the reader goes away after five bytes.
    let (r, w) = pipe();
    let mut s = ProcessSpec::silent(&["yes"], &ws.path());
    s.stdout = Stdio::Fd(w);
    let mut process = sandbox.spawn(s).await.unwrap();
    let mut first = [0u8; 5];
    let mut reader = std::fs::File::from(r);
    std::io::Read::read_exact(&mut reader, &mut first).unwrap();
    drop(reader);
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), process.wait())
        .await
        .expect("yes must end once its reader is gone")
        .unwrap();
    assert_eq!(status.as_shell_code(), 128 + libc::SIGPIPE, "{status:?}");
    assert_eq!(&first, b"y\ny\ny");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_redirected_to_a_file_stops_at_the_file_size_limit() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let mut jail = ws.jail();
    jail.limits.file_size_bytes = 10_000;
    let sandbox = sandbox(jail, "fsize").await;
    let target = std::fs::File::create(ws.path().join("big.txt")).unwrap();
    let mut s = ProcessSpec::silent(&["yes"], &ws.path());
    s.stdout = Stdio::Fd(OwnedFd::from(target));
    let mut process = sandbox.spawn(s).await.unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), process.wait())
        .await
        .expect("yes must end at the file size limit")
        .unwrap();
    assert_eq!(status.as_shell_code(), 128 + libc::SIGXFSZ, "{status:?}");
    assert_eq!(
        std::fs::metadata(ws.path().join("big.txt")).unwrap().len(),
        10_000
    );
    // Inside the container the same limit holds for files the program writes itself.
    let out = run(&sandbox, &["sh", "-c", "yes > inside.txt"], &ws.path()).await;
    assert_ne!(out.code(), 0);
    assert_eq!(
        std::fs::metadata(ws.path().join("inside.txt"))
            .unwrap()
            .len(),
        10_000
    );
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_and_stderr_into_one_pipe_keep_their_order() {
    let Some(_) = daemon().await else { return };
    let ws = Workspace::new();
    let sandbox = sandbox(ws.jail(), "merged").await;
    let script = "for i in 1 2 3 4 5 6 7 8; do echo out$i; echo err$i >&2; done";
    for _ in 0..5 {
        let (r, w) = pipe();
        let w2 = w.try_clone().unwrap();
        let mut s = ProcessSpec::silent(&["sh", "-c", script], &ws.path());
        s.stdout = Stdio::Fd(w);
        s.stderr = Stdio::Fd(w2);
        let mut process = sandbox.spawn(s).await.unwrap();
        let text = collect(r);
        assert_eq!(process.wait().await.unwrap(), ExitStatus::Code(0));
        let expected: String = (1..=8).map(|i| format!("out{i}\nerr{i}\n")).collect();
        assert_eq!(text.join().unwrap(), expected);
    }
    // Merged, a missing program is reported by the in-container shell, as a shell would.
    let (r, w) = pipe();
    let w2 = w.try_clone().unwrap();
    let mut s = ProcessSpec::silent(&["no-such-program"], &ws.path());
    s.stdout = Stdio::Fd(w);
    s.stderr = Stdio::Fd(w2);
    let mut process = sandbox.spawn(s).await.unwrap();
    let text = collect(r);
    assert_eq!(process.wait().await.unwrap(), ExitStatus::Code(127));
    assert!(text.join().unwrap().contains("no-such-program: not found"));
    sandbox.shutdown().await;
}
