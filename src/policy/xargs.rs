//! `xargs` with a fixed command: `find . -name '*.txt' | xargs grep -n hi`.
//!
//! The arguments xargs appends exist only when it runs, so the checker only reads the options
//! (a closed list: `-0`, `-n N`, `-r`) and checks the fixed command as it is; warden's executor
//! then does what xargs does — reads stdin, splits it, batches it — and checks each batch's
//! final argv with the same policy before it runs it. A batch the policy does not allow as it
//! is, or one that writes, stops the line. The fixed command must be one whose every run the
//! policy can judge from its argv: not a builtin, not git (its config is checked as it
//! starts), nothing that runs code, asks or writes.

use super::check::{program_name, Checked, Walk};
use super::ir::{Command, PolicyRef, XargsPlan};
use super::paths::Access;
use super::{Checker, Denial};
use std::path::Path;
use std::sync::Arc;

impl Checker {
    /// xargs' fixed command, checked alone (each batch is checked again when it exists), and
    /// the policy that will check the batches.
    pub(super) fn xargs(&self, mut plan: XargsPlan, cwd: &Path) -> Result<XargsPlan, Denial> {
        if !self.runs_in_warden() {
            return Err(Denial::new(
                "xargs is not allowed here: the shell running this command would run every \
                 batch unchecked",
            ));
        }
        self.plain_program(plan.command.clone(), cwd)?;
        // A command that writes what its arguments name (`xargs rm`) would write whatever the
        // input names: refused now, not batch by batch.
        let mut probe = plan.command.clone();
        probe.push("file".into());
        if let Ok(checked) = self.program_in(probe, cwd) {
            if checked.writes {
                return Err(Denial::new(format!(
                    "xargs: `{}` writes the files its arguments name; warden's xargs runs only \
                     read-only commands",
                    shell_words::join(&plan.command)
                )));
            }
        }
        plan.policy = Some(PolicyRef(Arc::clone(self.policy_arc())));
        Ok(plan)
    }

    /// A program with its final argv checked in `cwd` at the start of a line.
    fn program_in(&self, argv: Vec<String>, cwd: &Path) -> Result<Checked, Denial> {
        let first = argv.first().ok_or_else(|| Denial::new("no command"))?;
        let name = program_name(first)?;
        let cwd = self.paths().check(cwd, ".", Access::Read)?;
        self.program(argv, &name, Vec::new(), &Walk::at(cwd))
    }

    /// One program with its final argv in `cwd`, as xargs runs a batch: allowed as it is, and
    /// read-only (warden's xargs runs nothing that writes, asks or runs unreadable code).
    /// Returns the command that runs.
    pub fn plain_program(&self, argv: Vec<String>, cwd: &Path) -> Result<Command, Denial> {
        let deny = |why: String| Denial::new(format!("xargs: {why}"));
        let shown = shell_words::join(&argv);
        let checked = self.program_in(argv, cwd).map_err(|d| deny(d.reason))?;
        if !checked.asks.is_empty() {
            return Err(deny(format!(
                "`{shown}` needs approval ({}); xargs runs only commands the policy allows as \
                 they are",
                checked.asks.join("; ")
            )));
        }
        if checked.writes || !checked.links.links.is_empty() || !checked.links.trees.is_empty() {
            return Err(deny(format!(
                "`{shown}` writes files; warden's xargs runs only read-only commands"
            )));
        }
        if checked.command.builtin.is_some() || checked.command.runs_code || checked.command.network
        {
            return Err(deny(format!(
                "`{shown}` is not a plain program whose every effect the policy knows"
            )));
        }
        Ok(checked.command)
    }
}
