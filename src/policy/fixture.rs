//! A workspace built from a description, for policy test suites: files, directories, symlinks
//! (also out of the workspace), a git repository, files outside the workspace and in a home.
//!
//! Layout of the temporary directory: `ws/` (the workspace, which is also what `~` means to the
//! checker, as in the jail), `home/` (the user's own home, outside every root: its secrets are
//! reached only through links), `outside/` (neither a root nor readable: secrets a policy must
//! never reach).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// `[fixture]` as written in a policy or test file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FixtureSpec {
    /// Files in the workspace (parents are created), each holding one line.
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub dirs: Vec<String>,
    /// Link name in the workspace → target, as `ln -s` takes it; `~/x` is the fixture's home.
    #[serde(default)]
    pub symlinks: BTreeMap<String, String>,
    /// A `.git` directory as `git init` leaves it.
    #[serde(default)]
    pub git: bool,
    /// Files under `../outside/` (outside every root).
    #[serde(default)]
    pub outside: Vec<String>,
    /// Files under the user's own home, outside every root (`~/.ssh/id_ed25519`); in commands
    /// `~` is the workspace, so only a link reaches these.
    #[serde(default)]
    pub home: Vec<String>,
}

/// A built fixture; removed when dropped.
pub struct Fixture {
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    pub fn build(spec: &FixtureSpec) -> Result<Fixture, String> {
        let dir = tempfile::Builder::new()
            .prefix("warden-policy-test.")
            .tempdir()
            .map_err(|e| format!("cannot create a fixture directory: {e}"))?;
        let root = dir
            .path()
            .canonicalize()
            .map_err(|e| format!("cannot resolve the fixture directory: {e}"))?;
        let fixture = Fixture { dir, root };
        for sub in ["ws", "home", "outside"] {
            make_dir(&fixture.root.join(sub))?;
        }
        for name in &spec.dirs {
            make_dir(&fixture.workspace().join(relative(name)?))?;
        }
        for name in &spec.files {
            write_file(&fixture.workspace().join(relative(name)?), name)?;
        }
        for name in &spec.outside {
            write_file(&fixture.root.join("outside").join(relative(name)?), name)?;
        }
        for name in &spec.home {
            let name = name.strip_prefix("~/").unwrap_or(name);
            write_file(&fixture.home().join(relative(name)?), name)?;
        }
        if spec.git {
            fixture.git_init()?;
        }
        for (link, target) in &spec.symlinks {
            let at = fixture.workspace().join(relative(link)?);
            if let Some(parent) = at.parent() {
                make_dir(parent)?;
            }
            let target = match target.strip_prefix("~/") {
                Some(rest) => fixture.home().join(rest),
                None => PathBuf::from(target),
            };
            std::os::unix::fs::symlink(&target, &at)
                .map_err(|e| format!("fixture symlink {link}: {e}"))?;
        }
        Ok(fixture)
    }

    pub fn workspace(&self) -> PathBuf {
        self.root.join("ws")
    }

    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// The temporary directory holding it all.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn git_init(&self) -> Result<(), String> {
        let git = self.workspace().join(".git");
        for dir in [
            "objects/info",
            "objects/pack",
            "refs/heads",
            "refs/tags",
            "info",
        ] {
            make_dir(&git.join(dir))?;
        }
        let files = [
            ("HEAD", "ref: refs/heads/main\n"),
            (
                "config",
                "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                 \tlogallrefupdates = true\n",
            ),
            ("description", "Unnamed repository\n"),
        ];
        for (name, text) in files {
            std::fs::write(git.join(name), text)
                .map_err(|e| format!("fixture .git/{name}: {e}"))?;
        }
        Ok(())
    }
}

/// A fixture path must stay inside its directory: relative, without `..`.
fn relative(name: &str) -> Result<&Path, String> {
    let path = Path::new(name);
    if name.is_empty()
        || path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "fixture path {name:?} must be relative and stay inside (no `..`, not absolute)"
        ));
    }
    Ok(path)
}

fn make_dir(path: &Path) -> Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| format!("fixture directory {}: {e}", path.display()))
}

fn write_file(path: &Path, name: &str) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        make_dir(parent)?;
    }
    std::fs::write(path, format!("{name}\n"))
        .map_err(|e| format!("fixture file {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_what_it_describes() {
        let spec: FixtureSpec = toml::from_str(
            r#"
            files = ["src/main.rs", "README.md"]
            dirs = ["build"]
            git = true
            outside = ["secret.txt"]
            home = ["~/.ssh/id_ed25519"]
            symlinks = { "escape" = "../outside", "keys" = "~/.ssh" }
            "#,
        )
        .unwrap();
        let fixture = Fixture::build(&spec).unwrap();
        let ws = fixture.workspace();
        assert!(ws.join("src/main.rs").is_file());
        assert!(ws.join("build").is_dir());
        assert!(ws.join(".git/config").is_file());
        assert!(ws.join("escape/secret.txt").is_file());
        assert!(ws.join("keys/id_ed25519").is_file());
        assert!(fixture.home().join(".ssh/id_ed25519").is_file());
    }

    #[test]
    fn paths_that_leave_the_fixture_are_refused() {
        for bad in ["../x", "/etc/passwd", "a/../../b", ""] {
            let spec = FixtureSpec {
                files: vec![bad.to_string()],
                ..FixtureSpec::default()
            };
            assert!(Fixture::build(&spec).is_err(), "{bad}");
        }
    }
}
