//! Links made earlier on a command line. A command that makes symbolic links (`tar -x` of a
//! link member, `ln`, a link `cp`, `mv` or `git mv` copies) runs only after the whole line was
//! checked, so at check time the links do not exist and a later path through one
//! (`lnk -> .git/hooks`, then `echo > lnk/pre-commit`) would be judged where it is not. Such a
//! path cannot be resolved: it is refused, with the link named. A git command that writes the
//! work tree may restore links the policy does not read (from the index): nothing beneath that
//! tree is resolved after it.

use super::ir::{CheckedPath, OpenMode, Redirect, RedirectTarget};
use super::paths::{self, Access};
use super::Denial;
use std::path::{Path, PathBuf};

/// Where earlier commands of the line make links (absolute, parent resolved), and the folders
/// beneath which they may make links they do not name (a git checkout restores whatever links
/// its trees and index hold).
#[derive(Clone, Debug, Default)]
pub(super) struct LineLinks {
    links: Vec<PathBuf>,
    trees: Vec<PathBuf>,
}

/// What one command adds.
#[derive(Clone, Debug, Default)]
pub(super) struct Made {
    pub links: Vec<PathBuf>,
    pub trees: Vec<PathBuf>,
}

impl LineLinks {
    pub fn len(&self) -> usize {
        self.links.len() + self.trees.len()
    }

    pub fn extend(&mut self, made: Made) {
        self.links.extend(made.links);
        self.trees.extend(made.trees);
    }

    /// Refuse `path` (resolved) when it lies beneath such a link, or is one and is followed
    /// (anything but removing it), or lies beneath such a folder.
    pub fn refuse_through(&self, path: &Path, access: Access) -> Result<(), Denial> {
        if let Some(tree) = self
            .trees
            .iter()
            .find(|t| path.starts_with(t) && path != t.as_path())
        {
            return Err(Denial::new(format!(
                "{} is beneath {}, where an earlier command of this line may make symbolic \
                 links it does not name (git restores the links its trees hold): where the \
                 path leads is not known when the line is checked; run the commands one at a \
                 time",
                path.display(),
                tree.display()
            )));
        }
        for link in &self.links {
            let at = path == link.as_path();
            if (at && access != Access::Delete) || (!at && path.starts_with(link)) {
                return Err(Denial::new(format!(
                    "{} is at or beneath {}, a symbolic link an earlier command of this line \
                     makes: where it leads is not known when the line is checked; run the \
                     commands one at a time",
                    path.display(),
                    link.display()
                )));
            }
        }
        Ok(())
    }

    /// Every checked path and redirection file of a command.
    pub fn refuse_command(
        &self,
        paths: &[CheckedPath],
        redirects: &[Redirect],
    ) -> Result<(), Denial> {
        for checked in paths {
            self.refuse_through(&checked.path, checked.access)?;
        }
        self.refuse_redirects(redirects)
    }

    pub fn refuse_redirects(&self, redirects: &[Redirect]) -> Result<(), Denial> {
        for r in redirects {
            if let RedirectTarget::File { path, mode } = &r.target {
                let access = if *mode == OpenMode::Read {
                    Access::Read
                } else {
                    Access::Write
                };
                self.refuse_through(path, access)?;
            }
        }
        Ok(())
    }

    /// A copy or move whose source is, or lies beneath, such a link carries it to its
    /// destination: the destination (and the source's name in it) becomes one too.
    pub fn carried(&self, paths: &[CheckedPath]) -> Vec<PathBuf> {
        let sources: Vec<&CheckedPath> =
            paths.iter().filter(|p| p.access != Access::Write).collect();
        let carries = sources
            .iter()
            .any(|p| self.links.iter().any(|l| p.path.starts_with(l)));
        if !carries {
            return Vec::new();
        }
        let mut out = Vec::new();
        for dest in paths.iter().filter(|p| p.access == Access::Write) {
            out.push(dest.path.clone());
            for source in &sources {
                if let Some(name) = source.path.file_name() {
                    out.push(dest.path.join(name));
                }
            }
        }
        out
    }
}

/// Where a link named `link` (relative to `cwd`, as a command wrote it) is made: its folder
/// resolved, its own name kept.
pub(super) fn located(cwd: &Path, link: &str) -> PathBuf {
    let at = paths::lexically_normal(&cwd.join(link));
    paths::resolve(&at, true).unwrap_or(at)
}
