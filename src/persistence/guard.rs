//! Which workspace files steer the agent, and whether a write to them must be approved.
//!
//! Paths arrive checked and resolved (symlinks followed, absolute), from the file tools or from
//! the bash policy's IR, so `echo x > link-to-AGENTS.md` is a write to `AGENTS.md`. A write to a
//! directory that holds such a file (`tar -x` or `git checkout` in the workspace root, `rm -r
//! memory`) may change it too, and counts as touching it.

use crate::config::TrustConfig;
use crate::policy::ir::{RedirectTarget, Script};
use crate::policy::PathPolicy;
use crate::taint::Taint;
use crate::verify::{Listed, Protection};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Tells the agent how to behave (AGENTS.md): every change asks.
    Instructions,
    /// Remembered facts that feed later prompts (MEMORY.md): changes ask in a tainted run.
    Memory,
    /// Named in `[trust] protected_files`: every change asks.
    Protected,
}

/// A prompt-feeding file a write may change: `name` is relative to the workspace (`memory/**`
/// for a whole folder).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Touched {
    pub kind: Kind,
    pub name: String,
}

/// The prompt-feeding files of one workspace, and its untrusted folders.
#[derive(Clone, Debug)]
pub struct PromptFiles {
    workspace: PathBuf,
    instructions: Vec<Listed>,
    memory: Vec<Listed>,
    protected: Vec<Listed>,
    untrusted: Vec<PathBuf>,
}

impl PromptFiles {
    /// `workspace` is canonical (the path validator's).
    pub fn new(workspace: &Path, config: &TrustConfig) -> Result<PromptFiles, String> {
        let parse = Listed::parse_all;
        let untrusted = parse("untrusted_paths", &config.untrusted_paths)?
            .into_iter()
            .map(|e| e.path().to_path_buf())
            .collect();
        Ok(PromptFiles {
            workspace: workspace.to_path_buf(),
            instructions: parse("instruction_files", &config.instruction_files)?,
            memory: parse("memory_files", &config.memory_files)?,
            protected: parse("protected_files", &config.protected_files)?,
            untrusted,
        })
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The prompt-feeding files a write to (or removal of) `path` may change.
    pub fn touched_by(&self, path: &Path) -> Vec<Touched> {
        let Ok(rel) = path.strip_prefix(&self.workspace) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (kind, entries) in [
            (Kind::Instructions, &self.instructions),
            (Kind::Memory, &self.memory),
            (Kind::Protected, &self.protected),
        ] {
            for entry in entries {
                if let Some(name) = entry.touched_by(rel) {
                    out.push(Touched { kind, name });
                }
            }
        }
        out
    }

    /// Everything a checked bash line may change of them: each path it writes or removes and
    /// each file it redirects output to.
    pub fn touched_by_script(&self, script: &Script) -> Vec<Touched> {
        let mut out: Vec<Touched> = script
            .written_paths()
            .into_iter()
            .flat_map(|path| self.touched_by(path))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Whether `path` (checked, absolute) is in an untrusted folder: its contents came from
    /// someone else.
    pub fn is_untrusted(&self, path: &Path) -> bool {
        path.strip_prefix(&self.workspace)
            .is_ok_and(|rel| self.untrusted.iter().any(|u| rel.starts_with(u)))
    }

    /// The untrusted folders, relative to the workspace.
    pub fn untrusted_folders(&self) -> Vec<String> {
        self.untrusted
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    /// The untrusted files a checked bash line opens, as the user would name them.
    pub fn untrusted_in_script(&self, script: &Script) -> Vec<String> {
        let mut out: Vec<String> = script
            .commands()
            .flat_map(|c| {
                let redirected = c.redirects.iter().filter_map(|r| match &r.target {
                    RedirectTarget::File { path, .. } => Some(path.as_path()),
                    _ => None,
                });
                c.paths.iter().map(|p| p.path.as_path()).chain(redirected)
            })
            .filter(|p| self.is_untrusted(p))
            .map(|p| self.name(p))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// `path` relative to the workspace when it is inside it.
    pub fn name(&self, path: &Path) -> String {
        path.strip_prefix(&self.workspace)
            .map(|r| r.display().to_string())
            .unwrap_or_else(|_| path.display().to_string())
    }

    /// Why changing `touched` needs the user's approval in a run with `taint`, or `None` when
    /// it does not.
    pub fn why_ask(&self, touched: &[Touched], taint: &Taint) -> Option<String> {
        let names = |kind: Kind| -> Vec<&str> {
            touched
                .iter()
                .filter(|t| t.kind == kind)
                .map(|t| t.name.as_str())
                .collect()
        };
        let mut why = Vec::new();
        let instructions = names(Kind::Instructions);
        if !instructions.is_empty() {
            why.push(format!(
                "{} {} the agent how to behave in every later run: a change always needs your \
                 approval",
                instructions.join(", "),
                if instructions.len() == 1 {
                    "tells"
                } else {
                    "tell"
                }
            ));
        }
        let protected = names(Kind::Protected);
        if !protected.is_empty() {
            why.push(format!(
                "{} {} protected ([trust] protected_files): a change always needs your approval",
                protected.join(", "),
                if protected.len() == 1 { "is" } else { "are" }
            ));
        }
        let memory = names(Kind::Memory);
        if let (false, Some(tainted)) = (memory.is_empty(), taint.why()) {
            why.push(format!(
                "{} {} every later prompt, and {tainted}",
                memory.join(", "),
                if memory.len() == 1 { "feeds" } else { "feed" }
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// What the write verifier protects around a command of a run (`tainted`: its memory
    /// files too), for the command's paths.
    pub fn protection(&self, paths: &PathPolicy, tainted: bool) -> Protection {
        let mut protection = Protection::for_paths(paths)
            .with_instructions(&self.instructions)
            .with_instructions(&self.protected);
        if tainted {
            protection = protection.with_memory(&self.memory);
        }
        protection
    }

    /// The prompt-feeding files that exist now, relative to the workspace (at most `limit`).
    pub fn existing(&self, limit: usize) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in self
            .instructions
            .iter()
            .chain(&self.memory)
            .chain(&self.protected)
        {
            entry.existing(&self.workspace, limit, &mut out);
        }
        out.sort();
        out.dedup();
        out
    }
}

/// A unified diff of one file for an approval (`old` empty for a new file).
pub fn diff(name: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(name, name)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Checker, PathPolicy, Policy};
    use std::sync::Arc;

    fn files(ws: &Path) -> PromptFiles {
        PromptFiles::new(ws, &TrustConfig::default()).unwrap()
    }

    fn names(touched: &[Touched]) -> Vec<(Kind, &str)> {
        touched.iter().map(|t| (t.kind, t.name.as_str())).collect()
    }

    #[test]
    fn files_folders_and_the_directories_holding_them_are_touched() {
        let ws = Path::new("/ws");
        let f = files(ws);
        assert_eq!(
            names(&f.touched_by(Path::new("/ws/AGENTS.md"))),
            [(Kind::Instructions, "AGENTS.md")]
        );
        assert_eq!(
            names(&f.touched_by(Path::new("/ws/memory/2026-11-25.md"))),
            [(Kind::Memory, "memory/2026-11-25.md")]
        );
        assert_eq!(
            names(&f.touched_by(Path::new("/ws/memory"))),
            [(Kind::Memory, "memory/**")]
        );
        // The workspace itself holds them all.
        let all = f.touched_by(Path::new("/ws"));
        assert_eq!(all.len(), 7, "{all:?}");
        for other in [
            "/ws/notes.md",
            "/ws/agents.md",
            "/ws/AGENTS.md.bak",
            "/elsewhere/AGENTS.md",
        ] {
            assert!(f.touched_by(Path::new(other)).is_empty(), "{other}");
        }
        assert!(f.is_untrusted(Path::new("/ws/attachments/a.pdf")));
        assert!(!f.is_untrusted(Path::new("/ws/attachments-old/a.pdf")));
    }

    #[test]
    fn only_instructions_ask_in_a_clean_run() {
        let f = files(Path::new("/ws"));
        let taint = Taint::new();
        let memory = f.touched_by(Path::new("/ws/MEMORY.md"));
        assert_eq!(f.why_ask(&memory, &taint), None);
        let agents = f.touched_by(Path::new("/ws/AGENTS.md"));
        let why = f.why_ask(&agents, &taint).unwrap();
        assert!(
            why.starts_with("AGENTS.md tells the agent how to behave"),
            "{why}"
        );
        taint.add("web_fetch https://page.example/");
        let why = f.why_ask(&memory, &taint).unwrap();
        assert_eq!(
            why,
            "MEMORY.md feeds every later prompt, and this run read untrusted content from: \
             web_fetch https://page.example/"
        );
    }

    #[test]
    fn every_write_of_a_checked_line_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::write(ws.join("AGENTS.md"), "be nice\n").unwrap();
        std::fs::create_dir(ws.join("memory")).unwrap();
        std::fs::create_dir(ws.join("attachments")).unwrap();
        std::fs::write(ws.join("attachments/doc.txt"), "x").unwrap();
        std::os::unix::fs::symlink("AGENTS.md", ws.join("rules")).unwrap();
        let policy = Arc::new(Policy::load(None).unwrap());
        let paths = PathPolicy::new(&ws, &[], &[], &ws).unwrap();
        let mut checker = Checker::new(policy, paths);
        let f = files(&ws);
        let mut touched = |line: &str| {
            let verdict = checker.check(line);
            assert_ne!(
                verdict.decision,
                crate::policy::Decision::Deny,
                "{line}: {}",
                verdict.reason
            );
            f.touched_by_script(&verdict.script)
                .into_iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(touched("echo hi > AGENTS.md"), ["AGENTS.md"]);
        assert_eq!(touched("echo hi >> rules"), ["AGENTS.md"]);
        assert_eq!(touched("sed -i s/nice/evil/ AGENTS.md"), ["AGENTS.md"]);
        assert_eq!(touched("cp attachments/doc.txt AGENTS.md"), ["AGENTS.md"]);
        assert_eq!(
            touched("ls; if true; then echo x > SOUL.md; fi"),
            ["SOUL.md"]
        );
        assert_eq!(touched("echo note >> memory/today.md"), ["memory/today.md"]);
        assert!(touched("cp attachments/doc.txt .").contains(&"AGENTS.md".to_string()));
        assert!(touched("echo hi > notes.md; cat AGENTS.md").is_empty());
        let verdict = checker.check("cat attachments/doc.txt | wc -l");
        assert_eq!(
            f.untrusted_in_script(&verdict.script),
            ["attachments/doc.txt"]
        );
    }

    #[test]
    fn existing_files_are_found_without_following_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("id_ed25519"), "key").unwrap();
        std::fs::write(ws.join("AGENTS.md"), "x").unwrap();
        std::os::unix::fs::symlink(outside.join("id_ed25519"), ws.join("SOUL.md")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("memory")).unwrap();
        let f = files(&ws);
        assert_eq!(f.existing(100), [PathBuf::from("AGENTS.md")]);
    }

    #[test]
    fn the_diff_shows_the_change() {
        let d = diff("AGENTS.md", "a\nb\n", "a\nc\n");
        assert!(d.contains("-b\n") && d.contains("+c\n"), "{d}");
        assert!(d.starts_with("--- AGENTS.md"), "{d}");
    }
}
