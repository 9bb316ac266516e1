//! File lists: files whose contents name more files (`wc --files0-from=F`, `du --files0-from`,
//! `file -f F`, `tar -T F`). The program opens every name in the list, so checking only the
//! list file would let it reach any path: the checker reads the list and checks each name as
//! if it had been written on the command line.

use super::paths::{Access, PathPolicy};
use super::Denial;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Lists larger than this are refused rather than half-checked.
const MAX_LIST_BYTES: u64 = 1024 * 1024;
/// As many names as a list may hold.
const MAX_LIST_NAMES: usize = 10_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileList {
    /// The list file as written (relative to the command's cwd).
    pub path: String,
    pub format: ListFormat,
    /// The directory the names are relative to, as written, when not the cwd (`tar -C DIR`).
    pub base: Option<String>,
    /// How the program uses the files the list names.
    pub access: Access,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListFormat {
    /// Names separated by NUL bytes (`--files0-from`).
    Nul,
    /// One name per line (`file -f`, `tar -T`).
    Lines,
    /// One name per line, and a line starting with `-` is an option (`tar -T`: `-C dir`).
    LinesWithOptions,
    /// Checksum lines as `md5sum -c` reads them: `HASH  NAME`, `HASH *NAME`, the escaped
    /// form `\HASH  NAME` and the tagged `SHA256 (NAME) = HASH`.
    Checksums,
}

/// Check a list and every name in it; returns the resolved list file and the checked names.
/// `earlier_writes`: an earlier command in the same string may change the list first.
pub fn check(
    list: &FileList,
    program: &str,
    cwd: &Path,
    paths: &PathPolicy,
    earlier_writes: bool,
) -> Result<Vec<(PathBuf, Access)>, Denial> {
    let refuse =
        |why: String| Denial::new(format!("{program}: the file list {}: {why}", list.path));
    if list.path == "-" {
        return Err(refuse(
            "names read from standard input cannot be checked; write them to a file first".into(),
        ));
    }
    if earlier_writes {
        return Err(refuse(
            "an earlier command in the same string writes files, so the list checked now may \
             not be the list the program reads; run it as its own command"
                .into(),
        ));
    }
    let file = paths
        .check(cwd, &list.path, Access::Read)
        .map_err(|d| Denial::new(format!("{program}: {}", d.reason)))?;
    let mut bytes = Vec::new();
    std::fs::File::open(&file)
        .and_then(|f| f.take(MAX_LIST_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| refuse(format!("cannot be read to check the names in it: {e}")))?;
    let base = match &list.base {
        Some(base) => paths
            .check(cwd, base, Access::Read)
            .map_err(|d| Denial::new(format!("{program}: {}", d.reason)))?,
        None => cwd.to_path_buf(),
    };
    let mut checked = vec![(file, Access::Read)];
    checked.extend(
        check_names(
            &bytes,
            list.format,
            &base,
            paths,
            list.access,
            program,
            &list.path,
        )?
        .into_iter()
        .map(|path| (path, list.access)),
    );
    Ok(checked)
}

/// The largest list the policy checks (bytes); the executor reads no more of a list on stdin.
pub const MAX_BYTES: usize = MAX_LIST_BYTES as usize;

/// Check every name in a list's text as `access` relative to `base` (the executor calls it
/// for a checksum list on standard input, when the text exists). `shown` names the list in
/// refusals.
pub fn check_names(
    bytes: &[u8],
    format: ListFormat,
    base: &Path,
    paths: &PathPolicy,
    access: Access,
    program: &str,
    shown: &str,
) -> Result<Vec<PathBuf>, Denial> {
    let refuse = |why: String| Denial::new(format!("{program}: the file list {shown}: {why}"));
    if bytes.len() as u64 > MAX_LIST_BYTES {
        return Err(refuse(format!(
            "is larger than {MAX_LIST_BYTES} bytes; too large to check every name"
        )));
    }
    let names = split(bytes, format).map_err(refuse)?;
    if names.len() > MAX_LIST_NAMES {
        return Err(refuse(format!(
            "names {} files, more than the {MAX_LIST_NAMES} the policy checks",
            names.len()
        )));
    }
    names
        .iter()
        .map(|name| {
            paths.check(base, name, access).map_err(|d| {
                Denial::new(format!(
                    "{program}: {} (named in the file list {shown})",
                    d.reason
                ))
            })
        })
        .collect()
}

fn split(bytes: &[u8], format: ListFormat) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| "holds names that are not UTF-8, which the policy cannot check".to_string())?;
    let mut names = Vec::new();
    match format {
        ListFormat::Nul => {
            for name in text.split('\0') {
                names.push(name.to_string());
            }
            // A trailing NUL ends the last name rather than starting an empty one.
            if text.ends_with('\0') || text.is_empty() {
                names.pop();
            }
        }
        ListFormat::Lines | ListFormat::LinesWithOptions => {
            for line in text.lines() {
                if line.is_empty() {
                    continue;
                }
                if format == ListFormat::LinesWithOptions && line.starts_with('-') {
                    return Err(format!(
                        "has the line {line:?}, which the program reads as an option"
                    ));
                }
                names.push(line.to_string());
            }
        }
        ListFormat::Checksums => {
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                names.push(checksum_name(line).ok_or_else(|| {
                    format!("has the line {line:?}, which the policy cannot read as a checksum")
                })?);
            }
        }
    }
    Ok(names)
}

/// The file a checksum line names, as GNU coreutils reads it.
fn checksum_name(line: &str) -> Option<String> {
    let (escaped, line) = match line.strip_prefix('\\') {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    let name = if let Some((tag, rest)) = line.split_once(" (") {
        // Tagged: `SHA256 (NAME) = HASH`; the name runs to the last `) = `.
        if tag.is_empty() || tag.contains(' ') {
            return None;
        }
        rest.rsplit_once(") = ")?.0
    } else {
        let (hash, rest) = line.split_once(' ')?;
        if hash.is_empty()
            || !hash
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c))
        {
            return None;
        }
        rest.strip_prefix(' ').or_else(|| rest.strip_prefix('*'))?
    };
    if !escaped {
        return (!name.is_empty()).then(|| name.to_string());
    }
    // The escaped form: `\\` is a backslash, `\n` a newline, `\r` a carriage return.
    let mut out = String::new();
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '\\' => out.push('\\'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            _ => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_lines_name_their_files() {
        for (line, name) in [
            (
                "d41d8cd98f00b204e9800998ecf8427e  notes/todo.txt",
                Some("notes/todo.txt"),
            ),
            ("d41d8cd98f00b204e9800998ecf8427e *bin.dat", Some("bin.dat")),
            ("d41d8   two  spaces.txt", Some(" two  spaces.txt")),
            ("d41d8 one-space.txt", None),
            ("\\d41d8  a\\nb\\\\c", Some("a\nb\\c")),
            ("SHA256 (src/x (1).rs) = abcd", Some("src/x (1).rs")),
            ("BLAKE2b-512 (f) = 00", Some("f")),
            ("garbage", None),
            ("d41d8cd98f00b204e9800998ecf8427e  ", None),
            ("\\d41d8  bad\\x", None),
        ] {
            assert_eq!(checksum_name(line).as_deref(), name, "{line:?}");
        }
    }

    fn setup() -> (tempfile::TempDir, PathPolicy) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("a.txt"), "a").unwrap();
        let p = PathPolicy::new(&ws, &[], &[], dir.path()).unwrap();
        (dir, p)
    }

    fn list(path: &str, format: ListFormat) -> FileList {
        FileList {
            path: path.into(),
            format,
            base: None,
            access: Access::Read,
        }
    }

    #[test]
    fn every_name_in_the_list_is_checked() {
        let (_d, p) = setup();
        let ws = p.workspace().to_path_buf();
        std::fs::write(ws.join("ok0"), "a.txt\0sub\0").unwrap();
        let names = check(&list("ok0", ListFormat::Nul), "wc", &ws, &p, false).unwrap();
        assert_eq!(names.len(), 3);
        std::fs::write(ws.join("bad0"), "a.txt\0/etc/shadow\0").unwrap();
        let err = check(&list("bad0", ListFormat::Nul), "wc", &ws, &p, false).unwrap_err();
        assert!(err.reason.contains("/etc/shadow"), "{}", err.reason);
        assert!(
            err.reason.contains("named in the file list bad0"),
            "{}",
            err.reason
        );
        std::fs::write(ws.join("lines"), "a.txt\n../../etc/passwd\n").unwrap();
        assert!(check(&list("lines", ListFormat::Lines), "file", &ws, &p, false).is_err());
    }

    #[test]
    fn stdin_options_changes_and_size_are_refused() {
        let (_d, p) = setup();
        let ws = p.workspace().to_path_buf();
        let err = check(&list("-", ListFormat::Nul), "du", &ws, &p, false).unwrap_err();
        assert!(err.reason.contains("standard input"), "{}", err.reason);
        std::fs::write(ws.join("t"), "a.txt\n-C\n/\n").unwrap();
        let err = check(
            &list("t", ListFormat::LinesWithOptions),
            "tar",
            &ws,
            &p,
            false,
        )
        .unwrap_err();
        assert!(err.reason.contains("as an option"), "{}", err.reason);
        std::fs::write(ws.join("ok"), "a.txt\n").unwrap();
        let err = check(&list("ok", ListFormat::Lines), "file", &ws, &p, true).unwrap_err();
        assert!(err.reason.contains("earlier command"), "{}", err.reason);
        std::fs::write(ws.join("big"), vec![b'a'; MAX_LIST_BYTES as usize + 1]).unwrap();
        assert!(check(&list("big", ListFormat::Lines), "file", &ws, &p, false).is_err());
        assert!(check(&list("missing", ListFormat::Lines), "file", &ws, &p, false).is_err());
    }
}
