//! What each step of starting and ending a jailed command costs, on stderr when
//! `WARDEN_JAIL_TRACE=1` (`warden jail`): wall time and warden's CPU time per step,
//! in the order the steps ran, so a slow start can be pinned on its step. Off (one relaxed load
//! per mark) otherwise.
//!
//! Steps in warden's own thread are marked with [`mark`]; the jailed child's steps (between the
//! clone and `execve`, where nothing may allocate) are stamped by the child into memory the
//! parent hands over with [`child_marks`].

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

/// The environment variable that turns the report on.
pub const ENV: &str = "WARDEN_JAIL_TRACE";

/// 0 not yet read, 1 off, 2 on.
static STATE: AtomicU8 = AtomicU8::new(0);
static MARKS: Mutex<Vec<Mark>> = Mutex::new(Vec::new());

struct Mark {
    step: &'static str,
    wall_ns: u64,
    /// Process CPU time; `None` for the child's steps (stamped without a system call).
    cpu_ns: Option<u64>,
}

/// Whether steps are being recorded.
pub fn enabled() -> bool {
    match STATE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let on = std::env::var_os(ENV).is_some_and(|v| !v.is_empty() && v != "0");
            STATE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
    }
}

/// `step` has just finished.
pub fn mark(step: &'static str) {
    if enabled() {
        push(Mark {
            step,
            wall_ns: monotonic_ns(),
            cpu_ns: Some(clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)),
        });
    }
}

/// The child's steps, each finished at `wall_ns` (CLOCK_MONOTONIC; 0 = not reached).
pub fn child_marks(steps: &[(&'static str, u64)]) {
    if enabled() {
        for &(step, wall_ns) in steps.iter().filter(|(_, t)| *t != 0) {
            push(Mark {
                step,
                wall_ns,
                cpu_ns: None,
            });
        }
    }
}

/// Marks kept at most: only `warden jail` prints and empties them; a long-running warden with
/// the variable set must not grow without end.
const MAX_MARKS: usize = 4096;

fn push(mark: Mark) {
    if let Ok(mut marks) = MARKS.lock() {
        if marks.len() < MAX_MARKS {
            marks.push(mark);
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds; async-signal-safe (vDSO, no allocation), so the jailed
/// child stamps its steps with it.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the local timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// The report: one line per step, wall and CPU microseconds since the previous step. The first
/// line is what ran before warden's `main` (the kernel's exec, the loader, Rust's start-up):
/// its CPU time is known, its wall time is not. Empty when tracing is off.
pub fn report() -> String {
    use std::fmt::Write;
    if !enabled() {
        return String::new();
    }
    let Ok(mut marks) = MARKS.lock() else {
        return String::new();
    };
    let marks = std::mem::take(&mut *marks);
    let Some(first) = marks.first() else {
        return String::new();
    };
    let mut out = String::from("warden: jail steps (µs since the previous step; CPU is warden's own, '-' where the jailed child ran)\n");
    let _ = writeln!(
        out,
        "warden:   {:<36} wall {:>7} cpu {:>7}",
        "before main",
        "?",
        first.cpu_ns.unwrap_or(0) / 1000
    );
    let (mut wall, mut cpu) = (first.wall_ns, first.cpu_ns.unwrap_or(0));
    for mark in &marks[1..] {
        let cpu_text = match mark.cpu_ns {
            Some(now) => {
                let text = (now.saturating_sub(cpu) / 1000).to_string();
                cpu = now;
                text
            }
            None => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "warden:   {:<36} wall {:>7} cpu {:>7}",
            mark.step,
            mark.wall_ns.saturating_sub(wall) / 1000,
            cpu_text
        );
        wall = mark.wall_ns;
    }
    let last = marks.last().map_or(first.wall_ns, |m| m.wall_ns);
    let _ = writeln!(
        out,
        "warden:   {:<36} wall {:>7} cpu {:>7}",
        "total after main",
        last.saturating_sub(first.wall_ns) / 1000,
        cpu.saturating_sub(first.cpu_ns.unwrap_or(0)) / 1000
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
        assert!(clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID) > 0);
    }
}
