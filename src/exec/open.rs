//! Opening the files of redirections, which warden does itself — outside the jail, with
//! warden's own rights.
//!
//! The symlink-free open beneath the containing root is [`crate::beneath`]'s (shared with the
//! file tools): `openat2(root, relative, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)`, so a symlink swapped in after the check makes the open fail. On top
//! of it the executor insists that writes go beneath a *writable* root (`beneath` accepts any
//! root), and that the target is a regular file: it opens non-blocking so a FIFO planted in the
//! workspace cannot hang warden, then refuses FIFOs, sockets and devices (except the devices
//! `beneath` special-cases, such as `/dev/null`).

use crate::beneath;
use crate::policy::ir::OpenMode;
use crate::policy::PathPolicy;
use nix::fcntl::OFlag;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Devices `beneath::open` opens directly; they are not regular files.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"];

/// Open a redirection target. The error is a short, bash-like reason.
pub fn open_redirect(paths: &PathPolicy, path: &Path, mode: OpenMode) -> Result<OwnedFd, String> {
    let flags = match mode {
        OpenMode::Read => OFlag::O_RDONLY,
        OpenMode::Write => OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC,
        OpenMode::Append => OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_APPEND,
        OpenMode::ReadWrite => OFlag::O_RDWR | OFlag::O_CREAT,
    };
    let device = path.to_str().is_some_and(|p| DEVICES.contains(&p));
    if !device {
        let roots = match mode {
            OpenMode::Read => paths.read_roots(),
            _ => paths.write_roots(),
        };
        if !roots.iter().any(|r| path.starts_with(r)) {
            let kind = if mode == OpenMode::Read {
                "readable"
            } else {
                "writable"
            };
            return Err(format!(
                "{}: outside every {kind} root of the sandbox",
                path.display()
            ));
        }
    }
    // openat2 refuses a mode without O_CREAT.
    let mode_bits = if flags.contains(OFlag::O_CREAT) {
        0o644
    } else {
        0
    };
    let file = beneath::open(
        paths,
        path,
        flags | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
        mode_bits,
    )
    .map_err(|e| describe(path, &e))?;
    let fd = OwnedFd::from(file);
    if !device {
        require_regular_file(&fd).map_err(|why| format!("{}: {why}", path.display()))?;
    }
    // Non-blocking only for the open itself.
    let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let blocking = OFlag::from_bits_truncate(flags) & !OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(blocking))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(fd)
}

fn require_regular_file(fd: &OwnedFd) -> Result<(), &'static str> {
    let st = nix::sys::stat::fstat(fd).map_err(|_| "cannot stat the opened file")?;
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Ok(()),
        libc::S_IFDIR => Err("Is a directory"),
        libc::S_IFIFO => Err("refusing to redirect to a FIFO"),
        _ => Err("not a regular file"),
    }
}

fn describe(path: &Path, err: &io::Error) -> String {
    if err.raw_os_error() == Some(libc::ENXIO) {
        return format!("{}: refusing to redirect to a FIFO", path.display());
    }
    let text = err.to_string();
    // "No such file or directory (os error 2)" → "No such file or directory", like bash.
    let short = text.split(" (os error").next().unwrap_or(&text);
    if short.starts_with(&path.display().to_string()) || short.contains("symlink") {
        short.to_string()
    } else {
        format!("{}: {short}", path.display())
    }
}

const MFD_NOEXEC_SEAL: libc::c_uint = 0x8;

/// Here-document / here-string content as a sealed memfd, positioned at its start: the jailed
/// process reads it like a file, with no writer task and no pipe that could fill up.
pub fn text_fd(text: &str) -> io::Result<OwnedFd> {
    let create = |flags: libc::c_uint| {
        // SAFETY: memfd_create with a static name.
        unsafe { libc::memfd_create(c"warden-heredoc".as_ptr(), flags) }
    };
    // Never executable (a memfd lies outside every Landlock rule); kernels before 6.3 do not
    // know MFD_NOEXEC_SEAL, and their jails cannot create executable memfds either.
    let base = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    let mut fd = create(base | MFD_NOEXEC_SEAL);
    if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        fd = create(base);
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(text.as_bytes())?;
    let fd = OwnedFd::from(file);
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl/lseek on a descriptor we own.
    unsafe {
        if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) != 0
            || libc::lseek(fd.as_raw_fd(), 0, libc::SEEK_SET) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::path::PathBuf;

    fn paths(ws: &Path) -> PathPolicy {
        PathPolicy::new(ws, &[], &[], Path::new("/root")).unwrap()
    }

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        (dir, ws)
    }

    #[test]
    fn writes_and_appends_inside_the_workspace() {
        let (_d, ws) = workspace();
        let target = ws.join("out.txt");
        let fd = open_redirect(&paths(&ws), &target, OpenMode::Write).unwrap();
        std::fs::File::from(fd).write_all(b"hello").unwrap();
        let fd = open_redirect(&paths(&ws), &target, OpenMode::Append).unwrap();
        std::fs::File::from(fd).write_all(b" world").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello world");
    }

    #[test]
    fn symlinks_are_never_followed() {
        let (_d, ws) = workspace();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), ws.join("file-link")).unwrap();
        for p in [ws.join("link/f"), ws.join("file-link")] {
            let err = open_redirect(&paths(&ws), &p, OpenMode::Write).unwrap_err();
            assert!(err.contains("symlink"), "{err}");
        }
        assert!(!outside.path().join("f").exists());
    }

    #[test]
    fn paths_outside_the_roots_are_refused() {
        let (_d, ws) = workspace();
        let err =
            open_redirect(&paths(&ws), Path::new("/etc/passwd"), OpenMode::Write).unwrap_err();
        assert!(err.contains("outside every writable root"), "{err}");
        let err = open_redirect(&paths(&ws), Path::new("/etc/passwd"), OpenMode::Read).unwrap_err();
        assert!(err.contains("outside every readable root"), "{err}");
        let err = open_redirect(&paths(&ws), &ws.join("a/../b"), OpenMode::Write).unwrap_err();
        assert!(err.contains("normalized"), "{err}");
        // A readable root is not writable.
        let ro = PathPolicy::new(&ws, &[], &[PathBuf::from("/usr")], Path::new("/root")).unwrap();
        let err = open_redirect(&ro, Path::new("/usr/share/x"), OpenMode::Append).unwrap_err();
        assert!(err.contains("outside every writable root"), "{err}");
    }

    #[test]
    fn fifos_and_directories_are_refused_without_blocking() {
        let (_d, ws) = workspace();
        nix::unistd::mkfifo(
            &ws.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        for mode in [OpenMode::Write, OpenMode::Read] {
            let err = open_redirect(&paths(&ws), &ws.join("fifo"), mode).unwrap_err();
            assert!(err.contains("FIFO"), "{err}");
        }
        std::fs::create_dir(ws.join("d")).unwrap();
        let err = open_redirect(&paths(&ws), &ws.join("d"), OpenMode::Read).unwrap_err();
        assert!(err.contains("directory"), "{err}");
    }

    #[test]
    fn dev_null_and_missing_files() {
        let (_d, ws) = workspace();
        assert!(open_redirect(&paths(&ws), Path::new("/dev/null"), OpenMode::Write).is_ok());
        let err = open_redirect(&paths(&ws), &ws.join("missing"), OpenMode::Read).unwrap_err();
        assert!(err.ends_with("missing: No such file or directory"), "{err}");
    }

    #[test]
    fn opened_files_are_blocking_again() {
        let (_d, ws) = workspace();
        let fd = open_redirect(&paths(&ws), &ws.join("f"), OpenMode::Write).unwrap();
        let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        assert!(!OFlag::from_bits_truncate(flags).contains(OFlag::O_NONBLOCK));
    }

    #[test]
    fn text_is_a_sealed_readable_memfd() {
        let fd = text_fd("line 1\nline 2\n").unwrap();
        let mut file = std::fs::File::from(fd);
        let mut s = String::new();
        file.read_to_string(&mut s).unwrap();
        assert_eq!(s, "line 1\nline 2\n");
        assert!(file.write_all(b"x").is_err(), "sealed against writes");
    }
}
