//! `find`: leading options, start paths (read), then an expression whose primaries are checked
//! one by one against a closed list. Actions that run programs or delete files are denied,
//! the files `-fprint` and its kin write are write paths;
//! an unknown primary is denied rather than guessed at. Following symbolic links (`-L`, `-H`,
//! `-follow`) is refused as `ls -L` is: the walk would leave the checked tree through any link
//! beneath it; so is `-files0-from`, whose starting points the policy would not see.

use crate::policy::paths::Access;
use crate::policy::rules::Analysis;
use crate::policy::Denial;

/// Primaries that run commands, delete or write files.
const DENIED: &[(&str, &str)] = &[
    ("-exec", "runs a command for each file"),
    ("-execdir", "runs a command for each file"),
    ("-ok", "runs a command for each file"),
    ("-okdir", "runs a command for each file"),
    ("-delete", "deletes files (use rm on explicit paths)"),
    ("-follow", FOLLOWS_LINKS),
    (
        "-files0-from",
        "reads its starting points from a file the policy does not check; name them",
    ),
];

const FOLLOWS_LINKS: &str = "follows symbolic links, out of the searched tree (without it find \
                             lists links as links)";

/// Primaries whose first value is a file that is written (created even when nothing matches);
/// `-fprintf FILE FORMAT` also takes a format.
const WITH_OUTPUT: &[&str] = &["-fprint", "-fprint0", "-fprintf", "-fls"];

/// Primaries that take one value that is not a path.
const WITH_VALUE: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-regextype",
    "-type",
    "-xtype",
    "-perm",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-size",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-used",
    "-links",
    "-inum",
    "-maxdepth",
    "-mindepth",
    "-printf",
    "-lname",
    "-ilname",
    "-fstype",
    "-context",
];

/// Primaries whose value is a file that is read (its timestamps or identity).
const WITH_PATH: &[&str] = &["-newer", "-anewer", "-cnewer", "-samefile"];

const WITHOUT_VALUE: &[&str] = &[
    "-print",
    "-print0",
    "-ls",
    "-prune",
    "-quit",
    "-true",
    "-false",
    "-empty",
    "-readable",
    "-writable",
    "-executable",
    "-depth",
    "-d",
    "-mount",
    "-xdev",
    "-noleaf",
    "-nouser",
    "-nogroup",
    "-daystart",
    "-ignore_readdir_race",
    "-noignore_readdir_race",
    "-warn",
    "-nowarn",
    "-a",
    "-and",
    "-o",
    "-or",
    "-not",
    "!",
    "(",
    ")",
    ",",
];

pub fn analyze(program: &str, args: &[String]) -> Result<Analysis, Denial> {
    let mut analysis = Analysis::default();
    let mut i = 0;
    // Leading options: -H -L -P, -D debugopts, -Olevel.
    while i < args.len() {
        match args[i].as_str() {
            "-P" => i += 1,
            option @ ("-H" | "-L") => {
                return Err(Denial::new(format!("{program} {option}: {FOLLOWS_LINKS}")))
            }
            "-D" => i += 2,
            a if a.starts_with("-O") && a[2..].chars().all(|c| c.is_ascii_digit()) => i += 1,
            _ => break,
        }
    }
    // Start paths: everything up to the first expression token.
    while i < args.len() {
        let a = args[i].as_str();
        if a.starts_with('-') || matches!(a, "(" | ")" | "!" | ",") {
            break;
        }
        analysis.paths.push((a.to_string(), Access::Read));
        i += 1;
    }
    while i < args.len() {
        let primary = args[i].as_str();
        i += 1;
        if let Some((_, why)) = DENIED.iter().find(|(p, _)| *p == primary) {
            return Err(Denial::new(format!("{program} {primary}: {why}")));
        }
        if WITHOUT_VALUE.contains(&primary) {
            continue;
        }
        if WITH_OUTPUT.contains(&primary) {
            let file = args
                .get(i)
                .ok_or_else(|| Denial::new(format!("{program} {primary}: missing its file")))?;
            analysis.paths.push((file.clone(), Access::Write));
            i += if primary == "-fprintf" { 2 } else { 1 };
            if i > args.len() {
                return Err(Denial::new(format!(
                    "{program} -fprintf: missing its format"
                )));
            }
            continue;
        }
        let takes_path = WITH_PATH.contains(&primary) || is_newer_xy_with_file(primary);
        let takes_value = WITH_VALUE.contains(&primary) || is_newer_xy_with_time(primary);
        if !(takes_path || takes_value) {
            return Err(Denial::new(format!(
                "{program}: the expression {primary:?} is not in the policy's list of find \
                 primaries"
            )));
        }
        let value = args
            .get(i)
            .ok_or_else(|| Denial::new(format!("{program} {primary}: missing its value")))?;
        i += 1;
        if takes_path {
            analysis.paths.push((value.clone(), Access::Read));
        }
    }
    Ok(analysis)
}

/// `-newerXY FILE` where Y is not `t` compares with a file's timestamp.
fn is_newer_xy_with_file(p: &str) -> bool {
    newer_xy(p).is_some_and(|y| y != 't')
}

/// `-newerXt TIME` compares with a literal time.
fn is_newer_xy_with_time(p: &str) -> bool {
    newer_xy(p) == Some('t')
}

fn newer_xy(p: &str) -> Option<char> {
    let xy = p.strip_prefix("-newer")?;
    let mut chars = xy.chars();
    let (x, y) = (chars.next()?, chars.next()?);
    let valid = chars.next().is_none() && "aBcm".contains(x) && "aBcmt".contains(y);
    valid.then_some(y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Analysis, Denial> {
        analyze(
            "find",
            &args.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn start_paths_and_reference_files_are_read_paths() {
        let a = run(&[
            "-P",
            "src",
            "docs",
            "-name",
            "*.rs",
            "-newer",
            "/etc/passwd",
            "-print",
        ])
        .unwrap();
        let paths: Vec<&str> = a.paths.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["src", "docs", "/etc/passwd"]);
    }

    #[test]
    fn actions_are_denied_and_unknown_primaries_too() {
        assert!(run(&[".", "-exec", "sh", "-c", "id", ";"])
            .unwrap_err()
            .reason
            .contains("-exec"));
        assert!(run(&[".", "-delete"]).is_err());
        let out = run(&[".", "-fprintf", "/tmp/x", "%p", "-fls", "l"]).unwrap();
        assert_eq!(
            out.paths[1..],
            [
                ("/tmp/x".to_string(), Access::Write),
                ("l".to_string(), Access::Write)
            ]
        );
        assert!(run(&[".", "-fprintf", "/tmp/x"]).is_err());
        assert!(run(&[".", "-frobnicate"]).is_err());
        assert!(run(&[".", "-newermt", "2024-01-01"]).unwrap().paths.len() == 1);
    }

    #[test]
    fn following_links_and_unseen_starting_points_are_refused() {
        for args in [
            &["-L", ".", "-name", "x"][..],
            &["-H", "src"],
            &["-P", "-L", "."],
            &[".", "-follow", "-print"],
            &["-files0-from", "names0", "-print"],
        ] {
            let err = run(args).unwrap_err().reason;
            assert!(
                err.contains("symbolic links") || err.contains("starting points"),
                "{args:?}: {err}"
            );
        }
    }
}
