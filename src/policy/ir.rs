//! The checked intermediate representation of a command string.
//!
//! The policy produces it and the executor runs it: argv are final literal strings (quotes,
//! escapes, `~`, the allowed variables, brace expansions and globs already resolved; only `$?`
//! and command substitutions are filled in at run time, where the checker allowed them), every path in a redirection is
//! absolute and was validated, and the operators — `&& || ; |`, `!`, `{ }` groups, `( )`
//! subshells, `if` and `while`/`until` — are evaluated by warden, never by a shell. A `for`
//! loop arrives unrolled: its word list was expanded and every iteration checked.

use serde::Serialize;
use std::path::PathBuf;

/// Pipelines joined by `&&`, `||`, `;` or newlines, evaluated left to right as bash does:
/// a step runs when its connector says so given the status of the last step that ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Script {
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// How this step depends on the previous one; the first step's connector is `Seq`.
    pub connector: Connector,
    pub pipeline: Pipeline,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Connector {
    /// `;` or newline: always runs.
    Seq,
    /// `&&`: runs when the last status was 0.
    And,
    /// `||`: runs when the last status was not 0.
    Or,
}

impl Connector {
    /// Whether a step with this connector runs after a step that ended with `last_status`.
    pub fn runs_after(self, last_status: i32) -> bool {
        match self {
            Connector::Seq => true,
            Connector::And => last_status == 0,
            Connector::Or => last_status != 0,
        }
    }
}

/// Simple commands joined by `|` (a `|&` is a `|` plus a `2>&1` on the left command). A
/// compound command (group, subshell, `if`, loop) is a pipeline of its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pipeline {
    pub commands: Vec<Command>,
    /// `! pipeline`: the status is inverted (0 becomes 1, anything else 0).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub negated: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Command {
    pub argv: Vec<String>,
    /// The absolute working directory this command was checked against. The executor refuses
    /// to run it anywhere else (for example when a `cd` before it was skipped by `||`).
    pub cwd: PathBuf,
    /// Applied in order, after the pipe ends, exactly like bash.
    pub redirects: Vec<Redirect>,
    /// `cd` is evaluated by the executor itself; every other command is a program.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub builtin: Option<Builtin>,
    /// The arguments the policy checked as paths, resolved, with how they are used.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<CheckedPath>,
    /// Assignments written before the command (`LANG=C sort`), added to its environment.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, String)>,
    /// Where `$?` stands in argv: the checker put `0` there; the executor writes the status
    /// of the last pipeline instead.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub status_args: Vec<StatusArg>,
    /// Command substitutions, run before the command: each one's output goes into argv where
    /// it stood (see [`Substitution`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub substitutions: Vec<Substitution>,
    /// Process substitutions `<(…)`: each script runs beside the command, its stdout on a pipe
    /// the command gets at a fixed descriptor (see [`ProcessSubstitution`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub process_substitutions: Vec<ProcessSubstitution>,
    /// The program reads a checksum list (`md5sum -c`) on stdin: the executor reads the list
    /// first, checks every name it holds as a read, and only then feeds it to the program.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub checksums_on_stdin: bool,
    /// The program runs code the policy cannot read (`python3 tool.py`, `make`): the executor
    /// runs it only in a sandbox that confines code.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub runs_code: bool,
    /// The program reaches the network (a rule of `policy/network.toml`): the line runs with
    /// the jail's way out, warden's egress proxy.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// Why this command needs a person's approval; `None` when the policy allows it as it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<Ask>,
}

/// A command the policy asks about: its reasons, and the words an "always" approval of it
/// covers (see [`crate::policy::shape`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ask {
    pub reasons: Vec<String>,
    /// argv as checked (before an analyzer added its safety options), cut after the words
    /// that name what runs: the subcommand, the script or module; all of argv otherwise.
    pub shape: Vec<String>,
}

/// `argv[arg][offset..offset + 1]` is a `0` standing for `$?`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct StatusArg {
    pub arg: usize,
    pub offset: usize,
}

/// `"$(script)"` in `argv[arg]` at byte `offset`: the executor runs `script` first (in the
/// sandbox, stdin empty, stdout captured), strips the trailing newlines as bash does and
/// inserts the text there, one argument whatever it holds. The checker allowed it only where
/// any text is harmless, and only for a script that neither writes nor asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Substitution {
    pub arg: usize,
    pub offset: usize,
    pub script: Script,
}

/// `<(script)` as `argv[arg]`, which reads `/dev/fd/{fd}`: the executor starts `script` (in the
/// sandbox, stdin empty) with its stdout on a pipe whose read end the command gets as
/// descriptor `fd`, and waits for it after the command. The checker allowed it only where the
/// program reads a file operand, and only for a script that neither writes nor asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessSubstitution {
    pub arg: usize,
    pub fd: u8,
    pub script: Script,
}

impl ProcessSubstitution {
    /// The path the command is given: its own descriptor, never a file.
    pub fn path(fd: u8) -> String {
        format!("/dev/fd/{fd}")
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckedPath {
    pub path: PathBuf,
    pub access: crate::policy::paths::Access,
    /// The argument as the command wrote it (before `~`, `..` and symlinks were resolved).
    pub written: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Builtin {
    /// Change the working directory of the steps that follow to this checked absolute path.
    Cd(PathBuf),
    /// A compound command; its `redirects` apply to everything inside it.
    Compound(Box<Compound>),
    /// `chmod`, read exactly; on the host backend warden applies it itself (the jail's chmod
    /// calls do nothing), elsewhere the program runs. `argv` stays the command that was checked.
    Chmod(ChmodPlan),
    /// `xargs`, run by warden itself: each batch it builds is checked before it runs (see
    /// `policy::xargs`). `argv` stays the xargs command that was checked.
    Xargs(XargsPlan),
}

/// What warden's xargs does: split stdin (`-0`: at NUL bytes), batch it (`-n`), append each
/// batch to `command` and check that argv with `policy` before running it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct XargsPlan {
    pub command: Vec<String>,
    pub null: bool,
    pub max_args: Option<usize>,
    /// `-r`: nothing runs on empty input (else the command runs once with no extra argument).
    pub no_run_if_empty: bool,
    /// The policy that checked the line, which checks every batch; set by the checker.
    #[serde(skip)]
    pub policy: Option<PolicyRef>,
}

/// A policy inside the IR (equal when it is the same policy).
#[derive(Clone)]
pub struct PolicyRef(pub std::sync::Arc<super::Policy>);

impl PartialEq for PolicyRef {
    fn eq(&self, other: &PolicyRef) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for PolicyRef {}

impl std::fmt::Debug for PolicyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PolicyRef")
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChmodPlan {
    pub mode: ChmodMode,
    pub recursive: bool,
    pub report: ChmodReport,
    /// The checked files (as written, until the checker resolves them).
    pub files: Vec<PathBuf>,
    /// The files as the command wrote them, for chmod's messages.
    pub names: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChmodMode {
    /// A mode argument the policy parsed and accepted (see `policy::mode`).
    Change(String),
    /// `--reference`: the mode of this (checked, read) file.
    Like(PathBuf),
}

/// What chmod prints: nothing (`-f`), errors, changed files (`-c`), every file (`-v`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChmodReport {
    Quiet,
    Errors,
    Changes,
    Verbose,
}

impl ChmodPlan {
    /// The plan with its paths replaced by the checked ones, which come in the order the
    /// analyzer listed them: the files, then the reference.
    pub fn with_checked(mut self, checked: &[CheckedPath]) -> ChmodPlan {
        let count = self.files.len();
        self.files = checked.iter().take(count).map(|c| c.path.clone()).collect();
        if let (ChmodMode::Like(reference), Some(c)) = (&mut self.mode, checked.get(count)) {
            *reference = c.path.clone();
        }
        self
    }
}

/// Commands grouped as bash groups them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compound {
    /// `{ list; }` (and an unrolled `for` loop): runs in the current directory and changes it.
    Group(Script),
    /// `( list )`: a `cd` inside does not outlive it.
    Subshell(Script),
    /// `if c1; then b1; elif c2; then b2; else e; fi`: the first condition with status 0 runs its
    /// body; none does: `otherwise`, or status 0.
    If {
        branches: Vec<Branch>,
        otherwise: Option<Script>,
    },
    /// `while c; do b; done` (`until`: while the condition fails). Status: the last body's, 0
    /// when the body never ran.
    Loop {
        until: bool,
        condition: Script,
        body: Script,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Branch {
    pub condition: Script,
    pub body: Script,
}

impl Compound {
    /// The lists it holds, in the order they appear.
    fn scripts(&self) -> Vec<&Script> {
        match self {
            Compound::Group(s) | Compound::Subshell(s) => vec![s],
            Compound::If {
                branches,
                otherwise,
            } => branches
                .iter()
                .flat_map(|b| [&b.condition, &b.body])
                .chain(otherwise)
                .collect(),
            Compound::Loop {
                condition, body, ..
            } => vec![condition, body],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Redirect {
    /// The file descriptor in the command that is redirected (0-9).
    pub fd: u8,
    pub target: RedirectTarget,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RedirectTarget {
    /// A file, opened by warden after the path check; `path` is absolute and symlink-free.
    File { path: PathBuf, mode: OpenMode },
    /// `n>&m` / `n<&m`: a copy of descriptor `m`.
    Dup(u8),
    /// `n>&-`: closed.
    Close,
    /// Here-document or here-string content fed to the descriptor.
    Text(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenMode {
    Read,
    /// Create or truncate.
    Write,
    /// Create or append.
    Append,
    ReadWrite,
}

impl Script {
    /// Every simple command (a program, or `cd`), in the order written, compound commands
    /// opened up, a command's substitutions before it (they run first).
    pub fn commands(&self) -> impl Iterator<Item = &Command> {
        let mut out = Vec::new();
        self.collect_commands(&mut out);
        out.into_iter()
    }

    fn collect_commands<'a>(&'a self, out: &mut Vec<&'a Command>) {
        for step in &self.steps {
            for command in &step.pipeline.commands {
                match &command.builtin {
                    Some(Builtin::Compound(compound)) => {
                        for script in compound.scripts() {
                            script.collect_commands(out);
                        }
                    }
                    _ => {
                        for substitution in &command.substitutions {
                            substitution.script.collect_commands(out);
                        }
                        for substitution in &command.process_substitutions {
                            substitution.script.collect_commands(out);
                        }
                        out.push(command)
                    }
                }
            }
        }
    }

    /// Whether a command of the line may use the network when `[network]` has rules: a
    /// network program ([`Command::network`]), or code the policy cannot read (which may open
    /// connections as well as any program).
    pub fn may_use_network(&self) -> bool {
        self.commands().any(|c| c.network || c.runs_code)
    }

    /// The compound commands, outermost first, with their redirections.
    pub fn compounds(&self) -> impl Iterator<Item = &Command> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(script) = stack.pop() {
            for command in script.steps.iter().flat_map(|s| &s.pipeline.commands) {
                if let Some(Builtin::Compound(compound)) = &command.builtin {
                    out.push(command);
                    stack.extend(compound.scripts());
                }
            }
        }
        out.into_iter()
    }

    /// Every path the script may create, change or remove, as the policy checked it: program
    /// arguments it writes or removes and redirections that write — a compound command's own
    /// (`{ …; } > f`) included.
    pub fn written_paths(&self) -> Vec<&std::path::Path> {
        let mut out = Vec::new();
        for command in self.commands().chain(self.compounds()) {
            out.extend(
                command
                    .paths
                    .iter()
                    .filter(|p| p.access != crate::policy::paths::Access::Read)
                    .map(|p| p.path.as_path()),
            );
            out.extend(command.redirects.iter().filter_map(|r| match &r.target {
                RedirectTarget::File { path, mode } if *mode != OpenMode::Read => {
                    Some(path.as_path())
                }
                _ => None,
            }));
        }
        out
    }

    /// A script of a single command with no redirections, for running argv directly.
    pub fn single(argv: Vec<String>, cwd: PathBuf) -> Script {
        Script {
            steps: vec![Step {
                connector: Connector::Seq,
                pipeline: Pipeline {
                    commands: vec![Command::program(argv, cwd)],
                    negated: false,
                },
            }],
        }
    }
}

impl Command {
    /// A program with its argv, run in `cwd`, nothing else.
    pub fn program(argv: Vec<String>, cwd: PathBuf) -> Command {
        Command {
            argv,
            cwd,
            redirects: Vec::new(),
            builtin: None,
            paths: Vec::new(),
            env: Vec::new(),
            status_args: Vec::new(),
            substitutions: Vec::new(),
            process_substitutions: Vec::new(),
            checksums_on_stdin: false,
            runs_code: false,
            network: false,
            ask: None,
        }
    }

    /// The argv as a shell-quoted string, for display (never for execution); a compound
    /// command shows its keyword.
    pub fn display(&self) -> String {
        match &self.builtin {
            Some(Builtin::Compound(c)) => match **c {
                Compound::Group(_) => "{ … }".into(),
                Compound::Subshell(_) => "( … )".into(),
                Compound::If { .. } => "if …; fi".into(),
                Compound::Loop { until: false, .. } => "while …; done".into(),
                Compound::Loop { until: true, .. } => "until …; done".into(),
            },
            _ => {
                let assignments: Vec<String> = self
                    .env
                    .iter()
                    .map(|(k, v)| format!("{k}={}", shell_words::quote(v)))
                    .collect();
                let argv = shell_words::join(&self.argv);
                if assignments.is_empty() {
                    argv
                } else {
                    format!("{} {argv}", assignments.join(" "))
                }
            }
        }
    }

    /// argv with each substitution's output inserted where it stood (`outputs` in the order
    /// of [`Command::substitutions`]).
    pub fn argv_with_substitutions(&self, outputs: &[String]) -> Vec<String> {
        let mut argv = self.argv.clone();
        let mut places: Vec<(usize, &Substitution, &String)> = self
            .substitutions
            .iter()
            .zip(outputs)
            .enumerate()
            .map(|(i, (s, text))| (i, s, text))
            .collect();
        // From the end, so earlier offsets stay valid (`"$(a)$(b)"`: b goes in before a).
        places.sort_by_key(|(i, s, _)| std::cmp::Reverse((s.arg, s.offset, *i)));
        for (_, at, text) in places {
            if let Some(arg) = argv.get_mut(at.arg) {
                if arg.is_char_boundary(at.offset) {
                    arg.insert_str(at.offset, text);
                }
            }
        }
        argv
    }

    /// argv with the last status written where `$?` stood.
    pub fn argv_with_status(&self, status: i32) -> Vec<String> {
        let mut argv = self.argv.clone();
        let text = status.to_string();
        // From the end, so earlier offsets stay valid.
        for at in self.status_args.iter().rev() {
            if let Some(arg) = argv.get_mut(at.arg) {
                if arg.get(at.offset..at.offset + 1) == Some("0") {
                    arg.replace_range(at.offset..at.offset + 1, &text);
                }
            }
        }
        argv
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connectors_follow_bash_semantics() {
        assert!(Connector::Seq.runs_after(1));
        assert!(Connector::And.runs_after(0));
        assert!(!Connector::And.runs_after(2));
        assert!(Connector::Or.runs_after(2));
        assert!(!Connector::Or.runs_after(0));
    }

    #[test]
    fn display_quotes_arguments() {
        let cmd = &Script::single(vec!["echo".into(), "a b".into()], "/".into()).steps[0]
            .pipeline
            .commands[0];
        assert_eq!(cmd.display(), "echo 'a b'");
    }
}
