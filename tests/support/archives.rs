//! Tar archives built byte for byte in tests: plain members, symlinks, hard links and device
//! nodes, pax headers (local and global), zero blocks, gzip-compressed or not; and zip archives
//! with any host type, mode and extra fields — so the policy's member checks meet the archives
//! GNU tar and unzip really read.

use std::io::Write;
use std::path::Path;

pub enum Member<'a> {
    File(&'a str, &'a str),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
    CharDevice(&'a str),
    /// A pax global header: its keywords apply to every later member (GNU tar).
    PaxGlobal(&'a [(&'a str, &'a str)]),
    /// A pax extended header for the next member.
    PaxLocal(&'a [(&'a str, &'a str)]),
    /// One block of zeros: the end of the archive, unless tar reads on with -i.
    ZeroBlock,
    /// A symbolic link whose size field claims the next 1024 bytes as its data: GNU tar gives a
    /// link no data and reads the next header there.
    LinkClaimingData(&'a str, &'a str),
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
            Member::PaxGlobal(records) | Member::PaxLocal(records) => {
                let data = pax_records(records);
                let mut pax = tar::Header::new_ustar();
                pax.set_path("pax").unwrap();
                pax.set_mode(0o644);
                pax.set_entry_type(if matches!(member, Member::PaxGlobal(_)) {
                    tar::EntryType::XGlobalHeader
                } else {
                    tar::EntryType::XHeader
                });
                pax.set_size(data.len() as u64);
                pax.set_cksum();
                builder.append(&pax, &data[..]).unwrap();
            }
            Member::ZeroBlock => builder.get_mut().extend_from_slice(&[0u8; 512]),
            Member::LinkClaimingData(name, target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_path(name).unwrap();
                header.set_link_name(target).unwrap();
                header.set_size(1024);
                header.set_cksum();
                builder.get_mut().extend_from_slice(header.as_bytes());
            }
        }
    }
    builder.into_inner().unwrap()
}

/// pax records: `LEN KEY=VALUE\n`, LEN counting the whole record.
fn pax_records(records: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (key, value) in records {
        let body = format!(" {key}={value}\n");
        let mut len = body.len() + 1;
        while len.to_string().len() + body.len() != len {
            len += 1;
        }
        out.extend_from_slice(format!("{len}{body}").as_bytes());
    }
    out
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

/// A stored (uncompressed) zip archive with these members: (name, unix mode, contents), made
/// on Unix.
pub fn zip(members: &[(&str, u32, &str)]) -> Vec<u8> {
    let entries: Vec<ZipEntry> = members
        .iter()
        .map(|(name, mode, text)| ZipEntry::unix(name, *mode, text))
        .collect();
    zip_entries(&entries)
}

/// One zip entry, with the fields unzip reads to name and type it.
pub struct ZipEntry<'a> {
    pub name: &'a str,
    /// The upper 16 bits of the external attributes.
    pub mode: u32,
    pub text: &'a str,
    /// The "made by" host (3 Unix, 0 FAT, 5 Atari, 16 BeOS…).
    pub host: u8,
    /// Extra fields of the central directory and of the local header.
    pub central_extra: Vec<u8>,
    pub local_extra: Vec<u8>,
}

impl<'a> ZipEntry<'a> {
    pub fn unix(name: &'a str, mode: u32, text: &'a str) -> ZipEntry<'a> {
        ZipEntry {
            name,
            mode,
            text,
            host: 3,
            central_extra: Vec::new(),
            local_extra: Vec::new(),
        }
    }
}

/// An extra field block: id, size, data.
pub fn extra_block(id: u16, data: &[u8]) -> Vec<u8> {
    let mut out = id.to_le_bytes().to_vec();
    out.extend_from_slice(&(data.len() as u16).to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// Info-ZIP's Unicode Path extra field (0x7075) naming `name`'s entry `unicode`.
pub fn unicode_path(name: &str, unicode: &str) -> Vec<u8> {
    let mut data = vec![1];
    data.extend_from_slice(&crc32(name.as_bytes()).to_le_bytes());
    data.extend_from_slice(unicode.as_bytes());
    extra_block(0x7075, &data)
}

/// An ASi Unix extra field (0x756e) carrying `mode` (and, for a link, its target).
pub fn asi_unix(mode: u16, link: &str) -> Vec<u8> {
    let mut data = vec![0, 0, 0, 0]; // CRC of the rest, which unzip does not check here
    data.extend_from_slice(&mode.to_le_bytes());
    data.extend_from_slice(&(link.len() as u32).to_le_bytes());
    data.extend_from_slice(&[0, 0, 0, 0]); // uid, gid
    data.extend_from_slice(link.as_bytes());
    extra_block(0x756e, &data)
}

/// A stored zip archive of `entries`.
pub fn zip_entries(entries: &[ZipEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for entry in entries {
        let (name, text) = (entry.name, entry.text);
        let offset = out.len() as u32;
        let crc = crc32(text.as_bytes());
        let size = (text.len() as u32).to_le_bytes();
        let mut common = vec![20, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        common.extend_from_slice(&crc.to_le_bytes());
        common.extend_from_slice(&size);
        common.extend_from_slice(&size);
        common.extend_from_slice(&(name.len() as u16).to_le_bytes());
        let mut local = common.clone();
        local.extend_from_slice(&(entry.local_extra.len() as u16).to_le_bytes());
        common.extend_from_slice(&(entry.central_extra.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0x50, 0x4b, 0x03, 0x04]);
        out.extend_from_slice(&local);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&entry.local_extra);
        out.extend_from_slice(text.as_bytes());
        // Made by version 3.0 on the entry's host; the external attributes carry the mode.
        central.extend_from_slice(&[0x50, 0x4b, 0x01, 0x02, 30, entry.host]);
        central.extend_from_slice(&common);
        central.extend_from_slice(&[0; 6]); // comment length, disk, internal attributes
        central.extend_from_slice(&(entry.mode << 16).to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
        central.extend_from_slice(&entry.central_extra);
    }
    let start = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&[0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0]);
    let count = (entries.len() as u16).to_le_bytes();
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
