//! Opening the files of redirections, which warden does itself — outside the jail, with
//! warden's own rights — so this is where the "checked path is the opened file" guarantee lives.
//!
//! The policy hands over an absolute, already canonical path. It is opened with
//! `openat2(root_fd, relative, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//! where `root_fd` is the workspace, writable root or readable root containing it (itself opened
//! without following symlinks). A symlink a jailed command swapped in after the check makes the
//! open fail instead of writing somewhere else. Writes need a writable root, reads any root.
//! Only regular files (and `/dev/null`) are accepted: a FIFO planted in the workspace must not
//! block warden.

use crate::policy::ir::OpenMode;
use crate::sandbox::JailSpec;
use std::ffi::CString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Where warden may open redirection targets: the jail's roots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecRoots {
    /// The workspace and the other writable roots.
    pub writable: Vec<PathBuf>,
    /// Read-only roots.
    pub readable: Vec<PathBuf>,
}

impl ExecRoots {
    /// The roots of a jail: workspace and write roots writable, read roots readable.
    pub fn from_spec(spec: &JailSpec) -> ExecRoots {
        let canonical = |p: &PathBuf| p.canonicalize().unwrap_or_else(|_| p.clone());
        ExecRoots {
            writable: std::iter::once(&spec.workspace)
                .chain(&spec.write_roots)
                .map(canonical)
                .collect(),
            readable: spec.read_roots.iter().map(canonical).collect(),
        }
    }

    /// The deepest root containing `path` that allows `mode`.
    fn root_for(&self, path: &Path, mode: OpenMode) -> Option<&Path> {
        let candidates = self.writable.iter().chain(match mode {
            OpenMode::Read => self.readable.iter(),
            _ => [].iter(),
        });
        candidates
            .filter(|root| path.starts_with(root))
            .max_by_key(|root| root.components().count())
            .map(PathBuf::as_path)
    }
}

/// Open a redirection target. The error is a short, bash-like reason.
pub fn open_redirect(roots: &ExecRoots, path: &Path, mode: OpenMode) -> Result<OwnedFd, String> {
    let flags = match mode {
        OpenMode::Read => libc::O_RDONLY,
        OpenMode::Write => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        OpenMode::Append => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
        OpenMode::ReadWrite => libc::O_RDWR | libc::O_CREAT,
    };
    if path == Path::new("/dev/null") {
        return openat2(libc::AT_FDCWD, path, flags & !libc::O_CREAT, 0)
            .map_err(|e| describe(path, &e));
    }
    if !path.is_absolute()
        || path
            .components()
            .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        return Err(format!(
            "{}: not an absolute, normalized path",
            path.display()
        ));
    }
    let root = roots.root_for(path, mode).ok_or_else(|| {
        let kind = if mode == OpenMode::Read {
            "readable"
        } else {
            "writable"
        };
        format!(
            "{}: outside every {kind} root of the sandbox",
            path.display()
        )
    })?;
    let fd = open_beneath(root, path, flags, 0o644).map_err(|e| describe(path, &e))?;
    require_regular_file(&fd).map_err(|why| format!("{}: {why}", path.display()))?;
    Ok(fd)
}

/// Create a new file (never following or replacing anything) beneath `root`, for saved output.
pub fn create_new_beneath(root: &Path, path: &Path) -> io::Result<std::fs::File> {
    let fd = open_beneath(
        root,
        path,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        0o644,
    )?;
    Ok(std::fs::File::from(fd))
}

/// `openat2` of `path` (inside `root`) relative to `root`, symlinks refused everywhere.
fn open_beneath(root: &Path, path: &Path, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let root_fd = openat2(libc::AT_FDCWD, root, libc::O_PATH | libc::O_DIRECTORY, 0)?;
    let relative = path
        .strip_prefix(root)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path outside its root"))?;
    let relative = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    let fd = openat2(
        root_fd.as_raw_fd(),
        relative,
        flags | libc::O_NONBLOCK | libc::O_NOCTTY,
        mode,
    )?;
    // Non-blocking only for the open itself (a FIFO must not hang warden).
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    Ok(fd)
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

fn openat2(dirfd: RawFd, path: &Path, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & libc::O_CREAT != 0 {
        u64::from(mode)
    } else {
        0
    };
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    if dirfd != libc::AT_FDCWD {
        how.resolve |= RESOLVE_BENEATH;
    }
    // SAFETY: valid C string and open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            c_path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn require_regular_file(fd: &OwnedFd) -> Result<(), &'static str> {
    // SAFETY: fstat into a zeroed struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err("cannot stat the opened file");
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Ok(()),
        libc::S_IFDIR => Err("Is a directory"),
        libc::S_IFIFO => Err("refusing to redirect to a FIFO"),
        _ => Err("not a regular file"),
    }
}

fn describe(path: &Path, err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ELOOP) => format!(
            "{}: refusing to follow a symbolic link (the path must not contain one)",
            path.display()
        ),
        Some(libc::EXDEV) => format!("{}: resolves outside its sandbox root", path.display()),
        Some(libc::ENXIO) => format!("{}: refusing to redirect to a FIFO", path.display()),
        _ => {
            let text = err.to_string();
            // "No such file or directory (os error 2)" → "No such file or directory", like bash.
            let short = text.split(" (os error").next().unwrap_or(&text);
            format!("{}: {short}", path.display())
        }
    }
}

/// Here-document / here-string content as a sealed memfd, positioned at its start: the jailed
/// process reads it like a file, with no writer task and no pipe that could fill up.
pub fn text_fd(text: &str) -> io::Result<OwnedFd> {
    // SAFETY: memfd_create with a static name.
    let fd = unsafe {
        libc::memfd_create(
            c"warden-heredoc".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd);
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

    fn roots(ws: &Path) -> ExecRoots {
        ExecRoots {
            writable: vec![ws.to_path_buf()],
            readable: vec![],
        }
    }

    #[test]
    fn writes_inside_the_workspace() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let target = ws.join("out.txt");
        let fd = open_redirect(&roots(&ws), &target, OpenMode::Write).unwrap();
        std::fs::File::from(fd).write_all(b"hello").unwrap();
        let fd = open_redirect(&roots(&ws), &target, OpenMode::Append).unwrap();
        std::fs::File::from(fd).write_all(b" world").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello world");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o022, 0o644 & !0o022);
    }

    #[test]
    fn symlinks_are_never_followed() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), ws.join("file-link")).unwrap();
        for p in [ws.join("link/f"), ws.join("file-link")] {
            let err = open_redirect(&roots(&ws), &p, OpenMode::Write).unwrap_err();
            assert!(err.contains("symbolic link"), "{err}");
        }
        assert!(!outside.path().join("f").exists());
    }

    #[test]
    fn paths_outside_the_roots_are_refused() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let err =
            open_redirect(&roots(&ws), Path::new("/etc/passwd"), OpenMode::Write).unwrap_err();
        assert!(err.contains("outside every writable root"), "{err}");
        let err = open_redirect(&roots(&ws), Path::new("/etc/passwd"), OpenMode::Read).unwrap_err();
        assert!(err.contains("outside every readable root"), "{err}");
        let err = open_redirect(&roots(&ws), &ws.join("../x"), OpenMode::Write).unwrap_err();
        assert!(err.contains("normalized"), "{err}");
        // A readable root is not writable.
        let ro = ExecRoots {
            writable: vec![ws.clone()],
            readable: vec![PathBuf::from("/usr")],
        };
        assert!(open_redirect(&ro, Path::new("/usr/share/x"), OpenMode::Append).is_err());
    }

    #[test]
    fn fifos_and_directories_are_refused_without_blocking() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        nix::unistd::mkfifo(
            &ws.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        for mode in [OpenMode::Write, OpenMode::Read] {
            let err = open_redirect(&roots(&ws), &ws.join("fifo"), mode).unwrap_err();
            assert!(err.contains("FIFO"), "{err}");
        }
        std::fs::create_dir(ws.join("d")).unwrap();
        let err = open_redirect(&roots(&ws), &ws.join("d"), OpenMode::Read).unwrap_err();
        assert!(err.contains("directory"), "{err}");
    }

    #[test]
    fn dev_null_and_missing_files() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        assert!(open_redirect(&roots(&ws), Path::new("/dev/null"), OpenMode::Write).is_ok());
        let err = open_redirect(&roots(&ws), &ws.join("missing"), OpenMode::Read).unwrap_err();
        assert!(err.ends_with("missing: No such file or directory"), "{err}");
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
