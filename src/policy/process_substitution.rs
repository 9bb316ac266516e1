//! Process substitution, `<(cmd)`: where it may stand and what it may run.
//!
//! The command runs beside the outer one, its stdout on a pipe warden makes; the outer program
//! gets the read end at a fixed descriptor and the path `/dev/fd/N` in place of the word. That
//! is honest only where the program reads a file operand (`comm -13 <(sort a) <(sort b)`,
//! `diff <(ls x) <(ls y)`): the program reads text, as it would from a checked file. Anywhere
//! else — a path it writes, a list of names, a file an analyzer reads to judge the command
//! (`sed -f`, `tar -tf`), the program name, a redirection target — the pipe's text would
//! decide what happens after the check, so it is refused. `>(cmd)` is refused where the word
//! is read (see `policy::words`).
//!
//! The inner command is held to command substitution's rules (`policy::substitution`):
//! allowed as it is and read-only. `/dev/fd/N` is never a readable path in general: only the
//! argument warden itself put there is exempt from the path check, and only the descriptor
//! warden made is behind it.

use super::ir::{ProcessSubstitution, Redirect, RedirectTarget};
use super::paths::Access;
use super::rules::{Analysis, ProgramRule};
use super::{Decision, Denial};

/// The descriptors a process substitution may take, highest first (the executor's table holds
/// 0-9; redirections usually take the low ones).
const DESCRIPTORS: std::ops::RangeInclusive<u8> = 3..=9;

/// Give each process substitution a descriptor no redirection of the command uses, and put its
/// path in argv.
pub(super) fn place(
    name: &str,
    argv: &mut [String],
    pipes: &mut [ProcessSubstitution],
    redirects: &[Redirect],
) -> Result<(), Denial> {
    if name == "cd" {
        return Err(Denial::new(
            "a process substitution is not a directory cd can enter",
        ));
    }
    let taken = |fd: u8| {
        redirects
            .iter()
            .any(|r| r.fd == fd || r.target == RedirectTarget::Dup(fd))
    };
    let mut free = DESCRIPTORS.rev().filter(|&fd| !taken(fd));
    for pipe in pipes.iter_mut() {
        let Some(fd) = free.next() else {
            return Err(Denial::new(format!(
                "{name}: too many process substitutions with these redirections (descriptors \
                 3-9 are all in use)"
            )));
        };
        pipe.fd = fd;
        argv[pipe.arg] = ProcessSubstitution::path(fd);
    }
    // The path stands for warden's pipe only where warden put it.
    for (i, arg) in argv.iter().enumerate() {
        if !pipes.iter().any(|p| p.arg == i) && arg.contains("/dev/fd/") {
            return Err(Denial::new(format!(
                "{name}: argument {i} ({arg}) names a descriptor path in a command with a process \
                 substitution; only warden's own pipe may stand there"
            )));
        }
    }
    Ok(())
}

/// The program, before its arguments are analyzed: allowed as it is, and judged from its
/// declared options alone (no analyzer that reads its files at check time, no copy).
pub(super) fn judge_program(name: &str, rule: &ProgramRule) -> Result<(), Denial> {
    if rule.decision != Decision::Allow {
        return Err(Denial::new(format!(
            "{name} needs approval; a process substitution is given only to a command the policy \
             allows as it is"
        )));
    }
    if rule.analyzer.is_some() {
        return Err(Denial::new(format!(
            "a process substitution is not supported for {name}: {name} is judged by its own \
             analyzer, which may read the files it names at check time, and the pipe's text \
             exists only when the command runs"
        )));
    }
    if rule.copies {
        return Err(Denial::new(format!(
            "a process substitution is not supported for {name}, which copies or moves files"
        )));
    }
    Ok(())
}

/// Each pipe must be a file operand the program only reads (not a list of names, not written),
/// in a command that asks nothing.
pub(super) fn judge_reads(name: &str, analysis: &Analysis, pipes: &[String]) -> Result<(), Denial> {
    if !analysis.ask.is_empty() || analysis.builtin.is_some() || analysis.runs_code.is_some() {
        return Err(Denial::new(format!(
            "{name} needs approval or is run by warden itself here; a process substitution is \
             given only to a program the policy allows as it is"
        )));
    }
    for pipe in pipes {
        if analysis.lists.iter().any(|l| &l.path == pipe) {
            return Err(Denial::new(format!(
                "a process substitution may not be a list of names for {name}: they would be \
                 known only when it runs"
            )));
        }
        let uses: Vec<Access> = analysis
            .paths
            .iter()
            .filter(|(path, _)| path == pipe)
            .map(|(_, access)| *access)
            .collect();
        if uses.is_empty() {
            return Err(Denial::new(format!(
                "a process substitution may stand only where {name} reads a file operand; here \
                 {name} does not take it as a file it reads"
            )));
        }
        if uses.iter().any(|a| *a != Access::Read) {
            return Err(Denial::new(format!(
                "a process substitution may stand only where {name} reads a file; here {name} \
                 would write to it"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ir::Script;

    fn pipe(arg: usize) -> ProcessSubstitution {
        ProcessSubstitution {
            arg,
            fd: 0,
            script: Script::default(),
        }
    }

    #[test]
    fn descriptors_avoid_the_commands_redirections() {
        let mut argv: Vec<String> = ["comm", "", ""].iter().map(|s| s.to_string()).collect();
        let mut pipes = [pipe(1), pipe(2)];
        let redirects = [
            Redirect {
                fd: 9,
                target: RedirectTarget::Close,
            },
            Redirect {
                fd: 2,
                target: RedirectTarget::Dup(8),
            },
        ];
        place("comm", &mut argv, &mut pipes, &redirects).unwrap();
        assert_eq!((pipes[0].fd, pipes[1].fd), (7, 6));
        assert_eq!(argv[1..], ["/dev/fd/7", "/dev/fd/6"]);
    }

    #[test]
    fn too_many_and_a_descriptor_path_written_out_are_refused() {
        let mut argv = vec![String::from("cat"); 9];
        let mut pipes: Vec<_> = (1..9).map(pipe).collect();
        assert!(place("cat", &mut argv, &mut pipes, &[]).is_err());
        let mut argv: Vec<String> = ["cat", "", "/dev/fd/3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(place("cat", &mut argv, &mut [pipe(1)], &[]).is_err());
        let mut argv: Vec<String> = ["cd", ""].iter().map(|s| s.to_string()).collect();
        assert!(place("cd", &mut argv, &mut [pipe(1)], &[]).is_err());
    }
}
