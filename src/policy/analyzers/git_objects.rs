//! git's object database, read at check time the way git reads it: loose objects
//! (`objects/xx/…`, zlib) and packs (`objects/pack/*.idx` version 2 and their `.pack`, with
//! offset and reference deltas), SHA-1 names. The policy uses it to see which trees a command
//! would check out; it never writes and never runs git. Anything it cannot read is an error the
//! caller turns into a refusal (alternates, a version-1 index, an oversized object).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

pub type Oid = [u8; 20];

/// More than this (inflated) is not read for one object, nor for all pack indexes together.
const MAX_OBJECT: usize = 256 << 20;
/// Longer delta chains are refused (git writes at most 4095 by configuration).
const MAX_DELTA_DEPTH: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Commit,
    Tree,
    Blob,
    Tag,
}

pub struct Objects {
    dir: PathBuf,
    packs: Vec<Pack>,
}

struct Pack {
    index: Vec<u8>,
    pack: PathBuf,
    count: usize,
}

pub fn hex(oid: &Oid) -> String {
    oid.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn parse_hex(text: &str) -> Option<Oid> {
    if text.len() != 40 {
        return None;
    }
    let mut oid = [0u8; 20];
    for (i, byte) in oid.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(oid)
}

fn be32(b: &[u8], at: usize) -> Option<usize> {
    let bytes = b.get(at..at + 4)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize)
}

impl Objects {
    pub fn open(dir: &Path) -> Result<Objects, String> {
        if dir.join("info/alternates").exists() {
            return Err(
                "the repository borrows objects from another (objects/info/alternates)".into(),
            );
        }
        let mut packs = Vec::new();
        let mut total = 0usize;
        let pack_dir = dir.join("pack");
        if let Ok(entries) = std::fs::read_dir(&pack_dir) {
            let mut names: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "idx"))
                .collect();
            names.sort();
            for idx in names {
                let index = std::fs::read(&idx)
                    .map_err(|e| format!("cannot read {}: {e}", idx.display()))?;
                total += index.len();
                if total > MAX_OBJECT {
                    return Err("its pack indexes are larger than warden reads".into());
                }
                if index.get(..8) != Some(&[0xff, b't', b'O', b'c', 0, 0, 0, 2]) {
                    return Err(format!(
                        "{} is not a version-2 pack index, which warden does not read",
                        idx.display()
                    ));
                }
                let count = be32(&index, 8 + 255 * 4).ok_or("a truncated pack index")?;
                if index.len() < 8 + 1024 + count * 28 {
                    return Err(format!("{} is truncated", idx.display()));
                }
                packs.push(Pack {
                    pack: idx.with_extension("pack"),
                    index,
                    count,
                });
            }
        }
        Ok(Objects {
            dir: dir.to_path_buf(),
            packs,
        })
    }

    /// Every object whose name starts with `prefix` (lowercase hex, at least 4 digits).
    pub fn find_prefix(&self, prefix: &str) -> Result<Vec<Oid>, String> {
        let mut out = Vec::new();
        let (fan, rest) = prefix.split_at(2);
        if let Ok(entries) = std::fs::read_dir(self.dir.join(fan)) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(rest) {
                    if let Some(oid) = parse_hex(&format!("{fan}{name}")) {
                        out.push(oid);
                    }
                }
            }
        }
        let first = u8::from_str_radix(fan, 16).map_err(|e| e.to_string())?;
        for pack in &self.packs {
            let (lo, hi) = pack.fan_range(first);
            for i in lo..hi {
                let oid = pack.oid(i);
                if hex(&oid).starts_with(prefix) && !out.contains(&oid) {
                    out.push(oid);
                }
            }
        }
        Ok(out)
    }

    pub fn exists(&self, oid: &Oid) -> bool {
        let name = hex(oid);
        self.dir.join(&name[..2]).join(&name[2..]).exists()
            || self.packs.iter().any(|p| p.find(oid).is_some())
    }

    /// The object's kind and contents.
    pub fn read(&self, oid: &Oid) -> Result<(Kind, Vec<u8>), String> {
        let name = hex(oid);
        let loose = self.dir.join(&name[..2]).join(&name[2..]);
        if loose.exists() {
            return read_loose(&loose);
        }
        for pack in &self.packs {
            if let Some(offset) = pack.find(oid) {
                return self.read_packed(pack, offset);
            }
        }
        Err(format!("the object {name} is not in the repository"))
    }

    fn read_packed(&self, pack: &Pack, offset: u64) -> Result<(Kind, Vec<u8>), String> {
        let mut file = std::fs::File::open(&pack.pack)
            .map_err(|e| format!("cannot read {}: {e}", pack.pack.display()))?;
        // Follow the delta chain down to its base, then apply the deltas back up.
        let mut deltas: Vec<Vec<u8>> = Vec::new();
        let mut at = offset;
        let (kind, mut data) = loop {
            if deltas.len() > MAX_DELTA_DEPTH {
                return Err("a delta chain is longer than warden follows".into());
            }
            let entry = PackEntry::read(&mut file, at)?;
            match entry.kind {
                6 => {
                    deltas.push(entry.inflate(&mut file)?);
                    at = entry.base_offset.ok_or("a delta without a base")?;
                }
                7 => {
                    let base = entry.base_oid.ok_or("a delta without a base")?;
                    let delta = entry.inflate(&mut file)?;
                    let (kind, data) = self.read(&base)?;
                    deltas.push(delta);
                    break (kind, data);
                }
                1..=4 => {
                    let kind = [Kind::Commit, Kind::Tree, Kind::Blob, Kind::Tag]
                        [usize::from(entry.kind) - 1];
                    break (kind, entry.inflate(&mut file)?);
                }
                other => return Err(format!("a pack entry of unknown type {other}")),
            }
        };
        while let Some(delta) = deltas.pop() {
            data = apply_delta(&data, &delta)?;
        }
        Ok((kind, data))
    }
}

impl Pack {
    fn fan_range(&self, first: u8) -> (usize, usize) {
        let at = |i: usize| be32(&self.index, 8 + i * 4).unwrap_or(0);
        let lo = if first == 0 {
            0
        } else {
            at(usize::from(first) - 1)
        };
        (lo.min(self.count), at(usize::from(first)).min(self.count))
    }

    fn oid(&self, i: usize) -> Oid {
        let start = 8 + 1024 + i * 20;
        let mut oid = [0u8; 20];
        oid.copy_from_slice(&self.index[start..start + 20]);
        oid
    }

    /// The object's offset in the pack.
    fn find(&self, oid: &Oid) -> Option<u64> {
        let (mut lo, mut hi) = self.fan_range(oid[0]);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.oid(mid).cmp(oid) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let offsets = 8 + 1024 + self.count * 24;
                    let small = be32(&self.index, offsets + mid * 4)?;
                    if small & 0x8000_0000 == 0 {
                        return Some(small as u64);
                    }
                    let large = offsets + self.count * 4 + (small & 0x7fff_ffff) * 8;
                    let bytes = self.index.get(large..large + 8)?;
                    return Some(u64::from_be_bytes(bytes.try_into().ok()?));
                }
            }
        }
        None
    }
}

struct PackEntry {
    kind: u8,
    size: usize,
    base_offset: Option<u64>,
    base_oid: Option<Oid>,
    /// Where the zlib stream starts.
    data_at: u64,
}

impl PackEntry {
    fn read(file: &mut std::fs::File, at: u64) -> Result<PackEntry, String> {
        let bad = || "a damaged pack".to_string();
        file.seek(SeekFrom::Start(at)).map_err(|e| e.to_string())?;
        let mut head = [0u8; 32];
        let n = file.read(&mut head).map_err(|e| e.to_string())?;
        let head = &head[..n];
        let mut i = 0;
        let mut byte = *head.get(i).ok_or_else(bad)?;
        let kind = (byte >> 4) & 7;
        let mut size = usize::from(byte & 0x0f);
        let mut shift = 4;
        while byte & 0x80 != 0 {
            i += 1;
            byte = *head.get(i).ok_or_else(bad)?;
            if shift > 56 {
                return Err(bad());
            }
            size |= usize::from(byte & 0x7f) << shift;
            shift += 7;
        }
        i += 1;
        let mut entry = PackEntry {
            kind,
            size,
            base_offset: None,
            base_oid: None,
            data_at: 0,
        };
        match kind {
            6 => {
                let mut c = *head.get(i).ok_or_else(bad)?;
                i += 1;
                let mut back = u64::from(c & 0x7f);
                while c & 0x80 != 0 {
                    c = *head.get(i).ok_or_else(bad)?;
                    i += 1;
                    if back >= u64::MAX >> 8 {
                        return Err(bad());
                    }
                    back = ((back + 1) << 7) | u64::from(c & 0x7f);
                }
                entry.base_offset = Some(at.checked_sub(back).filter(|b| *b < at).ok_or_else(bad)?);
            }
            7 => {
                let oid = head.get(i..i + 20).ok_or_else(bad)?;
                entry.base_oid = Some(oid.try_into().map_err(|_| bad())?);
                i += 20;
            }
            _ => {}
        }
        entry.data_at = at + i as u64;
        Ok(entry)
    }

    fn inflate(&self, file: &mut std::fs::File) -> Result<Vec<u8>, String> {
        if self.size > MAX_OBJECT {
            return Err("an object larger than warden reads".into());
        }
        file.seek(SeekFrom::Start(self.data_at))
            .map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(self.size);
        flate2::read::ZlibDecoder::new(std::io::BufReader::new(&*file))
            .take(self.size as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("a damaged pack entry: {e}"))?;
        if out.len() != self.size {
            return Err("a pack entry of the wrong size".into());
        }
        Ok(out)
    }
}

fn read_loose(path: &Path) -> Result<(Kind, Vec<u8>), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(file)
        .take(MAX_OBJECT as u64 + 64)
        .read_to_end(&mut raw)
        .map_err(|e| format!("a damaged object {}: {e}", path.display()))?;
    let nul = raw
        .iter()
        .position(|b| *b == 0)
        .ok_or("a damaged loose object")?;
    let header = std::str::from_utf8(&raw[..nul]).map_err(|_| "a damaged loose object")?;
    let (kind, size) = header.split_once(' ').ok_or("a damaged loose object")?;
    let kind = match kind {
        "commit" => Kind::Commit,
        "tree" => Kind::Tree,
        "blob" => Kind::Blob,
        "tag" => Kind::Tag,
        _ => return Err("a loose object of unknown type".into()),
    };
    let size: usize = size.parse().map_err(|_| "a damaged loose object")?;
    if raw.len() - nul - 1 != size {
        return Err("a loose object of the wrong size".into());
    }
    raw.drain(..=nul);
    Ok((kind, raw))
}

fn varint(delta: &[u8], at: &mut usize) -> Result<usize, String> {
    let mut value = 0usize;
    let mut shift = 0;
    loop {
        let byte = *delta.get(*at).ok_or("a damaged delta")?;
        *at += 1;
        if shift > 56 {
            return Err("a damaged delta".into());
        }
        value |= usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>, String> {
    let bad = || "a damaged delta".to_string();
    let mut at = 0;
    if varint(delta, &mut at)? != base.len() {
        return Err(bad());
    }
    let size = varint(delta, &mut at)?;
    if size > MAX_OBJECT {
        return Err("an object larger than warden reads".into());
    }
    let mut out = Vec::with_capacity(size);
    while at < delta.len() {
        let op = delta[at];
        at += 1;
        if op & 0x80 != 0 {
            let mut offset = 0usize;
            let mut len = 0usize;
            for bit in 0..4 {
                if op & (1 << bit) != 0 {
                    offset |= usize::from(*delta.get(at).ok_or_else(bad)?) << (8 * bit);
                    at += 1;
                }
            }
            for bit in 0..3 {
                if op & (0x10 << bit) != 0 {
                    len |= usize::from(*delta.get(at).ok_or_else(bad)?) << (8 * bit);
                    at += 1;
                }
            }
            if len == 0 {
                len = 0x10000;
            }
            out.extend_from_slice(base.get(offset..offset + len).ok_or_else(bad)?);
        } else if op != 0 {
            let len = usize::from(op);
            out.extend_from_slice(delta.get(at..at + len).ok_or_else(bad)?);
            at += len;
        } else {
            return Err(bad());
        }
        if out.len() > size {
            return Err(bad());
        }
    }
    if out.len() != size {
        return Err(bad());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_copy_and_insert() {
        let base = b"hello world";
        // size 11 -> 9: copy 6 bytes from 0 ("hello "), insert "git".
        let delta = [11, 9, 0x80 | 0x01 | 0x10, 0, 6, 3, b'g', b'i', b't'];
        assert_eq!(apply_delta(base, &delta).unwrap(), b"hello git");
        assert!(apply_delta(b"short", &delta).is_err());
    }

    #[test]
    fn hex_round_trips() {
        let oid = parse_hex("0123456789abcdef0123456789abcdef01234567").unwrap();
        assert_eq!(hex(&oid), "0123456789abcdef0123456789abcdef01234567");
        assert!(parse_hex("xyz").is_none());
    }
}
