//! System calls the seccomp filter and Landlock scopes deny, tried for real: signals and ptrace
//! against a process outside, user namespaces (unshare, clone flags, clone3), io_uring, TIOCSTI.

mod common;
use common::*;
use std::process::{Command, Stdio};

/// A `sleep` the test owns, outside the jail.
struct Victim(std::process::Child);

impl Victim {
    fn start() -> Victim {
        Victim(Command::new("sleep").arg("300").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
    fn tracer(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .unwrap()
            .trim()
            .to_string()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python(env: &Env, code: &str) -> Run {
    env.jail(&["python3", "-c", code])
}

const LIBC: &str = "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True)\n";

#[test]
fn killing_a_process_outside_fails() {
    if landlock_abi() < 6 {
        eprintln!(
            "skipped: signal scoping needs Landlock ABI 6 (this kernel: {})",
            landlock_abi()
        );
        return;
    }
    let env = Env::new();
    let mut victim = Victim::start();
    let pid = victim.pid().to_string();
    let r = env.jail(&["kill", "-9", &pid]);
    assert_ne!(r.status, 0, "{r:?}");
    let r = env.jail(&["sh", "-c", &format!("kill -KILL {pid}; kill -TERM -1")]);
    assert_ne!(r.status, 0, "{r:?}");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(victim.alive(), "the jail killed a process outside");
}

#[test]
fn ptrace_of_a_process_outside_fails() {
    let env = Env::new();
    let victim = Victim::start();
    let pid = victim.pid();
    if have_python() {
        let r = python(
            &env,
            &format!("{LIBC}r = libc.ptrace(16, {pid}, 0, 0); print(r, ctypes.get_errno())"),
        );
        assert_eq!(r.stdout.trim(), format!("-1 {}", libc::EPERM), "{r:?}");
    }
    if std::path::Path::new("/usr/bin/strace").exists() {
        let r = env.jail(&["strace", "-p", &pid.to_string()]);
        assert_ne!(r.status, 0, "{r:?}");
    }
    assert_eq!(victim.tracer(), "0");
}

#[test]
fn user_namespaces_cannot_be_created() {
    let env = Env::new();
    let r = env.jail(&["unshare", "-U", "true"]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(r.stderr.contains("Operation not permitted"), "{r:?}");
    let r = env.jail(&["unshare", "-r", "-n", "true"]);
    assert_ne!(r.status, 0, "{r:?}");
    if !have_python() {
        return;
    }
    // unshare(CLONE_NEWUSER), clone(CLONE_NEWUSER | SIGCHLD), and clone3, which must say ENOSYS
    // so that C libraries fall back to clone.
    let r = python(
        &env,
        &format!(
            "{LIBC}\
             r = libc.unshare(0x10000000); print('unshare', r, ctypes.get_errno())\n\
             r = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)\n\
             if r == 0: os._exit(0)\n\
             print('clone', r, ctypes.get_errno())\n\
             args = (ctypes.c_uint64 * 11)(); args[0] = 0x10000000; args[4] = 17\n\
             r = libc.syscall(435, ctypes.byref(args), 88)\n\
             if r == 0: os._exit(0)\n\
             print('clone3', r, ctypes.get_errno())\n"
        ),
    );
    assert_eq!(
        r.stdout,
        format!(
            "unshare -1 {eperm}\nclone -1 {eperm}\nclone3 -1 {enosys}\n",
            eperm = libc::EPERM,
            enosys = libc::ENOSYS
        ),
        "{r:?}"
    );
    // Ordinary process creation still works through the clone fallback.
    let r = python(
        &env,
        "import subprocess; print(subprocess.run(['true']).returncode)",
    );
    assert_eq!(r.stdout.trim(), "0", "{r:?}");
}

#[test]
fn io_uring_is_unavailable() {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed to call io_uring_setup");
        return;
    }
    let env = Env::new();
    let r = python(
        &env,
        &format!(
            "{LIBC}p = ctypes.create_string_buffer(120); r = libc.syscall(425, 8, p); print(r, ctypes.get_errno())"
        ),
    );
    assert_eq!(r.stdout.trim(), format!("-1 {}", libc::EPERM), "{r:?}");
}

#[test]
fn tiocsti_injection_fails_even_with_the_high_bit_trick() {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed to call ioctl");
        return;
    }
    let env = Env::new();
    // fd 0 is /dev/null opened outside the jail: an ioctl that reached the kernel would fail
    // with ENOTTY, so EPERM proves the filter stopped it.
    let code = format!(
        "{LIBC}c = ctypes.c_char(b'x')\n\
         r = libc.ioctl(0, 0x5412, ctypes.byref(c)); print('plain', r, ctypes.get_errno())\n\
         r = libc.syscall(16, 0, ctypes.c_ulong(0x5412 | (1 << 32)), ctypes.byref(c)); print('high', r, ctypes.get_errno())\n\
         r = libc.ioctl(0, 0x541C, ctypes.byref(c)); print('linux', r, ctypes.get_errno())\n\
         r = libc.ioctl(0, 0x5401, ctypes.create_string_buffer(64)); print('tcgets', r, ctypes.get_errno())\n"
    );
    let r = python(&env, &code);
    let eperm = libc::EPERM;
    assert_eq!(
        r.stdout,
        format!(
            "plain -1 {eperm}\nhigh -1 {eperm}\nlinux -1 {eperm}\ntcgets -1 {}\n",
            libc::ENOTTY
        ),
        "{r:?}"
    );

    // And on a real terminal: nothing arrives in its input queue.
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut cmd = env.command(&[], &["python3", "-c", &code]);
    cmd.stdin(Stdio::from(std::fs::File::from(
        pty.slave.try_clone().unwrap(),
    )));
    let r = run(cmd);
    assert!(
        r.stdout
            .starts_with(&format!("plain -1 {eperm}\nhigh -1 {eperm}\n")),
        "{r:?}"
    );
    nix::fcntl::fcntl(
        &pty.slave,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .unwrap();
    let mut buf = [0u8; 16];
    match nix::unistd::read(&pty.slave, &mut buf) {
        Err(nix::errno::Errno::EAGAIN) => {}
        other => panic!("something reached the terminal's input: {other:?}"),
    }
}

#[test]
fn mount_bpf_and_keyrings_are_denied() {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed for raw syscalls");
        return;
    }
    let env = Env::new();
    // mount(165), bpf(321), keyctl(250), perf_event_open(298), userfaultfd(323), setns(308)
    let r = python(
        &env,
        &format!(
            "{LIBC}\
             for n in (165, 321, 250, 298, 323, 308):\n    \
                 r = libc.syscall(n, 0, 0, 0, 0, 0); print(n, r, ctypes.get_errno())\n"
        ),
    );
    let eperm = libc::EPERM;
    assert_eq!(
        r.stdout,
        format!("165 -1 {eperm}\n321 -1 {eperm}\n250 -1 {eperm}\n298 -1 {eperm}\n323 -1 {eperm}\n308 -1 {eperm}\n"),
        "{r:?}"
    );
}
