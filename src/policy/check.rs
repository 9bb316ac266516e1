//! The checker: parse, then walk the script in order with a static cwd, expanding words,
//! applying the program rules and analyzers, checking every path and redirection, and
//! building the IR the executor will run. The first denial wins; `ask` reasons are collected.
//! Compound commands (groups, subshells, `if`, loops, `[[ ]]`) are walked in `compound.rs`.

use super::analyzers::{self, AnalyzerContext};
use super::assignments;
use super::copies;
use super::derived;
use super::expand::{Expander, UnknownVariables};
use super::grammar::{self, RawCommand, RawScript, RawUnit};
use super::ir::{
    Ask, Builtin, CheckedPath, Command, OpenMode, Pipeline, ProcessSubstitution, Redirect,
    RedirectTarget, Script, StatusArg, Step, Substitution,
};
use super::line_links::{self, LineLinks, Made};
use super::lists;
use super::paths::{Access, PathPolicy};
use super::process_substitution;
use super::rules::{Analysis, ProgramRule};
use super::substitution_places;
use super::syntax::{self, RawRedirect, RawTarget, RedirectOp};
use super::words::RawWord;
use super::{Decision, Denial, Policy, Verdict};
use std::cell::RefCell;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Programs that may take `$?` as an argument: they only print or compare it.
const STATUS_READERS: &[&str] = &["echo", "printf", "test", "[", "expr"];

/// Simple commands one command string may check (loops are unrolled; this bounds the work).
const MAX_COMMANDS: usize = 10_000;

/// Directories a program named by absolute path may come from.
const SYSTEM_BIN_DIRS: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"];

pub struct Checker {
    policy: Arc<Policy>,
    paths: PathPolicy,
    /// In a cell: a command substitution's source is parsed while its command is checked.
    parser: RefCell<tree_sitter::Parser>,
    unknown_variables: UnknownVariables,
    /// Variables the jail's environment sets with values known before the line runs (name,
    /// value): `[network.secrets]` placeholders. Expanded as written here, never to nothing.
    jail_variables: Vec<(String, String)>,
    /// Whether warden's executor runs the commands (it runs command substitutions itself);
    /// `false` for a real shell, which would run them unchecked.
    substitutions: bool,
}

/// What one command contributes besides its IR.
pub(super) struct Checked {
    pub command: Command,
    pub asks: Vec<String>,
    pub writes: bool,
    /// Where it makes symbolic links: see [`Walk::links`].
    pub links: Made,
}

/// What the walk over a script carries from command to command.
#[derive(Clone, Debug)]
pub(super) struct Walk {
    /// Where the next command runs (physical, checked).
    pub cwd: PathBuf,
    /// bash's `$PWD` (logical: symlinks kept as written).
    pub logical_cwd: PathBuf,
    /// An earlier command may have written files (analyzers reading disk must refuse).
    pub earlier_writes: bool,
    pub asks: Vec<String>,
    /// Variables bound by enclosing `for` loops, innermost last.
    /// `None`: set by a loop that has ended, to a value known only when it runs.
    pub vars: Vec<(String, Option<String>)>,
    /// Simple commands checked so far.
    pub commands: usize,
    /// Where earlier commands of the line make symbolic links (see `line_links`).
    pub links: LineLinks,
    /// Directories earlier commands of the line create (`mkdir`): `cd` may go there before
    /// they exist; the executor checks the directory when the `cd` runs.
    pub made_dirs: Vec<PathBuf>,
    /// How many groups, loops or ifs enclose the command being checked.
    pub nesting: usize,
    /// Checking the command of a command substitution (which may hold no other).
    pub in_substitution: bool,
    /// A command since the start (of the line, or of a substitution's command) writes.
    pub wrote: bool,
}

impl Walk {
    /// The start of a line in `cwd` (checked, physical).
    pub fn at(cwd: PathBuf) -> Walk {
        Walk {
            logical_cwd: cwd.clone(),
            cwd,
            earlier_writes: false,
            asks: Vec::new(),
            vars: Vec::new(),
            commands: 0,
            links: LineLinks::default(),
            made_dirs: Vec::new(),
            nesting: 0,
            in_substitution: false,
            wrote: false,
        }
    }

    /// Record whether a command writes (analyzers after it must not trust the disk).
    pub fn note_writes(&mut self, writes: bool) {
        self.earlier_writes |= writes;
        self.wrote |= writes;
    }

    pub fn ask(&mut self, reasons: Vec<String>) {
        for reason in reasons {
            if !self.asks.contains(&reason) {
                self.asks.push(reason);
            }
        }
    }
}

impl Checker {
    /// A checker over an existing path validator (the file tools and the jail share it).
    #[expect(
        clippy::expect_used,
        reason = "the grammar and the tree-sitter it is linked with are fixed at build time; \
                  every policy test builds a Checker, so a mismatch never ships"
    )]
    pub fn new(policy: Arc<Policy>, paths: PathPolicy) -> Checker {
        let mut parser = tree_sitter::Parser::new();
        parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .expect("tree-sitter-bash is compatible with the linked tree-sitter");
        Checker {
            policy,
            paths,
            parser: RefCell::new(parser),
            unknown_variables: UnknownVariables::Empty,
            jail_variables: Vec::new(),
            substitutions: true,
        }
    }

    /// Variables the jail's environment will hold, with their values (`[network.secrets]`
    /// placeholders, `NetworkConfig::jail_variables`): `$NAME` on a command line expands to
    /// the value, as bash in the jail would, instead of to nothing.
    pub fn set_jail_variables(&mut self, variables: Vec<(String, String)>) {
        self.jail_variables = variables;
    }

    /// For commands a real shell runs (the Claude Code hook), not warden's executor: a
    /// variable the policy has no value for may be set there, so it is refused.
    pub fn for_a_real_shell(mut self) -> Checker {
        self.unknown_variables = UnknownVariables::Refused;
        self.substitutions = false;
        self
    }

    /// Whether warden's executor runs what this checker allows (it runs command
    /// substitutions, xargs batches and checksum lists itself); `false` for a real shell.
    pub(super) fn runs_in_warden(&self) -> bool {
        self.substitutions
    }

    pub(super) fn policy_arc(&self) -> &Arc<Policy> {
        &self.policy
    }

    pub fn paths(&self) -> &PathPolicy {
        &self.paths
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Check a command string run in the workspace.
    pub fn check(&mut self, command: &str) -> Verdict {
        let workspace = self.paths.workspace().to_path_buf();
        self.check_in(command, &workspace)
    }

    /// Check a command string run in `cwd`.
    pub fn check_in(&mut self, command: &str, cwd: &Path) -> Verdict {
        // One snapshot of the filesystem per check: each component is looked at once, the
        // roots' own directories not at all.
        let settled = self.paths.settled_directories();
        super::lstat_memo::during_from(Some(settled), || self.check_in_snapshot(command, cwd))
    }

    fn check_in_snapshot(&mut self, command: &str, cwd: &Path) -> Verdict {
        let mut script = Script::default();
        match self.check_script(command, cwd, &mut script) {
            Ok(asks) if asks.is_empty() => {
                // Name the rules that allowed it (`ls`, not `/bin/ls`).
                let names: Vec<&str> = script
                    .commands()
                    .filter_map(|c| c.argv.first())
                    .map(|a| a.rsplit('/').next().unwrap_or(a))
                    .collect();
                Verdict {
                    decision: Decision::Allow,
                    reason: format!("allowed: {}", names.join(", ")),
                    script,
                }
            }
            Ok(asks) => Verdict {
                decision: Decision::Ask,
                reason: format!("needs approval: {}", asks.join("; ")),
                script,
            },
            Err(denial) => Verdict {
                decision: Decision::Deny,
                reason: denial.reason,
                script,
            },
        }
    }

    /// Fills `script` as it goes so a denial still reports what was analysed before it.
    fn check_script(
        &mut self,
        source: &str,
        cwd: &Path,
        script: &mut Script,
    ) -> Result<Vec<String>, Denial> {
        let max = self.policy.settings().max_input_bytes;
        if source.len() > max {
            return Err(Denial::new(format!(
                "the command is {} bytes, more than the {max}-byte limit",
                source.len()
            )));
        }
        if source.contains('\0') {
            return Err(Denial::new("the command contains a NUL byte"));
        }
        // bash's `cd` is logical: it tracks $PWD as text (`cd link/..` goes back to where it
        // started), while warden's executor changes directory physically. The logical cwd is
        // followed beside the physical one so a `cd` on which the two disagree is refused.
        let logical_cwd = if is_plain_absolute(cwd) {
            cwd.to_path_buf()
        } else {
            std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf())
        };
        let cwd = self.paths.check(cwd, ".", Access::Read).map_err(|d| {
            Denial::new(format!(
                "the working directory is not allowed: {}",
                d.reason
            ))
        })?;
        let raw = self.parse(source)?;
        let mut walk = Walk::at(cwd);
        walk.logical_cwd = logical_cwd;
        self.list(&raw, &mut walk, script)?;
        Ok(walk.asks)
    }

    /// Check a list in order, appending its steps to `out` as they are checked.
    pub(super) fn list(
        &self,
        raw: &RawScript,
        walk: &mut Walk,
        out: &mut Script,
    ) -> Result<(), Denial> {
        for step in &raw.steps {
            let in_pipeline = step.commands.len() > 1;
            out.steps.push(Step {
                connector: step.connector,
                pipeline: Pipeline {
                    commands: Vec::new(),
                    negated: step.negated,
                },
            });
            for unit in &step.commands {
                let command = match unit {
                    RawUnit::Simple(raw_command) if raw_command.words.is_empty() => {
                        self.assign(raw_command, walk, in_pipeline, step.connector)?
                    }
                    RawUnit::Simple(raw_command) => {
                        walk.commands += 1;
                        if walk.commands > MAX_COMMANDS {
                            return Err(Denial::new(format!(
                                "the command runs more than {MAX_COMMANDS} commands (loops \
                                 included); split it up"
                            )));
                        }
                        let checked = self.command(raw_command, walk, in_pipeline)?;
                        if let Some(Builtin::Cd(target)) = &checked.command.builtin {
                            walk.logical_cwd =
                                logical_cd(&walk.logical_cwd, &checked.command.argv, target)?;
                            walk.cwd = target.clone();
                        }
                        let program = checked.command.argv.first().map(String::as_str);
                        if program.is_some_and(|p| p == "mkdir" || p.ends_with("/mkdir")) {
                            walk.made_dirs.extend(
                                checked
                                    .command
                                    .paths
                                    .iter()
                                    .filter(|p| p.access == Access::Write)
                                    .map(|p| p.path.clone()),
                            );
                        }
                        walk.note_writes(checked.writes);
                        walk.links.extend(checked.links);
                        walk.ask(checked.asks);
                        checked.command
                    }
                    RawUnit::Compound {
                        compound,
                        redirects,
                        stderr_to_pipe,
                    } => {
                        if in_pipeline {
                            return Err(Denial::new(
                                "a group, subshell, loop or if inside a pipeline is not \
                                 supported: redirect its output to a file and read that",
                            ));
                        }
                        walk.nesting += 1;
                        let command = self.compound(compound, redirects, *stderr_to_pipe, walk);
                        walk.nesting -= 1;
                        command?
                    }
                };
                if let Some(step) = out.steps.last_mut() {
                    step.pipeline.commands.push(command);
                }
            }
        }
        Ok(())
    }

    pub(super) fn parse(&self, source: &str) -> Result<grammar::RawScript, Denial> {
        let deadline = Instant::now() + self.policy.settings().parse_budget;
        let mut progress = |_: &tree_sitter::ParseState| {
            if Instant::now() > deadline {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let options = tree_sitter::ParseOptions::new().progress_callback(&mut progress);
        // tree-sitter-bash's scanner calls isdigit() on Unicode code points (undefined
        // behaviour; U+10FFFF after `{` crashed the process). The parser therefore only ever
        // sees an ASCII shadow: every non-ASCII byte becomes `x`, so byte offsets are unchanged
        // and word text is taken from the original. Non-ASCII is never shell syntax, and bash
        // itself treats Unicode spaces as word characters, as the shadow does.
        let shadow: std::borrow::Cow<[u8]> = if source.is_ascii() {
            source.as_bytes().into()
        } else {
            source
                .bytes()
                .map(|b| if b.is_ascii() { b } else { b'x' })
                .collect::<Vec<u8>>()
                .into()
        };
        // A parse given up for time leaves the parser mid-way: without a reset the next call
        // resumes that parse instead of starting this one (and decided the next command with
        // the old command's tree, or panicked). Reset before every parse, not only after a
        // cancel, so no earlier state can ever leak into a decision.
        let mut parser = self.parser.borrow_mut();
        parser.reset();
        let tree = parser
            .parse_with_options(
                &mut |offset, _| &shadow[offset.min(shadow.len())..],
                None,
                Some(options),
            )
            .ok_or_else(|| Denial::new("parsing the command took too long"))?;
        let tokens = syntax::tokens(tree.root_node(), source)?;
        grammar::parse(tokens)
    }

    pub(super) fn expander<'a>(&'a self, walk: &'a Walk) -> Expander<'a> {
        Expander {
            paths: &self.paths,
            cwd: &walk.cwd,
            max_glob_matches: self.policy.settings().max_glob_matches,
            vars: &walk.vars,
            unknown_variables: self.unknown_variables,
            jail_vars: &self.jail_variables,
            home_used: Default::default(),
        }
    }

    /// A simple command: its assignments, words (with `$?` where allowed) and redirections.
    fn command(&self, raw: &RawCommand, walk: &Walk, in_pipeline: bool) -> Result<Checked, Denial> {
        let expander = self.expander(walk);
        self.expanded_command(raw, walk, in_pipeline, &expander)
            .map_err(|denial| expander.explain_home(denial))
    }

    fn expanded_command(
        &self,
        raw: &RawCommand,
        walk: &Walk,
        in_pipeline: bool,
        expander: &Expander,
    ) -> Result<Checked, Denial> {
        let mut argv: Vec<String> = Vec::new();
        let mut status_args: Vec<StatusArg> = Vec::new();
        let mut substitutions: Vec<Substitution> = Vec::new();
        let mut pipes: Vec<ProcessSubstitution> = Vec::new();
        for (i, word) in raw.words.iter().enumerate() {
            if let Some(source) = word.process_substitution() {
                if i == 0 {
                    return Err(Denial::new(format!(
                        "a process substitution may not be the command name ({}): it would \
                         choose the program after the check",
                        word.display()
                    )));
                }
                let script = self.process_substitution(source, walk)?;
                // Its path is written in once the descriptor is chosen (after the redirections).
                pipes.push(ProcessSubstitution {
                    arg: argv.len(),
                    fd: 0,
                    script,
                });
                argv.push(String::new());
                continue;
            }
            let sources = word.substitutions();
            let args = expander.expand_args_with_substitutions(word)?;
            // bash would run the next word as the program: the name must be written out.
            if i == 0 && args.is_empty() {
                return Err(Denial::new(format!(
                    "the command name {} expands to nothing",
                    word.display()
                )));
            }
            // Each substitution's command is checked on its own before its place is judged.
            let scripts = sources
                .iter()
                .map(|source| self.substitution(source, walk))
                .collect::<Result<Vec<_>, _>>()?;
            for arg in args {
                for offset in arg.status_at {
                    status_args.push(StatusArg {
                        arg: argv.len(),
                        offset,
                    });
                }
                for (offset, n) in arg.substitutions_at {
                    substitutions.push(Substitution {
                        arg: argv.len(),
                        offset,
                        script: scripts[n].clone(),
                    });
                }
                argv.push(arg.text);
            }
        }
        let mut env = Vec::new();
        for assignment in &raw.assignments {
            let value = expander.expand_literal(&assignment.value)?;
            assignments::check(&assignment.name, &value)?;
            env.push((assignment.name.clone(), value));
        }
        if argv.is_empty() {
            return Err(Denial::new("the command expands to nothing"));
        }
        if substitutions.iter().any(|s| s.arg == 0) {
            substitution_places::judge_places("", &argv, &[0])?;
        }
        let name = program_name(&argv[0])?;
        if !status_args.is_empty() && !STATUS_READERS.contains(&name.as_str()) {
            return Err(Denial::new(format!(
                "$? may only be an argument of {} (it could name a file elsewhere)",
                STATUS_READERS.join(", ")
            )));
        }
        if !substitutions.is_empty() {
            if !status_args.is_empty() {
                return Err(Denial::new(
                    "$? and a command substitution in one command are not supported (the \
                     substitution would change $?)",
                ));
            }
            let places: Vec<usize> = substitutions.iter().map(|s| s.arg).collect();
            substitution_places::judge_places(&name, &argv, &places)?;
        }
        let (redirects, redirect_writes) =
            self.redirects(&raw.redirects, raw.stderr_to_pipe, expander, &walk.cwd)?;
        if !pipes.is_empty() {
            process_substitution::place(&name, &mut argv, &mut pipes, &redirects)?;
        }
        if name == "cd" {
            if !env.is_empty() {
                return Err(Denial::new(
                    "an assignment before cd has no effect; remove it",
                ));
            }
            let checked = self.cd(&argv, raw, walk, in_pipeline)?;
            if let Some(Builtin::Cd(target)) = &checked.command.builtin {
                walk.links
                    .refuse_through(target, Access::Read)
                    .map_err(|d| Denial::new(format!("cd: {}", d.reason)))?;
            }
            return Ok(checked);
        }
        let checked_argv = (!substitutions.is_empty()).then(|| argv.clone());
        let pipe_paths: Vec<String> = pipes.iter().map(|p| argv[p.arg].clone()).collect();
        let mut checked = self.program_reading_pipes(argv, &name, redirects, walk, &pipe_paths)?;
        if checked_argv.is_some_and(|argv| argv != checked.command.argv) {
            // The offsets are into the argv as written.
            return Err(Denial::new(format!(
                "a command substitution in {name}, whose arguments the policy rewrites, is not \
                 supported"
            )));
        }
        checked.writes |= redirect_writes;
        if matches!(checked.command.builtin, Some(Builtin::Xargs(_))) && !env.is_empty() {
            // warden's xargs starts each batch itself: the assignment would not reach it.
            return Err(Denial::new(
                "an assignment before xargs is not supported: warden starts each batch itself, \
                 and the assignment would not reach it",
            ));
        }
        checked.command.env = env;
        checked.command.status_args = status_args;
        checked.command.substitutions = substitutions;
        if !pipes.is_empty() && !checked.asks.is_empty() {
            return Err(Denial::new(format!(
                "{name} needs approval ({}); a process substitution is given only to a command \
                 the policy allows as it is",
                checked.asks.join("; ")
            )));
        }
        checked.command.process_substitutions = pipes;
        Ok(checked)
    }

    /// A program with its final argv: the rule, the analyzers, every path.
    pub(super) fn program(
        &self,
        argv: Vec<String>,
        name: &str,
        redirects: Vec<Redirect>,
        walk: &Walk,
    ) -> Result<Checked, Denial> {
        self.program_reading_pipes(argv, name, redirects, walk, &[])
    }

    /// [`Checker::program`], where the `pipes` (`/dev/fd/N` of process substitutions) stand in
    /// argv: each must be a file the program only reads (see `policy::process_substitution`).
    fn program_reading_pipes(
        &self,
        argv: Vec<String>,
        name: &str,
        redirects: Vec<Redirect>,
        walk: &Walk,
        pipes: &[String],
    ) -> Result<Checked, Denial> {
        // Quoted for the trace only when something listens: the quoting allocates per word.
        let shown = tracing::enabled!(tracing::Level::TRACE).then(|| shell_words::join(&argv));
        let max_args = self.policy.settings().max_args;
        if argv.len() > max_args {
            return Err(Denial::new(format!(
                "`{}`: {} arguments is more than the {max_args} allowed",
                argv[0],
                argv.len()
            )));
        }
        let cwd = walk.cwd.as_path();
        let name = name.to_string();
        let mut asks = Vec::new();
        let default_rule;
        let rule = match self.policy.rule(&name) {
            Some(rule) => rule,
            None => match self.policy.settings().unknown_programs {
                Decision::Ask => {
                    asks.push(format!("{name} is not in the allowlist"));
                    default_rule = unknown_program_rule();
                    &default_rule
                }
                _ => {
                    return Err(Denial::new(format!(
                        "{name} is not in the allowlist (add [programs.{name}] to a policy file \
                         to allow it)"
                    )))
                }
            },
        };
        match rule.decision {
            Decision::Deny => {
                return Err(Denial::new(format!(
                    "{name}: {}",
                    rule.reason.as_deref().unwrap_or("denied by policy")
                )))
            }
            Decision::Ask => asks.push(format!(
                "{name}: {}",
                rule.reason
                    .as_deref()
                    .unwrap_or("this program needs approval")
            )),
            Decision::Allow => {}
        }
        if !pipes.is_empty() {
            process_substitution::judge_program(&name, rule)?;
        }
        let args = &argv[1..];
        let mut analysis = self.analyze(rule, &name, args, cwd, walk.earlier_writes)?;
        // Names the program derives from its arguments (backups, chunks, decompressed files).
        let derived = match rule.analyzer {
            None => derived::names(&name, &analysis, cwd, &self.paths)?,
            Some(_) => derived::Derived::default(),
        };
        analysis.paths.extend(derived.paths);
        analysis.links.extend(derived.links);
        if !pipes.is_empty() {
            process_substitution::judge_reads(&name, &analysis, pipes)?;
        }
        let mut writes = false;
        let mut paths = Vec::with_capacity(analysis.paths.len());
        for (path, access) in &analysis.paths {
            // "" names no file (open and exec fail with ENOENT); joined to the cwd it would
            // stand for the cwd, e.g. a whole-workspace source for cp.
            if path.is_empty() {
                continue;
            }
            // A pipe warden made, read only (judged above): no file to check.
            if pipes.contains(path) {
                continue;
            }
            let resolved = self
                .paths
                .check(cwd, path, *access)
                .map_err(|d| Denial::new(format!("{name}: {}", d.reason)))?;
            writes |= *access != Access::Read;
            paths.push(CheckedPath {
                path: resolved,
                access: *access,
                written: path.clone(),
            });
        }
        let mut links: Vec<PathBuf> = Vec::new();
        if rule.copies {
            links = copies::check(
                &name,
                args,
                &analysis,
                cwd,
                &self.paths,
                derived.backup_suffix.as_deref(),
            )?;
            links.extend(walk.links.carried(&paths));
        }
        let mut checksums_on_stdin = false;
        for list in &analysis.lists {
            // A checksum list on stdin exists only when the command runs: warden's executor
            // checks its names then, before the program starts (a real shell could not).
            if list.path == "-" && list.format == lists::ListFormat::Checksums && self.substitutions
            {
                checksums_on_stdin = true;
                continue;
            }
            for (path, access) in lists::check(list, &name, cwd, &self.paths, walk.earlier_writes)?
            {
                writes |= access != Access::Read;
                let written = path.display().to_string();
                paths.push(CheckedPath {
                    path,
                    access,
                    written,
                });
            }
        }
        links.extend(analysis.links.iter().map(|l| line_links::located(cwd, l)));
        let trees = analysis
            .changed_trees
            .iter()
            .map(|t| line_links::located(cwd, t))
            .collect();
        // Nothing this command names may lead through a link an earlier command makes.
        walk.links
            .refuse_command(&paths, &redirects)
            .map_err(|d| Denial::new(format!("{name}: {}", d.reason)))?;
        asks.extend(analysis.ask);
        if let Some(what) = &analysis.runs_code {
            let jailed = match self.policy.networked() {
                true => JAILED_CODE_NETWORKED,
                false => JAILED_CODE,
            };
            asks.push(format!(
                "{name} {what}, code the policy cannot read: {jailed}"
            ));
        }
        // The shape is cut from argv as written, before an analyzer adds its safety options.
        let ask = (!asks.is_empty()).then(|| Ask {
            reasons: asks.clone(),
            shape: argv[..analysis
                .shape
                .map_or(argv.len(), |n| (n + 1).min(argv.len()))]
                .to_vec(),
        });
        let mut argv = analysis.argv.unwrap_or(argv);
        if !rule.added_args.is_empty() {
            argv.splice(1..1, rule.added_args.iter().cloned());
        }
        if let Some(shown) = shown {
            tracing::trace!(command = %shown, "checked");
        }
        let mut command = Command::program(argv, cwd.to_path_buf());
        command.builtin = match analysis.builtin {
            Some(Builtin::Chmod(plan)) => Some(Builtin::Chmod(plan.with_checked(&paths))),
            Some(Builtin::Xargs(plan)) => Some(Builtin::Xargs(self.xargs(plan, cwd)?)),
            other => other,
        };
        command.redirects = redirects;
        command.paths = paths;
        command.runs_code = analysis.runs_code.is_some();
        command.network = analysis.network;
        command.checksums_on_stdin = checksums_on_stdin;
        command.ask = ask;
        Ok(Checked {
            command,
            asks,
            writes,
            links: Made { links, trees },
        })
    }

    fn analyze(
        &self,
        rule: &ProgramRule,
        name: &str,
        args: &[String],
        cwd: &Path,
        earlier_writes: bool,
    ) -> Result<Analysis, Denial> {
        if let Some(kind) = rule.analyzer {
            let ctx = AnalyzerContext {
                cwd,
                paths: &self.paths,
                earlier_writes,
            };
            return analyzers::analyze(kind, rule, name, args, &ctx);
        }
        rule.analyze_command(name, args)
    }

    /// `cd DIR`: evaluated by the executor; the target must be a readable directory.
    fn cd(
        &self,
        argv: &[String],
        raw: &RawCommand,
        walk: &Walk,
        in_pipeline: bool,
    ) -> Result<Checked, Denial> {
        let cwd = walk.cwd.as_path();
        if in_pipeline {
            return Err(Denial::new(
                "cd inside a pipeline has no effect in bash; use `cd dir && cmd`",
            ));
        }
        if !raw.redirects.is_empty() || raw.stderr_to_pipe {
            return Err(Denial::new("cd with redirections is not supported"));
        }
        let dirs: Vec<&String> = argv[1..]
            .iter()
            .filter(|a| !matches!(a.as_str(), "-P" | "-L" | "--"))
            .collect();
        let home = self.paths.home().to_string_lossy();
        let dir = match dirs.as_slice() {
            [dir] if dir.as_str() != "-" => dir.as_str(),
            // Where HOME is the workspace (the jail), `cd` alone goes there.
            [] if self.paths.home_note().is_some() => home.as_ref(),
            [] => {
                return Err(Denial::new(
                    "cd needs a directory (cd alone would go to $HOME)",
                ))
            }
            [_] => return Err(Denial::new("cd - is not supported; name the directory")),
            _ => return Err(Denial::new("cd takes one directory")),
        };
        let target = self
            .paths
            .check(cwd, dir, Access::Read)
            .map_err(|d| Denial::new(format!("cd: {}", d.reason)))?;
        let is_dir = match std::fs::metadata(&target) {
            Ok(meta) => meta.is_dir(),
            // A directory `mkdir` makes earlier in the line (or one of its parents, with -p)
            // does not exist yet: the executor checks it when the cd runs.
            Err(_) => walk.made_dirs.iter().any(|made| made.starts_with(&target)),
        };
        if !is_dir {
            return Err(Denial::new(format!("cd: {dir} is not a directory")));
        }
        let mut command = Command::program(argv.to_vec(), cwd.to_path_buf());
        command.builtin = Some(Builtin::Cd(target.clone()));
        command.paths = vec![CheckedPath {
            path: target,
            access: Access::Read,
            written: dir.to_string(),
        }];
        Ok(Checked {
            command,
            asks: Vec::new(),
            writes: false,
            links: Made::default(),
        })
    }

    /// Check and translate redirections; returns them and whether any writes a file.
    /// `stderr_to_pipe` (`|&`) adds the `2>&1` it stands for, after them.
    pub(super) fn redirects(
        &self,
        raw: &[RawRedirect],
        stderr_to_pipe: bool,
        expander: &Expander,
        cwd: &Path,
    ) -> Result<(Vec<Redirect>, bool), Denial> {
        let mut out = Vec::new();
        let mut writes = false;
        for r in raw {
            let word = |target: &RawTarget| -> Result<String, Denial> {
                match target {
                    RawTarget::Word(w) => single_word(expander, w),
                    _ => Err(Denial::new("a redirection without a target")),
                }
            };
            let file =
                |path: String, access: Access, mode: OpenMode| -> Result<RedirectTarget, Denial> {
                    let checked = self
                        .paths
                        .check(cwd, &path, access)
                        .map_err(|d| Denial::new(format!("redirection: {}", d.reason)))?;
                    Ok(RedirectTarget::File {
                        path: checked,
                        mode,
                    })
                };
            match r.op {
                RedirectOp::In => out.push(Redirect {
                    fd: r.fd.unwrap_or(0),
                    target: file(word(&r.target)?, Access::Read, OpenMode::Read)?,
                }),
                RedirectOp::Out | RedirectOp::Append => {
                    let mode = if r.op == RedirectOp::Out {
                        OpenMode::Write
                    } else {
                        OpenMode::Append
                    };
                    out.push(Redirect {
                        fd: r.fd.unwrap_or(1),
                        target: file(word(&r.target)?, Access::Write, mode)?,
                    });
                    writes = true;
                }
                RedirectOp::OutAll | RedirectOp::AppendAll => {
                    let mode = if r.op == RedirectOp::OutAll {
                        OpenMode::Write
                    } else {
                        OpenMode::Append
                    };
                    out.push(Redirect {
                        fd: 1,
                        target: file(word(&r.target)?, Access::Write, mode)?,
                    });
                    out.push(Redirect {
                        fd: 2,
                        target: RedirectTarget::Dup(1),
                    });
                    writes = true;
                }
                RedirectOp::DupOut | RedirectOp::DupIn => {
                    let text = word(&r.target)?;
                    let source =
                        text.parse::<u8>()
                            .ok()
                            .filter(|fd| *fd <= 9)
                            .ok_or_else(|| {
                                Denial::new(format!(
                                    "redirection to descriptor {text:?} is not supported"
                                ))
                            })?;
                    let default = if r.op == RedirectOp::DupOut { 1 } else { 0 };
                    out.push(Redirect {
                        fd: r.fd.unwrap_or(default),
                        target: RedirectTarget::Dup(source),
                    });
                }
                RedirectOp::Close => out.push(Redirect {
                    fd: r.fd.unwrap_or(1),
                    target: RedirectTarget::Close,
                }),
                RedirectOp::HereDoc => {
                    let RawTarget::Body(body) = &r.target else {
                        return Err(Denial::new("a here-document without a body"));
                    };
                    out.push(Redirect {
                        fd: r.fd.unwrap_or(0),
                        target: RedirectTarget::Text(body.clone()),
                    });
                }
                RedirectOp::HereString => {
                    let RawTarget::Word(w) = &r.target else {
                        return Err(Denial::new("a here-string without text"));
                    };
                    let text = expander.expand(w)?.join(" ");
                    out.push(Redirect {
                        fd: r.fd.unwrap_or(0),
                        target: RedirectTarget::Text(format!("{text}\n")),
                    });
                }
            }
        }
        if stderr_to_pipe {
            out.push(Redirect {
                fd: 2,
                target: RedirectTarget::Dup(1),
            });
        }
        Ok((out, writes))
    }
}

/// Whether `path` is absolute and already what `std::path::absolute` would make of it (no
/// `.` component, no doubled or trailing `/`), so it can be taken as it is: the usual cwd,
/// checked without rebuilding it component by component.
fn is_plain_absolute(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    bytes.len() > 1
        && bytes[0] == b'/'
        && !bytes.ends_with(b"/")
        && !bytes.ends_with(b"/.")
        && !bytes.windows(2).any(|w| w == b"//")
        && !bytes.windows(3).any(|w| w == b"/./")
}

/// bash's `cd DIR` (logical, the default): the new $PWD is the old one joined with DIR and
/// `..` removed as text, and the directory entered is whatever that text resolves to. Refuse
/// when that is not `target`, where warden's executor (and the path checks) will be: the two
/// would run the rest of the string in different places. `cd -P` is physical in both.
fn logical_cd(
    logical_cwd: &Path,
    argv: &[String],
    target: &Path,
) -> Result<std::path::PathBuf, Denial> {
    let physical = argv[1..]
        .iter()
        .take_while(|a| a.as_str() != "--")
        .any(|a| a == "-P");
    if physical {
        return Ok(target.to_path_buf());
    }
    let Some(dir) = argv[1..]
        .iter()
        .rev()
        .find(|a| !a.starts_with('-') || *a == "-")
    else {
        return Ok(target.to_path_buf());
    };
    let logical = super::paths::lexically_normal(&logical_cwd.join(dir));
    match super::paths::resolve(&logical, false) {
        Ok(entered) if entered == target => Ok(logical),
        _ => Err(Denial::new(format!(
            "cd {dir}: bash's cd follows the path as written ({}) while the directory it names \
             through a symbolic link is {}; name the directory without a link followed by `..`, \
             or use cd -P",
            logical.display(),
            target.display()
        ))),
    }
}

/// A redirection target must expand to exactly one word (bash: "ambiguous redirect").
fn single_word(expander: &Expander, word: &RawWord) -> Result<String, Denial> {
    let mut words = expander.expand(word)?;
    if words.first().is_some_and(String::is_empty) {
        return Err(Denial::new(format!(
            "the redirection target {} expands to an empty name",
            word.display()
        )));
    }
    if words.len() != 1 {
        return Err(Denial::new(format!(
            "ambiguous redirect: {} expands to {} files",
            word.display(),
            words.len()
        )));
    }
    Ok(words.remove(0))
}

/// The rule name for argv[0]: a bare name, or an absolute path in a system bin directory.
pub(super) fn program_name(arg0: &str) -> Result<String, Denial> {
    if arg0.is_empty() {
        return Err(Denial::new("an empty command name"));
    }
    if !arg0.contains('/') {
        return Ok(arg0.to_string());
    }
    let path = Path::new(arg0);
    let trusted = path.is_absolute()
        && !arg0.contains("/../")
        && !arg0.contains("/./")
        && path
            .parent()
            .is_some_and(|dir| SYSTEM_BIN_DIRS.iter().any(|d| Path::new(d) == dir));
    match path.file_name().and_then(|n| n.to_str()) {
        Some(name) if trusted => Ok(name.to_string()),
        _ => Err(Denial::new(format!(
            "{arg0}: programs run by path must be in a system directory ({}); programs in the \
             workspace or elsewhere are not allowed",
            SYSTEM_BIN_DIRS.join(", ")
        ))),
    }
}

/// What an approval of code the policy cannot read says about where it runs (the executor
/// refuses such commands in a sandbox that does not confine code).
pub const JAILED_CODE: &str = "it would run in the jail (Landlock + seccomp, or Docker), without \
                               network, writing only the workspace";

/// The same when `[network]` has rules.
pub const JAILED_CODE_NETWORKED: &str = "it would run in the jail (Landlock + seccomp, or \
                                         Docker), reaching only the hosts [network] allows, \
                                         writing only the workspace";

/// With `unknown_programs = "ask"`: every argument that might be a path is checked as a read.
fn unknown_program_rule() -> ProgramRule {
    ProgramRule::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_absolute_cwd_is_what_std_would_make_of_it() {
        let plain = ["/a/b", "/a/../b", "/.a/b.", "/a/.b", "/tmp/x y/ws"];
        let rebuilt = [
            "/", "/a//b", "//a", "/a/./b", "/a/b/", "/a/b/.", "a/b", "./a", "",
        ];
        for path in plain {
            assert!(is_plain_absolute(Path::new(path)), "{path}");
            assert_eq!(
                std::path::absolute(path).unwrap(),
                Path::new(path),
                "{path}"
            );
        }
        for path in rebuilt {
            assert!(!is_plain_absolute(Path::new(path)), "{path}");
        }
    }
}
