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

/// Run `code` in the jail's python; skip (say so) without /usr/bin/python3.
fn probe(env: &Env, code: &str) -> Option<Run> {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed for raw syscalls");
        return None;
    }
    Some(python(env, &format!("{LIBC}{code}")))
}

fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn modes_owners_and_times_outside_the_roots_stay_as_they_were() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let env = Env::new();
    // A secret outside every root and a program of the user's, as the red team used them.
    let secret = env.outside("keys").join("secret.key");
    std::fs::write(&secret, "k").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::metadata(&secret).unwrap();
    let s = secret.display();
    let Some(r) = probe(
        &env,
        &format!(
            "for name, call in [('chmod', lambda: os.chmod('{s}', 0o4777)),\n\
             ('chown', lambda: os.chown('{s}', 65534, 65534)),\n\
             ('utime', lambda: os.utime('{s}', (0, 0))),\n\
             ('lchown', lambda: os.lchown('{s}', 65534, 65534))]:\n    \
                 try:\n        call(); print(name, 'returned')\n    \
                 except OSError as e:\n        print(name, e.errno)\n"
        ),
    ) else {
        return;
    };
    // The calls "succeed" having done nothing (tar, cp -p and git call them routinely).
    assert_eq!(
        r.stdout, "chmod returned\nchown returned\nutime returned\nlchown returned\n",
        "{r:?}"
    );
    let after = std::fs::metadata(&secret).unwrap();
    assert_eq!(mode_of(&secret), 0o600, "the jail changed a mode outside");
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
    assert_eq!(
        after.mtime(),
        before.mtime(),
        "the jail changed a time outside"
    );
}

#[test]
fn no_setuid_file_is_created_and_xattrs_and_inode_flags_stay() {
    let env = Env::new();
    let ws = env.ws.display();
    std::fs::write(env.ws.join("plain"), "x").unwrap();
    let Some(r) = probe(
        &env,
        &format!(
            "import fcntl, struct\n\
             for mode in (0o4755, 0o2755, 0o1755):\n    \
                 try:\n        os.open('{ws}/made%o' % mode, os.O_CREAT | os.O_WRONLY, mode); print('created')\n    \
                 except OSError as e:\n        print('open', e.errno)\n\
             try:\n    os.setxattr('{ws}/plain', 'user.x', b'1'); print('xattr set')\n\
             except OSError as e:\n    print('setxattr', e.errno)\n\
             fd = os.open('{ws}/plain', os.O_RDONLY)\n\
             try:\n    fcntl.ioctl(fd, 0x40086602, struct.pack('l', 0x40)); print('flags set')\n\
             except OSError as e:\n    print('ioctl', e.errno)\n\
             r = libc.syscall(437, -100, b'{ws}/plain', 0, 0); print('openat2', r, ctypes.get_errno())\n"
        ),
    ) else {
        return;
    };
    let (eperm, enosys) = (libc::EPERM, libc::ENOSYS);
    assert_eq!(
        r.stdout,
        format!(
            "open {eperm}\nopen {eperm}\nopen {eperm}\nsetxattr {eperm}\nioctl {eperm}\n\
             openat2 -1 {enosys}\n"
        ),
        "{r:?}"
    );
    for mode in ["made4755", "made2755", "made1755"] {
        assert!(!env.ws.join(mode).exists(), "{mode} was created");
    }
    // An ordinary file is still created with the mode asked for (git checks out programs so).
    let r = python(
        &env,
        &format!("import os; os.close(os.open('{ws}/tool', os.O_CREAT | os.O_WRONLY, 0o755))"),
    );
    assert_eq!(r.status, 0, "{r:?}");
    let tool = mode_of(&env.ws.join("tool"));
    assert!(
        tool & 0o100 != 0 && tool & 0o7000 == 0,
        "tool has mode {tool:o}"
    );
}

#[test]
fn nothing_runs_that_was_never_a_file_on_disk() {
    let env = Env::new();
    // memfd_create without MFD_NOEXEC_SEAL is refused; with it, the memfd cannot be executed
    // (through /proc/self/fd or execveat); execveat(AT_EMPTY_PATH) is refused outright.
    let Some(r) = probe(
        &env,
        "elf = open('/bin/true', 'rb').read()\n\
         try:\n    os.memfd_create('x', 0); print('exec memfd made')\n\
         except OSError as e:\n    print('memfd', e.errno, flush=True)\n\
         fd = os.memfd_create('x', 8)\n\
         os.write(fd, elf)\n\
         pid = os.fork()\n\
         if pid == 0:\n    \
             try:\n        os.execv('/proc/self/fd/%d' % fd, ['x'])\n    \
             except OSError as e:\n        print('exec sealed', e.errno, flush=True)\n    \
             os._exit(0)\n\
         os.waitpid(pid, 0)\n\
         real = os.open('/bin/true', os.O_RDONLY)\n\
         r = libc.syscall(322, real, b'', 0, 0, 0x1000); print('execveat', r, ctypes.get_errno())\n",
    ) else {
        return;
    };
    let (eperm, eacces) = (libc::EPERM, libc::EACCES);
    assert_eq!(
        r.stdout,
        format!("memfd {eperm}\nexec sealed {eacces}\nexecveat -1 {eperm}\n"),
        "{r:?}"
    );
}

#[test]
fn no_watch_reports_activity_on_paths_outside() {
    let env = Env::new();
    let watched = env.outside("private");
    let Some(r) = probe(
        &env,
        &format!(
            "r = libc.syscall(294, 0); print('init1', r, ctypes.get_errno())\n\
             r = libc.syscall(253); print('init', r, ctypes.get_errno())\n\
             r = libc.syscall(254, 0, b'{}', 0xfff); print('watch', r, ctypes.get_errno())\n",
            watched.display()
        ),
    ) else {
        return;
    };
    let eperm = libc::EPERM;
    assert_eq!(
        r.stdout,
        format!("init1 -1 {eperm}\ninit -1 {eperm}\nwatch -1 {eperm}\n"),
        "{r:?}"
    );
}
