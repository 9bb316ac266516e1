//! A directory handle that never follows a symlink. The verifier runs outside the jail, often
//! while jailed processes still run: every step it takes is one name, opened or changed with
//! `O_NOFOLLOW` / `AT_SYMLINK_NOFOLLOW` relative to a directory it already holds open, so a
//! link swapped in under it cannot lead a read — or an undo — anywhere else.

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::UnlinkatFlags;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// What kind of entry a name is, without following it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    File,
    Dir,
    Link,
    /// A FIFO, socket or device.
    Other,
}

impl Kind {
    pub fn of(stat: &FileStat) -> Kind {
        match stat.st_mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Link,
            _ => Kind::Other,
        }
    }
}

pub struct Dir {
    fd: OwnedFd,
}

fn single(name: &OsStr) -> io::Result<&OsStr> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.contains(&b'/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a single file name"),
        ));
    }
    Ok(name)
}

impl Dir {
    /// Open a root the verifier trusts (canonical, chosen by the configuration).
    pub fn open_root(path: &Path) -> io::Result<Dir> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Dir { fd })
    }

    /// The child directory `name`; an error when it is anything else (a link included).
    pub fn open_dir(&self, name: &OsStr) -> io::Result<Dir> {
        let fd = nix::fcntl::openat(
            &self.fd,
            single(name)?,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Dir { fd })
    }

    /// The directory at `rel` beneath this one, one real directory at a time.
    pub fn open_path(&self, rel: &Path) -> io::Result<Dir> {
        let mut dir = self.try_clone()?;
        for comp in rel.components() {
            match comp {
                Component::Normal(name) => dir = dir.open_dir(name)?,
                Component::CurDir => {}
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} is not a plain relative path", rel.display()),
                    ))
                }
            }
        }
        Ok(dir)
    }

    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
        })
    }

    /// `name`'s metadata, the name itself (a link is a link).
    pub fn stat(&self, name: &OsStr) -> io::Result<FileStat> {
        Ok(nix::sys::stat::fstatat(
            &self.fd,
            single(name)?,
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )?)
    }

    /// The contents of the regular file `name`, at most `cap` bytes (`None` when longer). A
    /// FIFO cannot block the read: it is opened non-blocking and refused.
    pub fn read_file(&self, name: &OsStr, cap: u64) -> io::Result<Option<Vec<u8>>> {
        let fd = nix::fcntl::openat(
            &self.fd,
            single(name)?,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        if meta.len() > cap {
            return Ok(None);
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(cap + 1).read_to_end(&mut bytes)?;
        Ok((bytes.len() as u64 <= cap).then_some(bytes))
    }

    pub fn read_link(&self, name: &OsStr) -> io::Result<PathBuf> {
        Ok(PathBuf::from(nix::fcntl::readlinkat(
            &self.fd,
            single(name)?,
        )?))
    }

    /// The names in this directory with their kinds (`.` and `..` left out), sorted.
    pub fn entries(&self) -> io::Result<Vec<(OsString, Kind)>> {
        let fd = self.fd.try_clone()?;
        let mut dir = nix::dir::Dir::from_fd(fd)?;
        let mut out = Vec::new();
        for entry in dir.iter() {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            use nix::dir::Type;
            let kind = match entry.file_type() {
                Some(Type::File) => Kind::File,
                Some(Type::Directory) => Kind::Dir,
                Some(Type::Symlink) => Kind::Link,
                Some(_) => Kind::Other,
                // Filesystems without d_type: ask.
                None => match self.stat(name) {
                    Ok(stat) => Kind::of(&stat),
                    Err(_) => continue,
                },
            };
            out.push((name.to_os_string(), kind));
        }
        out.sort();
        Ok(out)
    }

    /// Remove `name` whatever it is; a directory with everything beneath it (links removed,
    /// never followed). Missing is not an error.
    pub fn remove(&self, name: &OsStr) -> io::Result<()> {
        let name = single(name)?;
        match self.stat(name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
            Ok(stat) if Kind::of(&stat) == Kind::Dir => {
                let child = self.open_dir(name)?;
                for (entry, _) in child.entries()? {
                    child.remove(&entry)?;
                }
                Ok(nix::unistd::unlinkat(
                    &self.fd,
                    name,
                    UnlinkatFlags::RemoveDir,
                )?)
            }
            Ok(_) => Ok(nix::unistd::unlinkat(
                &self.fd,
                name,
                UnlinkatFlags::NoRemoveDir,
            )?),
        }
    }

    /// Make `name` the regular file `contents` with `mode`, atomically: a new file beside it,
    /// renamed over whatever is there (a directory there is removed first).
    pub fn write_file(&self, name: &OsStr, contents: &[u8], mode: u32) -> io::Result<()> {
        let name = single(name)?;
        if self.stat(name).is_ok_and(|s| Kind::of(&s) == Kind::Dir) {
            self.remove(name)?;
        }
        let tmp = OsString::from(format!(
            ".warden-restore-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let fd = nix::fcntl::openat(
            &self.fd,
            tmp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        let mut file = File::from(fd);
        let written = file
            .write_all(contents)
            .and_then(|_| {
                nix::sys::stat::fchmod(&file, Mode::from_bits_truncate(mode & 0o7777))
                    .map_err(io::Error::from)
            })
            .and_then(|_| file.sync_all());
        let renamed = written.and_then(|_| {
            nix::fcntl::renameat(&self.fd, tmp.as_os_str(), &self.fd, name).map_err(io::Error::from)
        });
        if renamed.is_err() {
            let _ = nix::unistd::unlinkat(&self.fd, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        renamed
    }

    /// Make `name` a directory with `mode` (whatever else is there is removed first).
    pub fn make_dir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        let name = single(name)?;
        match self.stat(name) {
            Ok(stat) if Kind::of(&stat) == Kind::Dir => {}
            Ok(_) => {
                self.remove(name)?;
                nix::sys::stat::mkdirat(&self.fd, name, Mode::from_bits_truncate(0o700))?;
            }
            Err(_) => nix::sys::stat::mkdirat(&self.fd, name, Mode::from_bits_truncate(0o700))?,
        }
        self.set_mode(name, mode)
    }

    /// Make `name` a symlink to `target` (whatever is there is removed first).
    pub fn make_link(&self, name: &OsStr, target: &Path) -> io::Result<()> {
        let name = single(name)?;
        self.remove(name)?;
        Ok(nix::unistd::symlinkat(target, &self.fd, name)?)
    }

    /// Set the permission bits of the file or directory `name` (never through a link).
    pub fn set_mode(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        let fd = nix::fcntl::openat(
            &self.fd,
            single(name)?,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(nix::sys::stat::fchmod(
            fd.as_fd(),
            Mode::from_bits_truncate(mode & 0o7777),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        let root = dir.path().join("root");
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("file")).unwrap();
        let d = Dir::open_root(&root).unwrap();
        assert!(d.open_dir(OsStr::new("link")).is_err());
        assert!(d.open_path(Path::new("link/sub")).is_err());
        assert!(d.read_file(OsStr::new("file"), 100).is_err());
        assert_eq!(Kind::of(&d.stat(OsStr::new("link")).unwrap()), Kind::Link);
        // Removing the link removes the link, not what it points to.
        d.remove(OsStr::new("link")).unwrap();
        d.remove(OsStr::new("file")).unwrap();
        assert!(outside.join("sub").is_dir() && outside.join("secret").is_file());
        assert!(d.entries().unwrap().is_empty());
        assert!(d.stat(OsStr::new("../outside")).is_err());
    }

    #[test]
    fn writes_replace_whatever_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("victim");
        std::fs::write(&outside, "keep").unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("f")).unwrap();
        let d = Dir::open_root(&root).unwrap();
        d.write_file(OsStr::new("f"), b"restored", 0o755).unwrap();
        d.write_file(OsStr::new("d"), b"was a dir", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(root.join("f")).unwrap(), "restored");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(root.join("f"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(
            std::fs::read_to_string(root.join("d")).unwrap(),
            "was a dir"
        );
        d.make_link(OsStr::new("l"), Path::new("f")).unwrap();
        assert_eq!(d.read_link(OsStr::new("l")).unwrap(), PathBuf::from("f"));
        d.make_dir(OsStr::new("l"), 0o750).unwrap();
        assert!(root.join("l").is_dir());
        let names: Vec<OsString> = d.entries().unwrap().into_iter().map(|e| e.0).collect();
        assert_eq!(names, ["d", "f", "l"]);
    }
}
