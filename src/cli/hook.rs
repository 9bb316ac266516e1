//! `warden hook claude-code`: warden's command policy as a Claude Code `PreToolUse` hook.
//!
//! Claude Code runs the hook for each tool call with JSON on stdin (`tool_name`, `tool_input`,
//! `cwd`, …). For its Bash tool warden checks `tool_input.command` in `cwd` and answers on
//! stdout, exit 0, with
//! `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow|deny|ask",
//! "permissionDecisionReason":"…"}}`. Other tools get no answer (Claude Code's own rules
//! apply). Anything warden cannot read is a deny with the reason: the hook fails closed.
//!
//! The command then runs in Claude Code's own shell, not in warden's jail, so the hook is only
//! the policy layer. Two ways that shell can differ from what warden checked are refused: a
//! relative `cd` while `CDPATH` is set (bash would search it), and anything else the policy
//! does not understand is denied anyway (variables, functions, aliases in command position).

use crate::config::home_dir;
use crate::policy::ir::Builtin;
use crate::policy::{Decision, Policy};
use serde::Deserialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Deserialize)]
struct HookInput {
    tool_name: String,
    #[serde(default)]
    tool_input: serde_json::Value,
    #[serde(default)]
    cwd: Option<PathBuf>,
}

/// Answer one hook call; returns the JSON to print, or `None` for tools warden does not judge.
pub fn answer(
    input: &str,
    policy_file: Option<&Path>,
    workspace: Option<&Path>,
    read_roots: &[PathBuf],
    cdpath: Option<&str>,
) -> Option<serde_json::Value> {
    let input: HookInput = match serde_json::from_str(input) {
        Ok(input) => input,
        Err(e) => {
            return Some(output(
                Decision::Deny,
                &format!("warden: unreadable hook input: {e}"),
            ))
        }
    };
    if input.tool_name != "Bash" {
        return None;
    }
    let Some(command) = input.tool_input.get("command").and_then(|c| c.as_str()) else {
        return Some(output(
            Decision::Deny,
            "warden: the Bash call has no command",
        ));
    };
    let cwd = match input.cwd {
        Some(cwd) if cwd.is_absolute() => cwd,
        _ => {
            return Some(output(
                Decision::Deny,
                "warden: the hook input has no absolute cwd",
            ))
        }
    };
    let workspace = workspace
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cwd.clone());
    let verdict = Policy::load(policy_file)
        .map_err(|e| e.to_string())
        .and_then(|policy| {
            Arc::new(policy)
                .checker(&workspace, read_roots, &home_dir())
                .map_err(|e| e.to_string())
        })
        .map(|mut checker| checker.check_in(command, &cwd));
    let verdict = match verdict {
        Ok(verdict) => verdict,
        Err(e) => return Some(output(Decision::Deny, &format!("warden: {e}"))),
    };
    if verdict.decision != Decision::Deny && cdpath.is_some_and(|c| !c.is_empty()) {
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
            return Some(output(
                Decision::Deny,
                "warden: CDPATH is set, so bash's cd would search it: write cd ./DIR",
            ));
        }
    }
    Some(output(
        verdict.decision,
        &format!("warden: {}", verdict.reason),
    ))
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
pub fn claude_code(
    policy_file: Option<&Path>,
    workspace: Option<&Path>,
    read_roots: &[PathBuf],
) -> anyhow::Result<i32> {
    let mut input = String::new();
    let answered = match std::io::stdin().read_to_string(&mut input) {
        Ok(_) => answer(
            &input,
            policy_file,
            workspace,
            read_roots,
            std::env::var("CDPATH").ok().as_deref(),
        ),
        Err(e) => Some(output(
            Decision::Deny,
            &format!("warden: cannot read stdin: {e}"),
        )),
    };
    if let Some(json) = answered {
        println!("{json}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(command: &str, cwd: &Path, cdpath: Option<&str>) -> serde_json::Value {
        let input = serde_json::json!({
            "session_id": "s", "transcript_path": "/t", "cwd": cwd,
            "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": command, "description": "d"},
        });
        answer(&input.to_string(), None, None, &[], cdpath).unwrap()
    }

    #[test]
    fn cdpath_makes_a_relative_cd_a_denial() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("src")).unwrap();
        let decision = |v: serde_json::Value| {
            v["hookSpecificOutput"]["permissionDecision"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(decision(ask("cd src && ls", &ws, None)), "allow");
        assert_eq!(decision(ask("cd src && ls", &ws, Some("/etc"))), "deny");
        assert_eq!(decision(ask("cd ./src && ls", &ws, Some("/etc"))), "allow");
    }

    #[test]
    fn other_tools_are_left_alone_and_garbage_is_denied() {
        let input = r#"{"tool_name":"Read","tool_input":{"file_path":"/etc/passwd"},"cwd":"/"}"#;
        assert!(answer(input, None, None, &[], None).is_none());
        let out = answer("{not json", None, None, &[], None).unwrap();
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
    }
}
