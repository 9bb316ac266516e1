//! xargs' options and input, as GNU xargs reads them (the checker checks its fixed command and
//! the executor every batch: see `crate::policy::xargs`).

use crate::policy::ir::{Builtin, XargsPlan};
use crate::policy::rules::Analysis;
use crate::policy::Denial;

/// What GNU xargs puts on one command line by default (`-s`), in bytes.
pub const LINE_BYTES: usize = 128 * 1024;

/// The analyzer: xargs' options and its fixed command, which the checker checks on its own.
pub fn analyze(program: &str, args: &[String]) -> Result<Analysis, Denial> {
    let _ = program;
    Ok(Analysis {
        builtin: Some(Builtin::Xargs(plan(args)?)),
        ..Analysis::default()
    })
}

/// Read xargs' options (`args`: its arguments); the rest is the fixed command.
fn plan(args: &[String]) -> Result<XargsPlan, Denial> {
    let argv = args;
    let mut null = false;
    let mut max_args = None;
    let mut no_run_if_empty = false;
    let mut i = 0;
    let number = |text: &str| -> Result<usize, Denial> {
        text.parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| Denial::new(format!("xargs: -n takes a positive number, not {text:?}")))
    };
    while let Some(arg) = argv.get(i) {
        match arg.as_str() {
            "--" => {
                i += 1;
                break;
            }
            "-0" | "--null" => null = true,
            "-r" | "--no-run-if-empty" => no_run_if_empty = true,
            "-n" | "--max-args" => {
                i += 1;
                let value = argv
                    .get(i)
                    .ok_or_else(|| Denial::new("xargs: -n needs a number"))?;
                max_args = Some(number(value)?);
            }
            other if other.starts_with("--max-args=") => {
                max_args = Some(number(&other["--max-args=".len()..])?)
            }
            other if other.starts_with("-n") => max_args = Some(number(&other[2..])?),
            other if other.starts_with('-') => {
                return Err(Denial::new(format!(
                    "xargs: the option {other} is not one warden's xargs does (only -0, -n N \
                     and -r are: warden runs xargs itself, checking every batch)"
                )))
            }
            _ => break,
        }
        i += 1;
    }
    let command = argv[i..].to_vec();
    let Some(program) = command.first() else {
        return Err(Denial::new(
            "xargs needs the command to run (xargs alone runs echo: write xargs echo)",
        ));
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    if matches!(name, "xargs" | "git" | "cd") {
        return Err(Denial::new(format!(
            "xargs {name} is not allowed: warden checks each batch of xargs as a plain program, \
             and {name} is not one"
        )));
    }
    Ok(XargsPlan {
        command,
        null,
        max_args,
        no_run_if_empty,
        policy: None,
    })
}

/// Split xargs' input as GNU xargs does: NUL-separated items with `-0`; otherwise blanks and
/// newlines separate, quotes group (no newline inside) and a backslash escapes the next
/// character.
pub fn items(input: &[u8], null: bool) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(input)
        .map_err(|_| "xargs: the input is not UTF-8, which warden cannot check".to_string())?;
    if null {
        let mut items: Vec<String> = text.split('\0').map(String::from).collect();
        if text.ends_with('\0') || text.is_empty() {
            items.pop();
        }
        return Ok(items);
    }
    let mut items = Vec::new();
    let mut current = String::new();
    let mut started = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if started {
                    items.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            '\'' | '"' => {
                started = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some('\n') | None => {
                            return Err(format!(
                                "xargs: unmatched {} quote in the input",
                                if c == '"' { "double" } else { "single" }
                            ))
                        }
                        Some(other) => current.push(other),
                    }
                }
            }
            '\\' => {
                started = true;
                match chars.next() {
                    Some(next) => current.push(next),
                    None => return Err("xargs: a backslash ends the input".into()),
                }
            }
            other => {
                started = true;
                current.push(other);
            }
        }
    }
    if started {
        items.push(current);
    }
    Ok(items)
}

/// The batches: at most `-n` items, the policy's argument limit and GNU's line length each.
pub fn batches(plan: &XargsPlan, items: Vec<String>, max_argv: usize) -> Vec<Vec<String>> {
    let fixed: usize = plan.command.iter().map(|a| a.len() + 1).sum();
    let per_batch = plan
        .max_args
        .unwrap_or(usize::MAX)
        .min(max_argv.saturating_sub(plan.command.len()).max(1));
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut batch: Vec<String> = Vec::new();
    let mut bytes = fixed;
    for item in items {
        let size = item.len() + 1;
        if !batch.is_empty() && (batch.len() >= per_batch || bytes + size > LINE_BYTES) {
            out.push(std::mem::take(&mut batch));
            bytes = fixed;
        }
        bytes += size;
        batch.push(item);
    }
    if !batch.is_empty() {
        out.push(batch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn input_splits_as_gnu_xargs_splits_it() {
        assert_eq!(
            items(b"a b\n  c\t'd e' \"f g\" h\\ i -rf\n", false).unwrap(),
            strings(&["a", "b", "c", "d e", "f g", "h i", "-rf"])
        );
        assert_eq!(items(b"a\0b c\0", true).unwrap(), strings(&["a", "b c"]));
        assert_eq!(items(b"''", false).unwrap(), strings(&[""]));
        assert!(items(b"'a\nb'", false).is_err());
        assert!(items(b"\"a", false).is_err());
        assert!(items(b"", false).unwrap().is_empty());
    }

    #[test]
    fn options_are_a_closed_list() {
        let plan = plan(&strings(&["-0", "-n", "2", "-r", "grep", "-n", "x"])).unwrap();
        assert!(plan.null && plan.no_run_if_empty);
        assert_eq!(plan.max_args, Some(2));
        assert_eq!(plan.command, strings(&["grep", "-n", "x"]));
        for bad in [
            &["-I{}", "cat", "{}"][..],
            &["-P", "4", "cat"],
            &["-a", "list", "cat"],
            &["-n", "0", "cat"],
            &["--", "-0"][..0],
            &["git", "log"],
            &["-0", "xargs", "cat"],
        ] {
            assert!(self::plan(&strings(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn batches_follow_n_the_policy_limit_and_the_line_length() {
        let mut plan = plan(&strings(&["-n", "2", "cat"])).unwrap();
        let items = strings(&["a", "b", "c"]);
        assert_eq!(batches(&plan, items.clone(), 100).len(), 2);
        plan.max_args = None;
        assert_eq!(batches(&plan, items.clone(), 100), vec![items.clone()]);
        assert_eq!(batches(&plan, items, 2).len(), 3);
        let long = vec!["x".repeat(100 * 1024), "y".repeat(100 * 1024)];
        assert_eq!(batches(&plan, long, 100).len(), 2);
    }
}
