//! Helpers for the jail integration tests: run the real `warden` binary on the real kernel and
//! look at the result from outside the jail.
#![allow(dead_code)]

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const SECRET_KEY: &str = "fake-anthropic-key-TESTSECRET-4a7c1e";
pub const SECRET_TOKEN: &str = "fake-bot-token-TELEGRAM-TESTSECRET-9f2b";

/// A workspace plus an empty config file, both in fresh temporary directories.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub config: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        let config = root.join("config.toml");
        std::fs::write(&config, "").unwrap();
        Env { dir, ws, config }
    }

    /// A directory next to (outside) the workspace.
    pub fn outside(&self, name: &str) -> PathBuf {
        let p = self.dir.path().canonicalize().unwrap().join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// `warden jail --workspace WS FLAGS -- ARGV` with secrets in warden's environment.
    pub fn command(&self, flags: &[&str], argv: &[&str]) -> Command {
        let ws = self.ws.display().to_string();
        let mut all = vec!["--workspace", ws.as_str()];
        all.extend_from_slice(flags);
        self.command_raw(&all, argv)
    }

    /// `warden jail FLAGS -- ARGV`, without an implied `--workspace`.
    pub fn command_raw(&self, flags: &[&str], argv: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.arg("jail").args(flags).arg("--").args(argv);
        cmd.env("WARDEN_CONFIG", &self.config)
            .env("ANTHROPIC_API_KEY", SECRET_KEY)
            .env("TELEGRAM_BOT_TOKEN", SECRET_TOKEN)
            .env("OPENAI_API_KEY", SECRET_KEY)
            .stdin(Stdio::null());
        cmd
    }

    pub fn jail(&self, argv: &[&str]) -> Run {
        self.jail_with(&[], argv)
    }

    pub fn jail_with(&self, flags: &[&str], argv: &[&str]) -> Run {
        run(self.command(flags, argv))
    }

    /// Make the whole tree owned by `uid` (for the unprivileged tests).
    pub fn chown_all(&self, uid: u32) {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{uid}"))
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        std::fs::set_permissions(self.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[derive(Debug)]
pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// `warden ARGS` run in the workspace with this environment's config, stdin empty.
pub fn warden_in(env: &Env, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.args(args)
        .current_dir(&env.ws)
        .env("WARDEN_CONFIG", &env.config)
        .stdin(Stdio::null());
    run(cmd)
}

/// Run `cmd` with `input` on its stdin.
pub fn run_with_stdin(mut cmd: Command, input: &str) -> Run {
    use std::io::Write;
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Run {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

pub fn run(mut cmd: Command) -> Run {
    let start = Instant::now();
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    let status = out
        .status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
    Run {
        status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

/// A unique marker for process command lines.
pub fn marker() -> String {
    format!("{}.{}", 1000 + std::process::id() % 1000, rand_suffix())
}

fn rand_suffix() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() % 1_000_000_000
}

/// Pids of live (non-zombie) processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(mut cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        for b in cmdline.iter_mut() {
            if *b == 0 {
                *b = b' ';
            }
        }
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
                    .unwrap_or(false)
            })
            .unwrap_or(true);
        if !zombie && String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

/// Wait briefly for processes to disappear (the kernel reaps asynchronously), then list them.
pub fn survivors(needle: &str) -> Vec<u32> {
    for _ in 0..20 {
        let left = processes_with(needle);
        if left.is_empty() {
            return left;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    processes_with(needle)
}

/// `/usr/bin/python3` (the jail's PATH does not see pyenv shims).
pub fn have_python() -> bool {
    Path::new("/usr/bin/python3").exists()
}

pub fn read_all(mut r: impl Read) -> String {
    let mut s = String::new();
    r.read_to_string(&mut s).unwrap();
    s
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The Landlock ABI of the running kernel (0 without Landlock).
pub fn landlock_abi() -> i64 {
    // SAFETY: the version query takes no pointers.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    }
    .max(0)
}
