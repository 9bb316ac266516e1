//! `chmod`: files are write paths (from the rule); the mode must not set the setuid, setgid or
//! sticky bits, so nothing in the workspace becomes a privileged program for someone else.

use crate::policy::rules::{Analysis, ProgramRule};
use crate::policy::Denial;

pub fn analyze(rule: &ProgramRule, program: &str, args: &[String]) -> Result<Analysis, Denial> {
    let mut analysis = rule.analyze(program, args)?;
    let uses_reference = args.iter().any(|a| a.starts_with("--reference"));
    if !uses_reference {
        // The mode is the first positional; it was also checked as a (harmless) path.
        let mode = args
            .iter()
            .find(|a| !a.starts_with('-') || is_symbolic_removal(a))
            .ok_or_else(|| Denial::new(format!("{program}: no mode given")))?;
        check_mode(mode).map_err(|why| Denial::new(format!("{program} {mode}: {why}")))?;
        if let Some(pos) = analysis.paths.iter().position(|(p, _)| p == mode) {
            analysis.paths.remove(pos);
        }
    }
    Ok(analysis)
}

/// `-x` or `-w` look like flags but are symbolic modes.
fn is_symbolic_removal(arg: &str) -> bool {
    arg.len() > 1 && arg[1..].chars().all(|c| "rwxXst".contains(c))
}

/// Refuse a mode that sets the setuid, setgid or sticky bit, or one chmod would not read as
/// a mode. Symbolic modes are parsed clause by clause as chmod does (`[ugoa]*([-+=]PERMS)+`,
/// PERMS being letters, a class to copy, or octal digits), so `u+x-s+s` is caught.
pub(super) fn check_mode(mode: &str) -> Result<(), String> {
    let special = || Err("setuid, setgid and sticky bits are not allowed".to_string());
    if !mode.is_empty() && mode.chars().all(|c| c.is_ascii_digit()) {
        let value = u32::from_str_radix(mode, 8).map_err(|_| "not an octal mode".to_string())?;
        if value & 0o7000 != 0 {
            return special();
        }
        return Ok(());
    }
    for clause in mode.split(',') {
        let ops = clause.trim_start_matches(['u', 'g', 'o', 'a']);
        if ops.is_empty() || !ops.starts_with(['+', '-', '=']) {
            return Err("not a mode chmod understands".into());
        }
        // Split into (operator, permissions) pairs.
        let mut rest = ops;
        while let Some(op) = rest.chars().next() {
            rest = &rest[1..];
            let end = rest.find(['+', '-', '=']).unwrap_or(rest.len());
            let perms = &rest[..end];
            rest = &rest[end..];
            let adds = op != '-';
            if perms.chars().all(|c| c.is_ascii_digit()) && !perms.is_empty() {
                let value =
                    u32::from_str_radix(perms, 8).map_err(|_| "not an octal mode".to_string())?;
                if adds && value & 0o7000 != 0 {
                    return special();
                }
                continue;
            }
            if !perms.chars().all(|c| "rwxXstugo".contains(c)) {
                return Err("not a mode chmod understands".into());
            }
            if adds && perms.contains(['s', 't']) {
                return special();
            }
        }
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
