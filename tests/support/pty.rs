//! A real pseudo-terminal for driving interactive commands (`warden chat`, `warden init`) as a
//! person would: the child gets the pty as its controlling terminal (so line editors see a
//! terminal and Ctrl-C is a signal), a reader thread collects everything it prints, and
//! [`Pty::expect`] waits for text with the escape sequences removed.

use super::capture::Capture;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub struct Pty {
    master: File,
    output: Capture,
    child: Child,
    /// How much of the cleaned output earlier `expect`s consumed.
    seen: usize,
}

impl Pty {
    /// Start `command` with stdin, stdout and stderr on a new pty (100 columns, 40 rows).
    pub fn spawn(mut command: Command) -> Pty {
        let size = nix::pty::Winsize {
            ws_row: 40,
            ws_col: 100,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pair = nix::pty::openpty(Some(&size), None).expect("openpty");
        let slave: OwnedFd = pair.slave;
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        command
            .stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        // SAFETY: setsid and ioctl are async-signal-safe; they make the pty the controlling
        // terminal of the child's new session.
        unsafe {
            command.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("spawning in the pty");
        drop(slave);
        let master = File::from(pair.master);
        // Ends with EIO once the child and every holder of the slave are gone.
        let output = Capture::start(master.try_clone().unwrap());
        Pty {
            master,
            output,
            child,
            seen: 0,
        }
    }

    /// Type `bytes` (`\r` is Enter, `\x1b[A` the Up arrow, `\x03` Ctrl-C, `\x04` Ctrl-D).
    pub fn send(&mut self, bytes: &str) {
        self.master.write_all(bytes.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    /// Everything printed so far, escape sequences and carriage returns removed.
    pub fn screen(&self) -> String {
        clean(&self.output.text())
    }

    /// Wait until `text` appears after what earlier calls consumed; returns the output up to
    /// the end of it. Panics with the whole output after `timeout`.
    pub fn expect(&mut self, text: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if let Some(at) = screen.get(self.seen..).and_then(|rest| rest.find(text)) {
                let end = self.seen + at + text.len();
                let upto = screen[self.seen..end].to_string();
                self.seen = end;
                return upto;
            }
            if Instant::now() > deadline {
                panic!("no {text:?} within {timeout:?}; the terminal showed:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait for the child to exit.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // What the child printed last may still be in the pty.
                self.output.drain(Duration::from_secs(2));
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("still running after {timeout:?}:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn master_fd(&self) -> i32 {
        self.master.as_raw_fd()
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` without ANSI escape sequences (CSI, OSC) and carriage returns.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}
