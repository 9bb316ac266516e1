//! A skill folder read whole into memory, its content hash, and writing a copy of it.
//!
//! The hash covers every file and directory — names, contents and the executable bit — so any
//! change to a skill, its manifest included, changes it. Reading never follows a symlink
//! (every component is opened with `O_NOFOLLOW` relative to its parent's descriptor) and a
//! skill that contains one, or a device, socket or FIFO, is refused outright: a link could
//! point the jail at anything. A run executes a fresh copy written from the very bytes that
//! were hashed, so what was granted is exactly what runs.

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, Mode, SFlag};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// More entries than this, or more bytes, and the folder is not a skill.
pub const MAX_ENTRIES: usize = 1000;
pub const MAX_TOTAL_BYTES: u64 = 16 * 1024 * 1024;
const MAX_DEPTH: usize = 16;

/// One file or directory, by its `/`-separated path relative to the skill folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir(String),
    File {
        path: String,
        contents: Vec<u8>,
        executable: bool,
    },
}

impl Entry {
    pub fn path(&self) -> &str {
        match self {
            Entry::Dir(path) | Entry::File { path, .. } => path,
        }
    }
}

/// A skill folder's contents, sorted by path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillTree {
    entries: Vec<Entry>,
}

impl SkillTree {
    /// Build from entries (bundled skills embedded in the binary); sorted, checked for limits.
    pub fn from_entries(mut entries: Vec<Entry>) -> Result<SkillTree, String> {
        entries.sort_by(|a, b| a.path().cmp(b.path()));
        let total: u64 = entries
            .iter()
            .map(|e| match e {
                Entry::File { contents, .. } => contents.len() as u64,
                Entry::Dir(_) => 0,
            })
            .sum();
        if entries.len() > MAX_ENTRIES || total > MAX_TOTAL_BYTES {
            return Err(format!(
                "a skill may hold at most {MAX_ENTRIES} files and {} MiB",
                MAX_TOTAL_BYTES >> 20
            ));
        }
        for entry in &entries {
            check_relative_path(entry.path())?;
        }
        Ok(SkillTree { entries })
    }

    /// Read `dir` without following any symlink.
    pub fn read(dir: &Path) -> Result<SkillTree, String> {
        let root = nix::fcntl::open(
            dir,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => {
                format!(
                    "{} is not a directory (or is a symbolic link)",
                    dir.display()
                )
            }
            other => format!("{}: {}", dir.display(), other.desc()),
        })?;
        let mut reader = Reader {
            entries: Vec::new(),
            total: 0,
        };
        reader.walk(root, "", 0)?;
        SkillTree::from_entries(reader.entries)
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The contents of the file at `path`, if there is one.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.entries.iter().find_map(|e| match e {
            Entry::File {
                path: p, contents, ..
            } if p == path => Some(contents.as_slice()),
            _ => None,
        })
    }

    /// Number of files (directories not counted) and their total size.
    pub fn size(&self) -> (usize, u64) {
        self.entries.iter().fold((0, 0), |(n, bytes), e| match e {
            Entry::File { contents, .. } => (n + 1, bytes + contents.len() as u64),
            Entry::Dir(_) => (n, bytes),
        })
    }

    /// `sha256:` and the hex digest of every entry: kind, path, executable bit, contents.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"warden-skill-tree-v1\n");
        for entry in &self.entries {
            match entry {
                Entry::Dir(path) => {
                    h.update(format!("d {} {path}\n", path.len()).as_bytes());
                }
                Entry::File {
                    path,
                    contents,
                    executable,
                } => {
                    let kind = if *executable { 'x' } else { 'f' };
                    h.update(
                        format!("{kind} {} {path} {}\n", path.len(), contents.len()).as_bytes(),
                    );
                    h.update(contents);
                    h.update(b"\n");
                }
            }
        }
        format!("sha256:{}", hex::encode(h.finalize()))
    }

    /// Write the tree into `dest`, which must not exist yet. Directories 0755 and files 0644
    /// (0755 when executable), so an unprivileged sandbox user can read them.
    pub fn write_to(&self, dest: &Path) -> std::io::Result<()> {
        std::fs::create_dir(dest)?;
        std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755))?;
        for entry in &self.entries {
            match entry {
                Entry::Dir(path) => {
                    let dir = dest.join(path);
                    std::fs::create_dir(&dir)?;
                    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
                }
                Entry::File {
                    path,
                    contents,
                    executable,
                } => {
                    let mode = if *executable { 0o755 } else { 0o644 };
                    let mut file = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(mode)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(dest.join(path))?;
                    // Exactly these bits, whatever the umask: a container's unprivileged user
                    // must be able to read the copy.
                    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
                    file.write_all(contents)?;
                }
            }
        }
        Ok(())
    }
}

/// A short form of a hash for tables: `sha256:0123456789ab`.
pub fn short_hash(hash: &str) -> &str {
    let end = "sha256:".len() + 12;
    hash.get(..end).unwrap_or(hash)
}

struct Reader {
    entries: Vec<Entry>,
    total: u64,
}

impl Reader {
    fn walk(&mut self, dir: OwnedFd, prefix: &str, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("{prefix}: folders nested deeper than {MAX_DEPTH}"));
        }
        let mut listing = nix::dir::Dir::from_fd(dir)
            .map_err(|e| format!("{prefix}: cannot list: {}", e.desc()))?;
        let mut names = Vec::new();
        for item in listing.iter() {
            let item = item.map_err(|e| format!("{prefix}: cannot list: {}", e.desc()))?;
            let name = item.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = std::str::from_utf8(name)
                .map_err(|_| format!("{prefix}: a file name is not valid UTF-8"))?
                .to_string();
            names.push(name);
        }
        names.sort();
        for name in names {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            check_relative_path(&path)?;
            if self.entries.len() >= MAX_ENTRIES {
                return Err(format!("more than {MAX_ENTRIES} files"));
            }
            let fd = openat(
                listing.as_fd(),
                name.as_str(),
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| match e {
                nix::errno::Errno::ELOOP => {
                    format!("{path} is a symbolic link; skills may not contain links")
                }
                other => format!("{path}: {}", other.desc()),
            })?;
            let stat = fstat(&fd).map_err(|e| format!("{path}: {}", e.desc()))?;
            let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
            if kind == SFlag::S_IFDIR {
                self.entries.push(Entry::Dir(path.clone()));
                self.walk(fd, &path, depth + 1)?;
            } else if kind == SFlag::S_IFREG {
                self.total += stat.st_size as u64;
                if self.total > MAX_TOTAL_BYTES {
                    return Err(format!("more than {} MiB of files", MAX_TOTAL_BYTES >> 20));
                }
                let mut contents = Vec::with_capacity(stat.st_size as usize);
                std::fs::File::from(fd)
                    .take(MAX_TOTAL_BYTES + 1)
                    .read_to_end(&mut contents)
                    .map_err(|e| format!("{path}: {e}"))?;
                self.entries.push(Entry::File {
                    path,
                    contents,
                    executable: stat.st_mode & 0o111 != 0,
                });
            } else {
                return Err(format!(
                    "{path} is not a regular file or folder (devices, sockets and FIFOs are not \
                     allowed in skills)"
                ));
            }
        }
        Ok(())
    }
}

/// Names that are safe to recreate anywhere: no control characters, no `..`.
fn check_relative_path(path: &str) -> Result<(), String> {
    let ok = !path.is_empty()
        && !path.starts_with('/')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
        && !path.chars().any(char::is_control);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{path:?} is not an acceptable file name in a skill"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(dir: &Path) {
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("SKILL.md"), "---\nname: s\n---\n").unwrap();
        std::fs::write(dir.join("scripts/run.py"), "print(1)\n").unwrap();
    }

    #[test]
    fn every_change_changes_the_hash() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("s");
        sample(&skill);
        let first = SkillTree::read(&skill).unwrap();
        assert_eq!(first.size(), (2, 25));
        let hash = first.hash();
        assert!(hash.starts_with("sha256:") && hash.len() == 71, "{hash}");
        assert_eq!(SkillTree::read(&skill).unwrap().hash(), hash);

        std::fs::write(skill.join("scripts/run.py"), "print(2)\n").unwrap();
        let edited = SkillTree::read(&skill).unwrap().hash();
        assert_ne!(edited, hash);
        std::fs::rename(skill.join("scripts/run.py"), skill.join("scripts/go.py")).unwrap();
        let renamed = SkillTree::read(&skill).unwrap().hash();
        assert_ne!(renamed, edited);
        std::fs::create_dir(skill.join("empty")).unwrap();
        let with_dir = SkillTree::read(&skill).unwrap().hash();
        assert_ne!(with_dir, renamed);
        std::fs::set_permissions(
            skill.join("scripts/go.py"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_ne!(SkillTree::read(&skill).unwrap().hash(), with_dir);
    }

    #[test]
    fn links_and_special_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("s");
        sample(&skill);
        std::os::unix::fs::symlink("/etc/passwd", skill.join("scripts/p")).unwrap();
        let err = SkillTree::read(&skill).unwrap_err();
        assert!(err.contains("scripts/p is a symbolic link"), "{err}");
        std::fs::remove_file(skill.join("scripts/p")).unwrap();
        nix::unistd::mkfifo(&skill.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        assert!(SkillTree::read(&skill).unwrap_err().contains("FIFO"));
        std::fs::remove_file(skill.join("fifo")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&skill, &link).unwrap();
        assert!(SkillTree::read(&link)
            .unwrap_err()
            .contains("symbolic link"));
    }

    #[test]
    fn a_written_copy_hashes_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("s");
        sample(&skill);
        let tree = SkillTree::read(&skill).unwrap();
        let copy = dir.path().join("copy");
        tree.write_to(&copy).unwrap();
        assert_eq!(SkillTree::read(&copy).unwrap().hash(), tree.hash());
        assert_eq!(tree.file("scripts/run.py"), Some(&b"print(1)\n"[..]));
        assert!(tree.write_to(&copy).is_err(), "the destination must be new");
        assert_eq!(short_hash(&tree.hash()).len(), 19);
    }
}
