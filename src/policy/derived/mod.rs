//! Names a program makes from its arguments without writing them on the command line: backups
//! (`cp -b -S g a .gitconfi` writes `.gitconfig`), `split` and `csplit` chunks (`split in .gi`
//! can write `.git`), and what compressors write (`gunzip X.gz` writes `X`, `gzip -S onfig
//! .gitc` writes `.gitconfig`). Each name is computed as the program computes it and checked as
//! a write; where the name comes from data the policy does not read at check time (`gzip -d
//! -N` takes it from the archive's header), the option is refused.
//!
//! The rules are keyed by program name, so they hold for a user's own rule for `ln` or
//! `install` too. The backup environment (`VERSION_CONTROL`, `SIMPLE_BACKUP_SUFFIX`) never
//! reaches a sandbox (assignments refuse it, the jail's environment is fixed), so the default
//! suffix is `~`.

mod codecs;

use super::paths::{Access, PathPolicy};
use super::rules::Analysis;
use super::Denial;
use codecs::Codec;
use std::path::Path;

/// Final names the policy keeps read-only somewhere (see `paths::protected_reason`): a pattern
/// of names that can produce one of them is checked with it.
const PROTECTED_NAMES: &[&str] = &[".git", ".gitattributes", ".gitmodules", ".gitconfig", "git"];

/// What a program's derived names add to its checks.
#[derive(Debug, Default)]
pub struct Derived {
    /// More paths the command writes (relative to its cwd), checked like its other paths.
    pub paths: Vec<(String, Access)>,
    /// The backup suffix, for the copies it makes (`cp -r` backs up every file it replaces).
    pub backup_suffix: Option<String>,
    /// Where it makes links (relative to its cwd; `ln`).
    pub links: Vec<String>,
}

/// The names `program` derives from its arguments (`analysis` is its generic analysis).
pub fn names(
    program: &str,
    analysis: &Analysis,
    cwd: &Path,
    paths: &PathPolicy,
) -> Result<Derived, Denial> {
    let mut derived = Derived::default();
    match program {
        "cp" | "mv" | "install" => {
            if let Some(suffix) = backup_suffix(program, analysis)? {
                for (path, access) in &analysis.paths {
                    if *access == Access::Write {
                        derived
                            .paths
                            .push((format!("{path}{suffix}"), Access::Write));
                    }
                }
                derived.backup_suffix = Some(suffix);
            }
        }
        "split" => derived.paths = split(analysis, cwd, paths)?,
        "ln" => {
            derived.links = link_names(analysis, cwd);
            if let Some(suffix) = backup_suffix(program, analysis)? {
                for (path, access) in &analysis.paths {
                    if *access == Access::Write {
                        derived
                            .paths
                            .push((format!("{path}{suffix}"), Access::Write));
                    }
                }
            }
        }
        "csplit" => derived.paths = csplit(analysis, cwd, paths)?,
        _ => {
            if let Some(codec) = Codec::of(program) {
                derived.paths = codec.outputs(program, analysis, cwd, paths)?;
            }
        }
    }
    Ok(derived)
}

/// The names `ln` creates: `-t DIR` or a last operand that is a folder gets each target's
/// name inside it (both places are counted when it may or may not be one), else the last operand.
fn link_names(analysis: &Analysis, cwd: &Path) -> Vec<String> {
    let base = |target: &str| {
        Path::new(target)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    };
    let (targets, dir) = match flag(analysis, &["-t", "--target-directory"]) {
        Some(Some(dir)) => (&analysis.positionals[..], Some(dir.clone())),
        _ => match analysis.positionals.as_slice() {
            [] => return Vec::new(),
            [one] => return base(one).into_iter().collect(),
            [targets @ .., last] => {
                let mut out = vec![last.clone()];
                if cwd.join(last).is_dir() || last.ends_with('/') {
                    out.clear();
                }
                for t in targets {
                    if let Some(name) = base(t) {
                        out.push(format!("{}/{name}", last.trim_end_matches('/')));
                    }
                }
                return out;
            }
        },
    };
    let dir = dir.unwrap_or_default();
    targets
        .iter()
        .filter_map(|t| base(t))
        .map(|name| format!("{}/{name}", dir.trim_end_matches('/')))
        .collect()
}

fn flag<'a>(analysis: &'a Analysis, names: &[&str]) -> Option<&'a Option<String>> {
    analysis
        .flags
        .iter()
        .rev()
        .find(|(name, _)| names.contains(&name.as_str()))
        .map(|(_, value)| value)
}

fn has(analysis: &Analysis, names: &[&str]) -> bool {
    flag(analysis, names).is_some()
}

/// The value of the last of `names`. A rule that does not say the flag takes a value (a
/// user's rule, or an unknown program's) leaves it without one, and the name it shapes
/// unknown: refused.
fn value(program: &str, analysis: &Analysis, names: &[&str]) -> Result<Option<String>, Denial> {
    match flag(analysis, names) {
        None => Ok(None),
        Some(Some(value)) => Ok(Some(value.clone())),
        Some(None) => Err(Denial::new(format!(
            "{program} {}: its value shapes the names of the files written, and the policy's \
             rule for {program} does not say it takes one",
            names[0]
        ))),
    }
}

/// GNU's backups: `-b`, `--backup[=CONTROL]` or `-S SUFFIX` (which implies them) make one of
/// every file replaced, named FILE + SUFFIX (simple) or FILE.~N~ (numbered, which no
/// protected name ends like). `None`: no backups.
fn backup_suffix(program: &str, analysis: &Analysis) -> Result<Option<String>, Denial> {
    let suffix = value(program, analysis, &["-S", "--suffix"])?;
    if suffix.is_none() && !has(analysis, &["-b", "--backup"]) {
        return Ok(None);
    }
    let suffix = suffix.unwrap_or_else(|| "~".to_string());
    if suffix.is_empty() || suffix.contains('/') {
        return Err(Denial::new(format!(
            "{program}: the backup suffix {suffix:?} is empty or holds a `/`, which would put \
             backups in another folder"
        )));
    }
    Ok(Some(suffix))
}

/// Names made of a fixed prefix, a counter over `charset` at least `min` characters long, and
/// a fixed suffix, in `dir` (as written, relative to the cwd).
struct Series<'a> {
    program: &'a str,
    dir: String,
    prefix: String,
    charset: &'a str,
    min: usize,
    suffix: String,
}

impl Series<'_> {
    fn matches(&self, name: &str) -> bool {
        let Some(rest) = name.strip_prefix(self.prefix.as_str()) else {
            return false;
        };
        let Some(counter) = rest.strip_suffix(self.suffix.as_str()) else {
            return false;
        };
        counter.chars().count() >= self.min && counter.chars().all(|c| self.charset.contains(c))
    }

    /// Refuse when a name of the series is one the policy keeps read-only; return the names
    /// of the series that exist now (a symlink or hard link among them is written through),
    /// to be checked as writes.
    fn check(&self, cwd: &Path, paths: &PathPolicy) -> Result<Vec<(String, Access)>, Denial> {
        for name in PROTECTED_NAMES.iter().filter(|n| self.matches(n)) {
            let path = format!("{}{name}", self.dir);
            paths.check(cwd, &path, Access::Write).map_err(|d| {
                Denial::new(format!(
                    "{}: a file it writes could be named {path}: {}",
                    self.program, d.reason
                ))
            })?;
        }
        let dir = if self.dir.is_empty() { "." } else { &self.dir };
        let resolved = paths.check(cwd, dir, Access::Write)?;
        let mut existing = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&resolved) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if self.matches(&name) {
                    existing.push((format!("{}{name}", self.dir), Access::Write));
                }
            }
        }
        Ok(existing)
    }
}

/// `dir/`, `name` of a prefix as written (`out/part` → `out/`, `part`).
fn split_prefix(prefix: &str) -> (String, String) {
    match prefix.rfind('/') {
        Some(at) => (prefix[..=at].to_string(), prefix[at + 1..].to_string()),
        None => (String::new(), prefix.to_string()),
    }
}

/// `split [FILE [PREFIX]]`: chunks named PREFIX + counter + `--additional-suffix`; the
/// counter is `-a` letters long (2 by default, growing when the chunks run out) over a-z,
/// digits (`-d`) or hex digits (`-x`).
fn split(
    analysis: &Analysis,
    cwd: &Path,
    paths: &PathPolicy,
) -> Result<Vec<(String, Access)>, Denial> {
    let prefix = analysis
        .positionals
        .get(1)
        .cloned()
        .unwrap_or_else(|| "x".to_string());
    let additional = value("split", analysis, &["--additional-suffix"])?.unwrap_or_default();
    if additional.contains('/') {
        return Err(Denial::new(
            "split --additional-suffix: a suffix with a `/` puts chunks in another folder",
        ));
    }
    let min = match value("split", analysis, &["-a", "--suffix-length"])? {
        Some(n) => n
            .parse::<usize>()
            .map_err(|_| Denial::new(format!("split -a {n}: not a number")))?,
        None => 2,
    };
    // The last of -d / -x (and their long forms) wins, as in split.
    let charset = analysis
        .flags
        .iter()
        .rev()
        .find_map(|(name, _)| match name.as_str() {
            "-d" | "--numeric-suffixes" => Some("0123456789"),
            "-x" | "--hex-suffixes" => Some("0123456789abcdef"),
            _ => None,
        })
        .unwrap_or("abcdefghijklmnopqrstuvwxyz");
    let (dir, name) = split_prefix(&prefix);
    Series {
        program: "split",
        dir,
        prefix: name,
        charset,
        min: min.max(1),
        suffix: additional,
    }
    .check(cwd, paths)
}

/// `csplit FILE PATTERN…`: pieces named `-f PREFIX` (xx) + at least `-n` (2) digits. A
/// `-b` printf format can spell any name, so it is refused.
fn csplit(
    analysis: &Analysis,
    cwd: &Path,
    paths: &PathPolicy,
) -> Result<Vec<(String, Access)>, Denial> {
    if has(analysis, &["-b", "--suffix-format"]) {
        return Err(Denial::new(
            "csplit -b: a printf format for the names can spell any name (`%.0d` prints \
             nothing); use -n",
        ));
    }
    let prefix = value("csplit", analysis, &["-f", "--prefix"])?.unwrap_or_else(|| "xx".into());
    let min = match value("csplit", analysis, &["-n", "--digits"])? {
        Some(n) => n
            .parse::<usize>()
            .map_err(|_| Denial::new(format!("csplit -n {n}: not a number")))?,
        None => 2,
    };
    let (dir, name) = split_prefix(&prefix);
    Series {
        program: "csplit",
        dir,
        prefix: name,
        charset: "0123456789",
        min,
        suffix: String::new(),
    }
    .check(cwd, paths)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::policy::rules::ProgramRule;

    pub(super) fn setup() -> (tempfile::TempDir, PathPolicy) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("out")).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "").unwrap();
        std::fs::write(ws.join("in.txt"), "x").unwrap();
        let p = PathPolicy::new(&ws, &[], &[], &ws).unwrap();
        (dir, p)
    }

    pub(super) fn derive(rule: &str, program: &str, args: &str) -> Result<Derived, Denial> {
        let (_d, p) = setup();
        derive_in(&p, rule, program, args)
    }

    pub(super) fn derive_in(
        p: &PathPolicy,
        rule: &str,
        program: &str,
        args: &str,
    ) -> Result<Derived, Denial> {
        let rule: ProgramRule = toml::from_str(rule).unwrap();
        let args: Vec<String> = args.split_whitespace().map(String::from).collect();
        let analysis = rule.analyze(program, &args)?;
        names(program, &analysis, p.workspace(), p)
    }

    pub(super) fn written(d: &Derived) -> Vec<&str> {
        d.paths.iter().map(|(p, _)| p.as_str()).collect()
    }

    const CP: &str = r#"last_arg = "write"
flags = { "-b" = "flag", "-S" = "value", "--suffix" = "value", "--backup" = "optional", "-r" = "flag" }"#;

    #[test]
    fn backups_are_named_with_their_suffix() {
        let d = derive(CP, "cp", "-b -S g a .gitconfi").unwrap();
        assert_eq!(written(&d), [".gitconfig"]);
        assert_eq!(d.backup_suffix.as_deref(), Some("g"));
        let d = derive(CP, "cp", "--suffix=.bak a b").unwrap();
        assert_eq!(written(&d), ["b.bak"]);
        let d = derive(CP, "cp", "-b a b").unwrap();
        assert_eq!(written(&d), ["b~"]);
        let d = derive(CP, "mv", "--backup=numbered a b").unwrap();
        assert_eq!(written(&d), ["b~"]);
        assert!(derive(CP, "cp", "a b").unwrap().paths.is_empty());
        assert!(derive(CP, "cp", "-S /x a b").is_err());
    }

    const SPLIT: &str = r#"last_arg = "write"
flags = { "-a" = "value", "--additional-suffix" = "value", "-d" = "flag", "-x" = "flag", "-l" = "value", "--numeric-suffixes" = "optional" }"#;

    #[test]
    fn split_chunks_that_could_be_protected_are_refused() {
        for args in [
            "-a 1 in.txt .gi",
            "-a 1 --additional-suffix=ig in.txt .gitcon",
            "-x -a 1 --additional-suffix=ig in.txt .gitcon",
            "-a 1 in.txt out/../.gi",
        ] {
            let err = derive(SPLIT, "split", args).unwrap_err().reason;
            assert!(err.contains("could be named"), "{args}: {err}");
        }
        // Digits can never finish `.gi` as `.git`; longer counters are letters only.
        assert!(derive(SPLIT, "split", "-d -a 1 in.txt .gi").is_ok());
        assert!(derive(SPLIT, "split", "in.txt part").is_ok());
        assert!(derive(SPLIT, "split", "-x -a 1 in.txt .gitconfi").is_ok());
        assert!(derive(SPLIT, "split", "-l 10 in.txt out/part-").is_ok());
        assert!(derive(SPLIT, "split", "--additional-suffix=/x in.txt p").is_err());
    }

    #[test]
    fn existing_chunks_are_checked_as_writes() {
        let (_d, p) = setup();
        let ws = p.workspace().to_path_buf();
        std::os::unix::fs::symlink(".git/config", ws.join("xaa")).unwrap();
        std::fs::write(ws.join("xab"), "").unwrap();
        std::fs::write(ws.join("xa"), "").unwrap();
        let d = derive_in(&p, SPLIT, "split", "in.txt").unwrap();
        let mut names = written(&d);
        names.sort();
        assert_eq!(names, ["xaa", "xab"]);
    }
}
