//! Comparing two policies over a corpus of commands: which commands change decision, and
//! whether a change widens what runs (deny → ask → allow).

use super::fixture::{Fixture, FixtureSpec};
use super::{Decision, Policy};
use std::path::Path;
use std::sync::Arc;

/// One command whose decision differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub command: String,
    /// The programs the command names (what its rules are keyed by), for grouping.
    pub programs: Vec<String>,
    pub old: (Decision, String),
    pub new: (Decision, String),
}

impl Change {
    /// deny → ask, deny → allow, ask → allow: more may run than before.
    pub fn widens(&self) -> bool {
        rank(self.new.0) > rank(self.old.0)
    }
}

fn rank(decision: Decision) -> u8 {
    match decision {
        Decision::Deny => 0,
        Decision::Ask => 1,
        Decision::Allow => 2,
    }
}

/// Where the corpus is checked: a real directory, or a fixture built for the comparison.
pub enum Place<'a> {
    Workspace { dir: &'a Path },
    Fixture(&'a FixtureSpec),
}

/// Check every command of `corpus` with both policies in the same place.
pub fn compare(
    old: &Arc<Policy>,
    new: &Arc<Policy>,
    corpus: &[String],
    place: Place,
) -> Result<Vec<Change>, String> {
    let fixture;
    // `~` is the workspace, as in the jail where the commands run.
    let workspace = match place {
        Place::Workspace { dir } => dir.to_path_buf(),
        Place::Fixture(spec) => {
            fixture = Fixture::build(spec)?;
            fixture.workspace()
        }
    };
    let home = workspace.clone();
    let mut old_checker = old
        .checker(&workspace, &[], &home)
        .map_err(|e| e.to_string())?;
    let mut new_checker = new
        .checker(&workspace, &[], &home)
        .map_err(|e| e.to_string())?;
    let mut changes = Vec::new();
    for command in corpus {
        let before = old_checker.check(command);
        let after = new_checker.check(command);
        if before.decision == after.decision {
            continue;
        }
        let programs = program_names(command, &before, &after);
        changes.push(Change {
            command: command.clone(),
            programs,
            old: (before.decision, before.reason),
            new: (after.decision, after.reason),
        });
    }
    Ok(changes)
}

/// The programs of whichever verdict parsed the command (a denial may have no IR).
fn program_names(command: &str, a: &super::Verdict, b: &super::Verdict) -> Vec<String> {
    let mut names: Vec<String> = a
        .script
        .commands()
        .chain(b.script.commands())
        .filter_map(|c| c.argv.first().cloned())
        .collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        // Neither produced commands: group by the first word as written.
        names.extend(command.split_whitespace().next().map(String::from));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_widening_is_found_and_grouped() {
        let old = Arc::new(Policy::embedded_default());
        let new = Arc::new(
            Policy::from_user_toml(
                "[programs.curl]\nargs = \"read\"\n[programs.cat]\ndecision = \"deny\"\n",
                "test",
            )
            .unwrap(),
        );
        let corpus: Vec<String> = ["curl example.com", "cat a.txt", "ls"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let spec = FixtureSpec {
            files: vec!["a.txt".into()],
            ..FixtureSpec::default()
        };
        let changes = compare(&old, &new, &corpus, Place::Fixture(&spec)).unwrap();
        assert_eq!(changes.len(), 2, "{changes:#?}");
        assert!(changes[0].widens());
        assert_eq!(changes[0].programs, ["curl"]);
        assert!(!changes[1].widens());
    }
}
