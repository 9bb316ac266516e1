//! `warden hook claude-code`: warden's command policy and path validator as a Claude Code
//! `PreToolUse` hook.
//!
//! Claude Code runs the hook for each tool call with JSON on stdin (`tool_name`, `tool_input`,
//! `cwd`, …) and reads, on stdout with exit 0,
//! `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow|deny|ask",
//! "permissionDecisionReason":"…"}}`.
//!
//! - `Bash`: `tool_input.command` is checked in `cwd` by the command policy.
//! - `Read`, `Write`, `Edit`, `MultiEdit`, `NotebookEdit`, `Glob`, `Grep`: the file path (or
//!   search folder) goes through the path validator: outside the workspace and the readable
//!   roots, or one of warden's own files, is a deny; otherwise no answer, and Claude Code's
//!   own permissions decide.
//! - `WebFetch`, `WebSearch`: ask (the hook profile), or deny with `--network deny`.
//! - Anything else: no answer. Anything warden cannot read is a deny: the hook fails closed.
//!
//! A command allowed here runs in Claude Code's own shell, not in warden's jail: the hook is
//! the policy layer only, and its reasons say so. The profile therefore turns the default
//! policy's "network tool: the sandbox has no network" denials (curl, ssh, git fetch…) into
//! asks, and says that an approved project command runs unsandboxed. Two ways that shell can
//! differ from what warden checked are refused: a relative `cd` while `CDPATH` is set (bash
//! would search it), and whatever the policy does not understand (variables, functions,
//! aliases in command position).

use crate::config::{home_dir, Config};
use crate::policy::ir::Builtin;
use crate::policy::JAILED_CODE;
use crate::policy::{Access, Decision, Policy};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Default, clap::Args)]
pub struct HookArgs {
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Workspace (writable root); default: the hook input's cwd.
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Network tools (curl, ssh, WebFetch, WebSearch…): `ask` you in Claude Code (default), or
    /// `deny` them.
    #[arg(long, value_enum, default_value_t = Network::Ask)]
    pub network: Network,
}

/// What the hook does with tools that reach the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Network {
    #[default]
    Ask,
    Deny,
}

/// How every reason starts: whose decision it is, and where the command runs.
const PREFIX: &str = "warden (policy only: runs in Claude Code's shell, not sandboxed)";

/// Where an approved project command runs under the hook.
const HOOK_CODE: &str = "it would run in Claude Code's own shell, NOT sandboxed: with the \
                         network and write access to everything your account can reach";

#[derive(Deserialize)]
struct HookInput {
    tool_name: String,
    #[serde(default)]
    tool_input: serde_json::Value,
    #[serde(default)]
    cwd: Option<PathBuf>,
}

/// What one hook call is checked with.
pub struct Settings<'a> {
    pub policy_file: Option<&'a Path>,
    pub workspace: Option<&'a Path>,
    pub read_roots: &'a [PathBuf],
    pub network: Network,
    pub cdpath: Option<&'a str>,
}

/// The file tools and which input field holds their path, and whether they write.
fn file_tool(name: &str) -> Option<(&'static str, Access)> {
    match name {
        "Read" => Some(("file_path", Access::Read)),
        "Write" | "Edit" | "MultiEdit" => Some(("file_path", Access::Write)),
        "NotebookEdit" => Some(("notebook_path", Access::Write)),
        "Glob" | "Grep" => Some(("path", Access::Read)),
        _ => None,
    }
}

/// Answer one hook call; returns the JSON to print, or `None` when Claude Code's own rules
/// decide.
pub fn answer(input: &str, settings: &Settings<'_>) -> Option<serde_json::Value> {
    let input: HookInput = match serde_json::from_str(input) {
        Ok(input) => input,
        Err(e) => return Some(deny(&format!("unreadable hook input: {e}"))),
    };
    let cwd = match &input.cwd {
        Some(cwd) if cwd.is_absolute() => cwd.clone(),
        _ => return Some(deny("the hook input has no absolute cwd")),
    };
    let workspace = settings
        .workspace
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cwd.clone());
    match input.tool_name.as_str() {
        "Bash" => Some(bash(&input, &cwd, &workspace, settings)),
        "WebFetch" | "WebSearch" => Some(match settings.network {
            Network::Ask => output(
                Decision::Ask,
                &format!(
                    "{PREFIX}: {} reaches the network from Claude Code itself",
                    input.tool_name
                ),
            ),
            Network::Deny => deny(&format!(
                "{} is refused (warden hook --network deny)",
                input.tool_name
            )),
        }),
        name => {
            let (field, access) = file_tool(name)?;
            file(&input, field, access, &cwd, &workspace, settings)
        }
    }
}

/// The policy with the hook's profile: network tools the default denies because the jail
/// has no network ask instead (Claude Code's shell has one), unless `--network deny`.
fn hook_policy(policy: Policy, network: Network) -> Policy {
    if network == Network::Deny {
        return policy;
    }
    let changed: BTreeMap<_, _> = policy
        .programs()
        .filter(|(_, rule)| {
            rule.decision == Decision::Deny
                && rule
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.contains("a network tool"))
        })
        .map(|(name, rule)| {
            let mut rule = rule.clone();
            rule.decision = Decision::Ask;
            rule.reason = Some(format!("{name} reaches the network"));
            (name.clone(), rule)
        })
        .collect();
    let mut programs: BTreeMap<_, _> = policy
        .programs()
        .map(|(n, r)| (n.clone(), r.clone()))
        .collect();
    programs.extend(changed);
    policy.with_programs(programs)
}

fn checker(settings: &Settings<'_>, workspace: &Path) -> Result<crate::policy::Checker, String> {
    let policy = Policy::load(settings.policy_file).map_err(|e| e.to_string())?;
    Arc::new(hook_policy(policy, settings.network))
        .checker(workspace, settings.read_roots, &home_dir())
        .map(crate::policy::Checker::for_a_real_shell)
        .map_err(|e| e.to_string())
}

fn bash(
    input: &HookInput,
    cwd: &Path,
    workspace: &Path,
    settings: &Settings<'_>,
) -> serde_json::Value {
    let Some(command) = input.tool_input.get("command").and_then(|c| c.as_str()) else {
        return deny("the Bash call has no command");
    };
    let verdict = match checker(settings, workspace) {
        Ok(mut checker) => checker.check_in(command, cwd),
        Err(e) => return deny(&e),
    };
    if verdict.decision != Decision::Deny && settings.cdpath.is_some_and(|c| !c.is_empty()) {
        let searched = verdict.script.commands().any(|c| {
            matches!(c.builtin, Some(Builtin::Cd(_)))
                && c.paths.iter().any(|p| {
                    !p.written.starts_with('/')
                        && !p.written.starts_with("./")
                        && !p.written.starts_with("../")
                        && p.written != "."
                        && p.written != ".."
                })
        });
        if searched {
            return deny("CDPATH is set, so bash's cd would search it: write cd ./DIR");
        }
    }
    output(
        verdict.decision,
        &format!(
            "{PREFIX}: {}",
            verdict.reason.replace(JAILED_CODE, HOOK_CODE)
        ),
    )
}

fn file(
    input: &HookInput,
    field: &str,
    access: Access,
    cwd: &Path,
    workspace: &Path,
    settings: &Settings<'_>,
) -> Option<serde_json::Value> {
    let path = match input.tool_input.get(field) {
        Some(serde_json::Value::String(path)) => path.clone(),
        // Glob and Grep search the cwd when they name no folder.
        None if field == "path" => ".".to_string(),
        _ => {
            return Some(deny(&format!(
                "the {} call has no {field}",
                input.tool_name
            )))
        }
    };
    let checker = match checker(settings, workspace) {
        Ok(checker) => checker,
        Err(e) => return Some(deny(&e)),
    };
    match checker.paths().check(cwd, &path, access) {
        Ok(_) => None,
        Err(denial) => Some(deny(&format!("{}: {}", input.tool_name, denial.reason))),
    }
}

fn deny(reason: &str) -> serde_json::Value {
    output(Decision::Deny, &format!("{PREFIX}: {reason}"))
}

fn output(decision: Decision, reason: &str) -> serde_json::Value {
    serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    })
}

/// The CLI entry: stdin in, stdout out, exit 0 (a decision is an answer, not an error).
pub fn claude_code(args: HookArgs, config: &Config) -> anyhow::Result<i32> {
    let policy = args.policy.clone().or_else(|| config.policy.clone());
    let cdpath = std::env::var("CDPATH").ok();
    let settings = Settings {
        policy_file: policy.as_deref(),
        workspace: args.workspace.as_deref(),
        read_roots: &config.sandbox.read,
        network: args.network,
        cdpath: cdpath.as_deref(),
    };
    let mut input = String::new();
    let answered = match std::io::stdin().read_to_string(&mut input) {
        Ok(_) => answer(&input, &settings),
        Err(e) => Some(deny(&format!("cannot read stdin: {e}"))),
    };
    if let Some(json) = answered {
        println!("{json}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(cdpath: Option<&str>) -> Settings<'_> {
        Settings {
            policy_file: None,
            workspace: None,
            read_roots: &[],
            network: Network::Ask,
            cdpath,
        }
    }

    fn ask(command: &str, cwd: &Path, cdpath: Option<&str>) -> serde_json::Value {
        let input = serde_json::json!({
            "session_id": "s", "transcript_path": "/t", "cwd": cwd,
            "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": command, "description": "d"},
        });
        answer(&input.to_string(), &settings(cdpath)).unwrap()
    }

    fn decision(v: &serde_json::Value) -> String {
        v["hookSpecificOutput"]["permissionDecision"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn cdpath_makes_a_relative_cd_a_denial() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("src")).unwrap();
        assert_eq!(decision(&ask("cd src && ls", &ws, None)), "allow");
        assert_eq!(decision(&ask("cd src && ls", &ws, Some("/etc"))), "deny");
        assert_eq!(decision(&ask("cd ./src && ls", &ws, Some("/etc"))), "allow");
    }

    #[test]
    fn network_tools_ask_and_say_where_they_run() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let out = ask("curl -s https://example.com", &ws, None);
        assert_eq!(decision(&out), "ask", "{out}");
        let reason = out["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap();
        assert!(reason.contains("not sandboxed"), "{reason}");
        assert!(!reason.contains("the sandbox has no network"), "{reason}");
        let strict = Settings {
            network: Network::Deny,
            ..settings(None)
        };
        let input = serde_json::json!({"tool_name": "Bash", "cwd": ws,
            "tool_input": {"command": "curl -s https://example.com"}});
        assert_eq!(
            decision(&answer(&input.to_string(), &strict).unwrap()),
            "deny"
        );
    }

    #[test]
    fn other_tools_are_left_alone_and_garbage_is_denied() {
        let input = r#"{"tool_name":"TodoWrite","tool_input":{},"cwd":"/"}"#;
        assert!(answer(input, &settings(None)).is_none());
        let out = answer("{not json", &settings(None)).unwrap();
        assert_eq!(decision(&out), "deny");
    }
}
