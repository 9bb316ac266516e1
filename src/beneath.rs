//! Opening already-checked paths beneath their root, without following symlinks.
//!
//! The path validator resolved every symlink at check time, so the checked path is
//! symlink-free. Opening it with `openat2(root, relative, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
//! | RESOLVE_NO_MAGICLINKS)` makes the kernel refuse if a symlink was swapped in since, or if
//! anything would leave the root. Used by the executor's redirections and the file tools.

use crate::policy::PathPolicy;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"];

fn resolve_flags() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH
        | ResolveFlag::RESOLVE_NO_SYMLINKS
        | ResolveFlag::RESOLVE_NO_MAGICLINKS
}

/// The root containing `checked` and the path relative to it.
fn split<'a>(paths: &'a PathPolicy, checked: &'a Path) -> io::Result<(&'a Path, PathBuf)> {
    let root = paths.root_of(checked).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not under a root", checked.display()),
        )
    })?;
    let rel = checked.strip_prefix(root).map_err(io::Error::other)?;
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a normalized path", checked.display()),
        ));
    }
    let rel = if rel.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        rel.to_path_buf()
    };
    Ok((root, rel))
}

fn open_root(root: &Path) -> io::Result<OwnedFd> {
    let fd = nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    Ok(fd)
}

fn open_beneath(dir: impl AsFd, rel: &Path, flags: OFlag, mode: u32) -> io::Result<OwnedFd> {
    let mut how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .resolve(resolve_flags());
    // openat2 rejects a mode without O_CREAT/O_TMPFILE (EINVAL).
    if flags.intersects(OFlag::O_CREAT | OFlag::O_TMPFILE) {
        how = how.mode(Mode::from_bits_truncate(mode));
    }
    openat2(dir, rel, how).map_err(|e| {
        let err = io::Error::from(e);
        if e == nix::errno::Errno::ELOOP || e == nix::errno::Errno::EXDEV {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{}: a symlink appeared in the path after it was checked",
                    rel.display()
                ),
            )
        } else {
            err
        }
    })
}

/// Open a checked path with `flags` (`O_RDONLY`, `O_WRONLY|O_CREAT|O_TRUNC`, ...).
pub fn open(paths: &PathPolicy, checked: &Path, flags: OFlag, mode: u32) -> io::Result<File> {
    if checked.to_str().is_some_and(|p| DEVICES.contains(&p)) {
        let fd = nix::fcntl::open(
            checked,
            (flags & !OFlag::O_CREAT & !OFlag::O_TRUNC) | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )?;
        return Ok(File::from(fd));
    }
    let (root, rel) = split(paths, checked)?;
    let root_fd = open_root(root)?;
    Ok(File::from(open_beneath(&root_fd, &rel, flags, mode)?))
}

/// Open a checked regular file for reading. Opened non-blocking first, so a FIFO planted under
/// a file's name cannot hang warden, and refused unless it is a regular file (or a device).
pub fn open_read(paths: &PathPolicy, checked: &Path) -> io::Result<File> {
    let file = open(paths, checked, OFlag::O_RDONLY | OFlag::O_NONBLOCK, 0)?;
    let meta = file.metadata()?;
    let device = checked.to_str().is_some_and(|p| DEVICES.contains(&p));
    if !meta.is_file() && !device {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", checked.display()),
        ));
    }
    let flags = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL)?;
    let blocking = OFlag::from_bits_truncate(flags) & !OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(blocking))?;
    Ok(file)
}

/// Open a checked directory for listing.
pub fn open_dir(paths: &PathPolicy, checked: &Path) -> io::Result<OwnedFd> {
    let (root, rel) = split(paths, checked)?;
    let root_fd = open_root(root)?;
    open_beneath(&root_fd, &rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0)
}

/// Create the checked directory and its missing parents, one component at a time beneath the
/// root (a symlinked component is refused, never followed).
pub fn create_dirs(paths: &PathPolicy, checked_dir: &Path) -> io::Result<()> {
    let (root, rel) = split(paths, checked_dir)?;
    let mut dir = open_root(root)?;
    for comp in rel.components() {
        let name = comp.as_os_str();
        if name == "." {
            continue;
        }
        match nix::sys::stat::mkdirat(&dir, name, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        dir = open_beneath(&dir, Path::new(name), OFlag::O_PATH | OFlag::O_DIRECTORY, 0)?;
    }
    Ok(())
}

/// Replace the checked file's contents atomically: write a temporary file in the same
/// directory, fsync, rename over the target (a symlink at the target is replaced, not followed).
pub fn replace(paths: &PathPolicy, checked: &Path, contents: &[u8]) -> io::Result<()> {
    let parent = checked
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no parent directory"))?;
    let name = checked
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let dir = open_dir(paths, parent)?;
    let mode = nix::sys::stat::fstatat(&dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .map(|st| st.st_mode & 0o777)
        .unwrap_or(0o644);
    let tmp_name = format!(
        ".{}.warden-{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    );
    let tmp = Path::new(&tmp_name);
    let fd = open_beneath(
        &dir,
        tmp,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
        mode,
    )?;
    let mut file = File::from(fd);
    let written = file.write_all(contents).and_then(|_| file.sync_all());
    if let Err(e) = written {
        let _ = nix::unistd::unlinkat(&dir, tmp, nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    nix::fcntl::renameat(&dir, tmp, &dir, name).inspect_err(|_| {
        let _ = nix::unistd::unlinkat(&dir, tmp, nix::unistd::UnlinkatFlags::NoRemoveDir);
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn policy(dir: &Path) -> PathPolicy {
        PathPolicy::new(dir, &[], &[], Path::new("/root")).unwrap()
    }

    #[test]
    fn a_symlink_swapped_in_after_the_check_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let p = policy(&ws);
        let target = p.workspace().join("out.txt");
        // Checked while it did not exist; then an attacker plants a symlink.
        std::os::unix::fs::symlink(dir.path().join("victim"), &target).unwrap();
        let err = open(&p, &target, OFlag::O_WRONLY | OFlag::O_CREAT, 0o644).unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(!dir.path().join("victim").exists());
    }

    #[test]
    fn replace_is_atomic_and_replaces_a_planted_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(dir.path().join("victim"), "keep").unwrap();
        let p = policy(&ws);
        let target = p.workspace().join("f.txt");
        std::os::unix::fs::symlink(dir.path().join("victim"), &target).unwrap();
        replace(&p, &target, b"new").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("victim")).unwrap(),
            "keep"
        );
        let mut s = String::new();
        open_read(&p, &target)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "new");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let p = policy(dir.path());
        let fifo = p.workspace().join("SOUL.md");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        let err = open_read(&p, &fifo).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn create_dirs_makes_missing_parents() {
        let dir = tempfile::tempdir().unwrap();
        let p = policy(dir.path());
        let nested = p.workspace().join("a/b/c");
        create_dirs(&p, &nested).unwrap();
        assert!(nested.is_dir());
    }
}
