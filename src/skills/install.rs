//! Installing and granting: the user reviews a skill's permissions in plain words, says yes,
//! and the grant is recorded pinned to the content hash of exactly what was reviewed.
//!
//! `install PATH` reads the folder once; the bytes shown (hashed) are the bytes written into
//! the workspace's `skills/` — through a hidden staging folder renamed into place — so a source
//! changing during the review changes nothing. `grant NAME` re-reads the workspace folder at
//! commit time and refuses when it no longer hashes to what was reviewed.

use super::describe::describe;
use super::grants::Grants;
use super::settings::SkillSettings;
use super::tree::SkillTree;
use super::{bundled, discovery, Skill, Source, WORKSPACE_SKILLS_DIR};
use crate::audit::{self, AuditDecision, AuditEntry};
use crate::db::Database;
use std::path::{Path, PathBuf};

/// What the user is asked to approve.
#[derive(Debug)]
pub struct Review {
    pub skill: Skill,
    /// The permissions in plain words (shown, and stored with the grant).
    pub text: String,
    /// Where the skill lives once installed.
    pub target: PathBuf,
    /// Provenance recorded with the grant.
    pub origin: String,
    pub kind: ReviewKind,
}

#[derive(Debug, PartialEq, Eq)]
pub enum ReviewKind {
    /// Copy into the workspace; `replaces` is the hash of the skill already there.
    Install { replaces: Option<String> },
    /// Grant the workspace's folder as it is.
    Grant { previous: Option<String> },
}

impl Review {
    /// The question after the description.
    pub fn question(&self) -> String {
        match &self.kind {
            ReviewKind::Install { replaces: None } => format!(
                "Install it into {} and grant these permissions?",
                self.target.display()
            ),
            ReviewKind::Install {
                replaces: Some(old),
            } => format!(
                "Replace the skill in {} ({}) with this one and grant these permissions?",
                self.target.display(),
                super::tree::short_hash(old)
            ),
            ReviewKind::Grant { previous: None } => "Grant these permissions?".into(),
            ReviewKind::Grant {
                previous: Some(old),
            } => format!(
                "It changed since its grant for {}. Grant these permissions to the new content?",
                super::tree::short_hash(old)
            ),
        }
    }
}

/// `warden skill install PATH`: read and check the folder.
pub fn review_install(settings: &SkillSettings, source: &Path) -> Result<Review, String> {
    let source = source
        .canonicalize()
        .map_err(|e| format!("{}: {e}", source.display()))?;
    let name = source
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{} has no usable folder name", source.display()))?
        .to_string();
    let skills_dir = settings.workspace.join(WORKSPACE_SKILLS_DIR);
    let target = skills_dir.join(&name);
    if source.starts_with(&skills_dir) {
        return Err(format!(
            "{} is already in the workspace's skills folder; review and grant it in place with \
             `warden skill grant {name}`",
            source.display()
        ));
    }
    let tree = SkillTree::read(&source).map_err(|e| format!("not installed: {e}"))?;
    let skill = Skill::from_tree(
        tree,
        &name,
        target.clone(),
        Source::Workspace,
        &settings.bounds,
    )
    .map_err(|e| format!("not installed: {e}"))?;
    let replaces = match SkillTree::read(&target) {
        Ok(existing) if existing.hash() == skill.hash => None,
        Ok(existing) => Some(existing.hash()),
        Err(_) if target.exists() => Some("an unreadable folder".into()),
        Err(_) => None,
    };
    let mut text = describe(&skill, &settings.bounds);
    if settings.bundled_dir.is_some() && bundled::names().any(|n| n == name) {
        text.push_str(&format!(
            "It replaces the skill {name} bundled with warden (the workspace's copy wins).\n"
        ));
    }
    Ok(Review {
        origin: format!("installed from {}", source.display()),
        skill,
        text,
        target,
        kind: ReviewKind::Install { replaces },
    })
}

/// `warden skill grant NAME`: the workspace's skill as it is now.
pub fn review_grant(settings: &SkillSettings, db: &Database, name: &str) -> Result<Review, String> {
    let catalog = discovery::discover(&settings.roots(), &settings.bounds);
    let skill = match catalog.get(name) {
        Some(skill) => skill.clone(),
        None => {
            return Err(match catalog.skipped(name) {
                Some(s) => format!("{name} is not a valid skill: {}", s.reason),
                None => format!("there is no skill named {name:?}"),
            })
        }
    };
    if skill.source == Source::Bundled {
        return Err(format!(
            "{name} is bundled with warden and needs no grant; it runs with the permissions \
             `warden skill show {name}` lists"
        ));
    }
    let grant = Grants::new(db).get(name).map_err(|e| e.to_string())?;
    // Provenance survives a re-grant: a skill installed from a path stays "installed from" it.
    let origin = grant.as_ref().map_or_else(
        || "found in the workspace".to_string(),
        |g| g.origin.clone(),
    );
    let previous = grant.filter(|g| g.hash != skill.hash).map(|g| g.hash);
    Ok(Review {
        text: describe(&skill, &settings.bounds),
        target: skill.dir.clone(),
        origin,
        kind: ReviewKind::Grant { previous },
        skill,
    })
}

/// After the user said yes: put the files in place (install) or re-check them (grant), then
/// record the grant. Returns a one-line confirmation.
pub fn commit(settings: &SkillSettings, db: &Database, review: &Review) -> Result<String, String> {
    let name = &review.skill.name;
    match review.kind {
        ReviewKind::Install { .. } => put_in_place(settings, review)?,
        ReviewKind::Grant { .. } => {
            let now = SkillTree::read(&review.target)?.hash();
            if now != review.skill.hash {
                return Err(format!(
                    "{name} changed while you were reviewing it ({} now); nothing was granted — \
                     run `warden skill grant {name}` again",
                    super::tree::short_hash(&now)
                ));
            }
        }
    }
    Grants::new(db)
        .grant(name, &review.skill.hash, &review.origin, &review.text)
        .map_err(|e| format!("recording the grant failed: {e}"))?;
    Ok(format!(
        "Granted {name} ({}); it lives in {}.",
        review.skill.hash,
        review.target.display()
    ))
}

/// Write the reviewed bytes to a hidden staging folder and rename it into place.
fn put_in_place(settings: &SkillSettings, review: &Review) -> Result<(), String> {
    let skills_dir = settings.workspace.join(WORKSPACE_SKILLS_DIR);
    std::fs::create_dir_all(&skills_dir).map_err(|e| format!("{}: {e}", skills_dir.display()))?;
    let unique = format!("{}-{:08x}", std::process::id(), rand::random::<u32>());
    let name = &review.skill.name;
    let staging = skills_dir.join(format!(".install-{name}-{unique}"));
    let io = |e: std::io::Error| format!("installing {name}: {e}");
    review.skill.tree.write_to(&staging).map_err(io)?;
    let old = skills_dir.join(format!(".replaced-{name}-{unique}"));
    let had_old = match std::fs::symlink_metadata(&review.target) {
        Ok(meta) if meta.is_dir() => {
            std::fs::rename(&review.target, &old).map_err(io)?;
            true
        }
        Ok(_) => {
            std::fs::remove_file(&review.target).map_err(io)?;
            false
        }
        Err(_) => false,
    };
    std::fs::rename(&staging, &review.target).map_err(io)?;
    if had_old {
        std::fs::remove_dir_all(&old).map_err(io)?;
    }
    Ok(())
}

/// Remove a grant (the folder stays); whether there was one.
pub fn revoke(db: &Database, name: &str) -> Result<bool, String> {
    Grants::new(db)
        .revoke(name)
        .map_err(|e| format!("removing the grant failed: {e}"))
}

/// An audit row for an install, grant or revoke from the command line.
pub fn audit_action(
    db: &Database,
    action: &str,
    name: &str,
    input: serde_json::Value,
    decision: AuditDecision,
    reason: &str,
) -> Result<(), String> {
    audit::record(
        db,
        &AuditEntry {
            session: super::runner::CLI_SESSION.into(),
            tool: format!("skill-{action}:{name}"),
            input: input.to_string(),
            decision,
            reason: reason.to_string(),
            exit_code: None,
            duration_ms: 0,
            network: None,
        },
    )
    .map_err(|e| format!("the audit log could not be written: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::manifest::Bounds;

    fn settings(root: &Path) -> SkillSettings {
        let workspace = root.join("ws");
        std::fs::create_dir_all(&workspace).unwrap();
        SkillSettings {
            workspace,
            bundled_dir: None,
            runs_dir: root.join("data/skill-runs"),
            data_dir: root.join("data"),
            bounds: Bounds {
                timeout_secs: 120,
                limits: crate::sandbox::Limits::default(),
            },
            backend: crate::sandbox::Backend::Host,
            docker: Default::default(),
            hosts: Default::default(),
            secrets: Default::default(),
            own_files: Vec::new(),
        }
    }

    fn source(root: &Path) -> PathBuf {
        let dir = root.join("src/notes");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            "---\nname: notes\ndescription: notes\n---\n",
        )
        .unwrap();
        std::fs::write(dir.join("run.py"), "print('reviewed')\n").unwrap();
        dir
    }

    #[test]
    fn what_was_reviewed_is_what_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let settings = settings(&root);
        let db = crate::schema::open_in_memory().unwrap();
        let src = source(&root);
        let review = review_install(&settings, &src).unwrap();
        assert!(review.question().starts_with("Install it into"));
        // The source changes after the user read it: the reviewed bytes are installed.
        std::fs::write(src.join("run.py"), "print('swapped')\n").unwrap();
        commit(&settings, &db, &review).unwrap();
        let installed = settings.workspace.join("skills/notes");
        assert_eq!(
            std::fs::read_to_string(installed.join("run.py")).unwrap(),
            "print('reviewed')\n"
        );
        let grant = Grants::new(&db).get("notes").unwrap().unwrap();
        assert_eq!(grant.hash, review.skill.hash);
        assert_eq!(grant.origin, format!("installed from {}", src.display()));
        assert_eq!(grant.permissions, review.text);
        let leftovers: Vec<_> = std::fs::read_dir(settings.workspace.join("skills"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers, ["notes"], "no staging folder left");

        // Installing the changed source again replaces it, after its own review.
        let again = review_install(&settings, &src).unwrap();
        assert!(matches!(
            again.kind,
            ReviewKind::Install { replaces: Some(_) }
        ));
        commit(&settings, &db, &again).unwrap();
        assert_eq!(
            std::fs::read_to_string(installed.join("run.py")).unwrap(),
            "print('swapped')\n"
        );
        assert!(review_install(&settings, &installed)
            .unwrap_err()
            .contains("grant it in place"));
    }

    #[test]
    fn a_grant_is_refused_when_the_folder_changes_during_the_review() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let settings = settings(&root);
        let db = crate::schema::open_in_memory().unwrap();
        let skills = settings.workspace.join("skills");
        std::fs::create_dir_all(&skills).unwrap();
        std::fs::rename(source(&root), skills.join("notes")).unwrap();
        let review = review_grant(&settings, &db, "notes").unwrap();
        assert_eq!(review.origin, "found in the workspace");
        std::fs::write(skills.join("notes/run.py"), "print('changed')\n").unwrap();
        let err = commit(&settings, &db, &review).unwrap_err();
        assert!(err.contains("changed while you were reviewing it"), "{err}");
        assert_eq!(Grants::new(&db).get("notes").unwrap(), None);
        let review = review_grant(&settings, &db, "notes").unwrap();
        commit(&settings, &db, &review).unwrap();
        assert!(Grants::new(&db).get("notes").unwrap().is_some());
        assert!(review_grant(&settings, &db, "missing")
            .unwrap_err()
            .contains("no skill"));
    }
}
