//! Where a command substitution may stand: only where any text is harmless (see
//! [`super::substitution`] for what it may run).

use super::Denial;

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
