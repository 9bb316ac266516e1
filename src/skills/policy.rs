//! A run's policy: the embedded default policy, widened or narrowed only by the granted
//! manifest — its `commands` rules, and one interpreter rule per declared interpreter that
//! runs files from the run's private copy of the skill and nothing else — and a path validator
//! whose roots are exactly the jail's: the scratch folder (writable, HOME), the skill's copy
//! (read-only) and the workspace folders the manifest names.
//!
//! The user's own policy file and `[sandbox] read` roots do not apply: a skill gets what its
//! grant says, not whatever the local configuration happens to allow the agent.

use super::manifest::Manifest;
use super::WORKSPACE_SKILLS_DIR;
use crate::policy::paths::resolve;
use crate::policy::rules::{AnalyzerKind, ArgRole, FlagSpec, FlagTakes, ProgramRule, UnknownFlags};
use crate::policy::{Decision, OwnFile, PathPolicy, Policy};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Harmless interpreter options (unbuffered, no bytecode files, isolated, quiet, optimize).
const PYTHON_FLAGS: &[&str] = &["-u", "-B", "-I", "-E", "-s", "-S", "-O", "-q"];

/// Everything the checker and the jail need for one run.
pub struct RunPolicy {
    pub policy: Arc<Policy>,
    /// The canonical path of the skill's copy: the cwd of its commands.
    pub copy: PathBuf,
    pub paths: PathPolicy,
    /// Workspace folders the jail may read (resolved).
    pub reads: Vec<PathBuf>,
    /// Workspace folders the jail may write (resolved, created when missing).
    pub writes: Vec<PathBuf>,
    /// Things worth telling the user (a granted folder that does not exist).
    pub notes: Vec<String>,
}

/// Where a run's folders are, and what no grant may cover.
pub struct RunPlaces<'a> {
    pub workspace: &'a Path,
    /// The run's private copy of the skill.
    pub skill_copy: &'a Path,
    /// The run's scratch folder (HOME).
    pub scratch: &'a Path,
    /// warden's data directory (database, audit log, other runs): never inside a granted
    /// folder, even when the workspace is configured around it.
    pub data_dir: &'a Path,
    /// warden's own files, which no root of the run may expose.
    pub own_files: &'a [OwnFile],
}

/// Build it for one run.
pub fn build(manifest: &Manifest, places: &RunPlaces) -> Result<RunPolicy, String> {
    let RunPlaces {
        workspace,
        skill_copy,
        scratch,
        data_dir,
        own_files,
    } = *places;
    let skill_copy = skill_copy
        .canonicalize()
        .map_err(|e| format!("the skill's copy {}: {e}", skill_copy.display()))?;
    // The default's project-code runners (python3 tool.py, make: asked in a chat) are not the
    // skill's: a skill runs only the interpreters its manifest grants, on its own files.
    let mut rules: BTreeMap<String, ProgramRule> = Policy::embedded_default()
        .programs()
        .filter(|(_, rule)| rule.analyzer == Some(AnalyzerKind::Runner))
        .map(|(name, _)| (name.clone(), not_granted()))
        .collect();
    rules.extend(manifest.permissions.commands.clone());
    for interpreter in &manifest.permissions.interpreters {
        rules.insert(
            interpreter.clone(),
            interpreter_rule(interpreter, &skill_copy),
        );
    }
    let policy = Arc::new(Policy::embedded_default().with_programs(rules));
    let (reads, writes, notes) = resolve_grants(manifest, workspace, data_dir)?;
    let mut readable = vec![skill_copy.clone()];
    readable.extend(reads.iter().cloned());
    let paths = PathPolicy::new(scratch, &writes, &readable, scratch)
        .map_err(|e| format!("setting up the run's paths: {e}"))?
        .with_workspace_label(|scratch| {
            format!(
                "the skill's scratch folder ({}) and the folders its grant names",
                scratch.display()
            )
        });
    paths.refuse_exposing(own_files)?;
    Ok(RunPolicy {
        policy,
        copy: skill_copy,
        paths,
        reads,
        writes,
        notes,
    })
}

/// `INTERPRETER [harmless flags] SCRIPT ARGS…` with SCRIPT from `scripts` only.
fn not_granted() -> ProgramRule {
    ProgramRule {
        decision: Decision::Deny,
        reason: Some("an interpreter or build tool the skill's manifest does not grant".into()),
        ..interpreter_rule("", Path::new("/"))
    }
}

fn interpreter_rule(interpreter: &str, scripts: &Path) -> ProgramRule {
    let flags = if interpreter.starts_with("python") {
        PYTHON_FLAGS
    } else {
        &[]
    };
    ProgramRule {
        decision: Decision::Allow,
        reason: None,
        args: ArgRole::Read,
        last_arg: None,
        flags: flags
            .iter()
            .map(|f| (f.to_string(), FlagSpec::Takes(FlagTakes::Flag)))
            .collect(),
        unknown_flags: UnknownFlags::Deny,
        options: Default::default(),
        copies: false,
        max_args: None,
        subcommands: BTreeMap::new(),
        analyzer: Some(AnalyzerKind::Interpreter),
        scripts: Some(scripts.to_path_buf()),
        runs: None,
        no_code: Vec::new(),
        needs_args: None,
        needs_flag: None,
        min_positionals: None,
        added_args: Vec::new(),
        network: false,
    }
}

type Grants = (Vec<PathBuf>, Vec<PathBuf>, Vec<String>);

/// Resolve the manifest's workspace folders now (symlinks followed) and check them again: the
/// install-time check was on the text; a link planted since must not widen anything.
fn resolve_grants(
    manifest: &Manifest,
    workspace: &Path,
    data_dir: &Path,
) -> Result<Grants, String> {
    let paths = &manifest.permissions.paths;
    let skills = workspace.join(WORKSPACE_SKILLS_DIR);
    let mut notes = Vec::new();
    let mut reads = Vec::new();
    // warden's default layout keeps the workspace inside the data directory
    // (`~/.warden/workspace`): folders of that workspace are not the data directory's state.
    let workspace_in_data = workspace != data_dir && workspace.starts_with(data_dir);
    let inside = |rel: &str| -> Result<PathBuf, String> {
        let resolved = inside(workspace, rel)?;
        let in_data = resolved.starts_with(data_dir) && !workspace_in_data;
        if data_dir.starts_with(&resolved) || in_data {
            return Err(format!(
                "the granted path {rel} resolves to {}, which holds warden's data directory {}; \
                 refusing to run",
                resolved.display(),
                data_dir.display()
            ));
        }
        Ok(resolved)
    };
    for rel in &paths.read {
        let resolved = inside(rel)?;
        match std::fs::metadata(&resolved) {
            Ok(meta) if meta.is_dir() => reads.push(resolved),
            Ok(_) => return Err(format!("the granted read path {rel} is not a folder")),
            Err(_) => notes.push(format!("the granted folder {rel} does not exist; skipped")),
        }
    }
    let mut writes = Vec::new();
    for rel in &paths.write {
        let resolved = inside(rel)?;
        let forbidden = resolved == workspace
            || resolved.starts_with(&skills)
            || skills.starts_with(&resolved)
            || resolved.strip_prefix(workspace).is_ok_and(|r| {
                r.components()
                    .any(|c| c.as_os_str() == ".git" || c.as_os_str() == ".warden")
            });
        if forbidden {
            return Err(format!(
                "the granted write folder {rel} resolves to {}, which holds skills or warden's \
                 state; refusing to run",
                resolved.display()
            ));
        }
        std::fs::create_dir_all(&resolved)
            .map_err(|e| format!("creating the granted folder {rel}: {e}"))?;
        // A link swapped in while creating would show here.
        if inside(rel)? != resolved || !resolved.is_dir() {
            return Err(format!(
                "the granted write folder {rel} changed while it was created"
            ));
        }
        writes.push(resolved);
    }
    Ok((reads, writes, notes))
}

fn inside(workspace: &Path, rel: &str) -> Result<PathBuf, String> {
    let resolved =
        resolve(&workspace.join(rel), false).map_err(|e| format!("granted path {rel}: {e}"))?;
    if !resolved.starts_with(workspace) {
        return Err(format!(
            "the granted path {rel} resolves to {}, outside the workspace; refusing to run",
            resolved.display()
        ));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places<'a>(
        ws: &'a Path,
        copy: &'a Path,
        scratch: &'a Path,
        data: &'a Path,
    ) -> RunPlaces<'a> {
        RunPlaces {
            workspace: ws,
            skill_copy: copy,
            scratch,
            data_dir: data,
            own_files: &[],
        }
    }

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("skills/other")).unwrap();
        std::fs::create_dir_all(ws.join("data")).unwrap();
        let copy = root.join("run/skill");
        std::fs::create_dir_all(copy.join("scripts")).unwrap();
        std::fs::write(copy.join("scripts/go.py"), "").unwrap();
        let scratch = root.join("run/home");
        std::fs::create_dir_all(&scratch).unwrap();
        (dir, ws, copy, scratch)
    }

    fn manifest(text: &str) -> Manifest {
        Manifest::parse(text).unwrap()
    }

    #[test]
    fn the_manifest_widens_the_default_policy_and_nothing_else() {
        let (_d, ws, copy, scratch) = setup();
        let m = manifest(
            "[permissions]\ninterpreters = [\"python3\"]\n[permissions.paths]\nread = [\"data\", \"gone\"]\nwrite = [\"out\"]\n",
        );
        let data = ws.parent().unwrap().join("data");
        let run = build(&m, &places(&ws, &copy, &scratch, &data)).unwrap();
        assert_eq!(run.reads, [ws.join("data")]);
        assert_eq!(run.writes, [ws.join("out")]);
        assert!(ws.join("out").is_dir(), "write folders are created");
        assert!(run.notes[0].contains("gone"));
        let mut checker = crate::policy::Checker::new(run.policy.clone(), run.paths.clone());
        let ok = checker.check_in("python3 scripts/go.py", &copy);
        assert_eq!(ok.decision, Decision::Allow, "{}", ok.reason);
        for (command, why) in [
            ("python3 -c 1", "-c"),
            ("node scripts/go.py", "interpreter"),
            ("curl http://x", "network tool"),
            ("cat /etc/passwd", "outside"),
            ("touch scripts/new", "read-only"),
            (
                "touch ~/notes.txt && cat ../../ws/skills/other/x",
                "outside",
            ),
        ] {
            let verdict = checker.check_in(command, &copy);
            assert_eq!(verdict.decision, Decision::Deny, "{command}");
            assert!(
                verdict.reason.contains(why),
                "{command}: {}",
                verdict.reason
            );
        }
        let writes = checker.check_in("touch ~/notes.txt ", &copy);
        assert_eq!(writes.decision, Decision::Allow, "{}", writes.reason);
    }

    #[test]
    fn links_planted_after_the_grant_do_not_widen_it() {
        let (_d, ws, copy, scratch) = setup();
        std::os::unix::fs::symlink(ws.join("skills/other"), ws.join("out")).unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("cfg")).unwrap();
        let data = ws.join("state");
        std::fs::create_dir_all(&data).unwrap();
        let at = places(&ws, &copy, &scratch, &data);
        let refusal = |text: &str| build(&manifest(text), &at).err().unwrap();
        let err = refusal("[permissions.paths]\nwrite = [\"out\"]\n");
        assert!(err.contains("holds skills"), "{err}");
        let err = refusal("[permissions.paths]\nread = [\"cfg\"]\n");
        assert!(err.contains("outside the workspace"), "{err}");
        // A workspace configured around warden's data directory.
        for grant in [
            "read = [\".\"]",
            "read = [\"state\"]",
            "write = [\"state/x\"]",
        ] {
            let err = refusal(&format!("[permissions.paths]\n{grant}\n"));
            assert!(err.contains("data directory"), "{grant}: {err}");
        }
    }

    #[test]
    fn the_default_layout_with_the_workspace_inside_the_data_directory_grants_folders() {
        let (_d, ws, copy, scratch) = setup();
        // ~/.warden holds the database and ~/.warden/workspace.
        let data = ws.parent().unwrap().to_path_buf();
        let run = build(
            &manifest("[permissions.paths]\nread = [\"data\"]\nwrite = [\"out\"]\n"),
            &places(&ws, &copy, &scratch, &data),
        )
        .unwrap();
        assert_eq!(run.reads, [ws.join("data")]);
        assert_eq!(run.writes, [ws.join("out")]);
        // The workspace itself still never is granted whole for writing, and nothing holding
        // the data directory is granted.
        let err = build(
            &manifest("[permissions.paths]\nread = [\"..\"]\n"),
            &places(&ws, &copy, &scratch, &data),
        )
        .err()
        .unwrap();
        assert!(
            err.contains("outside the workspace") || err.contains("data directory"),
            "{err}"
        );
    }

    #[test]
    fn a_grant_holding_wardens_config_file_is_refused() {
        let (_d, ws, copy, scratch) = setup();
        std::fs::write(ws.join("data/config.toml"), "").unwrap();
        let data = scratch.parent().unwrap().join("state");
        let own = [OwnFile {
            path: ws.join("data/config.toml"),
            what: "warden's config file (API keys, the bot token)",
            readable: false,
        }];
        let at = RunPlaces {
            own_files: &own,
            ..places(&ws, &copy, &scratch, &data)
        };
        let err = build(&manifest("[permissions.paths]\nread = [\"data\"]\n"), &at)
            .err()
            .unwrap();
        assert!(err.contains("config file"), "{err}");
        assert!(err.contains("a skill's grant"), "{err}");
        // A grant beside it is fine.
        std::fs::create_dir_all(ws.join("notes")).unwrap();
        assert!(build(&manifest("[permissions.paths]\nread = [\"notes\"]\n"), &at).is_ok());
    }
}
