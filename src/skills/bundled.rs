//! Skills built into warden, from the repository's `skills/` folder.
//!
//! Their files are embedded in the binary, so they are exactly as trusted as warden itself and
//! need no grant; they still run in the sandbox with only what their manifest declares. At
//! start-up they are written to `<data_dir>/bundled-skills/` (so the agent can read their
//! `SKILL.md` with its `read` tool); a copy that differs from the embedded content is rewritten,
//! and discovery skips a bundled folder whose hash is not the embedded one.

use super::tree::{Entry, SkillTree};
use std::path::{Path, PathBuf};

/// The folder under the data directory holding the written copies.
pub const BUNDLED_DIR: &str = "bundled-skills";

/// (path inside the skill, contents).
type File = (&'static str, &'static [u8]);

/// (skill name, its files).
const BUNDLED: &[(&str, &[File])] = &[(
    "csv-stats",
    &[
        (
            "SKILL.md",
            include_bytes!("../../skills/csv-stats/SKILL.md"),
        ),
        (
            "skill.toml",
            include_bytes!("../../skills/csv-stats/skill.toml"),
        ),
        (
            "scripts/csv_stats.py",
            include_bytes!("../../skills/csv-stats/scripts/csv_stats.py"),
        ),
    ],
)];

/// The names of the bundled skills.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUNDLED.iter().map(|(name, _)| *name)
}

/// The embedded content of bundled skill `name`.
pub fn tree(name: &str) -> Option<SkillTree> {
    let (_, files) = BUNDLED.iter().find(|(n, _)| *n == name)?;
    let mut entries: Vec<Entry> = Vec::new();
    for (path, contents) in files.iter() {
        // Every parent folder is an entry of its own, as when reading from disk.
        let mut parent = String::new();
        for component in path.split('/').collect::<Vec<_>>().split_last()?.1 {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(component);
            if !entries.iter().any(|e| e.path() == parent) {
                entries.push(Entry::Dir(parent.clone()));
            }
        }
        entries.push(Entry::File {
            path: path.to_string(),
            contents: contents.to_vec(),
            executable: false,
        });
    }
    SkillTree::from_entries(entries).ok()
}

/// Write (or repair) the copies under `dir`; returns `dir`. A copy already equal to the
/// embedded content is left alone, so concurrent wardens do not fight over it.
pub fn materialize(dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    for name in names() {
        let Some(embedded) = tree(name) else {
            return Err(std::io::Error::other(format!(
                "the bundled skill {name} is not a valid skill tree"
            )));
        };
        let target = dir.join(name);
        if SkillTree::read(&target).is_ok_and(|t| t.hash() == embedded.hash()) {
            continue;
        }
        let unique = format!("{}-{}", std::process::id(), rand::random::<u32>());
        let staging = dir.join(format!(".new-{name}-{unique}"));
        embedded.write_to(&staging)?;
        let old = dir.join(format!(".old-{name}-{unique}"));
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.is_dir() => std::fs::rename(&target, &old)?,
            Ok(_) => std::fs::remove_file(&target)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::rename(&staging, &target)?;
        if old.exists() {
            std::fs::remove_dir_all(&old)?;
        }
        tracing::info!(skill = name, dir = %target.display(), "wrote the bundled skill");
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::manifest::Bounds;
    use crate::skills::{Skill, Source};

    #[test]
    fn the_embedded_copy_is_the_repository_folder() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
        for name in names() {
            let on_disk = SkillTree::read(&repo.join(name)).unwrap();
            // Executable bits are not embedded; compare paths and contents.
            let strip = |t: &SkillTree| -> Vec<(String, Option<Vec<u8>>)> {
                t.entries()
                    .iter()
                    .map(|e| match e {
                        Entry::Dir(p) => (p.clone(), None),
                        Entry::File { path, contents, .. } => {
                            (path.clone(), Some(contents.clone()))
                        }
                    })
                    .collect()
            };
            assert_eq!(
                strip(&on_disk),
                strip(&tree(name).unwrap()),
                "skills/{name} and the list in bundled.rs differ: embed every file"
            );
        }
    }

    #[test]
    fn bundled_skills_are_valid_and_materialize_idempotently() {
        let bounds = Bounds {
            timeout_secs: 120,
            limits: crate::sandbox::Limits::default(),
        };
        for name in names() {
            let skill = Skill::from_tree(
                tree(name).unwrap(),
                name,
                PathBuf::from("/bundled").join(name),
                Source::Bundled,
                &bounds,
            )
            .unwrap();
            assert!(!skill.description.is_empty());
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(BUNDLED_DIR);
        materialize(&root).unwrap();
        let target = root.join("csv-stats");
        let hash = SkillTree::read(&target).unwrap().hash();
        assert_eq!(hash, tree("csv-stats").unwrap().hash());
        // A tampered copy is repaired.
        std::fs::write(
            target.join("skill.toml"),
            "[permissions.network]\ndomains=[\"x.com\"]\n",
        )
        .unwrap();
        materialize(&root).unwrap();
        assert_eq!(SkillTree::read(&target).unwrap().hash(), hash);
        let leftovers: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no staging folders left");
    }
}
