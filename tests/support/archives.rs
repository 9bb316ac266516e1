//! Tar archives built byte for byte in tests: plain members, symlinks, hard links and device
//! nodes, gzip-compressed or not, so the policy's member checks meet real archives.

use std::io::Write;
use std::path::Path;

pub enum Member<'a> {
    File(&'a str, &'a str),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
    CharDevice(&'a str),
}

/// The tar bytes of `members`, in order.
pub fn tar(members: &[Member]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for member in members {
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o644);
        header.set_mtime(0);
        match member {
            Member::File(name, text) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(text.len() as u64);
                builder
                    .append_data(&mut header, name, text.as_bytes())
                    .unwrap();
            }
            Member::Dir(name) => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                builder.append_data(&mut header, name, &[][..]).unwrap();
            }
            Member::Symlink(name, target) | Member::HardLink(name, target) => {
                let kind = if matches!(member, Member::Symlink(..)) {
                    tar::EntryType::Symlink
                } else {
                    tar::EntryType::Link
                };
                header.set_entry_type(kind);
                header.set_size(0);
                builder.append_link(&mut header, name, target).unwrap();
            }
            Member::CharDevice(name) => {
                header.set_entry_type(tar::EntryType::Char);
                header.set_size(0);
                header.set_device_major(1).unwrap();
                header.set_device_minor(3).unwrap();
                builder.append_data(&mut header, name, &[][..]).unwrap();
            }
        }
    }
    builder.into_inner().unwrap()
}

/// Write `members` as a tar archive at `path`, gzip-compressed when the name ends in `gz`.
pub fn write(path: &Path, members: &[Member]) {
    let bytes = tar(members);
    let name = path.to_string_lossy();
    if name.ends_with("gz") {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        std::fs::write(path, gz.finish().unwrap()).unwrap();
    } else {
        std::fs::write(path, bytes).unwrap();
    }
}

/// A stored (uncompressed) zip archive with these members: (name, unix mode, contents).
pub fn zip(members: &[(&str, u32, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, mode, text) in members {
        let offset = out.len() as u32;
        let crc = crc32(text.as_bytes());
        let size = (text.len() as u32).to_le_bytes();
        let mut common = vec![20, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        common.extend_from_slice(&crc.to_le_bytes());
        common.extend_from_slice(&size);
        common.extend_from_slice(&size);
        common.extend_from_slice(&(name.len() as u16).to_le_bytes());
        common.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&[0x50, 0x4b, 0x03, 0x04]);
        out.extend_from_slice(&common);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(text.as_bytes());
        // Made by 3.0 on Unix, so the external attributes carry the mode.
        central.extend_from_slice(&[0x50, 0x4b, 0x01, 0x02, 30, 3]);
        central.extend_from_slice(&common);
        central.extend_from_slice(&[0; 6]); // comment length, disk, internal attributes
        central.extend_from_slice(&(mode << 16).to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let start = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&[0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0]);
    let count = (members.len() as u16).to_le_bytes();
    out.extend_from_slice(&count);
    out.extend_from_slice(&count);
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
