//! Finding skills: the bundled ones, then the workspace's `skills/` folder. A workspace skill
//! overrides a bundled one of the same name (the narrower scope wins, and there is no silent
//! fallback to the bundled one when the workspace copy is invalid or not granted). Every folder
//! that is not a valid skill is skipped with a reason, which is logged and shown by
//! `warden skill list`.

use super::manifest::Bounds;
use super::tree::SkillTree;
use super::{bundled, Skill, Source, WORKSPACE_SKILLS_DIR};
use std::path::{Path, PathBuf};

/// Where to look.
#[derive(Clone, Debug)]
pub struct Roots {
    /// The written copies of the bundled skills, when bundled skills are enabled.
    pub bundled: Option<PathBuf>,
    /// The workspace (its `skills/` folder is searched).
    pub workspace: PathBuf,
}

impl Roots {
    pub fn workspace_skills(&self) -> PathBuf {
        self.workspace.join(WORKSPACE_SKILLS_DIR)
    }
}

/// A folder that is not a usable skill, and why.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Skipped {
    /// The folder's name (the name the skill would have).
    pub name: String,
    pub dir: PathBuf,
    pub source: Source,
    pub reason: String,
}

/// The skills found, by name, and the folders skipped.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub skills: Vec<Skill>,
    pub skipped: Vec<Skipped>,
    /// Bundled skills a workspace folder of the same name replaces.
    pub overridden: Vec<String>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Why the folder named `name` is not a usable skill, when it was skipped.
    pub fn skipped(&self, name: &str) -> Option<&Skipped> {
        self.skipped.iter().find(|s| s.name == name)
    }

    pub fn names(&self) -> Vec<&str> {
        self.skills.iter().map(|s| s.name.as_str()).collect()
    }
}

/// Scan both places.
pub fn discover(roots: &Roots, bounds: &Bounds) -> Catalog {
    let mut catalog = Catalog::default();
    if let Some(dir) = &roots.bundled {
        for name in bundled::names() {
            let path = dir.join(name);
            match load_bundled(name, &path, bounds) {
                Ok(skill) => catalog.skills.push(skill),
                Err(reason) => skip(&mut catalog, name, path, Source::Bundled, reason),
            }
        }
    }
    let workspace_dir = roots.workspace_skills();
    for (name, path) in folders(&workspace_dir) {
        let loaded = SkillTree::read(&path).and_then(|tree| {
            Skill::from_tree(tree, &name, path.clone(), Source::Workspace, bounds)
        });
        // The workspace's folder takes the name over, valid or not.
        if catalog.skills.iter().any(|s| s.name == name) || catalog.skipped(&name).is_some() {
            catalog.skills.retain(|s| s.name != name);
            catalog.skipped.retain(|s| s.name != name);
            catalog.overridden.push(name.clone());
        }
        match loaded {
            Ok(skill) => catalog.skills.push(skill),
            Err(reason) => skip(&mut catalog, &name, path, Source::Workspace, reason),
        }
    }
    catalog.skills.sort_by(|a, b| a.name.cmp(&b.name));
    catalog
}

fn load_bundled(name: &str, path: &Path, bounds: &Bounds) -> Result<Skill, String> {
    let embedded = bundled::tree(name).ok_or("not a valid embedded skill")?;
    let tree = SkillTree::read(path)?;
    if tree.hash() != embedded.hash() {
        return Err(format!(
            "the copy in {} differs from the one built into warden (restart warden to restore it)",
            path.display()
        ));
    }
    Skill::from_tree(tree, name, path.to_path_buf(), Source::Bundled, bounds)
}

fn skip(catalog: &mut Catalog, name: &str, dir: PathBuf, source: Source, reason: String) {
    tracing::warn!(skill = name, dir = %dir.display(), %reason, "skipping an invalid skill");
    catalog.skipped.push(Skipped {
        name: name.to_string(),
        dir,
        source,
        reason,
    });
}

/// The entries of `dir` that may be skills: everything but hidden names (install staging)
/// and plain files; symlinks are listed so that reading them fails with a reason.
fn folders(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let kind = entry.file_type().ok()?;
            if name.starts_with('.') || kind.is_file() {
                return None;
            }
            Some((name, entry.path()))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> Bounds {
        Bounds {
            timeout_secs: 120,
            limits: crate::sandbox::Limits::default(),
        }
    }

    fn write_skill(root: &Path, folder: &str, name: &str, manifest: Option<&str>) {
        let dir = root.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: does {name} things\n---\nbody\n"),
        )
        .unwrap();
        if let Some(text) = manifest {
            std::fs::write(dir.join("skill.toml"), text).unwrap();
        }
    }

    #[test]
    fn workspace_overrides_bundled_and_invalid_ones_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let bundled_dir = bundled::materialize(&dir.path().join("bundled")).unwrap();
        let ws = dir.path().join("ws");
        let skills = ws.join("skills");
        write_skill(&skills, "good", "good", None);
        write_skill(&skills, "renamed", "other-name", None);
        write_skill(
            &skills,
            "greedy",
            "greedy",
            Some("[permissions.paths]\nread = [\"/\"]\n"),
        );
        write_skill(&skills, "csv-stats", "csv-stats", None);
        std::fs::create_dir_all(skills.join(".staging-x")).unwrap();
        std::fs::write(skills.join("README.md"), "not a skill").unwrap();
        std::os::unix::fs::symlink(skills.join("good"), skills.join("linked")).unwrap();
        let roots = Roots {
            bundled: Some(bundled_dir),
            workspace: ws,
        };
        let catalog = discover(&roots, &bounds());
        assert_eq!(catalog.names(), ["csv-stats", "good"]);
        let csv = catalog.get("csv-stats").unwrap();
        assert_eq!(csv.source, Source::Workspace, "the workspace copy wins");
        assert_eq!(catalog.overridden, ["csv-stats"]);
        let reasons: Vec<(&str, &str)> = catalog
            .skipped
            .iter()
            .map(|s| (s.name.as_str(), s.reason.as_str()))
            .collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(catalog
            .skipped("renamed")
            .unwrap()
            .reason
            .contains("differs from the folder"));
        assert!(catalog
            .skipped("greedy")
            .unwrap()
            .reason
            .contains("inside the workspace"));
        assert!(catalog
            .skipped("linked")
            .unwrap()
            .reason
            .contains("symbolic link"));
    }

    #[test]
    fn a_tampered_bundled_copy_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let bundled_dir = bundled::materialize(&dir.path().join("bundled")).unwrap();
        std::fs::write(bundled_dir.join("csv-stats/extra.py"), "import os").unwrap();
        let roots = Roots {
            bundled: Some(bundled_dir),
            workspace: dir.path().join("ws"),
        };
        let catalog = discover(&roots, &bounds());
        assert!(catalog.get("csv-stats").is_none());
        assert!(catalog
            .skipped("csv-stats")
            .unwrap()
            .reason
            .contains("differs"));
    }
}
