//! The descriptor table of one command (0-9), computed in warden with bash's semantics:
//! start from the pipe ends and the script's streams, then apply each redirection in order —
//! `n>file` opens (see `open.rs`), `n>&m` copies whatever `m` is *at that moment*, `n>&-`
//! closes, here-documents become a sealed memfd. `2>&1 >file` and `>file 2>&1` therefore differ
//! exactly as they do in bash.

use super::open::{open_redirect, text_fd};
use crate::policy::ir::{Redirect, RedirectTarget};
use crate::policy::PathPolicy;
use crate::sandbox::{ProcessSpec, Stdio};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

/// Descriptor numbers a command can use.
const SLOTS: usize = 10;

pub struct FdTable {
    slots: [Option<Arc<OwnedFd>>; SLOTS],
    /// What a closed 0-2 becomes: `/dev/null` (a closed standard descriptor would be reused by
    /// the program's first `open`, a classic source of corrupted files).
    null: Arc<OwnedFd>,
}

impl FdTable {
    pub fn new(
        stdin: Arc<OwnedFd>,
        stdout: Arc<OwnedFd>,
        stderr: Arc<OwnedFd>,
        null: Arc<OwnedFd>,
    ) -> FdTable {
        let mut slots: [Option<Arc<OwnedFd>>; SLOTS] = Default::default();
        slots[0] = Some(stdin);
        slots[1] = Some(stdout);
        slots[2] = Some(stderr);
        FdTable { slots, null }
    }

    /// Apply redirections in order. The error is a bash-like message; the command must not run.
    pub fn apply(&mut self, redirects: &[Redirect], paths: &PathPolicy) -> Result<(), String> {
        for redirect in redirects {
            let fd = usize::from(redirect.fd);
            if fd >= SLOTS {
                return Err(format!(
                    "{fd}: bad file descriptor (only 0-9 can be redirected)"
                ));
            }
            self.slots[fd] = match &redirect.target {
                RedirectTarget::File { path, mode } => {
                    Some(Arc::new(open_redirect(paths, path, *mode)?))
                }
                RedirectTarget::Dup(source) => {
                    let source = usize::from(*source);
                    match self.slots.get(source).cloned().flatten() {
                        Some(f) => Some(f),
                        None => return Err(format!("{source}: Bad file descriptor")),
                    }
                }
                RedirectTarget::Close => None,
                RedirectTarget::Text(text) => Some(Arc::new(
                    text_fd(text).map_err(|e| format!("here-document: {e}"))?,
                )),
            };
        }
        Ok(())
    }

    /// Set a descriptor above 2 (a process substitution's pipe: see `exec::beside`).
    pub fn set(&mut self, fd: u8, pipe: Arc<OwnedFd>) {
        if let Some(slot) = self.slots.get_mut(usize::from(fd)) {
            *slot = Some(pipe);
        }
    }

    /// Replace descriptor 0 (a checksum list warden checked: see `exec::checksums`).
    pub fn set_stdin(&mut self, fd: Arc<OwnedFd>) {
        self.slots[0] = Some(fd);
    }

    /// Descriptors 0-2 after the redirections (a closed one reads as `null`), for the commands
    /// inside a compound command.
    pub fn standard(&self, null: Arc<OwnedFd>) -> [Arc<OwnedFd>; 3] {
        let slot = |n: usize| self.slots[n].clone().unwrap_or_else(|| null.clone());
        [slot(0), slot(1), slot(2)]
    }

    /// The process to start: each descriptor duplicated for the sandbox, which takes ownership.
    pub fn into_spec(self, argv: Vec<String>, cwd: PathBuf) -> std::io::Result<ProcessSpec> {
        let stdio = |slot: &Option<Arc<OwnedFd>>| -> std::io::Result<Stdio> {
            Ok(Stdio::Fd(slot.as_ref().unwrap_or(&self.null).try_clone()?))
        };
        let mut extra_fds = Vec::new();
        for (n, slot) in self.slots.iter().enumerate().skip(3) {
            if let Some(fd) = slot {
                extra_fds.push((n as u8, fd.try_clone()?));
            }
        }
        Ok(ProcessSpec {
            argv,
            cwd,
            stdin: stdio(&self.slots[0])?,
            stdout: stdio(&self.slots[1])?,
            stderr: stdio(&self.slots[2])?,
            extra_fds,
            env: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ir::OpenMode;
    use std::os::fd::AsRawFd;
    use std::path::Path;

    /// Roots for tests that open no file.
    fn no_roots() -> PathPolicy {
        PathPolicy::new(&std::env::temp_dir(), &[], &[], Path::new("/root")).unwrap()
    }

    fn fd() -> Arc<OwnedFd> {
        Arc::new(OwnedFd::from(std::fs::File::open("/dev/null").unwrap()))
    }

    fn same(a: &Option<Arc<OwnedFd>>, b: &Arc<OwnedFd>) -> bool {
        a.as_ref().map(|x| x.as_raw_fd()) == Some(b.as_raw_fd())
    }

    fn redirect(fd: u8, target: RedirectTarget) -> Redirect {
        Redirect { fd, target }
    }

    #[test]
    fn dups_copy_the_current_descriptor_in_order() {
        let (stdin, stdout, stderr) = (fd(), fd(), fd());
        // 2>&1 1>&-  : stderr goes to the old stdout, stdout closed.
        let mut t = FdTable::new(stdin.clone(), stdout.clone(), stderr.clone(), fd());
        t.apply(
            &[
                redirect(2, RedirectTarget::Dup(1)),
                redirect(1, RedirectTarget::Close),
            ],
            &no_roots(),
        )
        .unwrap();
        assert!(same(&t.slots[2], &stdout));
        assert!(t.slots[1].is_none());

        // 3>&2 2>&1 1>&3 3>&- : swap stdout and stderr.
        let mut t = FdTable::new(stdin, stdout.clone(), stderr.clone(), fd());
        t.apply(
            &[
                redirect(3, RedirectTarget::Dup(2)),
                redirect(2, RedirectTarget::Dup(1)),
                redirect(1, RedirectTarget::Dup(3)),
                redirect(3, RedirectTarget::Close),
            ],
            &no_roots(),
        )
        .unwrap();
        assert!(same(&t.slots[1], &stderr));
        assert!(same(&t.slots[2], &stdout));
        assert!(t.slots[3].is_none());
    }

    #[test]
    fn dup_of_a_closed_descriptor_fails_like_bash() {
        let mut t = FdTable::new(fd(), fd(), fd(), fd());
        let err = t
            .apply(&[redirect(1, RedirectTarget::Dup(5))], &no_roots())
            .unwrap_err();
        assert_eq!(err, "5: Bad file descriptor");
        let err = t
            .apply(&[redirect(12, RedirectTarget::Close)], &no_roots())
            .unwrap_err();
        assert!(err.contains("only 0-9"), "{err}");
    }

    #[test]
    fn file_order_matters_like_in_bash() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let roots = PathPolicy::new(&ws, &[], &[], Path::new("/root")).unwrap();
        let out = ws.join("out");
        let file = RedirectTarget::File {
            path: out.clone(),
            mode: OpenMode::Write,
        };
        let (stdout, stderr) = (fd(), fd());
        // 2>&1 >out : stderr keeps the old stdout.
        let mut t = FdTable::new(fd(), stdout.clone(), stderr.clone(), fd());
        t.apply(
            &[
                redirect(2, RedirectTarget::Dup(1)),
                redirect(1, file.clone()),
            ],
            &roots,
        )
        .unwrap();
        assert!(same(&t.slots[2], &stdout));
        assert!(!same(&t.slots[1], &stdout));
        // >out 2>&1 : both go to the file.
        let mut t = FdTable::new(fd(), stdout, stderr, fd());
        t.apply(
            &[redirect(1, file), redirect(2, RedirectTarget::Dup(1))],
            &roots,
        )
        .unwrap();
        assert_eq!(
            t.slots[1].as_ref().unwrap().as_raw_fd(),
            t.slots[2].as_ref().unwrap().as_raw_fd()
        );
        assert!(out.exists());
    }

    #[test]
    fn spec_maps_slots_to_stdio_and_extra_fds() {
        let mut t = FdTable::new(fd(), fd(), fd(), fd());
        t.apply(
            &[
                redirect(0, RedirectTarget::Text("hi\n".into())),
                redirect(4, RedirectTarget::Dup(1)),
                redirect(2, RedirectTarget::Close),
            ],
            &no_roots(),
        )
        .unwrap();
        let spec = t
            .into_spec(vec!["cat".into()], Path::new("/").into())
            .unwrap();
        assert_eq!(spec.extra_fds.len(), 1);
        assert_eq!(spec.extra_fds[0].0, 4);
        // A closed stderr becomes /dev/null rather than a hole.
        assert!(matches!(spec.stderr, Stdio::Fd(_)));
    }
}
