//! Extraction modelled member by member: each name an archive member may get is checked as a
//! write under the extraction folder (existing symbolic links resolved, as tar and unzip follow
//! them), and the links earlier members make are remembered. A later member written at or
//! beneath such a link (`lnk -> .git/hooks`, then `lnk/pre-commit`) is refused: the link does
//! not exist when the policy checks, only when the program writes. The links made are also
//! what the rest of the command line may not resolve through (see `check::Walk::links`).

use crate::policy::paths::{Access, PathPolicy};
use crate::policy::Denial;
use std::path::{Path, PathBuf};

pub struct Extraction<'a> {
    program: &'a str,
    archive: &'a str,
    /// The extraction folder, checked and resolved.
    target: &'a Path,
    paths: &'a PathPolicy,
    /// Links made by the members so far, relative to the target.
    links: Vec<PathBuf>,
}

impl<'a> Extraction<'a> {
    pub fn new(
        program: &'a str,
        archive: &'a str,
        target: &'a Path,
        paths: &'a PathPolicy,
    ) -> Extraction<'a> {
        Extraction {
            program,
            archive,
            target,
            paths,
            links: Vec::new(),
        }
    }

    /// A member at `names` (every name it may get); `what` says what it holds there.
    pub fn write(&self, names: &[PathBuf], what: &str) -> Result<(), Denial> {
        for name in names {
            self.through_link(name, what)?;
            self.paths
                .check(self.target, &name.to_string_lossy(), Access::Write)
                .map_err(|d| {
                    Denial::new(format!(
                        "{}: the archive {} {what} {}: {}",
                        self.program,
                        self.archive,
                        name.display(),
                        d.reason
                    ))
                })?;
        }
        Ok(())
    }

    /// A symbolic link made at `names`: later members may not go through it.
    pub fn link(&mut self, names: &[PathBuf]) -> Result<(), Denial> {
        self.write(names, "holds the link")?;
        self.links.extend(names.iter().cloned());
        Ok(())
    }

    /// The links made, relative to the target.
    pub fn links(&self) -> &[PathBuf] {
        &self.links
    }

    fn through_link(&self, name: &Path, what: &str) -> Result<(), Denial> {
        match self.links.iter().find(|link| name.starts_with(link)) {
            Some(link) => Err(Denial::new(format!(
                "{}: the archive {} {what} {}, at or beneath the symbolic link {} that an \
                 earlier member makes: extraction would write through the link, where the \
                 policy cannot see",
                self.program,
                self.archive,
                name.display(),
                link.display()
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_through_earlier_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let paths = PathPolicy::new(&ws, &[], &[], &ws).unwrap();
        let mut x = Extraction::new("tar", "a.tar", &ws, &paths);
        x.write(&[PathBuf::from("src/a.rs")], "holds").unwrap();
        x.link(&[PathBuf::from("lnk")]).unwrap();
        let err = x
            .write(&[PathBuf::from("lnk/pre-commit")], "holds")
            .unwrap_err()
            .reason;
        assert!(err.contains("symbolic link lnk"), "{err}");
        assert!(x.write(&[PathBuf::from("lnk")], "holds").is_err());
        // A name that only starts with the same letters is another file.
        x.write(&[PathBuf::from("lnk2/x")], "holds").unwrap();
        assert!(x.link(&[PathBuf::from(".git/hooks")]).is_err());
        assert_eq!(x.links(), [PathBuf::from("lnk")]);
    }
}
