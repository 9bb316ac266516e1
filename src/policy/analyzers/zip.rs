//! `zip` and `unzip` (Info-ZIP).
//!
//! zip: the TOML rule checks the flags; the first operand is the archive (written, with `.zip`
//! added when its name has no suffix), the others are read. zip follows symbolic links inside
//! the trees it recurses into, so argv gets `-y` (store links as links): a link in the
//! workspace never carries a file from outside into the archive. `-TT`/`--unzip-command`
//! (a program to test with) and `-@` (names from standard input) are refused.
//!
//! unzip: listing, testing and printing read only the archive. Extraction writes the members'
//! names under `-d DIR` (or the cwd), so the policy reads the central directory as unzip does
//! (`zip_reader`) and checks each name it may give a member as a write; links and special
//! files in the archive, `-:` (allow `..`), `-^`, `-K` (keep setuid bits) and `-X` (restore
//! owners) are refused.

use super::extraction::Extraction;
use super::zip_reader::{self, Naming};
use super::AnalyzerContext;
use crate::policy::paths::Access;
use crate::policy::rules::{Analysis, ProgramRule};
use crate::policy::Denial;
use std::path::Path;

pub fn zip(rule: &ProgramRule, program: &str, args: &[String]) -> Result<Analysis, Denial> {
    for arg in args.iter().take_while(|a| *a != "--") {
        let short = arg.starts_with('-') && !arg.starts_with("--");
        if short && arg.matches('T').count() > 1 {
            return Err(Denial::new(format!(
                "{program} -TT: names a program to test the archive with"
            )));
        }
        if short && arg.contains('@') {
            return Err(Denial::new(format!(
                "{program} -@: reads the names to archive from standard input, which the \
                 policy cannot see"
            )));
        }
    }
    let mut analysis = rule.analyze(program, args)?;
    let Some(archive) = analysis.positionals.first().cloned() else {
        return Err(Denial::new(format!("{program}: no archive named")));
    };
    if archive == "-" {
        return Err(Denial::new(format!(
            "{program}: the archive goes to a file, not standard output"
        )));
    }
    // The generic analysis read every operand; the archive is written instead.
    analysis
        .paths
        .retain(|(p, access)| !(p == &archive && *access == Access::Read));
    analysis.paths.push((archive.clone(), Access::Write));
    let name = Path::new(&archive).file_name().unwrap_or_default();
    if !name.to_string_lossy().contains('.') {
        analysis
            .paths
            .push((format!("{archive}.zip"), Access::Write));
    }
    let mut argv = vec![program.to_string(), "-y".to_string()];
    argv.extend(args.iter().cloned());
    analysis.argv = Some(argv);
    Ok(analysis)
}

/// unzip's options: letters that only change output or behaviour, the ones refused, and the
/// modes that write nothing.
const UNZIP_FLAGS: &str = "lvtpczfunoqjCLaabUVDTMsW";
const UNZIP_READ_ONLY_MODES: &str = "lvtpcz";
const UNZIP_REFUSED: &[(char, &str)] = &[
    (':', "lets members climb out of the target folder with `..`"),
    ('^', "allows control characters in file names"),
    ('K', "keeps setuid and setgid bits"),
    ('X', "restores the archive's owners"),
    ('Z', "switches to zipinfo's options; use -l or -v to list"),
    ('M', "pipes output through a pager"),
];

/// A member name given to unzip: a pattern matched inside the archive, never a path. One that
/// is absolute or climbs with `..` names no member warden would extract (such members are
/// refused) and reads like a path outside the workspace, so it is refused too.
fn member_pattern(program: &str, name: &str) -> Result<(), Denial> {
    let climbs = name.starts_with('/') || name.split('/').any(|part| part == "..");
    if climbs {
        return Err(Denial::new(format!(
            "{program}: the member name {name:?} is absolute or climbs with '..'; members are \
             named as stored inside the archive"
        )));
    }
    Ok(())
}

pub fn unzip(program: &str, args: &[String], ctx: &AnalyzerContext) -> Result<Analysis, Denial> {
    let mut archive: Option<String> = None;
    let mut dir: Option<String> = None;
    let mut modes = String::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if !arg.starts_with('-') || arg == "-" {
            // The archive, then member names (patterns inside it, not paths).
            match archive {
                None => archive = Some(arg.clone()),
                Some(_) => member_pattern(program, arg)?,
            }
            continue;
        }
        if arg.starts_with("--") {
            return Err(Denial::new(format!(
                "{program}: the option {arg} is not in the policy's list for unzip"
            )));
        }
        let letters: Vec<char> = arg[1..].chars().collect();
        for (j, c) in letters.iter().enumerate() {
            if let Some((_, why)) = UNZIP_REFUSED.iter().find(|(r, _)| r == c) {
                return Err(Denial::new(format!("{program} -{c}: {why}")));
            }
            match c {
                'd' | 'P' | 'O' | 'I' => {
                    let rest: String = letters[j + 1..].iter().collect();
                    let value = if rest.is_empty() {
                        let v = args.get(i).cloned().ok_or_else(|| {
                            Denial::new(format!("{program} -{c}: missing its value"))
                        })?;
                        i += 1;
                        v
                    } else {
                        rest
                    };
                    if *c == 'd' {
                        dir = Some(value);
                    }
                    break;
                }
                // `-x NAME…`: member names to leave out, up to the next option.
                'x' => {
                    while let Some(name) = args.get(i).filter(|a| !a.starts_with('-')) {
                        member_pattern(program, name)?;
                        i += 1;
                    }
                }
                c if UNZIP_FLAGS.contains(*c) => modes.push(*c),
                other => {
                    return Err(Denial::new(format!(
                        "{program}: the option -{other} is not in the policy's list for unzip"
                    )))
                }
            }
        }
    }
    let Some(archive) = archive.filter(|a| a != "-") else {
        // `unzip -v` alone prints the version.
        if modes == "v" {
            return Ok(Analysis::default());
        }
        return Err(Denial::new(format!("{program}: no archive named")));
    };
    let mut analysis = Analysis::default();
    analysis.paths.push((archive.clone(), Access::Read));
    if modes.chars().any(|m| UNZIP_READ_ONLY_MODES.contains(m)) {
        return Ok(analysis);
    }
    if ctx.earlier_writes {
        return Err(Denial::new(format!(
            "{program} must run as its own command, not after a command that writes files in \
             the same string: the archive checked now may not be the one unzip reads"
        )));
    }
    let prefixed = |d: Denial| Denial::new(format!("{program}: {}", d.reason));
    let archive_path = ctx
        .paths
        .check(ctx.cwd, &archive, Access::Read)
        .map_err(prefixed)?;
    let dir = dir.unwrap_or_else(|| ".".to_string());
    let target = ctx
        .paths
        .check(ctx.cwd, &dir, Access::Write)
        .map_err(prefixed)?;
    // unzip adds `.zip` to a name it cannot open; the policy checks the name as written.
    let naming = Naming {
        junk_paths: modes.contains('j'),
        keep_versions: modes.contains('V'),
    };
    let members = zip_reader::members(&archive_path, naming)
        .map_err(|why| Denial::new(format!("{program}: the archive {archive} {why}")))?;
    let extraction = Extraction::new(program, &archive, &target, ctx.paths);
    for member in &members {
        extraction.write(&member.names, "holds")?;
    }
    analysis.paths.push((dir, Access::Write));
    Ok(analysis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn zip_writes_its_archive_and_stores_links_as_links() {
        let rule: ProgramRule = toml::from_str(
            "unknown_flags = \"deny\"\nflags = { \"-r\" = \"flag\", \"-T\" = \"flag\" }",
        )
        .unwrap();
        let a = zip(&rule, "zip", &words("-r out src notes.txt")).unwrap();
        assert_eq!(a.argv.unwrap()[..2], ["zip".to_string(), "-y".to_string()]);
        assert!(a.paths.contains(&("out".to_string(), Access::Write)));
        assert!(a.paths.contains(&("out.zip".to_string(), Access::Write)));
        assert!(a.paths.contains(&("src".to_string(), Access::Read)));
        assert!(!a.paths.contains(&("out".to_string(), Access::Read)));
        for cmd in ["-TT x.zip a", "-rTT x.zip a", "-@ x.zip", "-r", "-r - a"] {
            assert!(zip(&rule, "zip", &words(cmd)).is_err(), "zip {cmd}");
        }
    }
}
