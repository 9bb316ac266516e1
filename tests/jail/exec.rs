//! The executor over the real host jail: warden itself evaluates `&& || ;`, wires pipes, applies
//! redirections (never following symlinks out of the roots), tracks `cd`, caps output and
//! enforces the timeout. Scripts are built as checked IR, as the policy would hand them over.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;
use warden::exec::{run_script, ExecError, ExecOptions, OutputMode, RunOutput};
use warden::policy::ir::{
    Builtin, Command, Connector, OpenMode, Pipeline, Redirect, RedirectTarget, Script, Step,
};
use warden::policy::PathPolicy;
use warden::sandbox::host::HostSandbox;
use warden::sandbox::JailSpec;

fn cmd(argv: &[&str], cwd: &Path) -> Command {
    Command::program(
        argv.iter().map(|s| s.to_string()).collect(),
        cwd.to_path_buf(),
    )
}

fn cd(target: &Path, cwd: &Path) -> Command {
    let mut c = Command::program(
        vec!["cd".into(), target.display().to_string()],
        cwd.to_path_buf(),
    );
    c.builtin = Some(Builtin::Cd(target.to_path_buf()));
    c
}

fn with(mut c: Command, fd: u8, target: RedirectTarget) -> Command {
    c.redirects.push(Redirect { fd, target });
    c
}

fn file(path: PathBuf, mode: OpenMode) -> RedirectTarget {
    RedirectTarget::File { path, mode }
}

fn script(steps: Vec<(Connector, Vec<Command>)>) -> Script {
    Script {
        steps: steps
            .into_iter()
            .map(|(connector, commands)| Step {
                connector,
                pipeline: Pipeline {
                    commands,
                    negated: false,
                },
            })
            .collect(),
    }
}

use Connector::{And, Or, Seq};

struct Harness {
    env: Env,
    sandbox: HostSandbox,
    options: ExecOptions,
    runtime: tokio::runtime::Runtime,
}

impl Harness {
    fn new() -> Harness {
        let env = Env::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let spec = JailSpec::new(env.ws.clone());
        let paths = PathPolicy::new(&env.ws, &[], &[], Path::new("/root")).unwrap();
        let options = ExecOptions::capture(paths, Duration::from_secs(20));
        let sandbox = runtime.block_on(async { HostSandbox::new(spec).unwrap() });
        Harness {
            env,
            sandbox,
            options,
            runtime,
        }
    }

    fn ws(&self) -> &Path {
        &self.env.ws
    }

    fn try_run(&self, script: &Script) -> Result<RunOutput, ExecError> {
        self.runtime
            .block_on(run_script(&self.sandbox, script, &self.options))
    }

    fn run(&self, script: &Script) -> RunOutput {
        self.try_run(script).unwrap()
    }
}

#[test]
fn pipes_redirections_and_appends() {
    let h = Harness::new();
    let ws = h.ws();
    let out = ws.join("out.txt");
    let up = ws.join("up.txt");
    let s = script(vec![
        (
            Seq,
            vec![with(
                cmd(&["echo", "hello"], ws),
                1,
                file(out.clone(), OpenMode::Write),
            )],
        ),
        (
            Seq,
            vec![with(
                cmd(&["echo", "world"], ws),
                1,
                file(out.clone(), OpenMode::Append),
            )],
        ),
        (
            Seq,
            vec![
                cmd(&["cat", "out.txt"], ws),
                with(
                    cmd(&["tr", "a-z", "A-Z"], ws),
                    1,
                    file(up.clone(), OpenMode::Write),
                ),
            ],
        ),
        (
            Seq,
            vec![with(cmd(&["cat"], ws), 0, file(up.clone(), OpenMode::Read))],
        ),
    ]);
    let r = h.run(&s);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "HELLO\nWORLD\n");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "hello\nworld\n");
}

#[test]
fn here_documents_extra_fds_and_dup_order() {
    let h = Harness::new();
    let ws = h.ws();
    let three = ws.join("three.txt");
    let s = script(vec![
        (
            Seq,
            vec![with(
                cmd(&["cat"], ws),
                0,
                RedirectTarget::Text("line 1\nline 2\n".into()),
            )],
        ),
        (
            Seq,
            vec![with(
                cmd(&["sh", "-c", "echo to-three >&3"], ws),
                3,
                file(three.clone(), OpenMode::Write),
            )],
        ),
        // sh -c 'echo err >&2' 2>&1 | cat   → the error arrives on stdout.
        (
            Seq,
            vec![
                with(
                    cmd(&["sh", "-c", "echo err >&2"], ws),
                    2,
                    RedirectTarget::Dup(1),
                ),
                cmd(&["cat"], ws),
            ],
        ),
    ]);
    let r = h.run(&s);
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(r.stdout, "line 1\nline 2\nerr\n");
    assert_eq!(r.stderr, "");
    assert_eq!(std::fs::read_to_string(&three).unwrap(), "to-three\n");
}

#[test]
fn connectors_follow_the_last_status() {
    let h = Harness::new();
    let ws = h.ws();
    let s = script(vec![
        (Seq, vec![cmd(&["false"], ws)]),
        (And, vec![cmd(&["echo", "skipped"], ws)]),
        (Or, vec![cmd(&["echo", "or-ran"], ws)]),
        (And, vec![cmd(&["echo", "and-ran"], ws)]),
        (Seq, vec![cmd(&["sh", "-c", "exit 3"], ws)]),
    ]);
    let r = h.run(&s);
    assert_eq!(r.status, 3);
    assert_eq!(r.stdout, "or-ran\nand-ran\n");
    // Pipeline status is the last command's.
    let r = h.run(&script(vec![(
        Seq,
        vec![cmd(&["false"], ws), cmd(&["true"], ws)],
    )]));
    assert_eq!(r.status, 0);
    let r = h.run(&script(vec![(
        Seq,
        vec![cmd(&["true"], ws), cmd(&["false"], ws)],
    )]));
    assert_eq!(r.status, 1);
}

#[test]
fn cd_is_tracked_and_a_skipped_cd_stops_the_script() {
    let h = Harness::new();
    let ws = h.ws();
    let sub = ws.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let r = h.run(&script(vec![
        (Seq, vec![cd(&sub, ws)]),
        (And, vec![cmd(&["pwd"], &sub)]),
    ]));
    assert_eq!(r.stdout, format!("{}\n", sub.display()));

    // `cd missing; pwd` was checked as if pwd ran in `missing`: refuse to run it elsewhere.
    let missing = ws.join("missing");
    let err = h
        .try_run(&script(vec![
            (Seq, vec![cd(&missing, ws)]),
            (Seq, vec![cmd(&["pwd"], &missing)]),
        ]))
        .unwrap_err();
    assert!(matches!(err, ExecError::CwdMismatch { .. }), "{err}");
    assert!(
        err.to_string().contains("a `cd` before it did not run"),
        "{err}"
    );

    // A failing cd reports like bash.
    let r = h.run(&script(vec![(Seq, vec![cd(&missing, ws)])]));
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("cd: ") && r.stderr.contains("No such file or directory"),
        "{r:?}"
    );
}

#[test]
fn redirections_outside_the_roots_or_through_symlinks_are_refused() {
    let h = Harness::new();
    let ws = h.ws();
    let outside = h.env.outside("outside");
    std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
    for (target, why) in [
        (outside.join("f"), "outside every writable root"),
        (ws.join("link/f"), "symlink"),
        (
            PathBuf::from("/etc/warden-test"),
            "outside every writable root",
        ),
    ] {
        let r = h.run(&script(vec![(
            Seq,
            vec![with(
                cmd(&["echo", "x"], ws),
                1,
                file(target.clone(), OpenMode::Write),
            )],
        )]));
        assert_eq!(r.status, 1, "{r:?}");
        assert!(r.stderr.contains(why), "{r:?}");
        assert!(!target.exists());
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // Reading a secret outside through the executor fails the same way.
    let r = h.run(&script(vec![(
        Seq,
        vec![with(
            cmd(&["cat"], ws),
            0,
            file("/etc/shadow".into(), OpenMode::Read),
        )],
    )]));
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains("outside every readable root"), "{r:?}");
}

#[test]
fn bad_descriptors_and_missing_programs_fail_like_bash() {
    let h = Harness::new();
    let ws = h.ws();
    let r = h.run(&script(vec![(
        Seq,
        vec![with(cmd(&["echo", "x"], ws), 1, RedirectTarget::Dup(5))],
    )]));
    assert_eq!(r.status, 1);
    assert!(r.stderr.contains("5: Bad file descriptor"), "{r:?}");
    let r = h.run(&script(vec![(
        Seq,
        vec![cmd(&["no-such-program"], ws), cmd(&["cat"], ws)],
    )]));
    assert_eq!(r.status, 0, "{r:?}");
    assert!(
        r.stderr.contains("no-such-program: command not found"),
        "{r:?}"
    );
    let r = h.run(&script(vec![(Seq, vec![cmd(&["no-such-program"], ws)])]));
    assert_eq!(r.status, 127);
    // A redirection-only command creates its file.
    let created = ws.join("created");
    let r = h.run(&script(vec![(
        Seq,
        vec![with(
            cmd(&[], ws),
            1,
            file(created.clone(), OpenMode::Write),
        )],
    )]));
    assert_eq!(r.status, 0);
    assert!(created.exists());
}

#[test]
fn output_is_capped_and_saved_in_full() {
    let mut h = Harness::new();
    let save = h.ws().join(".warden/output");
    h.options.output = OutputMode::Capture { cap_bytes: 1000 };
    h.options.save_dir = Some(save.clone());
    let ws = h.ws().to_path_buf();
    let r = h.run(&script(vec![(
        Seq,
        vec![
            cmd(&["head", "-c", "200000", "/dev/zero"], &ws),
            cmd(&["tr", "\\0", "a"], &ws),
        ],
    )]));
    assert_eq!(r.status, 0);
    assert!(r.truncated);
    let full = r.full_output.clone().expect("saved");
    assert!(full.starts_with(&save));
    assert_eq!(std::fs::read(&full).unwrap(), vec![b'a'; 200000]);
    assert!(
        r.stdout.contains(&format!(
            "[... 199000 bytes truncated; full output saved to {}",
            full.display()
        )),
        "{}",
        &r.stdout[..600.min(r.stdout.len())]
    );
    assert!(r.stdout.len() < 1200);
}

#[test]
fn big_output_on_both_streams_does_not_deadlock() {
    let h = Harness::new();
    let ws = h.ws();
    let r = h.run(&script(vec![(
        Seq,
        vec![cmd(
            &[
                "sh",
                "-c",
                "head -c 3000000 /dev/zero; head -c 3000000 /dev/zero >&2; echo end",
            ],
            ws,
        )],
    )]));
    assert_eq!(r.status, 0);
    assert!(r.truncated);
    assert!(r.stdout.ends_with("end\n"), "tail kept");
}

#[test]
fn a_background_holder_of_the_pipe_does_not_delay_the_result() {
    let h = Harness::new();
    let m = marker();
    let r = h.run(&script(vec![(
        Seq,
        vec![cmd(
            &["sh", "-c", &format!("sleep {m} & echo done")],
            h.ws(),
        )],
    )]));
    assert_eq!(r.stdout, "done\n");
    assert!(r.duration < Duration::from_secs(2), "{r:?}");
    assert_eq!(survivors(&format!("sleep {m}")), Vec::<u32>::new());
}

#[test]
fn timeout_and_cancel_kill_everything() {
    let mut h = Harness::new();
    let m = marker();
    h.options.timeout = Duration::from_secs(1);
    let ws = h.ws().to_path_buf();
    let r = h.run(&script(vec![
        (
            Seq,
            vec![
                cmd(&["sh", "-c", &format!("sleep {m} & sleep {m}")], &ws),
                cmd(&["cat"], &ws),
            ],
        ),
        (Seq, vec![cmd(&["echo", "never"], &ws)]),
    ]));
    assert_eq!(r.status, 124);
    assert!(r.timed_out && !r.cancelled);
    assert!(r.duration < Duration::from_secs(2), "{r:?}");
    assert!(!r.stdout.contains("never"));
    assert!(r.stderr.contains("timed out"), "{r:?}");
    assert_eq!(survivors(&format!("sleep {m}")), Vec::<u32>::new());

    h.options.timeout = Duration::from_secs(30);
    let token = h.options.cancel.clone();
    h.runtime.spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel();
    });
    let r = h.run(&script(vec![(
        Seq,
        vec![cmd(&["sh", "-c", &format!("sleep {m}")], &ws)],
    )]));
    assert_eq!(r.status, 130);
    assert!(r.cancelled && !r.timed_out);
    assert!(r.duration < Duration::from_secs(2));
    assert_eq!(survivors(&format!("sleep {m}")), Vec::<u32>::new());
}
