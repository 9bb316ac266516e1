//! Compound commands, checked the way they will run.
//!
//! - `{ list; }` and `( list )`: the list is checked in order; a subshell's `cd` ends with it.
//! - `if`: every condition and branch is checked; since which branch runs is known only at run
//!   time, every way through must leave the same working directory (a `cd` in one branch
//!   would make later paths mean different places: put it in a subshell).
//! - `while`/`until`: condition and body are checked; a round may not change directory; a
//!   loop that writes is checked again as if its writes came first (the next round runs
//!   after them).
//! - `for NAME in WORDS`: the words are expanded now (braces, globs — every match checked) and
//!   the body checked once per value with `$NAME` bound to it: the loop is unrolled into the
//!   IR, so each iteration that runs is one that was checked.
//! - `[[ expr ]]`: translated into `test` commands joined by `&&`/`||` (and `!`), each checked
//!   by the `test` rule; operands are neither split nor globbed, as in bash; pattern matching
//!   (`== *.txt`), `=~`, `<`/`>` and `-v` are refused, having no `test` equivalent.

use super::check::{Checked, Walk};
use super::cond::CondExpr;
use super::grammar::{RawCompound, RawScript};
use super::ir::{Branch, Builtin, Command, Compound, Connector, Pipeline, Script, Step};
use super::syntax::RawRedirect;
use super::words::{Part, RawWord};
use super::{Checker, Denial};

impl Checker {
    /// A compound command with its redirections, as one IR command.
    pub(super) fn compound(
        &self,
        raw: &RawCompound,
        redirects: &[RawRedirect],
        stderr_to_pipe: bool,
        walk: &mut Walk,
    ) -> Result<Command, Denial> {
        let (redirects, writes) = {
            let expander = self.expander(walk);
            self.redirects(redirects, stderr_to_pipe, &expander, &walk.cwd)?
        };
        if let Some(r) = redirects.iter().find(|r| r.fd > 2) {
            return Err(Denial::new(format!(
                "redirecting descriptor {} of a group, loop or if is not supported (only 0-2)",
                r.fd
            )));
        }
        walk.links
            .refuse_redirects(&redirects)
            .map_err(|d| Denial::new(format!("redirection: {}", d.reason)))?;
        // The redirections are opened before anything inside runs.
        walk.note_writes(writes);
        let cwd = walk.cwd.clone();
        let compound = match raw {
            RawCompound::Group(body) => Compound::Group(self.script(body, walk)?),
            RawCompound::Subshell(body) => {
                let (cwd, logical) = (walk.cwd.clone(), walk.logical_cwd.clone());
                let script = self.script(body, walk)?;
                walk.cwd = cwd;
                walk.logical_cwd = logical;
                Compound::Subshell(script)
            }
            RawCompound::If {
                branches,
                otherwise,
            } => self.if_clause(branches, otherwise.as_ref(), walk)?,
            RawCompound::Loop {
                until,
                condition,
                body,
            } => self.while_loop(*until, condition, body, walk)?,
            RawCompound::For { name, words, body } => self.for_loop(name, words, body, walk)?,
            RawCompound::Cond(expr) => Compound::Group(self.cond(expr, walk)?),
        };
        let mut command = Command::program(Vec::new(), cwd);
        command.redirects = redirects;
        command.builtin = Some(Builtin::Compound(Box::new(compound)));
        Ok(command)
    }

    fn script(&self, raw: &RawScript, walk: &mut Walk) -> Result<Script, Denial> {
        let mut script = Script::default();
        self.list(raw, walk, &mut script)?;
        Ok(script)
    }

    fn if_clause(
        &self,
        branches: &[(RawScript, RawScript)],
        otherwise: Option<&RawScript>,
        walk: &mut Walk,
    ) -> Result<Compound, Denial> {
        let mut ir = Vec::new();
        let mut ends = Vec::new();
        for (condition, body) in branches {
            let condition = self.script(condition, walk)?;
            let after_condition = (walk.cwd.clone(), walk.logical_cwd.clone());
            let body = self.script(body, walk)?;
            ends.push((walk.cwd.clone(), walk.logical_cwd.clone()));
            (walk.cwd, walk.logical_cwd) = after_condition;
            ir.push(Branch { condition, body });
        }
        let otherwise = match otherwise {
            Some(raw) => {
                let script = self.script(raw, walk)?;
                Some(script)
            }
            None => None,
        };
        // With no else, "no branch ran" is a way through too.
        ends.push((walk.cwd.clone(), walk.logical_cwd.clone()));
        if ends.iter().any(|end| end != &ends[0]) {
            return Err(Denial::new(
                "a cd inside an if leaves the directory depending on which branch runs; put the \
                 cd and what needs it in a subshell: if …; then (cd dir && cmd); fi",
            ));
        }
        (walk.cwd, walk.logical_cwd) = ends.swap_remove(0);
        Ok(Compound::If {
            branches: ir,
            otherwise,
        })
    }

    fn while_loop(
        &self,
        until: bool,
        condition: &RawScript,
        body: &RawScript,
        walk: &mut Walk,
    ) -> Result<Compound, Denial> {
        let before = walk.clone();
        let check = |walk: &mut Walk| -> Result<(Script, Script), Denial> {
            let condition = self.script(condition, walk)?;
            let body = self.script(body, walk)?;
            if walk.cwd != before.cwd || walk.logical_cwd != before.logical_cwd {
                return Err(Denial::new(
                    "a cd inside a loop would run its next round somewhere else; put the cd and \
                     what needs it in a subshell: while …; do (cd dir && cmd); done",
                ));
            }
            Ok((condition, body))
        };
        let (mut condition_ir, mut body_ir) = check(walk)?;
        let new_links = walk.links.len() > before.links.len();
        if (walk.earlier_writes && !before.earlier_writes) || new_links {
            // The second round runs after the first round's writes and links.
            let commands = walk.commands;
            let links = std::mem::take(&mut walk.links);
            *walk = before.clone();
            walk.earlier_writes = true;
            walk.commands = commands;
            walk.links = links;
            (condition_ir, body_ir) = check(walk)?;
        }
        Ok(Compound::Loop {
            until,
            condition: condition_ir,
            body: body_ir,
        })
    }

    fn for_loop(
        &self,
        name: &str,
        words: &[RawWord],
        body: &RawScript,
        walk: &mut Walk,
    ) -> Result<Compound, Denial> {
        if !is_name(name) {
            return Err(Denial::new(format!("`{name}` is not a loop variable name")));
        }
        let mut values = Vec::new();
        {
            let expander = self.expander(walk);
            for word in words {
                values.extend(expander.expand(word)?);
            }
        }
        let max = self.policy().settings().max_args;
        if values.len() > max {
            return Err(Denial::new(format!(
                "the for loop goes over {} words, more than the {max} allowed",
                values.len()
            )));
        }
        let mut unrolled = Script::default();
        // bash leaves the loop's variables (and those of loops inside it) set after the loop,
        // to values that depend on what ran: later words may not use them unless set again.
        let mut left_set = vec![name.to_string()];
        for value in values {
            let mark = walk.vars.len();
            walk.vars.push((name.to_string(), Some(value)));
            let result = self.list(body, walk, &mut unrolled);
            for (inner, _) in walk.vars.drain(mark + 1..) {
                if !left_set.contains(&inner) {
                    left_set.push(inner);
                }
            }
            walk.vars.truncate(mark);
            result?;
        }
        walk.vars.extend(left_set.into_iter().map(|n| (n, None)));
        Ok(Compound::Group(unrolled))
    }

    /// `[[ expr ]]` as `test` commands.
    fn cond(&self, expr: &CondExpr, walk: &mut Walk) -> Result<Script, Denial> {
        let mut script = Script::default();
        match expr {
            CondExpr::And(a, b) | CondExpr::Or(a, b) => {
                let connector = if matches!(expr, CondExpr::And(..)) {
                    Connector::And
                } else {
                    Connector::Or
                };
                script.steps.push(self.cond_step(a, Connector::Seq, walk)?);
                script.steps.push(self.cond_step(b, connector, walk)?);
            }
            other => script
                .steps
                .push(self.cond_step(other, Connector::Seq, walk)?),
        }
        Ok(script)
    }

    fn cond_step(
        &self,
        expr: &CondExpr,
        connector: Connector,
        walk: &mut Walk,
    ) -> Result<Step, Denial> {
        let (negated, expr) = match expr {
            CondExpr::Not(inner) => (true, inner.as_ref()),
            other => (false, other),
        };
        let command = match expr {
            CondExpr::And(..) | CondExpr::Or(..) | CondExpr::Not(..) => {
                let mut group = Command::program(Vec::new(), walk.cwd.clone());
                group.builtin = Some(Builtin::Compound(Box::new(Compound::Group(
                    self.cond(expr, walk)?,
                ))));
                group
            }
            primary => {
                let argv = self.test_argv(primary, walk)?;
                walk.commands += 1;
                let Checked {
                    command,
                    asks,
                    writes,
                    links,
                } = self.program(argv, "test", Vec::new(), walk)?;
                walk.ask(asks);
                walk.note_writes(writes);
                walk.links.extend(links);
                command
            }
        };
        Ok(Step {
            connector,
            pipeline: Pipeline {
                commands: vec![command],
                negated,
            },
        })
    }

    /// The `test` argv for one primary of a `[[ ]]` expression.
    fn test_argv(&self, primary: &CondExpr, walk: &Walk) -> Result<Vec<String>, Denial> {
        let expander = self.expander(walk);
        let word = |w: &RawWord| expander.expand_literal(w);
        let mut argv = vec!["test".to_string()];
        match primary {
            CondExpr::Word(w) => argv.extend(["-n".to_string(), word(w)?]),
            CondExpr::Unary(op, w) => {
                let op = match op.as_str() {
                    "-v" | "-o" | "-R" => {
                        return Err(Denial::new(format!(
                            "[[ {op} … ]] tests shell state the policy does not track"
                        )))
                    }
                    // bash's unary -a is -e.
                    "-a" => "-e",
                    other => other,
                };
                argv.extend([op.to_string(), word(w)?]);
            }
            CondExpr::Binary(left, op, right) => {
                let op = match op.as_str() {
                    "==" | "=" | "!=" => {
                        if has_unquoted_pattern(right) {
                            return Err(Denial::new(format!(
                                "[[ … {op} {} ]] matches a pattern, which `test` cannot do; \
                                 quote the right side to compare text, or use case/grep",
                                right.display()
                            )));
                        }
                        if op == "!=" {
                            "!="
                        } else {
                            "="
                        }
                    }
                    "<" | ">" | "=~" => {
                        return Err(Denial::new(format!(
                            "[[ … {op} … ]] is not supported (no `test` equivalent); use sort or \
                             grep -E"
                        )))
                    }
                    other => other,
                };
                argv.extend([word(left)?, op.to_string(), word(right)?]);
            }
            CondExpr::And(..) | CondExpr::Or(..) | CondExpr::Not(..) => {
                return Err(Denial::new("cannot read this [[ ]] test"))
            }
        }
        Ok(argv)
    }
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// Whether the right side of `==` would be a glob pattern to bash (unquoted `*?[`).
fn has_unquoted_pattern(word: &RawWord) -> bool {
    word.parts.iter().any(|part| match part {
        Part::Text { text, quoted } => !quoted && text.contains(['*', '?', '[']),
        Part::Var { quoted, .. } | Part::Subst { quoted, .. } => !quoted,
        Part::Proc { .. } => true,
    })
}
