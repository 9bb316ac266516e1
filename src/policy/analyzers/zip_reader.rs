//! A zip archive's members as Info-ZIP unzip 6.0 (Debian's build) extracts them: the central
//! directory's entries, each named as unzip's `mapname` names it and typed as its `mapattr`
//! types it.
//!
//! unzip makes symbolic links from entries "made by" Unix, VMS, Atari, BeOS and AtheOS, from
//! FAT entries whose mode is consistent with their DOS bits, and from a mode carried in an ASi
//! Unix extra field when the attributes are empty: every entry whose mode says link or special
//! file is refused, whatever host made it. Names: a Unicode Path extra field replaces the
//! stored name (unzip is built with UNICODE_SUPPORT); control characters are dropped (`.gi\x01t`
//! is `.git`), a VMS version (`;1`) is cut, `.` and `..` as a last component become `_` and
//! `__`, and `-j` keeps only the last component. Names with `..` or a backslash, encrypted
//! central directories and zip64 archives are refused.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// More members than this are not checked one by one.
const MAX_MEMBERS: usize = 100_000;

const EF_UNICODE_PATH: u16 = 0x7075;
const EF_ASI_UNIX: u16 = 0x756e;

/// How unzip is told to name what it extracts.
#[derive(Clone, Copy, Debug, Default)]
pub struct Naming {
    /// `-j`: junk the folders, keep the last component.
    pub junk_paths: bool,
    /// `-V`: keep VMS version numbers (`name;1`).
    pub keep_versions: bool,
}

/// One entry: the names unzip may give it (relative to the extraction folder), and whether it
/// is a folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub names: Vec<PathBuf>,
    pub dir: bool,
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// The members of the zip archive at `archive`. `Err` says why it cannot be checked.
pub fn members(archive: &Path, naming: Naming) -> Result<Vec<Member>, String> {
    let cannot = |e: std::io::Error| format!("cannot be read: {e}");
    let mut file = std::fs::File::open(archive).map_err(cannot)?;
    let len = file.metadata().map_err(cannot)?.len();
    // The end record is in the last 22 bytes plus a comment of up to 65535 bytes.
    let tail_len = len.min(22 + 65_535);
    let mut tail = vec![0u8; tail_len as usize];
    file.seek(SeekFrom::Start(len - tail_len))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(cannot)?;
    let not_zip = || "is not a zip archive warden can read".to_string();
    let end = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .ok_or_else(not_zip)?;
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
        .map_err(cannot)?;
    let mut members = Vec::with_capacity(usize::from(count));
    let mut at = 0;
    for _ in 0..count {
        let header = directory.get(at..at + 46).ok_or_else(not_zip)?;
        if header[..4] != [0x50, 0x4b, 0x01, 0x02] {
            return Err(not_zip());
        }
        let mode = u32_at(header, 38) >> 16;
        let local_offset = u32_at(header, 42);
        let (name_len, extra_len, comment_len) = (
            usize::from(u16_at(header, 28)),
            usize::from(u16_at(header, 30)),
            usize::from(u16_at(header, 32)),
        );
        let raw = directory
            .get(at + 46..at + 46 + name_len)
            .ok_or_else(not_zip)?;
        let extra = directory
            .get(at + 46 + name_len..at + 46 + name_len + extra_len)
            .ok_or_else(not_zip)?;
        at += 46 + name_len + extra_len + comment_len;
        let name = std::str::from_utf8(raw)
            .map_err(|_| "has a member name that is not UTF-8, which the policy cannot check")?;
        let local_extra = local_extra(&mut file, local_offset, len)?;
        let mut written = vec![name.to_string()];
        for (id, data) in blocks(extra) {
            if id == EF_UNICODE_PATH && data.len() > 5 && data[0] == 1 {
                let unicode = std::str::from_utf8(&data[5..])
                    .map_err(|_| format!("has a Unicode path for {name:?} that is not UTF-8"))?;
                written.push(unicode.to_string());
            }
        }
        for (id, data) in blocks(extra).chain(blocks(&local_extra)) {
            if id == EF_ASI_UNIX && data.len() >= 6 && !plain(u32::from(u16_at(data, 4))) {
                return Err(special(name));
            }
        }
        if !plain(mode) {
            return Err(special(name));
        }
        let mut names = Vec::new();
        for text in &written {
            names.extend(mapped(text, naming)?);
        }
        if names.is_empty() {
            continue;
        }
        names.dedup();
        members.push(Member {
            names,
            dir: name.ends_with('/'),
        });
    }
    Ok(members)
}

/// A file type of a regular file or folder (or none, as DOS hosts leave it).
fn plain(mode: u32) -> bool {
    matches!(mode & 0o170_000, 0 | 0o100_000 | 0o040_000)
}

fn special(name: &str) -> String {
    format!(
        "has the member {name:?}, a symbolic link or special file, which extraction would \
         create and later members could write through"
    )
}

/// The extra field of the local header at `offset`.
fn local_extra(file: &mut std::fs::File, offset: u32, len: u64) -> Result<Vec<u8>, String> {
    let not_zip = || "is not a zip archive warden can read".to_string();
    let mut header = [0u8; 30];
    if u64::from(offset) + 30 > len {
        return Err(not_zip());
    }
    file.seek(SeekFrom::Start(u64::from(offset)))
        .and_then(|_| file.read_exact(&mut header))
        .map_err(|e| format!("cannot be read: {e}"))?;
    if header[..4] != [0x50, 0x4b, 0x03, 0x04] {
        return Err(not_zip());
    }
    let name_len = u64::from(u16_at(&header, 26));
    let extra_len = usize::from(u16_at(&header, 28));
    let start = u64::from(offset) + 30 + name_len;
    if start + extra_len as u64 > len {
        return Err(not_zip());
    }
    let mut extra = vec![0u8; extra_len];
    file.seek(SeekFrom::Start(start))
        .and_then(|_| file.read_exact(&mut extra))
        .map_err(|e| format!("cannot be read: {e}"))?;
    Ok(extra)
}

/// The `(id, data)` blocks of an extra field, up to the first one that does not fit.
fn blocks(extra: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at + 4 > extra.len() {
            return None;
        }
        let id = u16_at(extra, at);
        let size = usize::from(u16_at(extra, at + 2));
        let data = extra.get(at + 4..at + 4 + size)?;
        at += 4 + size;
        Some((id, data))
    })
}

/// The path unzip's `mapname` makes of a stored name (none for a name it makes nothing of).
fn mapped(name: &str, naming: Naming) -> Result<Vec<PathBuf>, String> {
    if name.contains('\\') {
        return Err(format!(
            "has the member {name:?}, whose backslash unzip may read as a folder separator"
        ));
    }
    // Control characters are left out of the name (without -^, which is refused).
    let visible: String = name
        .chars()
        .filter(|c| !(c.is_ascii_control() || *c == '\u{7f}'))
        .collect();
    let dir = visible.ends_with('/');
    let mut segments: Vec<&str> = visible.split('/').collect();
    // The last component of a file is named apart (`.` and `..` there become `_` and `__`).
    let last = if dir { None } else { segments.pop() };
    let mut parts: Vec<String> = Vec::new();
    for part in segments {
        match part {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "has the member {name:?}, which climbs out with `..`"
                ))
            }
            other => parts.push(other.to_string()),
        }
    }
    let last = match last {
        Some(last) => last.to_string(),
        None if naming.junk_paths => return Ok(Vec::new()),
        None => match parts.pop() {
            Some(folder) => folder,
            None => return Ok(Vec::new()),
        },
    };
    if naming.junk_paths {
        parts.clear();
    }
    let mut lasts = vec![last.clone()];
    if !dir {
        // `name;123` loses its VMS version unless -V; both are checked when it is given.
        if let Some((base, version)) = last.rsplit_once(';') {
            if !version.is_empty() && version.chars().all(|c| c.is_ascii_digit()) {
                if naming.keep_versions {
                    lasts.push(base.to_string());
                } else {
                    lasts = vec![base.to_string()];
                }
            }
        }
        for l in &mut lasts {
            if l == "." {
                *l = "_".into();
            } else if l == ".." {
                *l = "__".into();
            }
        }
    }
    Ok(lasts
        .into_iter()
        .filter(|l| !l.is_empty())
        .map(|l| parts.iter().chain(std::iter::once(&l)).collect())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(name: &str, naming: Naming) -> Vec<String> {
        mapped(name, naming)
            .unwrap()
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    #[test]
    fn names_are_mapped_as_unzip_maps_them() {
        let plain = Naming::default();
        assert_eq!(names(".gi\u{1}t/config", plain), [".git/config"]);
        assert_eq!(names("/a/./b", plain), ["a/b"]);
        assert_eq!(names(".gitconfig;1", plain), [".gitconfig"]);
        assert_eq!(names("notes;x", plain), ["notes;x"]);
        assert_eq!(
            names(
                ".gitconfig;1",
                Naming {
                    keep_versions: true,
                    ..plain
                }
            ),
            [".gitconfig;1", ".gitconfig"]
        );
        assert_eq!(names("a/.", plain), ["a/_"]);
        assert_eq!(names("a/..", plain), ["a/__"]);
        assert_eq!(names("dir/", plain), ["dir"]);
        let junk = Naming {
            junk_paths: true,
            ..plain
        };
        assert_eq!(names("deep/er/.gitattributes", junk), [".gitattributes"]);
        assert!(names("deep/", junk).is_empty());
        assert!(mapped("a/../b", plain).is_err());
        assert!(mapped("a\\b", plain).is_err());
    }

    #[test]
    fn modes_that_are_not_files_or_folders_are_refused() {
        assert!(plain(0) && plain(0o100_644) && plain(0o040_755));
        assert!(!plain(0o120_777) && !plain(0o020_644) && !plain(0o010_644));
    }
}
