//! `chmod`: files are write paths; the mode must not set the setuid, setgid or sticky bits, so
//! nothing in the workspace becomes a privileged program for someone else. The checked plan
//! (mode, files, -R) is what the executor applies itself on the host backend, where the jail's
//! own chmod calls do nothing.

use crate::policy::ir::{Builtin, ChmodMode, ChmodPlan, ChmodReport};
use crate::policy::mode;
use crate::policy::paths::Access;
use crate::policy::rules::{Analysis, ProgramRule};
use crate::policy::Denial;
use std::path::PathBuf;

pub fn analyze(rule: &ProgramRule, program: &str, args: &[String]) -> Result<Analysis, Denial> {
    // The rule's own flag denials still apply; the paths come from chmod's exact reading.
    rule.analyze(program, args)?;
    let plan = plan(program, args)?;
    let mut analysis = Analysis::default();
    for file in &plan.files {
        analysis
            .paths
            .push((file.to_string_lossy().into_owned(), Access::Write));
    }
    if let ChmodMode::Like(reference) = &plan.mode {
        analysis
            .paths
            .push((reference.to_string_lossy().into_owned(), Access::Read));
    }
    analysis.builtin = Some(Builtin::Chmod(plan));
    Ok(analysis)
}

/// Read chmod's arguments as GNU chmod does: options (clustered or not, `--` ends them), then
/// the mode (unless `--reference`), then the files. `-w`-like arguments are modes.
fn plan(program: &str, args: &[String]) -> Result<ChmodPlan, Denial> {
    let deny = |why: String| Denial::new(format!("{program}: {why}"));
    let mut recursive = false;
    let mut report = ChmodReport::Errors;
    let mut reference = None;
    let mut operands: Vec<&str> = Vec::new();
    let mut options_ended = false;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if options_ended || arg == "-" || !arg.starts_with('-') || is_symbolic_removal(arg) {
            operands.push(arg);
            continue;
        }
        if arg == "--" {
            options_ended = true;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            match name {
                "recursive" => recursive = true,
                "verbose" => report = ChmodReport::Verbose,
                "changes" => report = ChmodReport::Changes,
                "silent" | "quiet" => report = ChmodReport::Quiet,
                "preserve-root" | "no-preserve-root" => {}
                "reference" => {
                    let value = match inline {
                        Some(value) => value.to_string(),
                        None => {
                            let value = args
                                .get(i)
                                .ok_or_else(|| deny("--reference needs a file".into()))?;
                            i += 1;
                            value.clone()
                        }
                    };
                    if value.is_empty() || reference.is_some() {
                        return Err(deny("give --reference once, naming a file".into()));
                    }
                    reference = Some(PathBuf::from(value));
                }
                _ => return Err(deny(format!("option --{name} is not supported"))),
            }
            continue;
        }
        for flag in arg[1..].chars() {
            match flag {
                'R' => recursive = true,
                'v' => report = ChmodReport::Verbose,
                'c' => report = ChmodReport::Changes,
                'f' => report = ChmodReport::Quiet,
                'P' => {}
                'H' | 'L' => {
                    return Err(deny(format!(
                        "-{flag} follows symbolic links during -R; warden's chmod never does"
                    )))
                }
                _ => return Err(deny(format!("option -{flag} is not supported"))),
            }
        }
    }
    let mode = match reference {
        Some(reference) => ChmodMode::Like(reference),
        None => {
            let text = operands
                .first()
                .copied()
                .ok_or_else(|| deny("no mode given".into()))?;
            operands.remove(0);
            check_mode(text).map_err(|why| deny(format!("{text}: {why}")))?;
            ChmodMode::Change(text.to_string())
        }
    };
    if operands.is_empty() {
        return Err(deny("no file given".into()));
    }
    Ok(ChmodPlan {
        mode,
        recursive,
        report,
        names: operands.iter().map(|name| name.to_string()).collect(),
        files: operands.into_iter().map(PathBuf::from).collect(),
    })
}

/// `-x` or `-w` look like flags but are symbolic modes.
fn is_symbolic_removal(arg: &str) -> bool {
    arg.len() > 1 && arg[1..].chars().all(|c| "rwxXst".contains(c))
}

/// Refuse a mode that could set the setuid, setgid or sticky bit, or one chmod would not read
/// as a mode (parsed clause by clause as chmod does, so `u+x-s+s` is caught).
pub(super) fn check_mode(text: &str) -> Result<(), String> {
    if mode::parse(text)?.can_add_special_bits() {
        return Err("setuid, setgid and sticky bits are not allowed".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_mode;

    #[test]
    fn special_bits_are_refused() {
        for ok in [
            "644",
            "0755",
            "u+x",
            "go-w",
            "a=r",
            "u+rw,g-x",
            "u-s",
            "u=rwx,go=rx",
            "a-st",
            "=",
            "g=u",
            "-4000",
        ] {
            assert!(check_mode(ok).is_ok(), "{ok}");
        }
        for bad in [
            "4755", "2755", "1777", "u+s", "g+s", "+t", "a=rws", "u+x,g+s", "u+x-s+s", "+4000",
            "g=u+s", "u=x=s", "", "u", "x+s", "u+q",
        ] {
            assert!(check_mode(bad).is_err(), "{bad}");
        }
    }
}
