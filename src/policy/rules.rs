//! Policy as data: the TOML schema of `policy/default.toml` and user policy files, and the
//! generic per-program argument analysis (flags, flag values, positional path roles).
//!
//! Unknown or ambiguous arguments are always treated the stricter way: a positional that might
//! be a path is checked as one, an unknown `--flag=value` has its value checked as a read path,
//! a GNU-style abbreviation of a denied long flag (`--compress-prog`) is that flag, and an
//! abbreviation of any other listed flag is refused: the policy does not know the program's
//! whole flag set, so `--outp` might be another, unlisted flag (one that takes no value, making
//! the next argument a path the policy would never have checked).

use super::paths::Access;
use super::{Decision, Denial};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One expectation of a `[[tests]]` table (run by `warden policy test`, see
/// [`super::suite`]).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TestCase {
    pub cmd: String,
    pub expect: Decision,
    /// The reason must contain this text (any decision has a reason).
    #[serde(default)]
    pub reason_contains: Option<String>,
    /// Directory inside the workspace the command is checked in (default: the workspace).
    #[serde(default)]
    pub cwd: Option<String>,
}

/// A policy file as written. A user file extends the embedded default unless it sets
/// `extends_default = false`, in which case it replaces it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    pub extends_default: Option<bool>,
    #[serde(default)]
    pub settings: SettingsFile,
    #[serde(default)]
    pub paths: PathsFile,
    #[serde(default)]
    pub programs: BTreeMap<String, ProgramRule>,
    /// `[egress.hosts]`: host rules for warden's own fetches, under the config's (checked
    /// where the fetch tools are built, `crate::egress::HostRules`).
    #[serde(default)]
    pub egress: EgressFile,
    /// `[network]`: hosts jailed commands may reach, under the config's (see
    /// `crate::egress::network`); with rules, the network programs of `policy/network.toml`
    /// are added.
    #[serde(default)]
    pub network: crate::egress::network::NetworkConfig,
    /// `warden policy test`'s workspace for the tests below (ignored by the checker).
    #[serde(default)]
    pub fixture: super::fixture::FixtureSpec,
    /// Expectations checked by `warden policy test` (ignored by the checker).
    #[serde(default)]
    pub tests: Vec<TestCase>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressFile {
    #[serde(default)]
    pub hosts: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsFile {
    pub max_input_bytes: Option<usize>,
    pub max_args: Option<usize>,
    pub max_glob_matches: Option<usize>,
    /// `deny` (default) or `ask` for programs the policy does not list.
    pub unknown_programs: Option<Decision>,
    /// A parse that takes longer than this many milliseconds is given up (denied).
    pub parse_budget_ms: Option<u64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathsFile {
    /// Extra readable roots (absolute, `~` allowed).
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Extra writable roots.
    #[serde(default)]
    pub write: Vec<PathBuf>,
}

/// The effective settings after merging.
#[derive(Clone, Debug)]
pub struct Settings {
    pub max_input_bytes: usize,
    pub max_args: usize,
    pub max_glob_matches: usize,
    pub unknown_programs: Decision,
    pub parse_budget: std::time::Duration,
}

/// What the rules say about one program (or one subcommand of it).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramRule {
    #[serde(default = "allow")]
    pub decision: Decision,
    /// Shown with `deny` and `ask`.
    pub reason: Option<String>,
    /// The role of positional arguments.
    #[serde(default)]
    pub args: ArgRole,
    /// A different role for the last positional (the destination of `cp`).
    pub last_arg: Option<ArgRole>,
    #[serde(default)]
    pub flags: BTreeMap<String, FlagSpec>,
    /// The program copies or moves its sources, with everything beneath them, to its last
    /// positional or to its write-path flag's directory (`cp -r`, `mv`): the checker also checks
    /// every path the copy would create there.
    #[serde(default)]
    pub copies: bool,
    /// `allow` (default): unlisted flags are booleans; `deny`: only listed flags pass.
    #[serde(default)]
    pub unknown_flags: UnknownFlags,
    /// How the program reads its options: `getopt` (default: `-abc` is `-a -b -c`, values may
    /// be attached) or `whole-word` (the program's own reader: `-abc` is one option).
    #[serde(default)]
    pub options: OptionSyntax,
    pub max_args: Option<usize>,
    /// When present, the first positional must name one of these.
    #[serde(default)]
    pub subcommands: BTreeMap<String, ProgramRule>,
    /// Program-specific analysis in Rust for argument languages TOML cannot express.
    pub analyzer: Option<AnalyzerKind>,
    /// With `analyzer = "interpreter"`: the absolute folder whose files the interpreter may
    /// run (a skill's own folder). Without it an interpreter rule allows nothing.
    pub scripts: Option<PathBuf>,
    /// With `analyzer = "runner"`: how the program is given the code it runs.
    pub runs: Option<RunnerKind>,
    /// With `analyzer = "runner"`: argument lists that run no code (`--version`): allowed
    /// without approval.
    #[serde(default)]
    pub no_code: Vec<String>,
    /// Refuse the command without positional arguments, with this reason (bare `printenv`).
    pub needs_args: Option<String>,
    /// Refuse the command unless it gives one of these flags: `wget` without `-O` writes a file
    /// named after the URL (or a redirect), a name the policy never sees.
    pub needs_flag: Option<NeedsFlag>,
    /// Refuse the command with fewer positional arguments than this: `git clone URL` without
    /// a folder names it after the URL (`…/.git.git` makes `.git`), a name the policy never sees.
    pub min_positionals: Option<MinPositionals>,
    /// Words warden puts right after the program name when it runs it (npm's
    /// `--no-update-notifier`: no registry check from a jail without network). The check sees
    /// the command as written; what runs is that command with these added.
    #[serde(default)]
    pub added_args: Vec<String>,
    /// The program (or subcommand) reaches the network (`policy/network.toml`): a command
    /// line holding it gets the jail's way out, warden's egress proxy, when `[network]` has
    /// rules, and asks first in a run that read untrusted content.
    #[serde(default)]
    pub network: bool,
}

/// `needs_flag = { one_of = ["-O", "--output-document"], reason = "…" }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeedsFlag {
    /// The flags, by their full names; any one of them will do.
    pub one_of: Vec<String>,
    /// Why the command is refused without one.
    pub reason: String,
}

/// `min_positionals = { count = 2, reason = "…" }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinPositionals {
    pub count: usize,
    /// Why the command is refused with fewer.
    pub reason: String,
}

/// What an empty `[programs.NAME]` table means: allowed, every positional a possible path,
/// unlisted flags booleans (the rule an unknown program gets with `unknown_programs = "ask"`).
impl Default for ProgramRule {
    fn default() -> ProgramRule {
        ProgramRule {
            decision: allow(),
            reason: None,
            args: ArgRole::default(),
            last_arg: None,
            flags: BTreeMap::new(),
            copies: false,
            unknown_flags: UnknownFlags::default(),
            options: OptionSyntax::default(),
            max_args: None,
            subcommands: BTreeMap::new(),
            analyzer: None,
            scripts: None,
            runs: None,
            no_code: Vec::new(),
            needs_args: None,
            needs_flag: None,
            min_positionals: None,
            added_args: Vec::new(),
            network: false,
        }
    }
}

/// How a program that runs the project's code is given it (`analyzer = "runner"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunnerKind {
    /// An interpreter: options, then a script file (or `-m MODULE`), then the script's
    /// arguments (`python3 tool.py --in data.csv`).
    Script,
    /// A build tool or test runner: the project's files say what runs (`make`, `cargo build`,
    /// `npm test`); the arguments are checked by the rule (and its subcommands).
    Build,
    /// On a subcommand of a build tool: it runs none of the project's code (`npm ls`).
    None,
}

fn allow() -> Decision {
    Decision::Allow
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgRole {
    /// A path that is read (the default: anything that might be a path is checked).
    #[default]
    Read,
    Write,
    /// Removed or renamed.
    Delete,
    /// Read, then removed (gzip, xz, bzip2, zstd replace the file they compress): the name is
    /// checked as a delete and, following links, what it names as a read.
    Consume,
    /// Not a path (echo, printf, date formats).
    Value,
}

impl ArgRole {
    fn accesses(self) -> &'static [Access] {
        match self {
            ArgRole::Read => &[Access::Read],
            ArgRole::Write => &[Access::Write],
            ArgRole::Delete => &[Access::Delete],
            ArgRole::Consume => &[Access::Read, Access::Delete],
            ArgRole::Value => &[],
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownFlags {
    #[default]
    Allow,
    Deny,
}

/// How a program splits its option words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptionSyntax {
    /// POSIX/GNU getopt: short flags cluster (`-rn`), a value flag takes the rest of its word
    /// or the next argument.
    #[default]
    Getopt,
    /// The program's own reader (xxd, java-style tools): a word starting with one dash is one
    /// option. A word that is exactly a listed flag is that flag; any other word never takes
    /// the next argument (so the next argument is checked as what it might be: a path), and
    /// only its first letter's denials and path roles apply to it.
    WholeWord,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnalyzerKind {
    Chmod,
    Find,
    Sed,
    Git,
    Tar,
    /// `python3 SCRIPT ARGS…` with SCRIPT under the rule's `scripts` folder; no inline code.
    Interpreter,
    /// Interpreters and build tools running the project's code: asked, and run only where the
    /// jail confines code; no inline code.
    Runner,
    /// `zip`: the archive is written; symbolic links are stored, never followed.
    Zip,
    /// `awk`: the program text is read; no commands, files only as checked literals.
    Awk,
    /// `unzip`: extraction checks every member name as a write.
    Unzip,
    /// `xargs`: a closed list of options and a fixed command; warden runs it, checking each
    /// batch (see `policy::xargs`).
    Xargs,
}

/// What a flag takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlagTakes {
    /// No value.
    #[default]
    Flag,
    /// A value that is not a path.
    Value,
    /// A value that is a path read.
    Read,
    /// A value that is a path written.
    Write,
    /// A value only when attached (`-i.bak`, `--in-place=.bak`), never the next argument.
    Optional,
    /// A file read, whose contents name more files read, separated by NUL bytes
    /// (`--files0-from`). Every name in it is checked too.
    Files0,
    /// A file read, whose contents name more files read, one per line (`file -f`).
    #[serde(rename = "file-list")]
    FileLines,
    /// No value; the positional files become checksum lists whose names are read too
    /// (`sha256sum -c SUMS`).
    #[serde(rename = "checksum-lists")]
    ChecksumLists,
    /// A value, never `@NAME`: curl reads such a value from the file NAME (`@-`: standard
    /// input), which the policy did not read (`-H @file` sends a file's lines as headers; a
    /// `-w @file` format may hold `%output{FILE}`, a write).
    #[serde(rename = "value-not-@file")]
    ValueNotFile,
}

impl FlagTakes {
    /// Whether the flag has a value (attached, or else the next argument).
    pub fn takes_argument(self) -> bool {
        matches!(
            self,
            FlagTakes::Value
                | FlagTakes::Read
                | FlagTakes::Write
                | FlagTakes::Files0
                | FlagTakes::FileLines
                | FlagTakes::ValueNotFile
        )
    }
}

/// A flag entry: `"-o" = "write"` or `"--exec" = { deny = "runs commands" }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum FlagSpec {
    Takes(FlagTakes),
    Full(FlagFull),
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlagFull {
    #[serde(default)]
    pub takes: FlagTakes,
    pub deny: Option<String>,
    pub ask: Option<String>,
    /// A value holding one of these texts is refused with its reason (curl's
    /// `-w '%output{FILE}'` writes FILE).
    #[serde(default)]
    pub deny_containing: BTreeMap<String, String>,
}

impl FlagSpec {
    pub fn takes(&self) -> FlagTakes {
        match self {
            FlagSpec::Takes(t) => *t,
            FlagSpec::Full(f) => f.takes,
        }
    }
    pub(crate) fn deny(&self) -> Option<&str> {
        match self {
            FlagSpec::Full(f) => f.deny.as_deref(),
            FlagSpec::Takes(_) => None,
        }
    }
    fn ask(&self) -> Option<&str> {
        match self {
            FlagSpec::Full(f) => f.ask.as_deref(),
            FlagSpec::Takes(_) => None,
        }
    }
}

/// The result of analysing one command's arguments.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    /// Arguments to check as paths, relative to the command's cwd.
    pub paths: Vec<(String, Access)>,
    /// Reasons to ask the user.
    pub ask: Vec<String>,
    /// When the analyzer rewrote argv (git's safety options), the argv that will run.
    pub argv: Option<Vec<String>>,
    /// Files whose contents name more paths; the checker reads them and checks every name.
    pub lists: Vec<super::lists::FileList>,
    /// The positional arguments, in order (generic analysis only).
    pub positionals: Vec<String>,
    /// The values of flags that take a path, with the flag's full name (generic analysis only).
    pub path_flags: Vec<(String, String)>,
    /// Where the command makes symbolic links (relative to its cwd): the rest of the command
    /// line may not resolve a path at or beneath them, as they do not exist when it is checked.
    pub links: Vec<String>,
    /// Folders beneath which the command may make links it does not name (relative to its
    /// cwd): the rest of the line may not resolve a path beneath them.
    pub changed_trees: Vec<String>,
    /// Every flag given, in order, by its full name, with its value: the attached one or the
    /// next argument for a flag taking one, the attached one for an optional flag (generic
    /// analysis only).
    pub flags: Vec<(String, Option<String>)>,
    /// A command the executor may carry out itself (chmod), its paths as written; the checker
    /// replaces them with the checked ones.
    pub builtin: Option<super::ir::Builtin>,
    /// The program runs code the policy cannot read (a script, a Makefile, build scripts): it is
    /// asked, and the executor runs it only in a sandbox that confines code.
    pub runs_code: Option<String>,
    /// How many leading arguments name what the command does — up to its subcommand (`git
    /// commit`, `cargo test`), its script (`python3 tool.py`) or module (`python3 -m pytest`):
    /// an "always" approval covers commands that agree on them. `None`: every argument does.
    pub shape: Option<usize>,
    /// The program or its subcommand reaches the network ([`ProgramRule::network`]).
    pub network: bool,
}

/// One parsed flag occurrence.
struct Flag<'a> {
    /// As matched in the rule (the full name for an abbreviation).
    name: &'a str,
    spec: Option<&'a FlagSpec>,
}

impl ProgramRule {
    /// Look a flag up by its exact name. An unlisted long flag that abbreviates listed ones
    /// (GNU getopt_long accepts unique prefixes) is that flag only when that is stricter: an
    /// abbreviation of a denied flag is denied; an abbreviation of any other listed flag is
    /// refused, because the program may have an unlisted flag of that name or prefix which takes
    /// no value (then the argument after it is a path the policy never checked).
    fn lookup<'a>(&'a self, name: &'a str) -> Result<Flag<'a>, Denial> {
        if let Some(spec) = self.flags.get(name) {
            return Ok(Flag {
                name,
                spec: Some(spec),
            });
        }
        if name.starts_with("--") && name.len() > 2 {
            let candidates: Vec<(&String, &FlagSpec)> = self
                .flags
                .iter()
                .filter(|(k, _)| k.starts_with("--") && k.starts_with(name))
                .collect();
            if let Some((full, spec)) = candidates.iter().find(|(_, s)| s.deny().is_some()) {
                if candidates.len() == 1 {
                    return Ok(Flag {
                        name: full.as_str(),
                        spec: Some(spec),
                    });
                }
                let names: Vec<&str> = candidates.iter().map(|(k, _)| k.as_str()).collect();
                return Err(Denial::new(format!(
                    "{name} is an abbreviation of {} (denied: {})",
                    names.join(", "),
                    spec.deny().unwrap_or_default()
                )));
            }
            if !candidates.is_empty() {
                let names: Vec<&str> = candidates.iter().map(|(k, _)| k.as_str()).collect();
                return Err(Denial::new(format!(
                    "{name} looks like an abbreviation of {}; write the flag in full (the \
                     program may read an abbreviation as a flag the policy does not list)",
                    names.join(" or ")
                )));
            }
        }
        Ok(Flag { name, spec: None })
    }

    /// The full name a possibly abbreviated flag stands for.
    pub fn flag_name(&self, name: &str) -> String {
        self.lookup(name)
            .map_or_else(|_| name.to_string(), |f| f.name.to_string())
    }

    /// What a listed flag takes; `None` for flags the rule does not list.
    pub fn flag_takes(&self, name: &str) -> Option<FlagTakes> {
        self.lookup(name)
            .ok()
            .and_then(|f| f.spec.map(FlagSpec::takes))
    }

    /// Whether `arg`, read as this rule's flags, takes the next argument as its value: `-c N`,
    /// a cluster ending in such a flag (`-qc N`), or `--lines N`.
    pub fn flag_consumes_next(&self, arg: &str) -> bool {
        let takes_value = |takes: Option<FlagTakes>| takes.is_some_and(FlagTakes::takes_argument);
        if arg == "-" || arg == "--" || !arg.starts_with('-') {
            return false;
        }
        if arg.starts_with("--") || self.options == OptionSyntax::WholeWord {
            return !arg.contains('=') && takes_value(self.flag_takes(arg));
        }
        let mut letters = arg[1..].chars().peekable();
        let mut name = String::with_capacity(5);
        while let Some(letter) = letters.next() {
            name.clear();
            name.push('-');
            name.push(letter);
            match self.flag_takes(&name) {
                Some(FlagTakes::Optional) => return false,
                takes if takes_value(takes) => return letters.peek().is_none(),
                _ => {}
            }
        }
        false
    }

    /// Generic analysis of a whole command: without subcommands, [`ProgramRule::analyze`];
    /// with them, the global flags, then the subcommand's own rule (its decision and flags).
    pub fn analyze_command(&self, name: &str, args: &[String]) -> Result<Analysis, Denial> {
        if self.subcommands.is_empty() {
            return self.analyze(name, args);
        }
        // The first word that is neither a global flag nor a global flag's value.
        let mut index = 0;
        while index < args.len() && args[index].starts_with('-') {
            index += if self.flag_consumes_next(&args[index]) {
                2
            } else {
                1
            };
        }
        if index >= args.len() {
            return Err(Denial::new(format!("{name}: no subcommand given")));
        }
        let sub = &args[index];
        let sub_rule = self.subcommands.get(sub).ok_or_else(|| {
            let allowed: Vec<&str> = self.subcommands.keys().map(String::as_str).collect();
            Denial::new(format!(
                "{name} {sub} is not allowed (allowed subcommands: {})",
                allowed.join(", ")
            ))
        })?;
        let mut analysis = self.analyze(name, &args[..index])?;
        let full = format!("{name} {sub}");
        match sub_rule.decision {
            Decision::Deny => {
                return Err(Denial::new(format!(
                    "{full}: {}",
                    sub_rule.reason.as_deref().unwrap_or("denied by policy")
                )))
            }
            Decision::Ask => analysis.ask.push(format!(
                "{full}: {}",
                sub_rule.reason.as_deref().unwrap_or("needs approval")
            )),
            Decision::Allow => {}
        }
        // A subcommand with subcommands of its own (`uv pip install`) is analysed the same way.
        let sub_analysis = sub_rule.analyze_command(&full, &args[index + 1..])?;
        analysis.paths.extend(sub_analysis.paths);
        analysis.ask.extend(sub_analysis.ask);
        analysis.network |= sub_analysis.network;
        // The shape reaches the innermost subcommand.
        let nested = match sub_rule.subcommands.is_empty() {
            true => 0,
            false => sub_analysis.shape.unwrap_or(0),
        };
        analysis.shape = Some(index + 1 + nested);
        Ok(analysis)
    }

    /// Generic analysis: flags (combined short flags, `--flag=value`, `--`), then positionals
    /// by role. `program` is used in reasons.
    pub fn analyze(&self, program: &str, args: &[String]) -> Result<Analysis, Denial> {
        let mut analysis = Analysis {
            network: self.network,
            ..Analysis::default()
        };
        let mut checksum_lists = false;
        let mut positionals: Vec<&str> = Vec::new();
        let mut i = 0;
        let mut options_ended = false;
        while i < args.len() {
            let arg = args[i].as_str();
            i += 1;
            if options_ended || arg == "-" || !arg.starts_with('-') {
                positionals.push(arg);
                continue;
            }
            if arg == "--" {
                options_ended = true;
                continue;
            }
            if let Some(long) = arg.strip_prefix("--") {
                let (name, inline) = match long.split_once('=') {
                    Some((n, v)) => (format!("--{n}"), Some(v)),
                    None => (arg.to_string(), None),
                };
                if name == "--" {
                    return Err(Denial::new(format!(
                        "{program}: {arg:?} is an option without a name"
                    )));
                }
                let flag = self.lookup(&name)?;
                let takes = self.apply_flag(program, &flag, &mut analysis)?;
                match takes {
                    FlagTakes::Flag | FlagTakes::ChecksumLists => {
                        checksum_lists |= takes == FlagTakes::ChecksumLists;
                        // An unknown flag with an attached value: check the value as a read path.
                        if let (Some(value), None) = (inline, flag.spec) {
                            analysis.paths.push((value.to_string(), Access::Read));
                        }
                        analysis
                            .flags
                            .push((flag.name.to_string(), inline.map(str::to_string)));
                    }
                    // Only ever an attached suffix or mode, never a path.
                    FlagTakes::Optional => analysis
                        .flags
                        .push((flag.name.to_string(), inline.map(str::to_string))),
                    _ => {
                        let value = match inline {
                            Some(v) => v.to_string(),
                            None => next_value(args, &mut i, program, flag.name)?,
                        };
                        analysis
                            .flags
                            .push((flag.name.to_string(), Some(value.clone())));
                        push_value(&mut analysis, program, &flag, value)?;
                    }
                }
                continue;
            }
            if self.options == OptionSyntax::WholeWord {
                self.whole_word(program, arg, args, &mut i, &mut analysis)?;
                continue;
            }
            // A cluster of short flags: `-rn`, `-n5`, `-o/tmp/x`.
            let cluster: Vec<char> = arg[1..].chars().collect();
            let mut j = 0;
            while j < cluster.len() {
                let name = format!("-{}", cluster[j]);
                let flag = self.lookup(&name)?;
                let takes = self.apply_flag(program, &flag, &mut analysis)?;
                let rest: String = cluster[j + 1..].iter().collect();
                match takes {
                    FlagTakes::Flag => {
                        analysis.flags.push((flag.name.to_string(), None));
                        j += 1
                    }
                    FlagTakes::ChecksumLists => {
                        analysis.flags.push((flag.name.to_string(), None));
                        checksum_lists = true;
                        j += 1;
                    }
                    FlagTakes::Optional => {
                        let value = (!rest.is_empty()).then_some(rest);
                        analysis.flags.push((flag.name.to_string(), value));
                        break;
                    }
                    _ => {
                        let value = if rest.is_empty() {
                            next_value(args, &mut i, program, flag.name)?
                        } else {
                            // Some programs skip an `=` after a short flag (zstd's `-o=FILE`),
                            // most keep it (`sort -o=x` writes `=x`): check both names.
                            if let Some(bare) = rest.strip_prefix('=').filter(|b| !b.is_empty()) {
                                push_value(&mut analysis, program, &flag, bare.to_string())?;
                            }
                            rest
                        };
                        analysis
                            .flags
                            .push((flag.name.to_string(), Some(value.clone())));
                        push_value(&mut analysis, program, &flag, value)?;
                        break;
                    }
                }
            }
        }
        if let Some(max) = self.max_args {
            if args.len() > max {
                return Err(Denial::new(format!(
                    "{program}: {} arguments is more than the {max} this rule allows",
                    args.len()
                )));
            }
        }
        if let (Some(why), true) = (&self.needs_args, positionals.is_empty()) {
            return Err(Denial::new(format!("{program} {why}")));
        }
        if let Some(min) = self.min_positionals.as_ref() {
            if positionals.len() < min.count {
                return Err(Denial::new(format!(
                    "{program} with {} of the {} arguments it needs here: {}",
                    positionals.len(),
                    min.count,
                    min.reason
                )));
            }
        }
        if let Some(needs) = &self.needs_flag {
            if !analysis
                .flags
                .iter()
                .any(|(name, _)| needs.one_of.contains(name))
            {
                return Err(Denial::new(format!(
                    "{program} without {}: {}",
                    needs.one_of.join(" or "),
                    needs.reason
                )));
            }
        }
        analysis.positionals = positionals.iter().map(|p| p.to_string()).collect();
        let last = positionals.len().saturating_sub(1);
        for (idx, arg) in positionals.iter().enumerate() {
            let role = match self.last_arg {
                Some(role) if idx == last => role,
                _ => self.args,
            };
            if *arg != "-" {
                for &access in role.accesses() {
                    analysis.paths.push((arg.to_string(), access));
                }
            }
        }
        if checksum_lists {
            use super::lists::{FileList, ListFormat};
            // No list file: the names come from standard input, which lists::check refuses.
            let lists = if positionals.is_empty() {
                vec!["-"]
            } else {
                positionals
            };
            for list in lists {
                analysis.lists.push(FileList {
                    path: list.to_string(),
                    format: ListFormat::Checksums,
                    base: None,
                    access: Access::Read,
                });
            }
        }
        Ok(analysis)
    }

    /// One option word of a program with its own option reader (`OptionSyntax::WholeWord`).
    fn whole_word(
        &self,
        program: &str,
        arg: &str,
        args: &[String],
        i: &mut usize,
        analysis: &mut Analysis,
    ) -> Result<(), Denial> {
        if let Some(spec) = self.flags.get(arg) {
            let flag = Flag {
                name: arg,
                spec: Some(spec),
            };
            let takes = self.apply_flag(program, &flag, analysis)?;
            let value = match takes.takes_argument() {
                true => Some(next_value(args, i, program, arg)?),
                false => None,
            };
            analysis.flags.push((arg.to_string(), value.clone()));
            if let Some(value) = value {
                push_value(analysis, program, &flag, value)?;
            }
            return Ok(());
        }
        // Not a listed word. Programs with their own readers often match a prefix (xxd reads
        // `-ps` as `-p`), so the first letter's denials and path roles apply, its rest is
        // checked as that flag's value, and the next argument is never taken as a value.
        let first: String = arg.chars().take(2).collect();
        match self.flags.get(&first) {
            Some(spec) => {
                let flag = Flag {
                    name: &first,
                    spec: Some(spec),
                };
                self.apply_flag(program, &flag, analysis)?;
                let rest = &arg[first.len()..];
                if !rest.is_empty() {
                    push_value(analysis, program, &flag, rest.to_string())?;
                }
            }
            None => {
                let flag = Flag {
                    name: arg,
                    spec: None,
                };
                self.apply_flag(program, &flag, analysis)?;
            }
        }
        Ok(())
    }

    /// Deny/ask attached to a flag; returns what it takes.
    fn apply_flag(
        &self,
        program: &str,
        flag: &Flag,
        analysis: &mut Analysis,
    ) -> Result<FlagTakes, Denial> {
        match flag.spec {
            Some(spec) => {
                if let Some(reason) = spec.deny() {
                    return Err(Denial::new(format!("{program} {}: {reason}", flag.name)));
                }
                if let Some(reason) = spec.ask() {
                    analysis
                        .ask
                        .push(format!("{program} {}: {reason}", flag.name));
                }
                Ok(spec.takes())
            }
            None if self.unknown_flags == UnknownFlags::Deny => Err(Denial::new(format!(
                "{program}: the flag {} is not in the policy's list for {program}",
                flag.name
            ))),
            None => Ok(FlagTakes::Flag),
        }
    }
}

fn next_value(args: &[String], i: &mut usize, program: &str, flag: &str) -> Result<String, Denial> {
    let value = args
        .get(*i)
        .ok_or_else(|| Denial::new(format!("{program} {flag}: missing its value")))?;
    *i += 1;
    Ok(value.clone())
}

fn push_value(
    analysis: &mut Analysis,
    program: &str,
    flag: &Flag,
    value: String,
) -> Result<(), Denial> {
    use super::lists::{FileList, ListFormat};
    let takes = flag.spec.map_or(FlagTakes::Flag, FlagSpec::takes);
    let name = flag.name;
    if takes == FlagTakes::ValueNotFile && value.starts_with('@') {
        return Err(Denial::new(format!(
            "{program} {name} {value}: takes the value from a file or standard input the policy \
             did not read; give the value itself"
        )));
    }
    if let Some(FlagSpec::Full(full)) = flag.spec {
        if let Some((text, reason)) = full
            .deny_containing
            .iter()
            .find(|(text, _)| value.contains(text.as_str()))
        {
            return Err(Denial::new(format!(
                "{program} {name}: {text:?} in {value:?} {reason}"
            )));
        }
    }
    if matches!(takes, FlagTakes::Read | FlagTakes::Write) {
        analysis.path_flags.push((name.to_string(), value.clone()));
    }
    let list = |format| FileList {
        path: value.clone(),
        format,
        base: None,
        access: Access::Read,
    };
    match takes {
        FlagTakes::Read => analysis.paths.push((value, Access::Read)),
        FlagTakes::Write => analysis.paths.push((value, Access::Write)),
        FlagTakes::Files0 => analysis.lists.push(list(ListFormat::Nul)),
        FlagTakes::FileLines => analysis.lists.push(list(ListFormat::Lines)),
        FlagTakes::Flag
        | FlagTakes::Value
        | FlagTakes::Optional
        | FlagTakes::ChecksumLists
        | FlagTakes::ValueNotFile => {}
    }
    Ok(())
}

impl Settings {
    pub fn from_file(file: &SettingsFile, base: Option<&Settings>) -> Settings {
        let base = base.cloned().unwrap_or(Settings {
            max_input_bytes: 64 * 1024,
            max_args: 4096,
            max_glob_matches: 1000,
            unknown_programs: Decision::Deny,
            parse_budget: std::time::Duration::from_millis(200),
        });
        Settings {
            max_input_bytes: file.max_input_bytes.unwrap_or(base.max_input_bytes),
            max_args: file.max_args.unwrap_or(base.max_args),
            max_glob_matches: file.max_glob_matches.unwrap_or(base.max_glob_matches),
            unknown_programs: file.unknown_programs.unwrap_or(base.unknown_programs),
            // Capped at a minute: the budget bounds how long one check can hold a caller.
            parse_budget: file
                .parse_budget_ms
                .map(|ms| std::time::Duration::from_millis(ms.min(60_000)))
                .unwrap_or(base.parse_budget),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_rule_is_what_an_empty_table_parses_to() {
        let parsed: ProgramRule = toml::from_str("").unwrap();
        assert_eq!(
            format!("{parsed:?}"),
            format!("{:?}", ProgramRule::default())
        );
    }

    fn rule(toml_text: &str) -> ProgramRule {
        toml::from_str(toml_text).unwrap()
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn combined_short_flags_and_attached_values() {
        let sort = rule(r#"flags = { "-o" = "write", "-k" = "value", "-r" = "flag" }"#);
        let a = sort
            .analyze("sort", &args(&["-rk2", "-ro/tmp/x", "in.txt"]))
            .unwrap();
        assert_eq!(
            a.paths,
            vec![
                ("/tmp/x".into(), Access::Write),
                ("in.txt".into(), Access::Read)
            ]
        );
    }

    #[test]
    fn a_value_read_from_a_file_or_holding_a_refused_text_is_refused() {
        let curl = rule(
            r#"flags = { "-H" = "value-not-@file", "--write-out" = { takes = "value-not-@file", deny_containing = { "%output{" = "writes a file" } } }"#,
        );
        // Plain values are words, in every spelling.
        let a = curl
            .analyze(
                "curl",
                &args(&["-H", "Accept: */*", "-HX: y", "--write-out=%{size}"]),
            )
            .unwrap();
        assert!(a.paths.is_empty(), "{:?}", a.paths);
        // `@FILE` and `@-` would be read in the value's place: attached or not, short or long.
        for argv in [
            &["-H", "@.env"][..],
            &["-H@.env"],
            &["-H", "@-"],
            &["--write-out", "@fmt"],
            &["--write-out=@-"],
        ] {
            let err = curl.analyze("curl", &args(argv)).unwrap_err().reason;
            assert!(
                err.contains(" @") && err.contains("give the value itself"),
                "{argv:?}: {err}"
            );
        }
        for argv in [
            &["--write-out", "x%output{hook}y"][..],
            &["--write-out=%output{>>hook}"],
        ] {
            let err = curl.analyze("curl", &args(argv)).unwrap_err().reason;
            assert!(
                err.contains("\"%output{\"") && err.contains("writes a file"),
                "{argv:?}: {err}"
            );
        }
    }

    #[test]
    fn an_attached_value_after_an_equals_sign_is_checked_with_and_without_it() {
        let zstd = rule(r#"flags = { "-o" = "write", "-k" = "value" }"#);
        let a = zstd
            .analyze("zstd", &args(&["-o=/tmp/x", "-k=3", "in"]))
            .unwrap();
        assert_eq!(
            a.paths,
            vec![
                ("/tmp/x".into(), Access::Write),
                ("=/tmp/x".into(), Access::Write),
                ("in".into(), Access::Read)
            ]
        );
    }

    #[test]
    fn which_flags_consume_the_next_argument() {
        let head =
            rule(r#"flags = { "-c" = "value", "--lines" = "value", "--color" = "optional" }"#);
        for arg in ["-c", "-qc", "-exec", "--lines"] {
            assert!(head.flag_consumes_next(arg), "{arg}");
        }
        for arg in [
            "-c5",
            "-cq",
            "-q",
            "--lines=5",
            "--color",
            "--",
            "-",
            "file",
        ] {
            assert!(!head.flag_consumes_next(arg), "{arg}");
        }
    }

    #[test]
    fn long_flag_abbreviations_match_denied_flags_only() {
        let sort = rule(
            r#"flags = { "--output" = "write", "--compress-program" = { deny = "runs a program" }, "--label" = "value" }"#,
        );
        let err = sort
            .analyze("sort", &args(&["--compress-prog=sh", "x"]))
            .unwrap_err();
        assert!(err.reason.contains("--compress-program"), "{}", err.reason);
        // An abbreviation of a listed value flag might be an unlisted boolean flag of the real
        // program, making `/etc/x` a path: refused, never expanded.
        for abbreviated in [&["--outp=/etc/x"][..], &["--lab", "/etc/x"][..]] {
            let err = sort.analyze("sort", &args(abbreviated)).unwrap_err();
            assert!(
                err.reason.contains("write the flag in full"),
                "{}",
                err.reason
            );
        }
        let a = sort.analyze("sort", &args(&["--output=/etc/x"])).unwrap();
        assert_eq!(a.paths, vec![("/etc/x".into(), Access::Write)]);
    }

    #[test]
    fn whole_word_programs_never_split_a_word_into_flags() {
        // xxd reads `-ps` as `-p` (postscript): `/etc/shadow` is its input file, not the value
        // of a `-s` flag hidden in the word.
        let xxd = rule(
            r#"options = "whole-word"
            last_arg = "write"
            flags = { "-s" = "value", "-p" = "flag", "-o" = "write", "-x" = { deny = "no" } }"#,
        );
        let a = xxd
            .analyze("xxd", &args(&["-ps", "/etc/shadow", "out"]))
            .unwrap();
        assert_eq!(
            a.paths,
            vec![
                ("/etc/shadow".into(), Access::Read),
                ("out".into(), Access::Write)
            ]
        );
        // An exact listed value flag takes the next argument; a longer word never does.
        let a = xxd.analyze("xxd", &args(&["-s", "10", "in"])).unwrap();
        assert_eq!(a.paths, vec![("in".into(), Access::Write)]);
        let a = xxd
            .analyze("xxd", &args(&["-seek", "/etc/x", "in"]))
            .unwrap();
        assert!(a.paths.contains(&("/etc/x".into(), Access::Read)), "{a:?}");
        // The first letter's role and denial still apply.
        let a = xxd.analyze("xxd", &args(&["-o/tmp/x", "in"])).unwrap();
        assert!(a.paths.contains(&("/tmp/x".into(), Access::Write)), "{a:?}");
        assert!(xxd.analyze("xxd", &args(&["-xyz"])).is_err());
        assert!(!xxd.flag_consumes_next("-ps"));
        assert!(xxd.flag_consumes_next("-s"));
    }

    #[test]
    fn unknown_flag_values_are_checked_as_paths() {
        let r = rule("");
        let a = r
            .analyze("x", &args(&["--weird=/etc/passwd", "--", "-notaflag"]))
            .unwrap();
        assert_eq!(
            a.paths,
            vec![
                ("/etc/passwd".into(), Access::Read),
                ("-notaflag".into(), Access::Read)
            ]
        );
    }

    #[test]
    fn last_arg_role_and_strict_flags() {
        let cp = rule(r#"last_arg = "write""#);
        let a = cp.analyze("cp", &args(&["a", "b", "dest"])).unwrap();
        assert_eq!(a.paths[2], ("dest".into(), Access::Write));
        let strict = rule(r#"unknown_flags = "deny""#);
        assert!(strict.analyze("t", &args(&["-z"])).is_err());
    }

    #[test]
    fn missing_flag_value_is_denied() {
        let r = rule(r#"flags = { "-o" = "write" }"#);
        assert!(r
            .analyze("sort", &args(&["-o"]))
            .unwrap_err()
            .reason
            .contains("missing"));
    }
}
