//! `skill.toml`: what a skill needs beyond the default policy, as data the user grants.
//!
//! ```toml
//! run = ["python3", "scripts/stats.py"]   # what `warden skill run NAME ARGS…` starts
//!
//! [permissions]
//! interpreters = ["python3"]              # may run the skill's own files, nothing else
//!
//! [permissions.commands.jq]               # policy rules, exactly as in a policy file
//! args = "read"
//!
//! [permissions.paths]                     # folders in the workspace, relative to it
//! read = ["data"]
//! write = ["reports"]
//!
//! [permissions.network]
//! domains = ["api.example.com"]           # through warden's egress proxy only
//! # method/path rules per domain, and routes that add secret headers: see `routes.rs`
//!
//! [permissions.limits]                    # never above [sandbox]'s
//! timeout_secs = 60
//! memory_mb = 512
//! max_processes = 32
//! ```
//!
//! A missing `skill.toml` means no permissions beyond the default policy: no interpreters, no
//! workspace paths, no network. Validation refuses anything outside the skill's folder and the
//! workspace, anything above the global limits, and rules that would hand out a shell.

use crate::egress::proxy::domain::{parse_domain, Domain};
use crate::egress::proxy::routes::{HttpRules, RouteSpec};
use crate::policy::rules::{AnalyzerKind, ProgramRule};
use crate::sandbox::Limits;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Component, Path};

/// The manifest's file name, beside `SKILL.md`.
pub const MANIFEST_FILE: &str = "skill.toml";

/// Interpreters a skill may declare (they then run only the skill's own files).
pub const INTERPRETERS: &[&str] = &[
    "python3",
    "python3.11",
    "python3.12",
    "python3.13",
    "node",
    "perl",
    "ruby",
    "bash",
    "sh",
];

/// Programs no manifest may allow as plain commands: shells and interpreters (declare those
/// under `interpreters`), and wrappers or privilege tools that would run anything at all.
const NEVER_COMMANDS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "fish",
    "csh",
    "tcsh",
    "busybox",
    "python",
    "python2",
    "python3",
    "python3.11",
    "python3.12",
    "python3.13",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "tclsh",
    "Rscript",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "eval",
    "exec",
    "source",
    ".",
    "alias",
    "trap",
    "export",
    "builtin",
    "command",
    "env",
    "xargs",
    "nohup",
    "setsid",
    "timeout",
    "stdbuf",
    "script",
    "parallel",
    "watch",
    "sudo",
    "su",
    "doas",
    "pkexec",
    "runuser",
    "chroot",
    "unshare",
    "nsenter",
    "mount",
    "umount",
    "gdb",
    "strace",
    "ltrace",
    "ln",
];

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The argv `warden skill run NAME ARGS…` (and the tool's `args`) start with.
    pub run: Option<Vec<String>>,
    #[serde(default)]
    pub permissions: Permissions,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    #[serde(default)]
    pub interpreters: Vec<String>,
    /// Policy rules added to (or replacing entries of) the default policy.
    #[serde(default)]
    pub commands: BTreeMap<String, ProgramRule>,
    #[serde(default)]
    pub paths: PathGrants,
    #[serde(default)]
    pub network: Network,
    #[serde(default)]
    pub limits: LimitRequest,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathGrants {
    /// Workspace folders read (`.` is the whole workspace).
    #[serde(default)]
    pub read: Vec<String>,
    /// Workspace folders written.
    #[serde(default)]
    pub write: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// `name` (ports 80 and 443) or `name:port`; exact names, no wildcards, no addresses.
    #[serde(default)]
    pub domains: Vec<String>,
    /// Method and path rules per declared domain (`routes.rs`).
    #[serde(default)]
    pub rules: BTreeMap<String, HttpRules>,
    /// Named upstreams the proxy calls for the skill, adding secret headers (`routes.rs`).
    #[serde(default)]
    pub routes: BTreeMap<String, RouteSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitRequest {
    pub timeout_secs: Option<u64>,
    pub memory_mb: Option<u64>,
    pub max_processes: Option<u64>,
}

/// The global ceilings (from `[sandbox]`).
#[derive(Clone, Debug)]
pub struct Bounds {
    pub timeout_secs: u64,
    pub limits: Limits,
}

/// What a run gets after applying the request under the bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Effective {
    pub timeout_secs: u64,
    pub limits: Limits,
}

impl Manifest {
    /// Parse `skill.toml` text.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        toml::from_str(text).map_err(|e| format!("{MANIFEST_FILE}: {}", e.message()))
    }

    /// Refuse anything a grant could not safely mean.
    pub fn validate(&self, bounds: &Bounds) -> Result<(), String> {
        if let Some(run) = &self.run {
            if run.is_empty() || run[0].is_empty() {
                return Err(format!("{MANIFEST_FILE}: `run` needs a program"));
            }
        }
        let p = &self.permissions;
        for interpreter in &p.interpreters {
            if !INTERPRETERS.contains(&interpreter.as_str()) {
                return Err(format!(
                    "{MANIFEST_FILE}: {interpreter:?} is not an interpreter warden knows (known: \
                     {})",
                    INTERPRETERS.join(", ")
                ));
            }
        }
        for (name, rule) in &p.commands {
            check_command(name, rule)?;
        }
        for path in &p.paths.read {
            check_relative(path).map_err(|why| format!("read path {path:?}: {why}"))?;
        }
        for path in &p.paths.write {
            check_relative(path).map_err(|why| format!("write path {path:?}: {why}"))?;
            check_writable(path).map_err(|why| format!("write path {path:?}: {why}"))?;
        }
        for domain in &p.network.domains {
            parse_domain(domain)?;
        }
        let declared = self.domains()?;
        for (name, rules) in &p.network.rules {
            let domain = parse_domain(name)?;
            if !declared.contains(&domain) {
                return Err(format!(
                    "{MANIFEST_FILE}: rules for {name}, which is not in `domains`"
                ));
            }
            rules.validate(&format!("rules for {name}"))?;
        }
        let mut envs = std::collections::BTreeSet::new();
        for (name, route) in &p.network.routes {
            route
                .validate(name)
                .map_err(|e| format!("{MANIFEST_FILE}: {e}"))?;
            if !envs.insert(route.env_name(name)) {
                return Err(format!(
                    "{MANIFEST_FILE}: two routes use the variable {}",
                    route.env_name(name)
                ));
            }
        }
        self.effective(bounds).map(|_| ())
    }

    /// The parsed domains (validated first).
    pub fn domains(&self) -> Result<Vec<Domain>, String> {
        let mut out: Vec<Domain> = self
            .permissions
            .network
            .domains
            .iter()
            .map(|d| parse_domain(d))
            .collect::<Result<_, _>>()?;
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The limits a run gets: the request, or the global value when it names none. A request
    /// above a global limit is an error (install refuses it).
    pub fn effective(&self, bounds: &Bounds) -> Result<Effective, String> {
        let request = &self.permissions.limits;
        let mut limits = bounds.limits.clone();
        let above = |what: &str, asked: u64, max: u64| {
            Err(format!(
                "{MANIFEST_FILE}: {what} {asked} is above the global limit {max} ([sandbox])"
            ))
        };
        let timeout_secs = match request.timeout_secs {
            Some(0) => return Err(format!("{MANIFEST_FILE}: timeout_secs must be at least 1")),
            Some(t) if t > bounds.timeout_secs => {
                return above("timeout_secs", t, bounds.timeout_secs)
            }
            Some(t) => t,
            None => bounds.timeout_secs,
        };
        if let Some(mb) = request.memory_mb {
            let bytes = mb.saturating_mul(1024 * 1024);
            if mb == 0 || bytes > bounds.limits.memory_bytes {
                return above("memory_mb", mb, bounds.limits.memory_bytes / (1024 * 1024));
            }
            limits.memory_bytes = bytes;
        }
        if let Some(n) = request.max_processes {
            if n == 0 || n > bounds.limits.max_processes {
                return above("max_processes", n, bounds.limits.max_processes);
            }
            limits.max_processes = n;
        }
        Ok(Effective {
            timeout_secs,
            limits,
        })
    }
}

fn check_command(name: &str, rule: &ProgramRule) -> Result<(), String> {
    if name.is_empty() || name.contains('/') || name.starts_with('-') {
        return Err(format!(
            "{MANIFEST_FILE}: command {name:?} must be a plain program name"
        ));
    }
    if NEVER_COMMANDS.contains(&name) {
        let hint = if INTERPRETERS.contains(&name) {
            " (list it under `interpreters` to run the skill's own scripts)"
        } else {
            ""
        };
        return Err(format!(
            "{MANIFEST_FILE}: `{name}` cannot be granted as a command: it would run code the \
             policy cannot see{hint}"
        ));
    }
    check_rule(name, rule)
}

/// Interpreter rules are built by warden for the skill's own folder, never by a manifest.
fn check_rule(name: &str, rule: &ProgramRule) -> Result<(), String> {
    if rule.analyzer == Some(AnalyzerKind::Interpreter) || rule.scripts.is_some() {
        return Err(format!(
            "{MANIFEST_FILE}: command {name}: `analyzer = \"interpreter\"` and `scripts` are \
             set by warden from `interpreters`, not by a manifest"
        ));
    }
    for (sub, sub_rule) in &rule.subcommands {
        check_rule(&format!("{name} {sub}"), sub_rule)?;
    }
    Ok(())
}

/// A normalized relative path inside the workspace: no `/…`, `~`, `..`, `$`, globs.
fn check_relative(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("empty".into());
    }
    if path.starts_with('/') || path.starts_with('~') {
        return Err("only folders inside the workspace, relative to it, can be granted".into());
    }
    if path.contains(['$', '*', '?', '[', '{', '\\', '\0', '\n']) {
        return Err("variables, globs and escapes are not allowed".into());
    }
    if path == "." {
        return Ok(());
    }
    for component in Path::new(path).components() {
        match component {
            Component::Normal(_) => {}
            Component::ParentDir => return Err("`..` would leave the workspace".into()),
            _ => return Err("write it without `.` components or a leading `/`".into()),
        }
    }
    if path.ends_with('/') || path.contains("//") {
        return Err("write it without trailing or doubled slashes".into());
    }
    Ok(())
}

/// Writable folders may not hold skills, warden's own state, git internals, or the files the
/// system prompt is built from.
fn check_writable(path: &str) -> Result<(), String> {
    if path == "." {
        return Err(
            "the whole workspace holds skills/ and the files the system prompt is built from; \
             grant narrower folders"
                .into(),
        );
    }
    let first = path.split('/').next().unwrap_or(path);
    if first == "skills" {
        return Err("skill folders are never writable by skills".into());
    }
    if first == ".warden" || path.split('/').any(|c| c == ".git") {
        return Err("warden's state and .git are never writable by skills".into());
    }
    if path.split('/').count() == 1 {
        let prompt_files = crate::memory::workspace::TEMPLATES;
        if prompt_files.iter().any(|(name, _)| *name == path) {
            return Err("the system prompt's files are never writable by skills".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> Bounds {
        Bounds {
            timeout_secs: 120,
            limits: Limits::default(),
        }
    }

    fn check(text: &str) -> Result<Manifest, String> {
        let m = Manifest::parse(text)?;
        m.validate(&bounds())?;
        Ok(m)
    }

    #[test]
    fn a_full_manifest_validates() {
        let m = check(
            r#"
run = ["python3", "scripts/x.py"]
[permissions]
interpreters = ["python3"]
[permissions.commands.jq]
args = "read"
[permissions.paths]
read = [".", "data/in"]
write = ["reports"]
[permissions.network]
domains = ["api.example.com", "files.example.com:8443"]
[permissions.limits]
timeout_secs = 30
memory_mb = 256
max_processes = 8
"#,
        )
        .unwrap();
        let e = m.effective(&bounds()).unwrap();
        assert_eq!(e.timeout_secs, 30);
        assert_eq!(e.limits.memory_bytes, 256 << 20);
        assert_eq!(e.limits.max_processes, 8);
        let d = m.domains().unwrap();
        assert!(d[0].allows_port(443) && !d[0].allows_port(8443));
        assert!(d[1].allows_port(8443) && !d[1].allows_port(443));
    }

    #[test]
    fn dangerous_requests_are_refused() {
        for (text, why) in [
            (
                "[permissions]\ninterpreters = [\"php\"]",
                "not an interpreter",
            ),
            ("[permissions.commands.bash]", "cannot be granted"),
            ("[permissions.commands.python3]", "interpreters"),
            ("[permissions.commands.env]", "cannot be granted"),
            (
                "[permissions.commands.jq]\nanalyzer = \"interpreter\"\nscripts = \"/\"",
                "set by warden",
            ),
            (
                "[permissions.paths]\nread = [\"/etc\"]",
                "inside the workspace",
            ),
            (
                "[permissions.paths]\nread = [\"~/.ssh\"]",
                "inside the workspace",
            ),
            (
                "[permissions.paths]\nread = [\"../x\"]",
                "leave the workspace",
            ),
            ("[permissions.paths]\nread = [\"$HOME\"]", "variables"),
            ("[permissions.paths]\nwrite = [\".\"]", "narrower"),
            (
                "[permissions.paths]\nwrite = [\"skills/other\"]",
                "skill folders",
            ),
            ("[permissions.paths]\nwrite = [\"skills\"]", "skill folders"),
            (
                "[permissions.paths]\nwrite = [\".warden/x\"]",
                "never writable",
            ),
            (
                "[permissions.paths]\nwrite = [\"SOUL.md\"]",
                "system prompt",
            ),
            (
                "[permissions.network]\ndomains = [\"*.example.com\"]",
                "wildcards",
            ),
            (
                "[permissions.network]\ndomains = [\"10.0.0.1\"]",
                "addresses",
            ),
            ("[permissions.network]\ndomains = [\"localhost\"]", "dot"),
            (
                "[permissions.network]\ndomains = [\"Example.com\"]",
                "lowercase",
            ),
            ("[permissions.network]\ndomains = [\"a.com:0\"]", "port"),
            (
                "[permissions.limits]\ntimeout_secs = 121",
                "above the global",
            ),
            (
                "[permissions.limits]\nmemory_mb = 999999",
                "above the global",
            ),
            ("[permissions.limits]\nmax_processes = 0", "max_processes"),
            ("[permissions.limits]\ntimeout_secs = 0", "at least 1"),
            ("[permissions]\nnetwork = true", "invalid type"),
            ("[permission]", "unknown field"),
            ("run = []", "needs a program"),
        ] {
            let err = check(text).expect_err(text);
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }

    #[test]
    fn no_manifest_means_the_global_limits() {
        let e = Manifest::default().effective(&bounds()).unwrap();
        assert_eq!(e.timeout_secs, 120);
        assert_eq!(e.limits, Limits::default());
    }
}
