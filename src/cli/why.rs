//! `warden policy explain` on a deny or an ask: which rule or root decided, and the smallest
//! policy-file change that would let the command through (as TOML), like `nono why`. The
//! suggestion is read from the decision's own reason and the loaded rules; it is advice for a
//! person, never applied by warden.

use crate::policy::{Decision, Policy, Verdict};
use std::path::Path;

/// What decided, and what would change it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Why {
    /// The rule or root that decided (`[programs.curl] decision = "deny"`, `paths: …`).
    pub decided_by: String,
    /// A policy file fragment that would allow it (or make it ask instead of deny).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
    /// What to know before making that change.
    pub note: String,
}

/// A TOML string.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// Why `verdict` is not `allow`; `None` when it is.
pub fn why(
    verdict: &Verdict,
    policy: &Policy,
    workspace: &Path,
    read_roots: &[String],
) -> Option<Why> {
    match verdict.decision {
        Decision::Allow => None,
        Decision::Ask => Some(ask(verdict, policy)),
        Decision::Deny => Some(deny(&verdict.reason, policy, workspace, read_roots)),
    }
}

fn ask(verdict: &Verdict, policy: &Policy) -> Why {
    let asked = verdict.script.commands().find(|c| c.ask.is_some());
    let program = asked
        .and_then(|c| c.argv.first().cloned())
        .unwrap_or_default();
    let rule = policy.rule(&program);
    let decided_by = match (rule, rule.and_then(|r| r.analyzer)) {
        (Some(rule), _) if rule.decision == Decision::Ask => {
            format!("[programs.{program}] decision = \"ask\"")
        }
        (Some(_), Some(analyzer)) => format!(
            "[programs.{program}]'s {} analyzer: {}",
            format!("{analyzer:?}").to_lowercase(),
            verdict.reason
        ),
        _ => format!("[programs.{program}]: {}", verdict.reason),
    };
    Why {
        decided_by,
        change: None,
        note: "an ask is approved where it runs: y at `warden chat` or `warden exec` (--yes in \
               scripts), \"Always in this chat\" in Telegram (`warden approvals list` shows those); \
               a policy file cannot turn this ask into an allow without also allowing what the \
               ask protects against"
            .into(),
    }
}

fn deny(reason: &str, policy: &Policy, workspace: &Path, read_roots: &[String]) -> Why {
    // A path outside every root: `[paths]` adds one.
    if let Some(path) = outside_path(reason).map(|p| resolved(workspace, &p)) {
        let writing = reason.contains("writing ") || reason.contains("(Write)");
        // The file itself when it exists; the folder a new file would be created in.
        let root = if Path::new(&path).exists() {
            path.clone()
        } else {
            Path::new(&path)
                .parent()
                .filter(|p| !p.as_os_str().is_empty() && *p != Path::new("/"))
                .map(|p| p.display().to_string())
                .unwrap_or(path.clone())
        };
        let key = if writing { "write" } else { "read" };
        let roots = if read_roots.is_empty() {
            "none".to_string()
        } else {
            read_roots.join(", ")
        };
        return Why {
            decided_by: format!(
                "paths: the workspace {} (writable) and the readable roots ({roots})",
                workspace.display()
            ),
            change: Some(format!("[paths]\n{key} = [{}]", quoted(&root))),
            note: format!(
                "a root opens that path to every command the agent runs, and the jail follows \
                 the policy's roots; keep it as narrow as this (or copy the file into the \
                 workspace){}",
                if writing {
                    ""
                } else {
                    "; `sandbox.read` in the config adds a readable root too"
                }
            ),
        };
    }
    let program = reason
        .split([':', ' '])
        .next()
        .unwrap_or_default()
        .to_string();
    if reason.contains("is not in the allowlist") {
        return Why {
            decided_by: format!("no [programs.{program}] rule: programs not listed are denied"),
            change: Some(format!(
                "[programs.{program}]\ndecision = \"ask\"\nreason = {}",
                quoted(&format!("{program} is not reviewed yet"))
            )),
            note: "with decision = \"ask\" every use is put to a person; to allow it, describe \
                   its arguments (which are paths read or written, which flags are refused): see \
                   [programs.cp] in the default policy for the shape"
                .to_string(),
        };
    }
    let Some(rule) = policy.rule(&program) else {
        return Why {
            decided_by: format!("the parser: {reason}"),
            change: None,
            note: "shell constructs the policy does not understand are always denied; write the \
                   command without them (no variables in command position, no substitutions)"
                .into(),
        };
    };
    if rule.decision == Decision::Deny {
        return Why {
            decided_by: format!(
                "[programs.{program}] decision = \"deny\": {}",
                rule.reason.as_deref().unwrap_or(reason)
            ),
            change: Some(format!(
                "[programs.{program}]\ndecision = \"ask\"\nreason = {}",
                quoted(rule.reason.as_deref().unwrap_or("asks every time"))
            )),
            note: format!(
                "a [programs.{program}] in your policy file replaces the default's entry whole; \
                 with \"ask\" each use is shown to a person before it runs"
            ),
        };
    }
    let subcommand = reason
        .contains("(allowed subcommands")
        .then(|| reason.strip_prefix(&format!("{program} ")))
        .flatten()
        .and_then(|rest| rest.split(" is not allowed").next());
    if let Some(sub) = subcommand {
        return Why {
            decided_by: format!("[programs.{program}]'s subcommands: {sub} is not among them"),
            change: Some(format!(
                "# after a copy of the default [programs.{program}] (a rule replaces it whole):\n\
                 [programs.{program}.subcommands.{sub}]\ndecision = \"ask\""
            )),
            note: "`warden policy diff @default YOUR_FILE` shows what the change widens".into(),
        };
    }
    Why {
        decided_by: format!("[programs.{program}]: {reason}"),
        change: None,
        note: format!(
            "the rule refuses this use of {program} (a flag, an argument or a form it cannot \
             check); a policy file can replace [programs.{program}] as a whole — review with \
             `warden policy diff @default YOUR_FILE`"
        ),
    }
}

/// `path` against `cwd`, `.` and `..` folded without touching the disk.
fn resolved(cwd: &Path, path: &str) -> String {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for part in cwd.join(path).components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.display().to_string()
}

/// The path in "… X is outside the workspace …".
fn outside_path(reason: &str) -> Option<String> {
    let before = reason.split(" is outside the workspace").next()?;
    if before.len() == reason.len() {
        return None;
    }
    // "cat: /etc/shadow", "sort: writing /etc/x is not allowed: it": the last path-like word.
    before
        .split(' ')
        .map(|w| w.trim_end_matches(':'))
        .rfind(|w| w.contains('/'))
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deny_why(command: &str) -> Why {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let policy = std::sync::Arc::new(Policy::embedded_default());
        let mut checker = policy.clone().checker(&ws, &[], &ws).unwrap();
        let verdict = checker.check(command);
        assert_eq!(verdict.decision, Decision::Deny, "{verdict:?}");
        why(&verdict, &policy, &ws, &[]).unwrap()
    }

    #[test]
    fn a_path_outside_the_roots_suggests_the_narrowest_root() {
        let why = deny_why("cat /etc/ssl/openssl.cnf");
        assert!(
            why.decided_by.starts_with("paths: the workspace"),
            "{why:?}"
        );
        assert_eq!(
            why.change.as_deref(),
            Some("[paths]\nread = [\"/etc/ssl/openssl.cnf\"]")
        );
        let why = deny_why("sort -o /etc/warden-test-new.txt a.txt");
        assert!(
            why.change
                .as_deref()
                .unwrap()
                .contains("write = [\"/etc\"]"),
            "{why:?}"
        );
    }

    #[test]
    fn a_denied_program_can_be_made_to_ask() {
        let why = deny_why("curl https://example.com");
        assert!(
            why.decided_by
                .contains("[programs.curl] decision = \"deny\""),
            "{why:?}"
        );
        let change = why.change.unwrap();
        assert!(
            change.starts_with("[programs.curl]\ndecision = \"ask\""),
            "{change}"
        );
        let parsed = Policy::from_user_toml(&change, "suggestion").unwrap();
        assert_eq!(parsed.rule("curl").unwrap().decision, Decision::Ask);
    }

    #[test]
    fn an_unlisted_program_and_a_subcommand_name_their_rule() {
        let why = deny_why("frobnicate --all");
        assert!(why.decided_by.contains("no [programs.frobnicate] rule"));
        assert!(Policy::from_user_toml(&why.change.unwrap(), "s").is_ok());
        let why = deny_why("git push origin main");
        assert!(why.decided_by.contains("push is not among them"), "{why:?}");
        assert!(why
            .change
            .unwrap()
            .contains("[programs.git.subcommands.push]"));
    }
}
