//! `warden`, the front of the command line: `warden jail` on the host backend runs here, in a
//! binary that links only the jail; `warden bot` replaces this process with `warden-bot`,
//! every other command with `warden-full` (see `cli::front`).
//!
//! No Rust start-up (`#![no_main]`): the C runtime calls [`main`] directly. Every jailed command
//! pays this process's start, and Rust's start-up spent most of its part finding the main
//! thread's stack for a guard page message: glibc's `pthread_getattr_np` reads
//! `/proc/self/maps` and parses it line by line with `sscanf`, 107k of the 667k instructions
//! this process ran for `warden jail -- /bin/true` (callgrind). What of that start-up warden
//! relies on is done in [`process_basics`]; the stack overflow message is what is given up (an
//! overflow is still stopped by the kernel's guard gap, as a plain SIGSEGV).

#![no_main]
// Outside tests a failure is a `?` with a reason, or a pattern that cannot fail: a panic in
// warden is a dead bot or a lost run. Tests may unwrap (clippy.toml); the few places that may
// otherwise carry `#[expect(clippy::..., reason = "...")]`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use clap::{Parser, Subcommand};
use std::ffi::{c_char, c_int};
use std::path::PathBuf;
use warden::cli;
use warden::sandbox::steps;

#[derive(Parser)]
#[command(name = "warden", version, about = "A sandbox-first personal AI agent")]
struct Front {
    /// Config file (default ~/.warden/config.toml, or $WARDEN_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: FrontCommand,
}

#[derive(Subcommand)]
enum FrontCommand {
    /// Run a program in the sandbox without the command policy (to test the jail alone).
    Jail(cli::jail::JailArgs),
}

/// The program's entry, called by the C runtime. std's arguments and environment are set
/// before it (glibc hands them to std's initializer).
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    process_basics();
    // A panic must not unwind into C: it ends the process with 101, as Rust's start-up would
    // (the panic hook has printed the message).
    let code = std::panic::catch_unwind(front).unwrap_or(101);
    // Rust's start-up flushes stdout at exit; clap's --help and --version are written there.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code
}

/// What Rust's start-up does that warden relies on: fds 0-2 open, so a file warden opens
/// cannot take the number of a closed standard stream (and receive an error message or a
/// jailed program's output); SIGPIPE ignored, so a closed pipe is an EPIPE error and not a
/// kill. Programs warden executes get SIGPIPE's default back (std's exec and the jail's
/// launcher both reset it).
fn process_basics() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: poll and fcntl on a local array and constant descriptors; open with a constant
    // path; signal with a constant disposition.
    unsafe {
        while libc::poll(fds.as_mut_ptr(), 3, 0) == -1 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            // poll itself failed (ENOMEM, or EINVAL under RLIMIT_NOFILE < 3): ask each fd.
            for pfd in &mut fds {
                let closed = libc::fcntl(pfd.fd, libc::F_GETFD) == -1
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
                pfd.revents = if closed { libc::POLLNVAL } else { 0 };
            }
            break;
        }
        for pfd in fds {
            // open returns the lowest free number, which is this one.
            if pfd.revents & libc::POLLNVAL != 0
                && libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) == -1
            {
                libc::abort();
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// `warden jail` on the host backend here; anything else in the binary beside this one. The
/// exit code.
fn front() -> c_int {
    // As in warden-full: the config's secrets may be in this process.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("warden: cannot mark the process non-dumpable: {e}");
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let subcommand = cli::front::subcommand(&args);
    if subcommand.is_some_and(|c| c == "jail") {
        steps::mark("main");
        warden::redact::init_level_logging();
        steps::mark("logging");
        match Front::try_parse_from(&args) {
            Ok(Front {
                config,
                command: FrontCommand::Jail(jail),
            }) => {
                steps::mark("arguments");
                if let Some(code) = cli::jail::run_on_host(jail, config.as_deref()) {
                    eprint!("{}", steps::report());
                    return code.clamp(0, 255);
                }
                // The Docker backend: warden-full runs it.
            }
            Err(e) => {
                let _ = e.print();
                return if e.use_stderr() { cli::EXIT_USAGE } else { 0 };
            }
        }
    }
    let e = if subcommand.is_some_and(|c| c == "bot") {
        cli::front::exec_sibling(cli::front::BOT_BINARY, &args)
    } else {
        cli::front::exec_full(&args)
    };
    eprintln!("warden: {e}");
    cli::EXIT_USAGE
}
