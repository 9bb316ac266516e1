//! What compressors write beside their operands: `gzip X` writes `X.gz` (or `X` plus `-S`),
//! `gunzip X.gz` writes `X` (`.tgz` becomes `.tar`), bzip2 writes `X.out` for a name it does not
//! know, `zstd --output-dir-flat DIR` puts them in DIR, and `-r` does it for every file of a
//! tree. `-N` on decompression takes the name from the archive's header: refused.

use super::{flag, has, value};
use crate::policy::copies;
use crate::policy::paths::{Access, PathPolicy};
use crate::policy::rules::Analysis;
use crate::policy::Denial;
use std::path::{Path, PathBuf};

/// More files than this under a recursive compressor's operands are not checked one by one.
const MAX_TREE: usize = 20_000;

/// A compressor family: what it appends when compressing and how it turns a compressed name
/// back into the original.
pub(super) struct Codec {
    /// Programs of the family, with whether they decompress (and only to standard output).
    programs: &'static [(&'static str, Mode)],
    /// The suffix compression appends, by `--format` value (the first is the default).
    compress: &'static [(&'static str, &'static str)],
    /// Suffixes decompression removes, with what replaces them (`.tgz` → `.tar`); compared
    /// without case (gzip lowers the name's end first).
    decompress: &'static [(&'static str, &'static str)],
    /// What decompression appends to a name without a known suffix (bzip2's `.out`); `None`:
    /// the file is skipped.
    unknown: Option<&'static str>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Compress,
    Decompress,
    ToStdout,
}

const CODECS: &[Codec] = &[
    Codec {
        programs: &[
            ("gzip", Mode::Compress),
            ("gunzip", Mode::Decompress),
            ("uncompress", Mode::Decompress),
            ("zcat", Mode::ToStdout),
        ],
        compress: &[("", ".gz")],
        decompress: &[
            (".gz", ""),
            (".z", ""),
            (".taz", ".tar"),
            (".tgz", ".tar"),
            ("-gz", ""),
            ("-z", ""),
            ("_z", ""),
        ],
        unknown: None,
    },
    Codec {
        programs: &[
            ("xz", Mode::Compress),
            ("unxz", Mode::Decompress),
            ("xzcat", Mode::ToStdout),
            ("lzma", Mode::Compress),
            ("unlzma", Mode::Decompress),
            ("lzcat", Mode::ToStdout),
        ],
        compress: &[
            ("", ".xz"),
            ("xz", ".xz"),
            ("auto", ".xz"),
            ("lzma", ".lzma"),
            ("alone", ".lzma"),
            ("lzip", ".lz"),
        ],
        decompress: &[
            (".xz", ""),
            (".txz", ".tar"),
            (".lzma", ""),
            (".tlz", ".tar"),
            (".lz", ""),
        ],
        unknown: None,
    },
    Codec {
        programs: &[
            ("bzip2", Mode::Compress),
            ("bunzip2", Mode::Decompress),
            ("bzcat", Mode::ToStdout),
        ],
        compress: &[("", ".bz2")],
        decompress: &[
            (".bz2", ""),
            (".bz", ""),
            (".tbz2", ".tar"),
            (".tbz", ".tar"),
        ],
        unknown: Some(".out"),
    },
    Codec {
        programs: &[
            ("zstd", Mode::Compress),
            ("zstdmt", Mode::Compress),
            ("unzstd", Mode::Decompress),
            ("zstdcat", Mode::ToStdout),
        ],
        compress: &[
            ("", ".zst"),
            ("zstd", ".zst"),
            ("gzip", ".gz"),
            ("xz", ".xz"),
            ("lzma", ".lzma"),
            ("lz4", ".lz4"),
        ],
        decompress: &[
            (".zst", ""),
            (".tzst", ".tar"),
            (".gz", ""),
            (".tgz", ".tar"),
            (".xz", ""),
            (".txz", ".tar"),
            (".lzma", ""),
            (".lz4", ""),
            (".tlz4", ".tar"),
        ],
        unknown: None,
    },
    Codec {
        programs: &[
            ("lz4", Mode::Compress),
            ("unlz4", Mode::Decompress),
            ("lz4cat", Mode::ToStdout),
        ],
        compress: &[("", ".lz4")],
        decompress: &[(".lz4", "")],
        unknown: None,
    },
];

impl Codec {
    pub(super) fn of(program: &str) -> Option<&'static Codec> {
        CODECS
            .iter()
            .find(|c| c.programs.iter().any(|(name, _)| *name == program))
    }

    /// Every file the command writes beside its operands.
    pub(super) fn outputs(
        &self,
        program: &str,
        analysis: &Analysis,
        cwd: &Path,
        paths: &PathPolicy,
    ) -> Result<Vec<(String, Access)>, Denial> {
        let implied = self
            .programs
            .iter()
            .find(|(name, _)| *name == program)
            .map_or(Mode::Compress, |(_, mode)| *mode);
        // The last of -d and -z wins.
        let last_direction = analysis
            .flags
            .iter()
            .rev()
            .find_map(|(n, _)| match n.as_str() {
                "-d" | "--decompress" | "--uncompress" => Some(true),
                "-z" | "--compress" => Some(false),
                _ => None,
            });
        let decompress = implied != Mode::Compress || last_direction == Some(true);
        let to_stdout = implied == Mode::ToStdout
            || has(
                analysis,
                &[
                    "-c",
                    "--stdout",
                    "--to-stdout",
                    "-t",
                    "--test",
                    "-l",
                    "--list",
                ],
            );
        if to_stdout {
            return Ok(Vec::new());
        }
        if decompress && has(analysis, &["-N", "--name"]) {
            return Err(Denial::new(format!(
                "{program} -N: decompression would take the file's name from the archive's \
                 header, which the policy does not read; leave out -N (the name is then the \
                 archive's without its suffix)"
            )));
        }
        // An output named on the command line (zstd -o FILE, lz4 IN OUT) is checked by the
        // rule; nothing else is written.
        if has(analysis, &["-o"]) {
            return Ok(Vec::new());
        }
        let inputs: Vec<&String> = if program.contains("lz4")
            && !has(analysis, &["-m", "--multiple"])
            && analysis.positionals.len() == 2
        {
            analysis.positionals[..1].iter().collect()
        } else {
            analysis.positionals.iter().collect()
        };
        let suffix = value(program, analysis, &["-S", "--suffix"])?;
        if let Some(s) = &suffix {
            if s.is_empty() || s.contains('/') {
                return Err(Denial::new(format!(
                    "{program} -S {s:?}: a suffix that is empty or holds a `/`"
                )));
            }
        }
        let format = flag(analysis, &["-F", "--format"]).cloned().flatten();
        let compress_suffix = match (&suffix, &format) {
            (Some(s), _) => s.clone(),
            (None, Some(f)) => self
                .compress
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(f))
                .map(|(_, s)| s.to_string())
                .ok_or_else(|| {
                    Denial::new(format!(
                        "{program} --format={f}: the policy does not know which suffix that \
                         format's files get; name the output or use -S"
                    ))
                })?,
            (None, None) => self.compress[0].1.to_string(),
        };
        let out_dir = flag(analysis, &["--output-dir-flat"]).cloned().flatten();
        let mirror = flag(analysis, &["--output-dir-mirror"]).cloned().flatten();
        let recursive = has(analysis, &["-r", "--recursive"]);
        let mut out = Vec::new();
        for input in inputs {
            if input == "-" {
                continue;
            }
            for file in files(program, input, recursive, cwd, paths)? {
                let derived = if decompress {
                    self.decompressed(&file, suffix.as_deref())
                } else {
                    Some(format!("{file}{compress_suffix}"))
                };
                let Some(derived) = derived else { continue };
                let placed = match (&out_dir, &mirror) {
                    (Some(dir), _) => {
                        let name = Path::new(&derived).file_name().map(PathBuf::from);
                        let name = name.unwrap_or_default();
                        format!("{}/{}", dir.trim_end_matches('/'), name.display())
                    }
                    (None, Some(dir)) => {
                        let relative = derived.trim_start_matches('/');
                        format!("{}/{relative}", dir.trim_end_matches('/'))
                    }
                    (None, None) => derived,
                };
                out.push((placed, Access::Write));
            }
        }
        Ok(out)
    }

    /// The name decompression gives `file`, or `None` when the program skips it.
    fn decompressed(&self, file: &str, suffix: Option<&str>) -> Option<String> {
        let lower = file.to_ascii_lowercase();
        let user = suffix.map(|s| (s, ""));
        for (ending, replacement) in user.iter().chain(self.decompress.iter()) {
            let ending_lower = ending.to_ascii_lowercase();
            if lower.len() > ending.len()
                && lower.ends_with(&ending_lower)
                && !lower[..lower.len() - ending.len()].ends_with('/')
            {
                return Some(format!(
                    "{}{replacement}",
                    &file[..file.len() - ending.len()]
                ));
            }
        }
        self.unknown.map(|append| format!("{file}{append}"))
    }
}

/// The operand, or with `-r` every file beneath it (as written, relative to the cwd).
fn files(
    program: &str,
    input: &str,
    recursive: bool,
    cwd: &Path,
    paths: &PathPolicy,
) -> Result<Vec<String>, Denial> {
    if !recursive {
        return Ok(vec![input.to_string()]);
    }
    let Ok(resolved) = paths.check(cwd, input, Access::Read) else {
        // The operand's own check refuses it with the reason.
        return Ok(vec![input.to_string()]);
    };
    let entries = copies::tree(&resolved).map_err(|why| {
        Denial::new(format!(
            "{program} -r: cannot check what compressing {input} writes: {why}"
        ))
    })?;
    if entries.len() > MAX_TREE {
        return Err(Denial::new(format!(
            "{program} -r: {input} holds more than {MAX_TREE} files, too many to check"
        )));
    }
    Ok(entries
        .into_iter()
        // Links too: with -f the programs compress what a link names, under the link's name.
        .filter(|rel| {
            std::fs::symlink_metadata(resolved.join(rel))
                .is_ok_and(|m| m.is_file() || m.file_type().is_symlink())
        })
        .map(|rel| {
            if rel.as_os_str().is_empty() {
                input.to_string()
            } else {
                format!("{}/{}", input.trim_end_matches('/'), rel.display())
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{derive, derive_in, setup, written};

    const GZIP: &str = r#"args = "consume"
flags = { "-d" = "flag", "-c" = "flag", "-k" = "flag", "-N" = "flag", "--name" = "flag", "-S" = "value", "-r" = "flag", "-t" = "flag" }"#;

    #[test]
    fn compressors_write_the_names_they_derive() {
        let d = derive(GZIP, "gunzip", "a.gz b.TGZ c-z notes").unwrap();
        assert_eq!(written(&d), ["a", "b.tar", "c"]);
        let d = derive(GZIP, "gzip", "-S onfig .gitc").unwrap();
        assert_eq!(written(&d), [".gitconfig"]);
        let d = derive(GZIP, "gzip", "-dk -S .x a.x").unwrap();
        assert_eq!(written(&d), ["a"]);
        assert!(derive(GZIP, "gzip", "-dc a.gz").unwrap().paths.is_empty());
        assert!(derive(GZIP, "zcat", "a.gz").unwrap().paths.is_empty());
        let err = derive(GZIP, "gunzip", "-N a.gz").unwrap_err().reason;
        assert!(err.contains("header"), "{err}");
        assert!(derive(GZIP, "gzip", "-dN a.gz").is_err());
        assert!(derive(GZIP, "gunzip", "-Nc a.gz").is_ok());
        let d = derive(GZIP, "bunzip2", "a.bz2 b.tbz odd").unwrap();
        assert_eq!(written(&d), ["a", "b.tar", "odd.out"]);
        let d = derive(GZIP, "xz", "-d a.txz").unwrap();
        assert_eq!(written(&d), ["a.tar"]);
        let d = derive(GZIP, "zstd", "a").unwrap();
        assert_eq!(written(&d), ["a.zst"]);
    }

    #[test]
    fn a_recursive_compressor_derives_a_name_for_every_file() {
        let (_d, p) = setup();
        let ws = p.workspace().to_path_buf();
        std::fs::create_dir_all(ws.join("logs/old")).unwrap();
        std::fs::write(ws.join("logs/a.gz"), "").unwrap();
        std::fs::write(ws.join("logs/old/.gitattributes.gz"), "").unwrap();
        let d = derive_in(&p, GZIP, "gzip", "-dr logs").unwrap();
        let mut names = written(&d);
        names.sort();
        assert_eq!(names, ["logs/a", "logs/old/.gitattributes"]);
        // A link is compressed under its own name (with -f).
        std::os::unix::fs::symlink("a.gz", ws.join("logs/.gitattribute")).unwrap();
        let d = derive_in(&p, GZIP, "gzip", "-rf -S s logs").unwrap();
        assert!(written(&d).contains(&"logs/.gitattributes"), "{d:?}");
    }
}
