//! `tar`: the flags come from the TOML rule (a closed list; program-running options denied
//! there), old-style mode letters (`tar xzf a.tgz`) are normalised first, and the roles of the
//! archive (`-f`), the directory (`-C`) and the member arguments depend on the mode.

use crate::policy::paths::Access;
use crate::policy::rules::{Analysis, FlagTakes, ProgramRule};
use crate::policy::Denial;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Create,
    Extract,
    List,
    Modify,
    Diff,
}

pub fn analyze(rule: &ProgramRule, program: &str, args: &[String]) -> Result<Analysis, Denial> {
    let args = normalize_old_style(rule, args);
    // Validates every flag against the closed list and collects -T/-X/-g style paths.
    let mut analysis = rule.analyze(program, &args)?;

    let mut mode: Option<Mode> = None;
    let mut archive: Option<String> = None;
    let mut directory: Option<String> = None;
    let mut members: Vec<String> = Vec::new();
    let mut removes_sources = false;
    let set_mode = |m: Mode, mode: &mut Option<Mode>| -> Result<(), Denial> {
        match mode {
            Some(old) if *old != m => {
                Err(Denial::new(format!("{program}: more than one mode given")))
            }
            _ => {
                *mode = Some(m);
                Ok(())
            }
        }
    };
    let mut i = 0;
    let mut options_ended = false;
    while i < args.len() {
        let arg = args[i].clone();
        i += 1;
        if options_ended || !arg.starts_with('-') || arg == "-" {
            members.push(arg);
            continue;
        }
        if arg == "--" {
            options_ended = true;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            let full = rule.flag_name(&format!("--{name}"));
            let mut value = || -> Result<String, Denial> {
                match inline {
                    Some(v) => Ok(v.to_string()),
                    None => {
                        let v = args.get(i).cloned().ok_or_else(|| {
                            Denial::new(format!("{program} {full}: missing its value"))
                        })?;
                        i += 1;
                        Ok(v)
                    }
                }
            };
            match full.as_str() {
                "--create" => set_mode(Mode::Create, &mut mode)?,
                "--extract" | "--get" => set_mode(Mode::Extract, &mut mode)?,
                "--list" => set_mode(Mode::List, &mut mode)?,
                "--append" | "--update" | "--catenate" | "--concatenate" | "--delete" => {
                    set_mode(Mode::Modify, &mut mode)?
                }
                "--diff" | "--compare" => set_mode(Mode::Diff, &mut mode)?,
                "--file" => archive = Some(value()?),
                "--directory" => set_directory(&mut directory, value()?, program)?,
                "--remove-files" => removes_sources = true,
                other => {
                    let takes = rule.flag_takes(other);
                    if inline.is_none()
                        && matches!(
                            takes,
                            Some(FlagTakes::Value | FlagTakes::Read | FlagTakes::Write)
                        )
                    {
                        i += 1;
                    }
                }
            }
            continue;
        }
        let cluster: Vec<char> = arg[1..].chars().collect();
        for (j, c) in cluster.iter().enumerate() {
            let rest: String = cluster[j + 1..].iter().collect();
            let mut value = || -> Result<String, Denial> {
                if !rest.is_empty() {
                    return Ok(rest.clone());
                }
                let v = args
                    .get(i)
                    .cloned()
                    .ok_or_else(|| Denial::new(format!("{program} -{c}: missing its value")))?;
                i += 1;
                Ok(v)
            };
            match c {
                'c' => set_mode(Mode::Create, &mut mode)?,
                'x' => set_mode(Mode::Extract, &mut mode)?,
                't' => set_mode(Mode::List, &mut mode)?,
                'r' | 'u' | 'A' => set_mode(Mode::Modify, &mut mode)?,
                'd' => set_mode(Mode::Diff, &mut mode)?,
                'f' => {
                    archive = Some(value()?);
                    break;
                }
                'C' => {
                    set_directory(&mut directory, value()?, program)?;
                    break;
                }
                other => {
                    let takes = rule.flag_takes(&format!("-{other}"));
                    if matches!(
                        takes,
                        Some(FlagTakes::Value | FlagTakes::Read | FlagTakes::Write)
                    ) {
                        if rest.is_empty() {
                            i += 1;
                        }
                        break;
                    }
                }
            }
        }
    }
    let mode = mode.ok_or_else(|| {
        Denial::new(format!(
            "{program}: no mode given (one of -c, -x, -t, -r, -u, -A, -d)"
        ))
    })?;
    if let Some(archive) = archive.filter(|a| a != "-") {
        let access = match mode {
            Mode::Create | Mode::Modify => Access::Write,
            _ => Access::Read,
        };
        analysis.paths.push((archive, access));
    }
    let dir = directory.clone().unwrap_or_else(|| ".".into());
    let dir_access = if mode == Mode::Extract {
        Access::Write
    } else {
        Access::Read
    };
    analysis.paths.push((dir.clone(), dir_access));
    let member_access = match mode {
        Mode::Create | Mode::Modify if removes_sources => Some(Access::Delete),
        Mode::Create | Mode::Modify | Mode::Diff => Some(Access::Read),
        Mode::Extract => Some(Access::Write),
        Mode::List => None,
    };
    if let Some(access) = member_access {
        for member in members {
            let path = Path::new(&dir).join(&member).to_string_lossy().into_owned();
            analysis.paths.push((path, access));
        }
    }
    Ok(analysis)
}

fn set_directory(slot: &mut Option<String>, dir: String, program: &str) -> Result<(), Denial> {
    if slot.is_some() {
        return Err(Denial::new(format!(
            "{program}: more than one -C is not supported; run separate commands"
        )));
    }
    *slot = Some(dir);
    Ok(())
}

/// `tar xzf a.tgz dir` → `tar -x -z -f a.tgz dir`: the first argument without a dash is a
/// bundle of letters whose values come from the following arguments, in order.
fn normalize_old_style(rule: &ProgramRule, args: &[String]) -> Vec<String> {
    let Some(first) = args.first() else {
        return Vec::new();
    };
    if first.starts_with('-') {
        return args.to_vec();
    }
    let mut out = Vec::new();
    let mut values = args[1..].iter();
    for c in first.chars() {
        let flag = format!("-{c}");
        let takes_value = c == 'f'
            || c == 'C'
            || matches!(
                rule.flag_takes(&flag),
                Some(FlagTakes::Value | FlagTakes::Read | FlagTakes::Write)
            );
        out.push(flag);
        if takes_value {
            if let Some(v) = values.next() {
                out.push(v.clone());
            }
        }
    }
    out.extend(values.cloned());
    out
}
