//! Skills: folders with a `SKILL.md` (YAML frontmatter + instructions), scripts, and a
//! `skill.toml` manifest of the permissions they need beyond the default policy.
//!
//! The path of a skill, top to bottom:
//! - [`discovery`] finds them — the ones built into warden ([`bundled`]) and the workspace's
//!   `skills/` folder, narrower scope winning by name — and checks each ([`frontmatter`],
//!   [`manifest`]); invalid ones are skipped with a reason;
//! - [`install`] copies one into the workspace after the user has read its permissions in
//!   plain words ([`describe`]) and records the grant, pinned to the content hash of every
//!   file ([`tree`]), in SQLite ([`grants`]);
//! - [`runner`] runs one: unchanged since its grant, checked by the default policy widened or
//!   narrowed only by its manifest ([`policy`]), in a fresh sandbox over a private copy of its
//!   folder (read-only) and a scratch folder, with no network unless it declared domains —
//!   then only through warden's egress proxy ([`crate::egress::proxy`]) — and every run audited;
//! - [`report`] turns a run into the tool result, the audit reason and the run history;
//! - [`prompt`] lists the runnable ones in the system prompt.

pub mod bundled;
pub mod describe;
pub mod discovery;
pub mod frontmatter;
pub mod grants;
pub mod install;
pub mod jail;
pub mod listing;
pub mod manifest;
pub mod policy;
pub mod prompt;
pub mod report;
pub mod runner;
pub mod settings;
pub mod tree;

use manifest::{Bounds, Manifest, MANIFEST_FILE};
use std::path::PathBuf;
use tree::SkillTree;

/// The instructions file every skill has.
pub const SKILL_FILE: &str = "SKILL.md";
/// The workspace folder holding the workspace's skills.
pub const WORKSPACE_SKILLS_DIR: &str = "skills";

/// Where a skill was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Built into warden (trusted like the binary; pinned to the embedded content).
    Bundled,
    /// The workspace's `skills/` folder (runs only with a grant for its exact content).
    Workspace,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Bundled => "bundled",
            Source::Workspace => "workspace",
        })
    }
}

/// A checked skill and the exact content it was checked from.
#[derive(Clone, Debug)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub source: Source,
    /// The folder it lives in.
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// Every file as read; a run executes a copy of exactly these bytes.
    pub tree: SkillTree,
    /// `sha256:…` of `tree`.
    pub hash: String,
}

impl Skill {
    /// Check a folder's content: `SKILL.md` with a valid frontmatter whose name is the folder's
    /// name, and a valid `skill.toml` when there is one.
    pub fn from_tree(
        tree: SkillTree,
        folder_name: &str,
        dir: PathBuf,
        source: Source,
        bounds: &Bounds,
    ) -> Result<Skill, String> {
        let text = tree
            .file(SKILL_FILE)
            .ok_or_else(|| format!("no {SKILL_FILE} in the folder"))?;
        let text = std::str::from_utf8(text).map_err(|_| format!("{SKILL_FILE} is not UTF-8"))?;
        let front = frontmatter::parse(text)?;
        if front.name != folder_name {
            return Err(format!(
                "the name in {SKILL_FILE} ({:?}) differs from the folder's name ({folder_name:?})",
                front.name
            ));
        }
        let manifest = match tree.file(MANIFEST_FILE) {
            None => Manifest::default(),
            Some(bytes) => {
                let text = std::str::from_utf8(bytes)
                    .map_err(|_| format!("{MANIFEST_FILE} is not UTF-8"))?;
                Manifest::parse(text)?
            }
        };
        manifest.validate(bounds)?;
        let hash = tree.hash();
        Ok(Skill {
            name: front.name,
            description: front.description,
            source,
            dir,
            manifest,
            tree,
            hash,
        })
    }
}
