//! `name=value` on its own: a shell variable later words of the same line may expand.
//!
//! warden expands variables itself before checking (bash never sees the words), so a value
//! known when the line is checked is the value that runs. That holds only where the
//! assignment surely runs before what reads it and changes nothing else:
//! - at the top level of the line, after `;` or a newline (not behind `&&`/`||`, not inside a
//!   group, `if` or loop, where whether it ran is known only at run time), and never in a
//!   pipeline (bash runs each part in a subshell: the value would not outlive it);
//! - to a name that is not in the sandbox's environment and that bash does not keep itself
//!   (`PATH`, `HOME`, `LANG`, `TMPDIR`, `IFS`…): those are exported or change how bash works,
//!   which warden, running no shell, would not follow.

use super::check::Walk;
use super::expand;
use super::grammar::RawCommand;
use super::ir::{Command, Connector};
use super::{Checker, Denial};

impl Checker {
    /// Bind the assignments of a command that has no words; the IR gets a command that does
    /// nothing (status 0, as bash's).
    pub(super) fn assign(
        &self,
        raw: &RawCommand,
        walk: &mut Walk,
        in_pipeline: bool,
        connector: Connector,
    ) -> Result<Command, Denial> {
        let shown = || {
            raw.assignments
                .iter()
                .map(|a| format!("{}={}", a.name, a.value.display()))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if in_pipeline {
            return Err(Denial::new(format!(
                "{}: an assignment in a pipeline has no effect in bash (it runs in a subshell)",
                shown()
            )));
        }
        if walk.nesting > 0 || connector != Connector::Seq {
            return Err(Denial::new(format!(
                "{}: a variable may be set only at the top of the line, after `;` or a newline \
                 (behind && or ||, or inside a group, if or loop, whether it is set is known \
                 only when it runs)",
                shown()
            )));
        }
        for assignment in &raw.assignments {
            if !expand::settable(&assignment.name) {
                return Err(Denial::new(format!(
                    "setting ${} is not allowed: the sandbox's environment or bash itself \
                     keeps it, and warden runs no shell that would follow the change (set \
                     presentation settings before a command: LANG=C sort file)",
                    assignment.name
                )));
            }
            // Left to right, as bash: in `a=1 b=$a`, b is 1.
            let value = self.expander(walk).expand_literal(&assignment.value)?;
            walk.vars.push((assignment.name.clone(), Some(value)));
        }
        Ok(Command::program(Vec::new(), walk.cwd.clone()))
    }
}
