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

/// Programs that print their arguments and nothing else.
const PRINTERS: &[&str] = &["echo", "printf"];

/// `test` operators taking two operands, whose result is a comparison of the two texts.
const BINARY: &[&str] = &["=", "==", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge"];

/// `test` operators taking one operand as a string (not a file).
const UNARY_STRING: &[&str] = &["-n", "-z"];

/// Refuse substitutions (at argv indexes `places`) anywhere but a free-text position.
pub(super) fn judge_places(name: &str, argv: &[String], places: &[usize]) -> Result<(), Denial> {
    for &place in places {
        if place == 0 {
            return Err(Denial::new(
                "a command substitution may not be the command name: it would choose the \
                 program after the check",
            ));
        }
        if !free_text(name, argv, places, place) {
            return Err(Denial::new(format!(
                "a command substitution as argument {place} of {name} is not allowed: its output \
                 is known only when it runs, after the check, and there it could be a path, an \
                 option or an operator; it may stand only where any text is harmless — an \
                 argument of echo or printf, or a string operand of test or [ \
                 ([ -n \"$(…)\" ], [ \"$(…)\" = text ])"
            )));
        }
    }
    Ok(())
}

fn free_text(name: &str, argv: &[String], places: &[usize], place: usize) -> bool {
    if PRINTERS.contains(&name) {
        return true;
    }
    if name != "test" && name != "[" {
        return false;
    }
    // The operands, without `[`'s closing `]`; a form is read from the operand count and the
    // literal operators alone (POSIX test: one, two or three operands), never from the output.
    let end = if name == "[" {
        match argv.last() {
            Some(last)
                if last == "]"
                    && argv.len() >= 2
                    && places.iter().all(|&p| p != argv.len() - 1) =>
            {
                argv.len() - 1
            }
            _ => return false,
        }
    } else {
        argv.len()
    };
    let operands = &argv[1..end];
    let at = place - 1;
    let literal = |i: usize| places.iter().all(|&p| p != i + 1);
    match operands.len() {
        // `[ "$(…)" ]`: true when the text is not empty.
        1 => at == 0,
        // `[ -n "$(…)" ]`, `[ -z "$(…)" ]`.
        2 => at == 1 && literal(0) && UNARY_STRING.contains(&operands[0].as_str()),
        // `[ "$(…)" = text ]`, `[ text != "$(…)" ]`.
        3 => (at == 0 || at == 2) && literal(1) && BINARY.contains(&operands[1].as_str()),
        _ => false,
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn printers_take_any_text_anywhere_but_the_name() {
        assert!(judge_places("echo", &argv(&["echo", "a", ""]), &[2]).is_ok());
        assert!(judge_places("printf", &argv(&["printf", "", "x"]), &[1]).is_ok());
        assert!(judge_places("echo", &argv(&["", "x"]), &[0]).is_err());
    }

    #[test]
    fn test_takes_it_only_as_a_string_operand_of_a_fixed_form() {
        for (words, place) in [
            (&["[", "", "]"][..], 1),
            (&["[", "-n", "", "]"], 2),
            (&["test", "-z", ""], 2),
            (&["[", "", "=", "x", "]"], 1),
            (&["[", "x", "!=", "", "]"], 3),
            (&["test", "", "-eq", "3"], 1),
        ] {
            assert!(
                judge_places(words[0], &argv(words), &[place]).is_ok(),
                "{words:?}"
            );
        }
        for (words, place) in [
            // A file test: the output would be a path.
            (&["[", "-f", "", "]"][..], 2),
            (&["[", "-e", "", "]"], 2),
            // The operator itself, or a form whose meaning the output could change.
            (&["[", "x", "", "y", "]"], 2),
            (&["[", "!", "", "=", "x", "]"], 2),
            (&["[", "", "-a", "x", "]"], 1),
            // No closing bracket.
            (&["[", "-n", ""], 2),
            // Not a printer or a test.
            (&["cat", ""], 1),
            (&["grep", "", "notes.txt"], 1),
        ] {
            assert!(
                judge_places(words[0], &argv(words), &[place]).is_err(),
                "{words:?}"
            );
        }
        // The closing bracket may not come from the output either.
        assert!(judge_places("[", &argv(&["[", "-n", "x", ""]), &[3]).is_err());
    }
}
