//! Bounding and measuring warden's memory while a hostile peer keeps sending.
//!
//! The process runs under an address-space limit (`setrlimit(RLIMIT_AS)`), so a reader that
//! buffers without bound fails there instead of taking the machine with it, and its resident
//! size is sampled from `/proc/PID/status` until it exits. `VmHWM` is the kernel's own
//! high-water mark, so a peak between two samples is not missed.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Resident memory an idle `warden run` (debug build) stays within; the bounds are stated
/// over it.
pub const IDLE_RSS: u64 = 64 * 1024 * 1024;
/// What a hostile peer may add to it.
pub const HOSTILE_ALLOWANCE: u64 = 200 * 1024 * 1024;
/// The address space warden gets: enough for its threads' reservations, far below the
/// gigabytes an unbounded reader reaches in seconds.
pub const ADDRESS_SPACE: u64 = 4 * 1024 * 1024 * 1024;

/// How a bounded run went.
#[derive(Debug)]
pub struct Measured {
    pub output: Output,
    /// The largest resident size seen, in bytes.
    pub peak_rss: u64,
}

impl Measured {
    pub fn peak_mb(&self) -> u64 {
        self.peak_rss / (1024 * 1024)
    }

    /// The run stayed within [`IDLE_RSS`] + [`HOSTILE_ALLOWANCE`].
    pub fn assert_bounded(&self) {
        eprintln!("warden's peak resident size: {} MB", self.peak_mb());
        assert!(
            self.peak_rss < IDLE_RSS + HOSTILE_ALLOWANCE,
            "warden reached {} MB resident (bound: {} MB)",
            self.peak_mb(),
            (IDLE_RSS + HOSTILE_ALLOWANCE) / (1024 * 1024)
        );
    }
}

/// Run `cmd` under [`ADDRESS_SPACE`], sampling its resident size every 10 ms until it exits.
pub fn run_bounded(mut cmd: Command) -> Measured {
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("starting warden");
    let pid = child.id();
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if let Some(hwm) = high_water_mark(pid) {
                    peak.fetch_max(hwm, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let output = child.wait_with_output().expect("waiting for warden");
    done.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    Measured {
        output,
        peak_rss: peak.load(Ordering::SeqCst),
    }
}

/// `VmHWM` of `pid` in bytes (absent once it is a zombie).
pub fn high_water_mark(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}
