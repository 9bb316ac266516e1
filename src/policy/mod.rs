//! The command policy: parse a bash command string (tree-sitter-bash), build the IR, apply the
//! per-program rules and the path validator, and decide allow / deny / ask with a reason.
//!
//! Data path: `syntax` (tree → tokens) → `grammar` (tokens → raw script) → `check` (expansion,
//! cwd tracking, rules, analyzers, paths) → [`Verdict`] with the checked [`ir::Script`].

mod analyzers;
mod assignments;
mod check;
pub mod compare;
mod compound;
mod cond;
mod copies;
mod derived;
mod expand;
pub mod fixture;
mod grammar;
pub mod invariant;
pub mod ir;
mod line_links;
pub mod lists;
mod lstat_memo;
pub mod mode;
mod node_kind;
pub mod paths;
mod process_substitution;
pub mod rules;
mod sections;
pub mod shape;
mod shell_vars;
mod substitution;
mod substitution_places;
pub mod suite;
mod syntax;
mod words;
pub mod xargs;

use rules::{PolicyFile, ProgramRule, Settings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use analyzers::git_config;
pub use analyzers::git_files;
pub use analyzers::xargs as xargs_input;
pub use check::{Checker, JAILED_CODE};
pub use ir::Script;
pub use paths::{Access, OwnFile, PathPolicy};

/// The `PATH` every sandbox gives a command (and `$PATH` expands to).
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The embedded default policy (`policy/default.toml`).
pub const DEFAULT_POLICY: &str = include_str!("../../policy/default.toml");

/// The network programs added when `[network]` has rules (`policy/network.toml`).
pub const NETWORK_POLICY: &str = include_str!("../../policy/network.toml");

/// `policy/network.toml` as written: whole programs, and subcommands added to the default's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkPrograms {
    programs: BTreeMap<String, ProgramRule>,
    subcommands: BTreeMap<String, BTreeMap<String, ProgramRule>>,
    /// Expectations for these rules (run by the tests below), with their workspace.
    #[serde(default)]
    #[allow(dead_code)]
    fixture: fixture::FixtureSpec,
    #[serde(default)]
    #[allow(dead_code)]
    tests: Vec<rules::TestCase>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
    /// The user may approve it, command by command; with nobody to ask it is `Deny`.
    Ask,
}

impl Decision {
    /// The exit code of `warden policy check`: 0 allow, 1 deny, 3 ask.
    pub fn exit_code(self) -> i32 {
        match self {
            Decision::Allow => 0,
            Decision::Deny => 1,
            Decision::Ask => 3,
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Ask => "ask",
        })
    }
}

/// Why something was refused; every denial carries a reason a person can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    pub reason: String,
}

impl Denial {
    pub fn new(reason: impl Into<String>) -> Denial {
        Denial {
            reason: reason.into(),
        }
    }
}

/// The policy's answer for one command string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    pub reason: String,
    /// The checked IR. Complete when allowed or asked; for a denial, the commands analysed
    /// before the one that was denied.
    pub script: Script,
}

impl Verdict {
    /// `{"decision":…, "reason":…, "commands":[{"argv":[…]}…]}` as in the CLI contract.
    pub fn to_json(&self) -> serde_json::Value {
        let commands: Vec<serde_json::Value> = self
            .script
            .commands()
            .map(|c| serde_json::json!({ "argv": c.argv, "cwd": c.cwd }))
            .collect();
        serde_json::json!({
            "decision": self.decision,
            "reason": self.reason,
            "commands": commands,
        })
    }

    /// [`Verdict::to_json`] written straight to `out`, byte for byte the same text, without
    /// building the JSON tree first (batch mode writes one per line).
    pub fn write_json(&self, out: &mut impl std::io::Write) -> serde_json::Result<()> {
        // Fields in the order serde_json's map gives `to_json`'s keys (sorted).
        #[derive(Serialize)]
        struct Shown<'a> {
            commands: Commands<'a>,
            decision: Decision,
            reason: &'a str,
        }
        struct Commands<'a>(&'a Script);
        impl Serialize for Commands<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.commands().map(|c| ShownCommand {
                    argv: &c.argv,
                    cwd: &c.cwd,
                }))
            }
        }
        #[derive(Serialize)]
        struct ShownCommand<'a> {
            argv: &'a [String],
            cwd: &'a Path,
        }
        serde_json::to_writer(
            out,
            &Shown {
                commands: Commands(&self.script),
                decision: self.decision,
                reason: &self.reason,
            },
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("invalid policy {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("invalid root: {0}")]
    Root(std::io::Error),
}

/// Rules, settings and extra roots, merged from the default and an optional user file.
#[derive(Clone, Debug)]
pub struct Policy {
    programs: BTreeMap<String, Program>,
    settings: Settings,
    read_roots: Vec<PathBuf>,
    write_roots: Vec<PathBuf>,
    egress_hosts: BTreeMap<String, String>,
    /// The policy file's `[network]` (the config's is laid over it where it is used).
    network: crate::egress::network::NetworkConfig,
    /// Whether the network programs were added (`[network]` has rules).
    networked: bool,
}

/// One program's rule: parsed (a user file, a skill's manifest), or the embedded default's text
/// until the checker first asks for it (`sections`).
#[derive(Clone, Debug)]
enum Program {
    Parsed(Box<ProgramRule>),
    Unparsed(Arc<sections::LazyRule>),
}

impl Program {
    fn rule(&self) -> &ProgramRule {
        match self {
            Program::Parsed(rule) => rule,
            Program::Unparsed(lazy) => lazy.rule(),
        }
    }
}

impl Policy {
    /// The embedded default policy: built once per process, its programs parsed when first
    /// asked for.
    pub fn embedded_default() -> Policy {
        static DEFAULT: std::sync::OnceLock<Policy> = std::sync::OnceLock::new();
        DEFAULT.get_or_init(Policy::read_embedded_default).clone()
    }

    #[expect(
        clippy::expect_used,
        reason = "the embedded text is part of the binary; the default_policy_parses test \
                  parses it on every build, so a failure here is a build that never shipped"
    )]
    fn read_embedded_default() -> Policy {
        let split = sections::split(DEFAULT_POLICY);
        let mut policy = Policy::from_file(
            parse_file(&split.rest, "embedded default policy").expect(
                "the embedded default policy parses (checked by the default_policy_parses test)",
            ),
            None,
        );
        policy.programs = split
            .programs
            .into_iter()
            .map(|(name, pieces)| {
                let lazy = sections::LazyRule::new(name.clone(), pieces);
                (name, Program::Unparsed(lazy))
            })
            .collect();
        policy
    }

    /// The default, extended (or replaced, with `extends_default = false`) by a user file.
    pub fn load(user_file: Option<&Path>) -> Result<Policy, PolicyError> {
        Policy::load_with_network(user_file, &Default::default())
    }

    /// [`Policy::load`], with the network programs added when the config's `[network]`
    /// (`network`) or the policy file's has rules.
    pub fn load_with_network(
        user_file: Option<&Path>,
        network: &crate::egress::network::NetworkConfig,
    ) -> Result<Policy, PolicyError> {
        let Some(path) = user_file else {
            let mut policy = Policy::embedded_default();
            if network.has_rules() {
                policy.add_network_programs();
            }
            return Ok(policy);
        };
        let text = std::fs::read_to_string(path).map_err(|error| PolicyError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Policy::from_user_toml_with_network(&text, &path.display().to_string(), network)
    }

    /// Like [`Policy::load`] from text.
    pub fn from_user_toml(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        Policy::from_user_toml_with_network(text, origin, &Default::default())
    }

    fn from_user_toml_with_network(
        text: &str,
        origin: &str,
        network: &crate::egress::network::NetworkConfig,
    ) -> Result<Policy, PolicyError> {
        let file = parse_file(text, origin)?;
        file.network.check().map_err(|message| PolicyError::Parse {
            origin: origin.to_string(),
            message,
        })?;
        let networked = network.has_rules() || file.network.has_rules();
        if file.extends_default == Some(false) {
            return Ok(Policy::from_file(file, None));
        }
        let mut base = Policy::embedded_default();
        // Under the user's file: its own entries for these programs still replace them.
        if networked {
            base.add_network_programs();
        }
        Ok(Policy::from_file(file, Some(base)))
    }

    /// Add `policy/network.toml`: whole programs replace the default's entry, subcommands
    /// join the default's program.
    #[expect(
        clippy::expect_used,
        reason = "the embedded text is part of the binary; the network_policy_parses test \
                  parses it on every build"
    )]
    fn add_network_programs(&mut self) {
        let mut added: NetworkPrograms =
            toml::from_str(NETWORK_POLICY).expect("policy/network.toml parses (tested)");
        if let Some(pip) = added.programs.get("pip").cloned() {
            added.programs.insert("pip3".into(), pip);
        }
        self.networked = true;
        self.programs.extend(
            added
                .programs
                .into_iter()
                .map(|(name, rule)| (name, Program::Parsed(Box::new(rule)))),
        );
        for (program, subcommands) in added.subcommands {
            if let Some(entry) = self.programs.get_mut(&program) {
                let mut rule = entry.rule().clone();
                rule.subcommands.extend(subcommands);
                *entry = Program::Parsed(Box::new(rule));
            }
        }
    }

    /// Whether jailed commands may reach the network (`[network]` has rules).
    pub fn networked(&self) -> bool {
        self.networked
    }

    /// The policy file's `[network]`.
    pub fn network(&self) -> &crate::egress::network::NetworkConfig {
        &self.network
    }

    fn from_file(file: PolicyFile, base: Option<Policy>) -> Policy {
        let mut policy = base.unwrap_or(Policy {
            programs: BTreeMap::new(),
            settings: Settings::from_file(&Default::default(), None),
            read_roots: Vec::new(),
            write_roots: Vec::new(),
            egress_hosts: BTreeMap::new(),
            network: Default::default(),
            networked: false,
        });
        policy.settings = Settings::from_file(&file.settings, Some(&policy.settings));
        policy
            .read_roots
            .extend(file.paths.read.iter().map(|p| paths::expand_home(p)));
        policy
            .write_roots
            .extend(file.paths.write.iter().map(|p| paths::expand_home(p)));
        // A user entry replaces the default entry for that program as a whole.
        policy.programs.extend(
            file.programs
                .into_iter()
                .map(|(name, rule)| (name, Program::Parsed(Box::new(rule)))),
        );
        policy.egress_hosts.extend(file.egress.hosts);
        policy.network = file.network.over(&policy.network);
        policy
    }

    /// This policy with `rules` added; each replaces the entry for its program as a whole, as a
    /// user file's `[programs.X]` does (a skill's granted manifest widens or narrows this way).
    pub fn with_programs(mut self, rules: BTreeMap<String, ProgramRule>) -> Policy {
        self.programs.extend(
            rules
                .into_iter()
                .map(|(name, rule)| (name, Program::Parsed(Box::new(rule)))),
        );
        self
    }

    pub fn rule(&self, program: &str) -> Option<&ProgramRule> {
        self.programs.get(program).map(Program::rule)
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn programs(&self) -> impl Iterator<Item = (&String, &ProgramRule)> {
        self.programs
            .iter()
            .map(|(name, program)| (name, program.rule()))
    }

    /// Extra readable roots from the policy file.
    pub fn read_roots(&self) -> &[PathBuf] {
        &self.read_roots
    }

    /// Extra writable roots from the policy file.
    pub fn write_roots(&self) -> &[PathBuf] {
        &self.write_roots
    }

    /// `[egress.hosts]` of the policy file: host rules for `web_fetch`, which the config's
    /// entries for the same host replace.
    pub fn egress_hosts(&self) -> &BTreeMap<String, String> {
        &self.egress_hosts
    }

    /// A checker for commands in `workspace`, with `~` expanding to `home`.
    pub fn checker(
        self: &Arc<Self>,
        workspace: &Path,
        extra_read: &[PathBuf],
        home: &Path,
    ) -> Result<Checker, PolicyError> {
        let mut read: Vec<PathBuf> = self.read_roots.clone();
        read.extend_from_slice(extra_read);
        let paths = PathPolicy::new(workspace, &self.write_roots, &read, home)
            .map_err(PolicyError::Root)?;
        Ok(Checker::new(Arc::clone(self), paths))
    }
}

fn parse_file(text: &str, origin: &str) -> Result<PolicyFile, PolicyError> {
    toml::from_str(text).map_err(|e| PolicyError::Parse {
        origin: origin.to_string(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_parses() {
        let file = parse_file(DEFAULT_POLICY, "default").unwrap();
        assert!(file.programs.contains_key("ls"));
    }

    #[test]
    fn network_policy_parses_and_applies_only_with_network_rules() {
        let plain = Policy::embedded_default();
        assert!(!plain.networked());
        let git = plain.rule("git").unwrap();
        assert_eq!(git.subcommands["clone"].decision, Decision::Deny);

        let rules: crate::egress::network::NetworkConfig =
            toml::from_str("[hosts]\n\"a.test\" = \"allow\"").unwrap();
        let networked = Policy::load_with_network(None, &rules).unwrap();
        assert!(networked.networked());
        let git = networked.rule("git").unwrap();
        assert_eq!(git.subcommands["clone"].decision, Decision::Allow);
        assert!(git.subcommands.contains_key("status"));
        assert_eq!(networked.rule("curl").unwrap().decision, Decision::Allow);
        assert!(networked.rule("pip3").is_some());

        // A policy file's own [network] turns them on too; its own entry for a program wins.
        let from_file = Policy::from_user_toml(
            "[network.hosts]\n\"b.test\" = \"allow\"\n[programs.wget]\ndecision = \"deny\"\n",
            "u",
        )
        .unwrap();
        assert!(from_file.networked());
        assert_eq!(from_file.rule("wget").unwrap().decision, Decision::Deny);
        assert_eq!(from_file.network().hosts.len(), 1);
        assert!(Policy::from_user_toml("[network.hosts]\n\"b.test\" = \"maybe\"\n", "u").is_err());
    }

    #[test]
    fn the_network_policys_own_tests_pass_with_network_rules() {
        let rules: crate::egress::network::NetworkConfig =
            toml::from_str("[hosts]\n\"a.test\" = \"allow\"").unwrap();
        let policy = Arc::new(Policy::load_with_network(None, &rules).unwrap());
        let programs: NetworkPrograms = toml::from_str(NETWORK_POLICY).unwrap();
        assert!(programs.tests.len() > 10);
        let suite = suite::Suite {
            origin: "policy/network.toml".into(),
            fixture: programs.fixture,
            tests: programs.tests,
        };
        let failed: Vec<String> = suite::run(&policy, &[suite])
            .unwrap()
            .into_iter()
            .filter_map(|o| o.failure.map(|f| format!("{}: {f}", o.case.cmd)))
            .collect();
        assert!(failed.is_empty(), "{failed:#?}");
    }

    #[test]
    fn the_checker_marks_the_commands_that_reach_the_network() {
        let rules: crate::egress::network::NetworkConfig =
            toml::from_str("[hosts]\n\"a.test\" = \"allow\"").unwrap();
        let policy = Arc::new(Policy::load_with_network(None, &rules).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let mut checker = policy.checker(&ws, &[], &ws).unwrap();
        for (command, network) in [
            ("curl -sS http://a.test/", true),
            ("ls && wget -q -O x http://a.test/", true),
            ("git clone http://a.test/r.git r", true),
            ("uv pip install --target libs x", true),
            ("pnpm install", true),
            ("pip install --target libs x", true),
            ("make", true),
            ("ls -la", false),
            ("cat README.md", false),
        ] {
            let verdict = checker.check(command);
            assert_ne!(
                verdict.decision,
                Decision::Deny,
                "{command}: {}",
                verdict.reason
            );
            assert_eq!(verdict.script.may_use_network(), network, "{command}");
        }
        // xargs runs only what the policy knows every effect of: not a network command.
        let verdict = checker.check("echo http://a.test/ | xargs curl");
        assert_eq!(verdict.decision, Decision::Deny, "{}", verdict.reason);
    }

    #[test]
    fn a_jail_variable_expands_to_its_value_where_an_unset_one_expands_to_nothing() {
        let rules: crate::egress::network::NetworkConfig = toml::from_str(
            "[hosts]\n\"a.test\" = \"allow\"\n[secrets.GH_TOKEN]\nhosts = [\"a.test\"]",
        )
        .unwrap();
        let policy = Arc::new(Policy::load_with_network(None, &rules).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let argv = |checker: &mut Checker, command: &str| {
            let verdict = checker.check(command);
            assert_eq!(
                verdict.decision,
                Decision::Allow,
                "{command}: {}",
                verdict.reason
            );
            let commands: Vec<_> = verdict.script.commands().map(|c| c.argv.clone()).collect();
            commands
        };
        let command = "curl -sS -H \"Authorization: Bearer $GH_TOKEN\" https://a.test/x";
        let header = |argv: Vec<Vec<String>>| {
            let at = argv[0].iter().position(|a| a == "-H").unwrap();
            argv[0][at + 1].clone()
        };
        let mut plain = policy.checker(&ws, &[], &ws).unwrap();
        assert_eq!(
            header(argv(&mut plain, command)),
            "Authorization: Bearer ",
            "without the jail's value, as bash expands an unset variable"
        );
        let mut checker = policy.checker(&ws, &[], &ws).unwrap();
        let variables = rules.jail_variables();
        assert_eq!(variables.len(), 1);
        let placeholder = variables[0].1.clone();
        assert!(placeholder.starts_with("warden-placeholder-GH_TOKEN-"));
        checker.set_jail_variables(variables);
        assert_eq!(
            header(argv(&mut checker, command)),
            format!("Authorization: Bearer {placeholder}")
        );
        // Unquoted, in a loop's own variable of the same name, in other words.
        assert_eq!(
            argv(&mut checker, "echo $GH_TOKEN")[0],
            ["echo", &placeholder]
        );
        assert_eq!(
            argv(&mut checker, "for GH_TOKEN in a; do echo $GH_TOKEN; done")[0],
            ["echo", "a"]
        );
        assert_eq!(
            argv(&mut checker, "echo \"${GH_TOKEN}\"x")[0],
            ["echo", &format!("{placeholder}x")]
        );
        // Other variables the jail does not set still expand to nothing.
        assert_eq!(argv(&mut checker, "echo x$NPM_TOKEN")[0], ["echo", "x"]);
        // Without rules a jail has no network and no such variable.
        let no_rules: crate::egress::network::NetworkConfig =
            toml::from_str("[secrets.GH_TOKEN]\nhosts = [\"a.test\"]").unwrap();
        assert!(no_rules.jail_variables().is_empty());
    }

    #[test]
    fn a_verdict_written_as_json_is_the_same_text_as_its_json_value() {
        let policy = Arc::new(Policy::embedded_default());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x\n").unwrap();
        let mut checker = policy.checker(dir.path(), &[], dir.path()).unwrap();
        for command in [
            "ls -la",
            "cat notes.txt | sort > \"out \\\"q\\\".txt\"",
            "cat /etc/shadow",
            "if true; then echo $(ls); fi",
            "cd sub",
            "printf '%s\\n' \"tab\there\"",
        ] {
            let verdict = checker.check(command);
            let mut written = Vec::new();
            verdict.write_json(&mut written).unwrap();
            assert_eq!(
                String::from_utf8(written).unwrap(),
                verdict.to_json().to_string(),
                "{command}"
            );
        }
    }

    #[test]
    fn user_file_extends_or_replaces() {
        let extended = Policy::from_user_toml("[programs.jq]\nargs = \"read\"\n", "u").unwrap();
        assert!(extended.rule("jq").is_some() && extended.rule("ls").is_some());
        let replaced =
            Policy::from_user_toml("extends_default = false\n[programs.jq]\n", "u").unwrap();
        assert!(replaced.rule("jq").is_some() && replaced.rule("ls").is_none());
    }

    #[test]
    fn bad_policy_is_a_clear_error() {
        let err = Policy::from_user_toml("[programs.ls]\nargz = 1\n", "mine.toml").unwrap_err();
        assert!(err.to_string().contains("mine.toml"), "{err}");
    }
}
