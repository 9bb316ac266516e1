//! `chmod`, applied by warden itself on the host backend.
//!
//! Landlock cannot confine chmod by path, so inside the host jail every chmod-family call
//! "succeeds" having done nothing (see the seccomp table). A checked `chmod` command is carried
//! out here instead, on exactly the files the policy checked: each is opened `O_PATH` beneath
//! its writable root without following symlinks (a symlink swapped in since the check is
//! refused), and its mode changed through that descriptor. `-R` descends without following
//! symlinks, one name at a time, and leaves out what the policy keeps read-only (`.git` trees,
//! `.gitattributes`, `.gitmodules`, the root's `.gitconfig` and `.config/git`): `chmod -R +x .`
//! must not make a file under `.git/hooks` executable. No change may add a setuid, setgid or
//! sticky bit, whatever the plan says (the policy already refused such modes: this is the
//! second net).

use super::io_text::short;
use crate::policy::ir::{ChmodMode, ChmodPlan, ChmodReport};
use crate::policy::mode::{self, ModeChange, SPECIAL_BITS};
use crate::policy::PathPolicy;
use nix::fcntl::OFlag;
use nix::sys::stat::{fstat, FileStat, Mode};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What the command printed and its status.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ChmodResult {
    pub stdout: String,
    pub stderr: String,
    pub status: i32,
}

/// Carry out a checked chmod plan; `umask` is what a symbolic mode without `ugoa` leaves alone.
pub fn run(paths: &PathPolicy, plan: &ChmodPlan, umask: u32) -> ChmodResult {
    let mut run = Run {
        paths,
        plan,
        umask,
        result: ChmodResult::default(),
    };
    let change = match &plan.mode {
        ChmodMode::Change(text) => match mode::parse(text) {
            Ok(change) => change,
            Err(why) => {
                run.fail(format!("invalid mode: '{text}': {why}"));
                return run.result;
            }
        },
        ChmodMode::Like(reference) => match std::fs::metadata(reference) {
            Ok(meta) => {
                use std::os::unix::fs::MetadataExt;
                ModeChange::Octal {
                    value: meta.mode() & 0o7777,
                    long: true,
                }
            }
            Err(e) => {
                run.fail(format!(
                    "failed to get attributes of '{}': {}",
                    reference.display(),
                    short(&e)
                ));
                return run.result;
            }
        },
    };
    for (file, name) in plan.files.iter().zip(&plan.names) {
        let shown = Path::new(name);
        if !paths
            .write_roots()
            .iter()
            .any(|root| file.starts_with(root))
        {
            run.fail(format!(
                "changing permissions of '{}': outside every writable root of the sandbox",
                shown.display()
            ));
            continue;
        }
        match crate::beneath::open(paths, file, OFlag::O_PATH | OFlag::O_NOFOLLOW, 0) {
            Ok(opened) => run.file(&change, OwnedFd::from(opened), file, shown),
            Err(e) => run.fail(format!(
                "cannot access '{}': {}",
                shown.display(),
                short(&e)
            )),
        }
    }
    run.result
}

struct Run<'a> {
    paths: &'a PathPolicy,
    plan: &'a ChmodPlan,
    umask: u32,
    result: ChmodResult,
}

impl Run<'_> {
    fn fail(&mut self, message: String) {
        self.result.status = 1;
        if self.plan.report != ChmodReport::Quiet {
            self.result.stderr.push_str(&format!("chmod: {message}\n"));
        }
    }

    /// A file the walk leaves alone: said on stderr (unless -f), without failing the command.
    fn skip(&mut self, shown: &Path, why: &str) {
        if self.plan.report != ChmodReport::Quiet {
            self.result.stderr.push_str(&format!(
                "chmod: left '{}' unchanged: {why}\n",
                shown.display()
            ));
        }
    }

    /// Change one opened file (at `path`, absolute), then (with -R) what a directory holds.
    fn file(&mut self, change: &ModeChange, fd: OwnedFd, path: &Path, shown: &Path) {
        let stat = match fstat(&fd) {
            Ok(stat) => stat,
            Err(e) => return self.fail(format!("cannot access '{}': {e}", shown.display())),
        };
        let kind = stat.st_mode & libc::S_IFMT;
        if kind == libc::S_IFLNK {
            // Only reachable during -R: GNU chmod neither follows nor changes symlinks there.
            return;
        }
        let is_dir = kind == libc::S_IFDIR;
        self.change_mode(change, &fd, &stat, is_dir, shown);
        if self.plan.recursive && is_dir {
            self.descend(change, &fd, path, shown);
        }
    }

    fn change_mode(
        &mut self,
        change: &ModeChange,
        fd: &OwnedFd,
        stat: &FileStat,
        is_dir: bool,
        shown: &Path,
    ) {
        let old = stat.st_mode & 0o7777;
        let new = change.apply(old, is_dir, self.umask);
        if new & SPECIAL_BITS & !old != 0 {
            return self.fail(format!(
                "changing permissions of '{}': setuid, setgid and sticky bits are not allowed",
                shown.display()
            ));
        }
        if new != old {
            // The descriptor is O_PATH; its magic link names exactly the opened inode.
            let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
            use std::os::unix::fs::PermissionsExt;
            let permissions = std::fs::Permissions::from_mode(new);
            if let Err(e) = std::fs::set_permissions(&link, permissions) {
                return self.fail(format!(
                    "changing permissions of '{}': {}",
                    shown.display(),
                    short(&e)
                ));
            }
        }
        let report = match self.plan.report {
            ChmodReport::Verbose => true,
            ChmodReport::Changes => new != old,
            _ => false,
        };
        if report {
            let line = if new == old {
                format!(
                    "mode of '{}' retained as {:04o} ({})\n",
                    shown.display(),
                    old,
                    symbolic(old)
                )
            } else {
                format!(
                    "mode of '{}' changed from {:04o} ({}) to {:04o} ({})\n",
                    shown.display(),
                    old,
                    symbolic(old),
                    new,
                    symbolic(new)
                )
            };
            self.result.stdout.push_str(&line);
        }
    }

    fn descend(&mut self, change: &ModeChange, dir_path_fd: &OwnedFd, at: &Path, shown: &Path) {
        let listing = nix::fcntl::openat(
            dir_path_fd,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .and_then(nix::dir::Dir::from_fd);
        let mut dir = match listing {
            Ok(dir) => dir,
            Err(e) => {
                return self.fail(format!(
                    "cannot read directory '{}': {}",
                    shown.display(),
                    e.desc()
                ))
            }
        };
        let mut names: Vec<std::ffi::CString> = Vec::new();
        for entry in dir.iter() {
            match entry {
                Ok(entry) => {
                    let name = entry.file_name();
                    if name.to_bytes() != b"." && name.to_bytes() != b".." {
                        names.push(name.to_owned());
                    }
                }
                Err(e) => {
                    return self.fail(format!(
                        "cannot read directory '{}': {}",
                        shown.display(),
                        e.desc()
                    ))
                }
            }
        }
        names.sort();
        for name in names {
            let child_name = std::ffi::OsStr::from_bytes(name.to_bytes());
            let child_shown = shown.join(child_name);
            let child = at.join(child_name);
            if let Some(why) = self.paths.protected(&child) {
                self.skip(&child_shown, &why);
                continue;
            }
            // One component, never following a symlink: the walk cannot leave the tree.
            match nix::fcntl::openat(
                dir_path_fd,
                name.as_c_str(),
                OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => self.file(change, fd, &child, &child_shown),
                Err(e) => self.fail(format!(
                    "cannot access '{}': {}",
                    child_shown.display(),
                    e.desc()
                )),
            }
        }
    }
}

/// `ls -l`-style permission letters without the file type, as chmod -v prints them.
fn symbolic(mode: u32) -> String {
    let mut out = String::with_capacity(9);
    for (shift, special, set_letter, unset_letter) in [
        (6, 0o4000, 's', 'S'),
        (3, 0o2000, 's', 'S'),
        (0, 0o1000, 't', 'T'),
    ] {
        let bits = (mode >> shift) & 0o7;
        out.push(if bits & 4 != 0 { 'r' } else { '-' });
        out.push(if bits & 2 != 0 { 'w' } else { '-' });
        out.push(match (bits & 1 != 0, mode & special != 0) {
            (true, true) => set_letter,
            (false, true) => unset_letter,
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    out
}

/// warden's umask, read without changing it (`umask(2)` can only set it).
pub fn current_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Umask:"))
                .and_then(|value| u32::from_str_radix(value.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ir::ChmodPlan;
    use std::os::unix::fs::PermissionsExt;

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_recursive_chmod_leaves_what_the_policy_keeps_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        for file in [
            "run.sh",
            "src/tool.sh",
            ".git/hooks/pre-commit",
            ".git/config",
            "vendor/.git/hooks/post-checkout",
            "src/.gitattributes",
            ".gitmodules",
            ".gitconfig",
            ".config/git/config",
            ".config/other/settings",
        ] {
            let path = ws.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "x").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let paths = PathPolicy::new(&ws, &[], &[], &ws).unwrap();
        let plan = ChmodPlan {
            mode: ChmodMode::Change("+x".into()),
            recursive: true,
            report: ChmodReport::Errors,
            files: vec![ws.clone()],
            names: vec![".".into()],
        };
        let result = run(&paths, &plan, 0o022);
        assert_eq!(result.status, 0, "{result:?}");
        for changed in ["run.sh", "src/tool.sh", ".config/other/settings"] {
            assert_eq!(mode_of(&ws.join(changed)), 0o755, "{changed}");
        }
        for kept in [
            ".git/hooks/pre-commit",
            ".git/config",
            "vendor/.git/hooks/post-checkout",
            "src/.gitattributes",
            ".gitmodules",
            ".gitconfig",
            ".config/git/config",
        ] {
            assert_eq!(mode_of(&ws.join(kept)), 0o644, "{kept}");
        }
        // The folders themselves are left as they were too, and each is named once.
        assert_eq!(mode_of(&ws.join(".git")) & 0o111, 0o111);
        assert!(
            result.stderr.contains("left './.git' unchanged"),
            "{}",
            result.stderr
        );
        assert!(
            result.stderr.contains("'./vendor/.git'"),
            "{}",
            result.stderr
        );
        // -f: nothing said.
        let quiet = ChmodPlan {
            report: ChmodReport::Quiet,
            ..plan
        };
        assert_eq!(run(&paths, &quiet, 0o022).stderr, "");
    }
}
