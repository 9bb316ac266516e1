//! System calls the seccomp filter and Landlock scopes deny, tried for real: signals and ptrace
//! against a process outside, user namespaces (unshare, clone flags, clone3), io_uring, TIOCSTI,
//! directory notifications, leases, `flock` and pidfds of processes outside.

use crate::common::*;
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

#[test]
fn no_notification_lease_or_flock_reaches_files_outside() {
    let env = Env::new();
    // A file of the user's (same uid) in a read root, and a workspace file.
    let notes = env.outside("notes");
    std::fs::write(notes.join("todo.txt"), "milk").unwrap();
    std::fs::write(env.ws.join("data"), "x").unwrap();
    let notes_arg = notes.display().to_string();
    let code = format!(
        "{LIBC}import fcntl\n\
         def attempt(name, call):\n    \
             try:\n        call(); print(name, 'ok')\n    \
             except OSError as e:\n        print(name, e.errno)\n\
         usr = os.open('/usr', os.O_RDONLY)\n\
         attempt('notify', lambda: fcntl.fcntl(usr, 1026, 0x8000003f))\n\
         todo = os.open('{notes}/todo.txt', os.O_RDONLY)\n\
         attempt('lease', lambda: fcntl.fcntl(todo, 1024, fcntl.F_RDLCK))\n\
         attempt('flock', lambda: fcntl.flock(todo, fcntl.LOCK_EX | fcntl.LOCK_NB))\n\
         passwd = os.open('/etc/passwd', os.O_RDONLY)\n\
         attempt('flock passwd', lambda: fcntl.flock(passwd, fcntl.LOCK_SH | fcntl.LOCK_NB))\n\
         data = os.open('{ws}/data', os.O_RDWR)\n\
         attempt('write lock', lambda: fcntl.lockf(data, fcntl.LOCK_EX | fcntl.LOCK_NB))\n\
         attempt('read lock', lambda: fcntl.lockf(todo, fcntl.LOCK_SH | fcntl.LOCK_NB))\n\
         attempt('write lock read-only', lambda: fcntl.lockf(todo, fcntl.LOCK_EX | fcntl.LOCK_NB))\n\
         attempt('getfl', lambda: fcntl.fcntl(data, fcntl.F_GETFL))\n",
        notes = notes_arg,
        ws = env.ws.display()
    );
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed for raw syscalls");
        return;
    }
    let r = env.jail_with(&["--read", &notes_arg], &["python3", "-c", &code]);
    let (eperm, enosys, ebadf) = (libc::EPERM, libc::ENOSYS, libc::EBADF);
    // Record locks stay: a write lock needs a descriptor open for writing (Landlock decides
    // which), a read lock is part of reading.
    assert_eq!(
        r.stdout,
        format!(
            "notify {eperm}\nlease {eperm}\nflock {enosys}\nflock passwd {enosys}\n\
             write lock ok\nread lock ok\nwrite lock read-only {ebadf}\ngetfl ok\n"
        ),
        "{r:?}"
    );
    // util-linux flock(1): on a workspace file it locks, elsewhere it says why.
    let r = env.jail(&["flock", "data", "echo", "locked"]);
    assert_eq!((r.status, r.stdout.as_str()), (0, "locked\n"), "{r:?}");
    let r = env.jail(&["flock", "/etc/passwd", "true"]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(r.stderr.contains("Function not implemented"), "{r:?}");
}

/// flock(fd, op) on a host file, `Err(errno)` when refused.
fn host_flock(file: &std::fs::File, op: libc::c_int) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file the test holds open.
    match unsafe { libc::flock(file.as_raw_fd(), op) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error().raw_os_error().unwrap()),
    }
}

#[test]
fn flock_on_workspace_files_is_real_against_the_hosts_locks() {
    if !have_python() {
        eprintln!("skipped: /usr/bin/python3 is needed for flock");
        return;
    }
    use std::io::BufRead;
    let env = Env::new();
    let path = env.ws.join("build.lock");
    std::fs::write(&path, "").unwrap();
    let host = std::fs::File::open(&path).unwrap();
    host_flock(&host, libc::LOCK_EX).unwrap();
    // The host holds the lock: the jail's try fails, its blocking lock waits for the release
    // (from a thread the jail's own locking runs in, as rustc's does), then it holds the lock
    // until told to exit.
    let code = "import fcntl, os, sys, threading, time\n\
         f = os.open('build.lock', os.O_RDWR)\n\
         try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print('try ok')\n\
         except OSError as e:\n    print('try', e.errno, flush=True)\n\
         start = time.monotonic()\n\
         t = threading.Thread(target=lambda: fcntl.flock(f, fcntl.LOCK_EX)); t.start(); t.join()\n\
         print('held after', 'wait' if time.monotonic() - start > 0.2 else 'none', flush=True)\n\
         sys.stdin.readline()\n";
    let mut cmd = env.command(&[], &["python3", "-c", code]);
    cmd.current_dir(&env.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(
        lines.next().unwrap().unwrap(),
        format!("try {}", libc::EWOULDBLOCK)
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    host_flock(&host, libc::LOCK_UN).unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "held after wait");
    // Now the jail holds it: the host's try fails until the jailed process is gone.
    assert_eq!(
        host_flock(&host, libc::LOCK_EX | libc::LOCK_NB),
        Err(libc::EWOULDBLOCK)
    );
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    host_flock(&host, libc::LOCK_EX | libc::LOCK_NB).unwrap();
}

#[test]
fn pidfds_reach_only_the_jails_own_children() {
    let env = Env::new();
    let mut victim = Victim::start();
    let pid = victim.pid();
    // clone(CLONE_PIDFD | SIGCHLD) stores the child's pidfd at the parent-tid argument (the
    // third on both architectures).
    let Some(r) = probe(
        &env,
        &format!(
            "import platform, select\n\
             nr = {{'x86_64': dict(clone=56, pidfd_open=434, send=424, getfd=438),\n\
                    'aarch64': dict(clone=220, pidfd_open=434, send=424, getfd=438)}}[platform.machine()]\n\
             r = libc.syscall(nr['pidfd_open'], {pid}, 0); print('open outside', r, ctypes.get_errno())\n\
             pidfd = ctypes.c_int(-1)\n\
             child = libc.syscall(nr['clone'], 0x1000 | 17, 0, ctypes.byref(pidfd), 0, 0)\n\
             if child == 0:\n    select.select([], [], [], 0.5); os._exit(7)\n\
             print('own child pidfd', pidfd.value >= 0)\n\
             r = libc.syscall(nr['send'], pidfd.value, 0, 0, 0); print('signal own', r)\n\
             r = libc.syscall(nr['getfd'], pidfd.value, 0, 0); print('getfd own', r, ctypes.get_errno())\n\
             print('own exit', os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))\n"
        ),
    ) else {
        return;
    };
    let (eperm, enosys) = (libc::EPERM, libc::ENOSYS);
    assert_eq!(
        r.stdout,
        format!(
            "open outside -1 {enosys}\nown child pidfd True\nsignal own 0\n\
             getfd own -1 {eperm}\nown exit 7\n"
        ),
        "{r:?}"
    );
    assert!(victim.alive());
}

#[test]
fn sigio_cannot_be_aimed_at_a_process_outside() {
    if landlock_abi() < 6 {
        eprintln!(
            "skipped: signal scoping needs Landlock ABI 6 (this kernel: {})",
            landlock_abi()
        );
        return;
    }
    let env = Env::new();
    let mut victim = Victim::start();
    let pid = victim.pid();
    // F_SETOWN + F_SETSIG(SIGKILL) + O_ASYNC: a write to the pipe would send the owner SIGKILL.
    let Some(r) = probe(
        &env,
        &format!(
            "import fcntl, time\n\
             r, w = os.pipe()\n\
             fcntl.fcntl(r, fcntl.F_SETOWN, {pid}); fcntl.fcntl(r, 10, 9)\n\
             fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)\n\
             os.write(w, b'x'); time.sleep(0.1); print('written')\n"
        ),
    ) else {
        return;
    };
    assert_eq!(r.stdout, "written\n", "{r:?}");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        victim.alive(),
        "SIGIO from the jail killed a process outside"
    );
}
