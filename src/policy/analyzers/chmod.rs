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

fn check_mode(mode: &str) -> Result<(), String> {
    if mode.chars().all(|c| c.is_ascii_digit()) {
        let value = u32::from_str_radix(mode, 8).map_err(|_| "not an octal mode".to_string())?;
        if value & 0o7000 != 0 {
            return Err("setuid, setgid and sticky bits are not allowed".into());
        }
        return Ok(());
    }
    for clause in mode.split(',') {
        let ops = clause.trim_start_matches(['u', 'g', 'o', 'a']);
        let adds_special = ops
            .split(['-'])
            .next()
            .is_some_and(|adding| adding.contains(['s', 't']))
            || (ops.starts_with('=') && ops.contains(['s', 't']));
        if adds_special {
            return Err("setuid, setgid and sticky bits are not allowed".into());
        }
        if !ops.chars().all(|c| "+-=rwxXstugo".contains(c)) || ops.is_empty() {
            return Err("not a mode chmod understands".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_mode;

    #[test]
    fn special_bits_are_refused() {
        for ok in ["644", "0755", "u+x", "go-w", "a=r", "u+rw,g-x", "u-s"] {
            assert!(check_mode(ok).is_ok(), "{ok}");
        }
        for bad in [
            "4755", "2755", "1777", "u+s", "g+s", "+t", "a=rws", "u+x,g+s",
        ] {
            assert!(check_mode(bad).is_err(), "{bad}");
        }
    }
}
