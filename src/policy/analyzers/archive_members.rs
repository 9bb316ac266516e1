//! What extracting an archive would write: its members, read at check time.
//!
//! `tar -x` writes whatever names the archive holds, through whatever symlinks already exist
//! under the target directory (GNU tar follows them), and creates hard links to files that are
//! already there. None of that is on the command line, so the policy reads the member list
//! itself and checks every name that will be written, every hard link's target, and refuses
//! device nodes and FIFOs. Compressions it cannot read are refused, not guessed.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// More bytes than this (after decompression) are not read at check time.
const MAX_SCANNED_BYTES: u64 = 1024 * 1024 * 1024;
/// More members than this are not checked one by one.
const MAX_MEMBERS: usize = 100_000;

/// One thing extraction creates, relative to the extraction directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Member {
    /// A file, directory or symlink created at this path.
    Entry(PathBuf),
    /// A hard link at `path` to the existing file `target` (both relative).
    HardLink { path: PathBuf, target: PathBuf },
}

/// The members of the tar archive at `archive` (plain or gzip), with `strip` leading
/// components removed as `--strip-components` does. `Err` says why it cannot be checked.
pub fn tar_members(archive: &Path, strip: usize) -> Result<Vec<Member>, String> {
    let mut file = std::fs::File::open(archive).map_err(|e| format!("cannot be read: {e}"))?;
    let mut magic = [0u8; 6];
    let n = read_prefix(&mut file, &mut magic).map_err(|e| format!("cannot be read: {e}"))?;
    let file = std::fs::File::open(archive).map_err(|e| format!("cannot be read: {e}"))?;
    let reader: Box<dyn Read> = match &magic[..n] {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::MultiGzDecoder::new(file)),
        [b'B', b'Z', b'h', ..] => return Err(unreadable("bzip2", "bzip2 -dk")),
        [0xfd, b'7', b'z', b'X', b'Z', 0] => return Err(unreadable("xz", "xz -dk")),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => return Err(unreadable("zstd", "zstd -d")),
        [0x5d, 0, 0, ..] => return Err(unreadable("lzma", "xz -dk --format=lzma")),
        [0x1f, 0x9d, ..] => return Err(unreadable("compress (.Z)", "gzip -dk")),
        _ => Box::new(file),
    };
    let mut tar = tar::Archive::new(Capped {
        inner: reader,
        left: MAX_SCANNED_BYTES,
    });
    let entries = tar
        .entries()
        .map_err(|e| format!("is not a tar archive warden can read: {e}"))?;
    let mut members = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("is not a tar archive warden can read: {e}"))?;
        if members.len() >= MAX_MEMBERS {
            return Err(format!(
                "has more than {MAX_MEMBERS} members, too many to check"
            ));
        }
        let header = entry.header();
        let kind = header.entry_type();
        let raw = entry
            .path()
            .map_err(|e| format!("has a member name warden cannot read: {e}"))?;
        let Some(path) = stripped(&raw, strip) else {
            continue;
        };
        use tar::EntryType::*;
        match kind {
            Regular | Continuous | GNUSparse | Directory | Symlink => {
                members.push(Member::Entry(path))
            }
            Link => {
                let target = entry
                    .link_name()
                    .map_err(|e| format!("has a link warden cannot read: {e}"))?
                    .ok_or_else(|| {
                        format!("has a hard link {} without a target", path.display())
                    })?;
                // GNU tar strips the link target's leading components as the name's.
                let Some(target) = stripped(&target, strip) else {
                    return Err(format!(
                        "has a hard link {} whose target is stripped away",
                        path.display()
                    ));
                };
                members.push(Member::HardLink { path, target });
            }
            XGlobalHeader | XHeader | GNULongName | GNULongLink => {}
            Char | Block | Fifo => {
                return Err(format!(
                    "has a device node or FIFO ({}), which extraction must not create",
                    path.display()
                ))
            }
            other => {
                return Err(format!(
                    "has a member of a kind warden does not check ({other:?}: {})",
                    path.display()
                ))
            }
        }
    }
    Ok(members)
}

fn unreadable(format: &str, hint: &str) -> String {
    format!(
        "is {format}-compressed, and warden cannot read its members to check them; decompress \
         it first ({hint}) and extract the .tar"
    )
}

fn read_prefix(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// A reader that fails past [`MAX_SCANNED_BYTES`]: an archive that long is refused rather than
/// half-checked (a plain `take` would end it cleanly and hide the members after the cut).
struct Capped {
    inner: Box<dyn Read>,
    left: u64,
}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            // Only an error if there is more to read.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::Error::other(format!(
                    "larger than the {} MiB warden reads at check time",
                    MAX_SCANNED_BYTES >> 20
                ))),
            };
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// A member name with `strip` leading components removed, as GNU tar does; `None` when
/// nothing is left (tar skips such members). `.` components are dropped.
fn stripped(name: &Path, strip: usize) -> Option<PathBuf> {
    let parts: Vec<Component> = name
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    if parts.len() <= strip {
        return None;
    }
    Some(parts[strip..].iter().collect())
}

/// The members of the zip archive at `archive`, read from its central directory as unzip
/// does. Symlinks, device nodes and FIFOs, names with `..` or a backslash, encrypted central
/// directories and zip64 archives are refused (`Err` says why): extraction would write through
/// or outside what the policy checks, or the policy cannot read what unzip will.
pub fn zip_members(archive: &Path) -> Result<Vec<PathBuf>, String> {
    use std::io::{Seek, SeekFrom};
    let mut file = std::fs::File::open(archive).map_err(|e| format!("cannot be read: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("cannot be read: {e}"))?
        .len();
    // The end record is in the last 22 bytes plus a comment of up to 65535 bytes.
    let tail_len = len.min(22 + 65_535);
    let mut tail = vec![0u8; tail_len as usize];
    file.seek(SeekFrom::Start(len - tail_len))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(|e| format!("cannot be read: {e}"))?;
    let not_zip = || "is not a zip archive warden can read".to_string();
    let end = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .ok_or_else(not_zip)?;
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let record = &tail[end..];
    let (count, size, offset) = (u16_at(record, 10), u32_at(record, 12), u32_at(record, 16));
    if count == 0xffff || size == 0xffff_ffff || offset == 0xffff_ffff {
        return Err("is a zip64 archive, whose members warden does not read".into());
    }
    if usize::from(count) > MAX_MEMBERS || u64::from(offset) + u64::from(size) > len {
        return Err(not_zip());
    }
    let mut directory = vec![0u8; size as usize];
    file.seek(SeekFrom::Start(u64::from(offset)))
        .and_then(|_| file.read_exact(&mut directory))
        .map_err(|e| format!("cannot be read: {e}"))?;
    let mut members = Vec::with_capacity(usize::from(count));
    let mut at = 0;
    for _ in 0..count {
        let header = directory.get(at..at + 46).ok_or_else(not_zip)?;
        if header[..4] != [0x50, 0x4b, 0x01, 0x02] {
            return Err(not_zip());
        }
        let made_on_unix = header[5] == 3;
        let mode = u32_at(header, 38) >> 16;
        let (name_len, extra_len, comment_len) = (
            usize::from(u16_at(header, 28)),
            usize::from(u16_at(header, 30)),
            usize::from(u16_at(header, 32)),
        );
        let raw = directory
            .get(at + 46..at + 46 + name_len)
            .ok_or_else(not_zip)?;
        at += 46 + name_len + extra_len + comment_len;
        let name = std::str::from_utf8(raw)
            .map_err(|_| "has a member name that is not UTF-8, which the policy cannot check")?;
        if name.contains('\\') {
            return Err(format!(
                "has the member {name:?}, whose backslash unzip may read as a folder separator"
            ));
        }
        let file_type = mode & 0o170_000;
        if made_on_unix && file_type != 0 && file_type != 0o100_000 && file_type != 0o040_000 {
            return Err(format!(
                "has the member {name:?}, a symbolic link or special file, which extraction \
                 would create and later members could write through"
            ));
        }
        // unzip drops leading slashes; it skips `..` members, which are refused here.
        let path = Path::new(name.trim_start_matches('/'));
        if path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(format!(
                "has the member {name:?}, which climbs out with `..`"
            ));
        }
        if path.as_os_str().is_empty() {
            continue;
        }
        members.push(path.to_path_buf());
    }
    Ok(members)
}
