//! A skill's permissions in plain words: what `warden skill install`/`grant` shows before it
//! asks, and what the grant records as "what the user saw".

use super::manifest::{Bounds, Effective};
use super::{Skill, Source};
use crate::policy::{Decision, Policy};

/// The full description for a review before granting.
pub fn describe(skill: &Skill, bounds: &Bounds) -> String {
    let (files, bytes) = skill.tree.size();
    let mut out = format!(
        "Skill \"{}\" ({}): {}\nContent: {files} file(s), {}, {}\n",
        skill.name,
        skill.source,
        skill.description,
        human_bytes(bytes),
        skill.hash
    );
    out.push_str("\nIt asks to:\n");
    for line in permission_lines(skill, bounds) {
        out.push_str(&format!("  - {line}\n"));
    }
    out.push_str(
        "\nWhatever it asks, it runs in the sandbox: its own folder read-only (a private copy), a \
         fresh scratch folder as HOME, no API keys, tokens or other secrets, no network beyond \
         the domains above, and nothing it starts outlives the run.\n",
    );
    if let Some(run) = &skill.manifest.run {
        out.push_str(&format!(
            "Its command: {} [ARGS…]\n",
            shell_words::join(run)
        ));
    }
    out
}

/// One line per permission (the grant stores these).
pub fn permission_lines(skill: &Skill, bounds: &Bounds) -> Vec<String> {
    let p = &skill.manifest.permissions;
    let mut lines = Vec::new();
    for interpreter in &p.interpreters {
        lines.push(format!(
            "run its own scripts with {interpreter} (only files in its folder: no -c/-e code, \
             no -m modules, nothing from standard input)"
        ));
    }
    let default = Policy::embedded_default();
    for (name, rule) in &p.commands {
        let before = default.rule(name);
        let line = match (rule.decision, before.map(|r| r.decision)) {
            (Decision::Deny, _) => format!("never run {name} (narrower than the default policy)"),
            (_, Some(Decision::Deny)) => format!(
                "run {name}{} — the default policy denies it: {}",
                ask_suffix(rule.decision),
                before
                    .and_then(|r| r.reason.clone())
                    .unwrap_or_else(|| "denied".into())
            ),
            (_, None) => format!(
                "run {name}{} — not in the default policy's list",
                ask_suffix(rule.decision)
            ),
            (_, Some(_)) => format!(
                "run {name}{} with its own rules, replacing the default policy's rules for {name}",
                ask_suffix(rule.decision)
            ),
        };
        lines.push(line);
    }
    let paths = &p.paths;
    if !paths.read.is_empty() {
        lines.push(format!(
            "read (not write) in the workspace: {}",
            paths
                .read
                .iter()
                .map(|p| folder_name(p))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !paths.write.is_empty() {
        lines.push(format!(
            "create, change and delete files in these workspace folders: {}",
            paths.write.join(", ")
        ));
    }
    match skill.manifest.domains() {
        Ok(domains) if !domains.is_empty() => {
            let shown: Vec<String> = domains
                .iter()
                .map(|d| match d.port {
                    Some(port) => format!("{} (port {port})", d.name),
                    None => format!("{} (ports 80 and 443)", d.name),
                })
                .collect();
            lines.push(format!(
                "connect to {} — through warden's egress proxy only, which refuses every other \
                 name and private addresses",
                shown.join(", ")
            ));
        }
        _ if skill.manifest.permissions.network.routes.is_empty() => {
            lines.push("no network access at all".into())
        }
        _ => {}
    }
    let network = &skill.manifest.permissions.network;
    for (domain, rules) in &network.rules {
        if let Some(rules) = rules.describe() {
            lines.push(format!(
                "on {domain}: {rules}, over plain HTTP only (warden cannot check inside a TLS \
                 tunnel)"
            ));
        }
    }
    for (name, route) in &network.routes {
        lines.push(route.describe(name));
    }
    match skill.manifest.effective(bounds) {
        Ok(effective) => lines.push(limits_line(&effective)),
        Err(why) => lines.push(format!("limits: {why}")),
    }
    if skill.source == Source::Bundled {
        lines.push("(bundled with warden: trusted like warden itself, no grant needed)".into());
    }
    lines
}

fn ask_suffix(decision: Decision) -> &'static str {
    if decision == Decision::Ask {
        " after asking you each time"
    } else {
        ""
    }
}

fn folder_name(path: &str) -> String {
    if path == "." {
        "the whole workspace".into()
    } else {
        path.to_string()
    }
}

fn limits_line(e: &Effective) -> String {
    format!(
        "run for at most {} s, with at most {} of memory and {} processes",
        e.timeout_secs,
        human_bytes(e.limits.memory_bytes),
        e.limits.max_processes
    )
}

pub fn human_bytes(bytes: u64) -> String {
    const KIB: u64 = 1024;
    if bytes < KIB {
        format!("{bytes} B")
    } else if bytes < KIB * KIB {
        format!("{:.1} KiB", bytes as f64 / KIB as f64)
    } else if bytes < KIB * KIB * KIB {
        format!("{:.0} MiB", bytes as f64 / (KIB * KIB) as f64)
    } else {
        format!("{:.1} GiB", bytes as f64 / (KIB * KIB * KIB) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::tree::{Entry, SkillTree};
    use std::path::PathBuf;

    #[test]
    fn permissions_read_as_sentences() {
        let manifest = r#"
run = ["python3", "scripts/w.py"]
[permissions]
interpreters = ["python3"]
[permissions.commands.curl]
[permissions.commands.rm]
decision = "deny"
[permissions.commands.jq]
[permissions.paths]
read = ["."]
write = ["reports"]
[permissions.network]
domains = ["api.example.com", "files.example.com:8443"]
[permissions.network.rules."api.example.com"]
methods = ["GET"]
[permissions.network.routes.gh]
url = "https://api.github.com"
paths = ["/repos/"]
headers = { Authorization = "Bearer {secret:GITHUB_TOKEN}" }
[permissions.limits]
timeout_secs = 30
memory_mb = 256
"#;
        let tree = SkillTree::from_entries(vec![
            Entry::File {
                path: "SKILL.md".into(),
                contents: b"---\nname: w\ndescription: weather\n---\n".to_vec(),
                executable: false,
            },
            Entry::File {
                path: "skill.toml".into(),
                contents: manifest.as_bytes().to_vec(),
                executable: false,
            },
        ])
        .unwrap();
        let bounds = Bounds {
            timeout_secs: 120,
            limits: crate::sandbox::Limits::default(),
        };
        let skill =
            Skill::from_tree(tree, "w", PathBuf::from("/w"), Source::Workspace, &bounds).unwrap();
        let text = describe(&skill, &bounds);
        for expected in [
            "Skill \"w\" (workspace): weather",
            "run its own scripts with python3",
            "on api.example.com: GET only, over plain HTTP only",
            "call https://api.github.com through the route `gh` (paths under /repos/); warden \
             adds your secret GITHUB_TOKEN to every request to api.github.com (header \
             Authorization) without the skill seeing it",
            "run curl — the default policy denies it: a network tool",
            "never run rm",
            "run jq with its own rules",
            "read (not write) in the workspace: the whole workspace",
            "workspace folders: reports",
            "connect to api.example.com (ports 80 and 443), files.example.com (port 8443)",
            "at most 30 s, with at most 256 MiB of memory and 256 processes",
            "Its command: python3 scripts/w.py [ARGS…]",
            &skill.hash,
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
    }
}
