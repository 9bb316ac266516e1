//! `tar`: the flags come from the TOML rule (a closed list; program-running options denied
//! there), old-style mode letters (`tar xzf a.tgz`) are normalised first, and the roles of the
//! archive (`-f`), the directory (`-C`) and the member arguments depend on the mode.
//!
//! Extraction writes names the command line does not show, so the archive's members are read
//! as GNU tar reads them (`tar_reader`: pax global headers, sparse names, members after zero
//! blocks with `-i`) and each one checked as a write, member by member, through the links
//! earlier members make (`extraction`); renaming them (`--transform`) and restoring their
//! modes, owners or extended attributes (`-p`, `--xattrs`, `--acls`) are refused, and the
//! executed argv always carries `-o --no-same-permissions` (tar running as root would otherwise
//! restore setuid bits and foreign owners). An archive name of the form `host:path` is a remote
//! archive reached through rsh/ssh, refused unless `--force-local` says it is a local file.

use super::chmod;
use super::extraction::Extraction;
use super::tar_reader::{self, Kind};
use crate::policy::analyzers::AnalyzerContext;
use crate::policy::lists::{FileList, ListFormat};
use crate::policy::paths::Access;
use crate::policy::rules::{Analysis, FlagTakes, ProgramRule};
use crate::policy::Denial;
use std::path::Path;

/// Appended to every extraction: never restore owners or permission bits from the archive.
const EXTRACT_SAFETY: &[&str] = &["-o", "--no-same-permissions"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Create,
    Extract,
    List,
    Modify,
    Diff,
}

pub fn analyze(
    rule: &ProgramRule,
    program: &str,
    args: &[String],
    ctx: &AnalyzerContext,
) -> Result<Analysis, Denial> {
    let args = normalize_old_style(rule, args);
    // Validates every flag against the closed list and collects -T/-X/-g style paths.
    let mut analysis = rule.analyze(program, &args)?;

    let mut mode: Option<Mode> = None;
    let mut archive: Option<String> = None;
    let mut directory: Option<String> = None;
    let mut members: Vec<String> = Vec::new();
    let mut removes_sources = false;
    let mut force_local = false;
    let mut null_names = false;
    let mut name_lists: Vec<String> = Vec::new();
    let mut renames: Option<String> = None;
    let mut restores_modes: Option<String> = None;
    let mut strip = 0usize;
    let mut ignore_zeros = false;
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
                "--force-local" => force_local = true,
                "--null" => null_names = true,
                "--no-null" => null_names = false,
                "--files-from" => name_lists.push(value()?),
                "--transform" | "--xform" => {
                    value()?;
                    renames = Some(full.clone());
                }
                "--preserve-permissions"
                | "--same-permissions"
                | "--same-owner"
                | "--xattrs"
                | "--acls" => restores_modes = Some(full.clone()),
                "--ignore-zeros" => ignore_zeros = true,
                "--mode" => {
                    let mode = value()?;
                    chmod::check_mode(&mode)
                        .map_err(|why| Denial::new(format!("{program} --mode={mode}: {why}")))?;
                }
                "--strip-components" => {
                    let n = value()?;
                    strip = n.parse().map_err(|_| {
                        Denial::new(format!("{program} --strip-components {n}: not a number"))
                    })?;
                }
                other => {
                    let takes = rule.flag_takes(other);
                    if inline.is_none() && takes.is_some_and(FlagTakes::takes_argument) {
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
                'T' => {
                    name_lists.push(value()?);
                    break;
                }
                'p' => restores_modes = Some("-p".into()),
                'i' => ignore_zeros = true,
                other => {
                    let takes = rule.flag_takes(&format!("-{other}"));
                    if takes.is_some_and(FlagTakes::takes_argument) {
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
    if let Some(archive) = &archive {
        if is_remote_archive(archive) && !force_local {
            return Err(Denial::new(format!(
                "{program}: the archive name {archive} has a colon before any slash, which tar \
                 reads as host:path on another machine (reached through rsh/ssh); write \
                 ./{archive} or add --force-local"
            )));
        }
    }
    let dir = directory.clone().unwrap_or_else(|| ".".into());
    let member_access = match mode {
        Mode::Create | Mode::Modify if removes_sources => Some(Access::Delete),
        Mode::Create | Mode::Modify | Mode::Diff => Some(Access::Read),
        Mode::Extract => Some(Access::Write),
        Mode::List => None,
    };
    for list in name_lists {
        analysis.lists.push(FileList {
            path: list,
            format: if null_names {
                ListFormat::Nul
            } else {
                ListFormat::LinesWithOptions
            },
            base: Some(dir.clone()),
            // Listing only selects members; it reads the list file but opens none of them.
            access: member_access.unwrap_or(Access::Read),
        });
    }
    if let Some(archive) = archive.clone().filter(|a| a != "-") {
        let access = match mode {
            Mode::Create | Mode::Modify => Access::Write,
            _ => Access::Read,
        };
        analysis.paths.push((archive, access));
    }
    let dir_access = if mode == Mode::Extract {
        Access::Write
    } else {
        Access::Read
    };
    analysis.paths.push((dir.clone(), dir_access));
    if let Some(access) = member_access {
        for member in members {
            let path = Path::new(&dir).join(&member).to_string_lossy().into_owned();
            analysis.paths.push((path, access));
        }
    }
    if mode == Mode::Extract {
        if let Some(flag) = renames {
            return Err(Denial::new(format!(
                "{program} {flag}: renaming members while extracting writes names the policy \
                 cannot check (into .git/, for one)"
            )));
        }
        if let Some(flag) = restores_modes {
            return Err(Denial::new(format!(
                "{program} {flag}: restoring the archive's permissions, owners or extended \
                 attributes could create setuid, setgid or capability-carrying files, which \
                 chmod refuses too"
            )));
        }
        let links = check_members(program, archive.as_deref(), &dir, strip, ignore_zeros, ctx)?;
        analysis.links.extend(
            links
                .iter()
                .map(|l| Path::new(&dir).join(l).to_string_lossy().into_owned()),
        );
        let mut argv = vec![program.to_string()];
        argv.extend(args.iter().cloned());
        // Options after `--` would be member names.
        let at = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
        for (k, flag) in EXTRACT_SAFETY.iter().enumerate() {
            argv.insert(at + k, (*flag).to_string());
        }
        analysis.argv = Some(argv);
    }
    Ok(analysis)
}

/// GNU tar's rule: a colon before the first slash makes the name `[user@]host:path`.
fn is_remote_archive(name: &str) -> bool {
    match name.find(':') {
        Some(colon) => !name[..colon].contains('/'),
        None => false,
    }
}

/// Read the archive's members and check each one, member by member, as a write under the
/// extraction directory; returns the symbolic links extraction makes (relative to it).
fn check_members(
    program: &str,
    archive: Option<&str>,
    dir: &str,
    strip: usize,
    ignore_zeros: bool,
    ctx: &AnalyzerContext,
) -> Result<Vec<std::path::PathBuf>, Denial> {
    let archive = match archive {
        Some(a) if a != "-" => a,
        _ => {
            return Err(Denial::new(format!(
                "{program}: extracting from standard input writes files the policy cannot see \
                 first; extract from a file with -f ARCHIVE"
            )))
        }
    };
    if ctx.earlier_writes {
        return Err(Denial::new(format!(
            "{program} -x must run as its own command, not after a command that writes files \
             in the same string: the archive checked now may not be the one tar reads"
        )));
    }
    let archive_path = ctx.paths.check(ctx.cwd, archive, Access::Read)?;
    let target = ctx.paths.check(ctx.cwd, dir, Access::Write)?;
    let members = tar_reader::members(&archive_path, strip, ignore_zeros)
        .map_err(|why| Denial::new(format!("{program}: the archive {archive} {why}")))?;
    let mut extraction = Extraction::new(program, archive, &target, ctx.paths);
    for member in &members {
        match &member.kind {
            Kind::File | Kind::Dir => extraction.write(&member.names, "holds")?,
            Kind::Symlink => extraction.link(&member.names)?,
            Kind::HardLink(targets) => {
                extraction.write(&member.names, "holds")?;
                extraction.write(targets, "links to")?;
            }
        }
    }
    Ok(extraction.links().to_vec())
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
            || rule
                .flag_takes(&flag)
                .is_some_and(FlagTakes::takes_argument);
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
