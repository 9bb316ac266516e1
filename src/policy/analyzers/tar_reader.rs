//! A tar archive's members, read block by block the way GNU tar's `read_header` and
//! `decode_header` read them, so the policy sees every member GNU tar will extract and every
//! name it may give one.
//!
//! What GNU tar honours and a general-purpose reader does not: a pax *global* header's
//! keywords apply to every later member (`path=`, `size=`, `GNU.sparse.name=`), a local pax
//! header's `GNU.sparse.name` names the file as `path` does, hard links, symbolic links,
//! directories and devices carry no data whatever their size field says (the next block is the
//! next header), and with `-i` members go on after zero blocks. A block GNU tar would skip as
//! "not a header" (a bad checksum) or a member kind it handles in ways not modelled here is
//! refused: the policy does not guess where GNU tar resumes.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// More bytes than this (after decompression) are not read at check time.
const MAX_SCANNED_BYTES: u64 = 1024 * 1024 * 1024;
/// More members than this are not checked one by one.
const MAX_MEMBERS: usize = 100_000;
/// Longer GNU long names or pax headers are refused.
const MAX_META: u64 = 1024 * 1024;
const BLOCK: usize = 512;

/// What a member creates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A hard link to an existing file; every name the target may have.
    HardLink(Vec<PathBuf>),
}

/// One member: every name GNU tar may give it (the one it uses first), relative, with
/// `--strip-components` applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub names: Vec<PathBuf>,
    pub kind: Kind,
}

/// The members of the tar archive at `archive` (plain or gzip). `Err` says why it cannot be
/// checked.
pub fn members(archive: &Path, strip: usize, ignore_zeros: bool) -> Result<Vec<Member>, String> {
    let reader = open(archive)?;
    let mut tar = Reader {
        input: Capped {
            inner: reader,
            left: MAX_SCANNED_BYTES,
        },
        globals: Vec::new(),
    };
    let mut out = Vec::new();
    while let Some(member) = tar.next(strip, ignore_zeros)? {
        if out.len() >= MAX_MEMBERS {
            return Err(format!(
                "has more than {MAX_MEMBERS} members, too many to check"
            ));
        }
        if let Some(member) = member {
            out.push(member);
        }
    }
    Ok(out)
}

fn open(archive: &Path) -> Result<Box<dyn Read>, String> {
    let cannot = |e: std::io::Error| format!("cannot be read: {e}");
    let mut file = std::fs::File::open(archive).map_err(cannot)?;
    let mut magic = [0u8; 6];
    let mut n = 0;
    while n < magic.len() {
        match file.read(&mut magic[n..]).map_err(cannot)? {
            0 => break,
            k => n += k,
        }
    }
    let file = std::fs::File::open(archive).map_err(cannot)?;
    Ok(match &magic[..n] {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::MultiGzDecoder::new(file)),
        [b'B', b'Z', b'h', ..] => return Err(unreadable("bzip2", "bzip2 -dk")),
        [0xfd, b'7', b'z', b'X', b'Z', 0] => return Err(unreadable("xz", "xz -dk")),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => return Err(unreadable("zstd", "zstd -d")),
        [0x5d, 0, 0, ..] => return Err(unreadable("lzma", "xz -dk --format=lzma")),
        [0x1f, 0x9d, ..] => return Err(unreadable("compress (.Z)", "gzip -dk")),
        _ => Box::new(file),
    })
}

fn unreadable(format: &str, hint: &str) -> String {
    format!(
        "is {format}-compressed, and warden cannot read its members to check them; decompress \
         it first ({hint}) and extract the .tar"
    )
}

struct Reader {
    input: Capped,
    /// The last pax global header's records, in order (a new one replaces them all).
    globals: Vec<(String, String)>,
}

impl Reader {
    /// A block, or `None` at the end of the input.
    fn block(&mut self) -> Result<Option<[u8; BLOCK]>, String> {
        let mut block = [0u8; BLOCK];
        let mut n = 0;
        while n < BLOCK {
            match self.input.read(&mut block[n..]) {
                Ok(0) if n == 0 => return Ok(None),
                Ok(0) => return Err("ends in the middle of a block".into()),
                Ok(k) => n += k,
                Err(e) => return Err(format!("cannot be read to the end: {e}")),
            }
        }
        Ok(Some(block))
    }

    fn skip(&mut self, size: u64) -> Result<(), String> {
        for _ in 0..size.div_ceil(BLOCK as u64) {
            if self.block()?.is_none() {
                return Err("ends inside a member's data".into());
            }
        }
        Ok(())
    }

    fn data(&mut self, size: u64) -> Result<Vec<u8>, String> {
        if size > MAX_META {
            return Err("has a long-name or pax header larger than warden reads".into());
        }
        let mut out = Vec::with_capacity(size as usize);
        for _ in 0..size.div_ceil(BLOCK as u64) {
            let block = self
                .block()?
                .ok_or("ends inside a long-name or pax header")?;
            out.extend_from_slice(&block);
        }
        out.truncate(size as usize);
        Ok(out)
    }

    /// The next member: `None` at the end of the archive, `Some(None)` for a member stripped
    /// away entirely.
    fn next(&mut self, strip: usize, ignore_zeros: bool) -> Result<Option<Option<Member>>, String> {
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut locals: Vec<(String, String)> = Vec::new();
        loop {
            let Some(block) = self.block()? else {
                return Ok(None);
            };
            if block.iter().all(|b| *b == 0) {
                // GNU tar ends at the first zero block (two make the end; one alone ends it
                // too, with a warning) unless -i reads on.
                if ignore_zeros {
                    continue;
                }
                return Ok(None);
            }
            checksum(&block)?;
            let typeflag = block[156];
            let header_size = if typeflag == b'1' {
                0
            } else {
                number(&block[124..136]).ok_or("has a member whose size field is not a number")?
            };
            match typeflag {
                b'L' | b'K' => {
                    let data = self.data(header_size)?;
                    let text = c_string(&data).to_vec();
                    if typeflag == b'L' {
                        long_name = Some(text);
                    } else {
                        long_link = Some(text);
                    }
                }
                b'x' | b'X' => locals = pax_records(&self.data(header_size)?)?,
                b'g' => self.globals = pax_records(&self.data(header_size)?)?,
                _ => {
                    let member =
                        self.member(&block, long_name, long_link, &locals, header_size, strip)?;
                    return Ok(Some(member));
                }
            }
        }
    }

    /// A member's header, with what came before it; consumes its data.
    fn member(
        &mut self,
        block: &[u8; BLOCK],
        long_name: Option<Vec<u8>>,
        long_link: Option<Vec<u8>>,
        locals: &[(String, String)],
        header_size: u64,
        strip: usize,
    ) -> Result<Option<Member>, String> {
        let typeflag = block[156];
        let header_name = long_name.unwrap_or_else(|| {
            let mut name = Vec::new();
            // The ustar prefix counts only with the POSIX magic (GNU's magic reuses the field).
            if &block[257..263] == b"ustar\0" && block[345] != 0 {
                name.extend_from_slice(c_string(&block[345..500]));
                name.push(b'/');
            }
            name.extend_from_slice(c_string(&block[..100]));
            name
        });
        let header_link = long_link.unwrap_or_else(|| c_string(&block[157..257]).to_vec());
        let mut name = utf8(&header_name)?;
        let mut names = vec![name.clone()];
        let mut links = vec![utf8(&header_link)?];
        let mut size = header_size;
        let mut sparse_named = false;
        // decode_header: the global keywords, then the member's own, in order.
        for (key, value) in self.globals.iter().chain(locals) {
            match key.as_str() {
                "path" | "GNU.sparse.name" => {
                    let sparse = key == "GNU.sparse.name";
                    if !value.is_empty() && (sparse || !sparse_named) {
                        name = value.clone();
                    }
                    sparse_named |= sparse;
                    if !value.is_empty() {
                        names.push(value.clone());
                    }
                }
                "linkpath" => links.push(value.clone()),
                "size" => {
                    size = value
                        .parse()
                        .map_err(|_| format!("has a pax size {value:?} that is not a number"))?
                }
                "GNU.dumpdir" => {
                    return Err(
                        "has an incremental dump directory, which extraction uses to \
                                remove files; warden does not check that"
                            .into(),
                    )
                }
                _ => {}
            }
        }
        let trailing_slash = name.ends_with('/');
        // The name GNU tar uses goes first.
        names.retain(|n| *n != name);
        names.insert(0, name.clone());
        let kind = match typeflag {
            b'0' | 0 | b'7' if trailing_slash => Kind::Dir,
            b'0' | 0 | b'7' => Kind::File,
            b'S' => {
                // Old GNU sparse: more sparse-map blocks follow the header before the data.
                let mut extended = block[482] != 0;
                while extended {
                    let extension = self.block()?.ok_or("ends inside a sparse map")?;
                    extended = extension[504] != 0;
                }
                Kind::File
            }
            b'5' => Kind::Dir,
            b'2' => Kind::Symlink,
            b'1' => Kind::HardLink(Vec::new()),
            b'3' | b'4' | b'6' => {
                return Err(format!(
                    "has a device node or FIFO ({name}), which extraction must not create"
                ))
            }
            other => {
                return Err(format!(
                    "has a member of a kind warden does not check (type {:?}: {name})",
                    other as char
                ))
            }
        };
        // Only regular files (and sparse ones) carry data; for every other kind GNU tar reads
        // the next block as the next header.
        if kind == Kind::File {
            self.skip(size)?;
        }
        let kind = match kind {
            Kind::HardLink(_) => {
                let mut targets = Vec::new();
                for link in &links {
                    match stripped(link, strip)? {
                        Some(target) => targets.push(target),
                        None => {
                            return Err(format!(
                                "has a hard link {name} whose target is stripped away"
                            ))
                        }
                    }
                }
                Kind::HardLink(targets)
            }
            other => other,
        };
        let mut paths = Vec::new();
        for candidate in &names {
            if let Some(path) = stripped(candidate, strip)? {
                paths.push(path);
            }
        }
        if paths.is_empty() {
            return Ok(None);
        }
        Ok(Some(Member { names: paths, kind }))
    }
}

/// GNU tar's checksum test: the unsigned or the signed sum of the block, the checksum field
/// counted as blanks, must equal the octal number in that field.
fn checksum(block: &[u8; BLOCK]) -> Result<(), String> {
    let mut unsigned: i64 = 0;
    let mut signed: i64 = 0;
    for (i, b) in block.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { *b };
        unsigned += i64::from(b);
        signed += i64::from(b as i8);
    }
    let recorded = octal(&block[148..156]).map(|v| v as i64);
    if recorded == Some(unsigned) || recorded == Some(signed) {
        return Ok(());
    }
    Err(
        "has a block that is not a valid header (bad checksum) where a header should be; GNU \
         tar would skip ahead to one it accepts, which warden does not follow"
            .into(),
    )
}

/// A numeric header field as GNU tar's `from_header` reads it: a leading NUL and blanks
/// skipped, octal digits up to a blank or NUL, or base-256 (a first byte with the high bit).
fn number(field: &[u8]) -> Option<u64> {
    match field.first() {
        Some(0x80) => {
            let mut value: u64 = 0;
            for b in &field[1..] {
                value = value.checked_mul(256)?.checked_add(u64::from(*b))?;
            }
            Some(value)
        }
        Some(b) if b & 0x80 != 0 => None,
        _ => octal(field),
    }
}

fn octal(field: &[u8]) -> Option<u64> {
    let mut at = usize::from(field.first() == Some(&0));
    while at < field.len() && field[at].is_ascii_whitespace() {
        at += 1;
    }
    if at == field.len() || !(b'0'..=b'7').contains(&field[at]) {
        return None;
    }
    let mut value: u64 = 0;
    while at < field.len() && (b'0'..=b'7').contains(&field[at]) {
        value = value
            .checked_mul(8)?
            .checked_add(u64::from(field[at] - b'0'))?;
        at += 1;
    }
    match field.get(at) {
        None | Some(0) | Some(b' ') => Some(value),
        Some(_) => None,
    }
}

fn c_string(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| "has a member name that is not UTF-8, which the policy cannot check".into())
}

/// pax records: `LEN KEY=VALUE\n`, LEN counting the whole record.
fn pax_records(data: &[u8]) -> Result<Vec<(String, String)>, String> {
    let bad = || "has a malformed pax header".to_string();
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        if data[at] == 0 {
            break;
        }
        let space = data[at..].iter().position(|b| *b == b' ').ok_or_else(bad)? + at;
        let len: usize = std::str::from_utf8(&data[at..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        let end = at
            .checked_add(len)
            .filter(|e| *e <= data.len() && *e > space + 1);
        let end = end.ok_or_else(bad)?;
        if data[end - 1] != b'\n' {
            return Err(bad());
        }
        let record = &data[space + 1..end - 1];
        let eq = record.iter().position(|b| *b == b'=').ok_or_else(bad)?;
        let key = utf8(&record[..eq])?;
        let value = utf8(&record[eq + 1..])?;
        out.push((key, value));
        at = end;
    }
    Ok(out)
}

/// A member name as GNU tar extracts it: leading slashes removed (no -P), `.` dropped, `..`
/// refused (tar skips such members), then `strip` leading components; `None` when nothing is
/// left (tar skips the member).
fn stripped(name: &str, strip: usize) -> Result<Option<PathBuf>, String> {
    let path = Path::new(name.trim_start_matches('/'));
    let mut parts = Vec::new();
    for part in path.components() {
        match part {
            Component::Normal(p) => parts.push(p),
            Component::CurDir | Component::RootDir => {}
            _ => {
                return Err(format!(
                    "has the member name {name:?}, which climbs with `..`"
                ))
            }
        }
    }
    if parts.len() <= strip {
        return Ok(None);
    }
    Ok(Some(parts[strip..].iter().collect()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_as_gnu_tar_reads_them() {
        assert_eq!(number(b"00000001750\0"), Some(1000));
        assert_eq!(number(b"     1750 \0\0"), Some(1000));
        assert_eq!(number(b"\x0000001750 "), Some(1000));
        assert_eq!(
            number(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0]),
            Some(4096)
        );
        assert_eq!(number(b"12x4"), None);
        assert_eq!(number(b"        "), None);
        assert_eq!(number(&[0xff, 0xff]), None);
    }

    #[test]
    fn pax_records_are_length_prefixed() {
        let data = b"18 path=a/b/c.txt\n25 GNU.sparse.name=x/y.z\n\0\0";
        assert_eq!(
            pax_records(data).unwrap(),
            [
                ("path".to_string(), "a/b/c.txt".to_string()),
                ("GNU.sparse.name".to_string(), "x/y.z".to_string())
            ]
        );
        assert!(pax_records(b"99 path=x\n").is_err());
        assert!(pax_records(b"9 pathx\n").is_err());
    }

    #[test]
    fn names_lose_slashes_and_leading_components() {
        assert_eq!(stripped("/a/./b", 0).unwrap(), Some(PathBuf::from("a/b")));
        assert_eq!(stripped("a/b/c", 1).unwrap(), Some(PathBuf::from("b/c")));
        assert_eq!(stripped("a", 1).unwrap(), None);
        assert!(stripped("a/../b", 0).is_err());
    }
}
