//! The small files by which git finds a repository, read as git reads them: a `.git` file
//! (`gitdir: PATH`, a linked worktree's or a submodule's) and a worktree's `commondir`. The
//! policy's git analyzer and the write verifier both follow them; a reading that differs from
//! git's by a space would inspect one repository's config and hooks while git uses another's.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The path a `.git` file names, as git's `read_gitfile_gently` takes it: the bytes after
/// `gitdir: ` (the space included), without the trailing newlines and carriage returns. None
/// where git refuses the file (another prefix, no path). Relative to the file's directory.
pub fn gitfile_target(bytes: &[u8]) -> Option<&OsStr> {
    let path = without_line_ends(bytes.strip_prefix(b"gitdir: ")?);
    (!path.is_empty()).then(|| OsStr::from_bytes(path))
}

/// `bytes` without trailing `\n` and `\r` (git's loop over the end of the buffer).
fn without_line_ends(mut bytes: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = bytes {
        bytes = rest;
    }
    bytes
}

/// The file's bytes, or None when nothing is there. Most of the files git might read are
/// absent (`~/.gitconfig`, `config.worktree`, `commondir`): asking whether the name exists
/// costs this machine 0.67 µs where an open that fails costs 1.15-1.3 µs, and a check of `git`
/// asks for four or five of them. A file created between the two calls is one created after
/// the check, as it could be anyway; one removed between them is absent.
pub fn read_if_present(file: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use nix::unistd::{access, AccessFlags};
    if access(file, AccessFlags::F_OK) == Err(nix::errno::Errno::ENOENT) {
        return Ok(None);
    }
    match std::fs::read(file) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The common dir a linked worktree's `commondir` file names, as git reads it: the file's bytes
/// (a path need not be UTF-8) without trailing newlines and carriage returns, relative to the
/// git dir unless absolute. None when there is no such file (or it cannot be read).
pub fn common_dir(git_dir: &Path) -> Option<PathBuf> {
    let bytes = read_if_present(&git_dir.join("commondir")).ok()??;
    Some(git_dir.join(OsStr::from_bytes(without_line_ends(&bytes))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gitfile_is_read_as_git_reads_it() {
        assert_eq!(
            gitfile_target(b"gitdir: ../main/.git/worktrees/wt\n"),
            Some(OsStr::new("../main/.git/worktrees/wt"))
        );
        // Spaces after the prefix's own and before the line end are part of the path.
        assert_eq!(gitfile_target(b"gitdir:  x \r\n"), Some(OsStr::new(" x ")));
        // git refuses these files, and so does the reader.
        assert_eq!(gitfile_target(b"gitdir:x\n"), None);
        assert_eq!(gitfile_target(b"gitdir: \n"), None);
        assert_eq!(gitfile_target(b" gitdir: x\n"), None);
        assert_eq!(gitfile_target(b""), None);
    }

    #[test]
    fn the_common_dir_is_read_as_git_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path();
        assert_eq!(common_dir(git_dir), None);
        // Only trailing newlines and carriage returns go; spaces are part of the name.
        std::fs::write(git_dir.join("commondir"), " ../main .git\r\n\n").unwrap();
        assert_eq!(common_dir(git_dir), Some(git_dir.join(" ../main .git")));
        std::fs::write(git_dir.join("commondir"), "/srv/repo.git\n").unwrap();
        assert_eq!(common_dir(git_dir), Some(PathBuf::from("/srv/repo.git")));
        // A name need not be UTF-8.
        std::fs::write(git_dir.join("commondir"), b"../m\xffin\n").unwrap();
        let named: &std::ffi::OsStr = std::os::unix::ffi::OsStrExt::from_bytes(b"../m\xffin");
        assert_eq!(common_dir(git_dir), Some(git_dir.join(named)));
    }

    #[test]
    fn absent_files_read_as_none_and_unreadable_ones_as_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_if_present(&dir.path().join("nothing"))
            .unwrap()
            .is_none());
        assert!(read_if_present(&dir.path().join("no/dir/below"))
            .unwrap()
            .is_none());
        std::fs::write(dir.path().join("f"), "x").unwrap();
        assert_eq!(
            read_if_present(&dir.path().join("f")).unwrap().unwrap(),
            b"x"
        );
        // A dangling link is absent, as git's open finds it.
        std::os::unix::fs::symlink("gone", dir.path().join("link")).unwrap();
        assert!(read_if_present(&dir.path().join("link")).unwrap().is_none());
        // A directory where a config file is expected is an error, not an absent file.
        std::fs::create_dir(dir.path().join("d")).unwrap();
        assert!(read_if_present(&dir.path().join("d")).is_err());
    }
}
