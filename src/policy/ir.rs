//! The checked intermediate representation of a command string.
//!
//! The policy produces it and the executor runs it: argv are final literal strings (quotes,
//! escapes, `~`, the allowed variables and globs already resolved), every path in a redirection
//! is absolute and was validated, and the operators are evaluated by warden, never by a shell.

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

/// Simple commands joined by `|` (a `|&` is a `|` plus a `2>&1` on the left command).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pipeline {
    pub commands: Vec<Command>,
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
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckedPath {
    pub path: PathBuf,
    pub access: crate::policy::paths::Access,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Builtin {
    /// Change the working directory of the steps that follow to this checked absolute path.
    Cd(PathBuf),
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
    /// Every simple command in execution order.
    pub fn commands(&self) -> impl Iterator<Item = &Command> {
        self.steps.iter().flat_map(|s| s.pipeline.commands.iter())
    }

    /// A script of a single command with no redirections, for running argv directly.
    pub fn single(argv: Vec<String>, cwd: PathBuf) -> Script {
        Script {
            steps: vec![Step {
                connector: Connector::Seq,
                pipeline: Pipeline {
                    commands: vec![Command {
                        argv,
                        cwd,
                        redirects: Vec::new(),
                        builtin: None,
                        paths: Vec::new(),
                    }],
                },
            }],
        }
    }
}

impl Command {
    /// The argv as a shell-quoted string, for display (never for execution).
    pub fn display(&self) -> String {
        shell_words::join(&self.argv)
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
