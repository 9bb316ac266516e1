//! Command substitution, `"$(cmd)"`: where it may stand and what it may run.
//!
//! Its output exists only when it runs, after the check. So the outer command is checked with
//! nothing where the output will go, and that is honest only where any text at all is
//! harmless: an argument of `echo` or `printf` (they print it), or a string operand of `test`
//! and `[` in a form whose meaning does not depend on the operand (`[ -n "$(…)" ]`,
//! `[ "$(…)" = x ]`). Anywhere else — a path, an option, a program name, a redirection target —
//! the output would choose a file or a behaviour the policy never saw, so it is refused.
//!
//! The inner command runs first, in the same sandbox, and must be allowed as it is and
//! read-only: nothing to ask, no writes, no code the policy cannot read.

use super::check::Walk;
use super::ir::Script;
use super::{Checker, Denial};

impl Checker {
    /// The command of a command substitution, checked where it stands: allowed, and read-only
    /// (no writes, nothing to ask, no code the policy cannot read), or refused.
    pub(super) fn substitution(&self, source: &str, walk: &Walk) -> Result<Script, Denial> {
        self.substituted_script(
            &format!("$({source})"),
            "command substitution",
            source,
            walk,
        )
    }

    /// The command of a process substitution `<(…)`, held to the same rules.
    pub(super) fn process_substitution(&self, source: &str, walk: &Walk) -> Result<Script, Denial> {
        self.substituted_script(
            &format!("<({source})"),
            "process substitution",
            source,
            walk,
        )
    }

    fn substituted_script(
        &self,
        shown: &str,
        kind: &str,
        source: &str,
        walk: &Walk,
    ) -> Result<Script, Denial> {
        if !self.runs_in_warden() {
            return Err(Denial::new(format!(
                "{kind} is not allowed ({shown}): the shell running this command would run it \
                 unchecked"
            )));
        }
        if walk.in_substitution {
            return Err(Denial::new(format!(
                "a {kind} inside another substitution is not allowed ({shown})"
            )));
        }
        let in_it = |d: Denial| Denial::new(format!("in {shown}: {}", d.reason));
        let raw = self.parse(source).map_err(in_it)?;
        let mut inner = walk.clone();
        inner.asks.clear();
        inner.in_substitution = true;
        inner.wrote = false;
        let mut script = Script::default();
        self.list(&raw, &mut inner, &mut script).map_err(in_it)?;
        judge_script(shown, kind, &script, &inner.asks, inner.wrote)?;
        Ok(script)
    }
}

/// The inner command, checked: refused unless allowed as it is and read-only.
fn judge_script(
    shown: &str,
    kind: &str,
    script: &Script,
    asks: &[String],
    wrote: bool,
) -> Result<(), Denial> {
    if !asks.is_empty() {
        return Err(Denial::new(format!(
            "the command of {shown} needs approval ({}); a {kind} runs only commands the policy \
             allows as they are",
            asks.join("; ")
        )));
    }
    if wrote || !script.written_paths().is_empty() {
        return Err(Denial::new(format!(
            "the command of {shown} writes files; a {kind} runs only read-only commands"
        )));
    }
    if let Some(code) = script.commands().find(|c| c.runs_code) {
        return Err(Denial::new(format!(
            "the command of {shown} runs code the policy cannot read (`{}`); a {kind} runs only \
             commands whose every effect the policy knows",
            code.display()
        )));
    }
    Ok(())
}
