//! Bash's grammar over the flat token stream: a script is pipelines joined by `&&`, `||`, `;`
//! or newlines; a pipeline is simple commands joined by `|` or `|&`; a simple command is words
//! plus redirections, and every redirection belongs to the simple command it is written in.

use super::ir::Connector;
use super::syntax::{Op, RawRedirect, RawTarget, RedirectOp, Token};
use super::words::RawWord;
use super::Denial;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawScript {
    pub steps: Vec<RawStep>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawStep {
    pub connector: Connector,
    pub commands: Vec<RawCommand>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawCommand {
    pub words: Vec<RawWord>,
    pub redirects: Vec<RawRedirect>,
    /// Written before `|&`: stderr joins stdout into the pipe.
    pub stderr_to_pipe: bool,
}

/// Build the script from tokens, denying dangling operators and commands with no name.
pub fn parse(tokens: Vec<Token>) -> Result<RawScript, Denial> {
    let mut script = RawScript::default();
    let mut connector = Connector::Seq;
    let mut pipeline: Vec<RawCommand> = Vec::new();
    let mut command = RawCommand::default();
    let mut pending_op: Option<Op> = None;

    for token in tokens {
        match token {
            Token::Word(word) => {
                command.words.push(word);
                pending_op = None;
            }
            Token::Redirect(redirect) => {
                command.redirects.push(redirect);
                pending_op = None;
            }
            Token::Op(op) => {
                let empty = command.words.is_empty() && command.redirects.is_empty();
                if empty {
                    // `ls;` then a newline yields two separators in a row: harmless.
                    let harmless = op == Op::Seq
                        && pipeline.is_empty()
                        && (pending_op == Some(Op::Seq) || !script.steps.is_empty());
                    if harmless {
                        continue;
                    }
                    return Err(Denial::new(format!(
                        "`{}` has no command before it",
                        op_text(op)
                    )));
                }
                finish_command(&mut command, &mut pipeline)?;
                match op {
                    Op::Pipe | Op::PipeAll => {
                        if let Some(last) = pipeline.last_mut() {
                            last.stderr_to_pipe = op == Op::PipeAll;
                        }
                    }
                    Op::And | Op::Or | Op::Seq => {
                        script.steps.push(RawStep {
                            connector,
                            commands: std::mem::take(&mut pipeline),
                        });
                        connector = match op {
                            Op::And => Connector::And,
                            Op::Or => Connector::Or,
                            _ => Connector::Seq,
                        };
                    }
                }
                pending_op = Some(op);
            }
        }
    }
    match pending_op {
        Some(Op::Seq) | None => {}
        Some(op) => {
            if command.words.is_empty() && command.redirects.is_empty() {
                return Err(Denial::new(format!(
                    "`{}` has no command after it",
                    op_text(op)
                )));
            }
        }
    }
    if !command.words.is_empty() || !command.redirects.is_empty() {
        finish_command(&mut command, &mut pipeline)?;
    }
    if !pipeline.is_empty() {
        script.steps.push(RawStep {
            connector,
            commands: pipeline,
        });
    }
    if script.steps.is_empty() {
        return Err(Denial::new("the command is empty"));
    }
    Ok(script)
}

fn finish_command(command: &mut RawCommand, pipeline: &mut Vec<RawCommand>) -> Result<(), Denial> {
    if command.words.is_empty() {
        return Err(Denial::new(
            "a redirection without a command is not allowed (it would create or truncate a file \
             with no program): use e.g. `touch file` or `printf '' > file`",
        ));
    }
    // A here-document with a trailing target is still one command; sanity-check targets.
    for redirect in &command.redirects {
        if matches!(redirect.op, RedirectOp::HereDoc)
            && !matches!(redirect.target, RawTarget::Body(_))
        {
            return Err(Denial::new("a here-document without a body"));
        }
    }
    pipeline.push(std::mem::take(command));
    Ok(())
}

fn op_text(op: Op) -> &'static str {
    match op {
        Op::And => "&&",
        Op::Or => "||",
        Op::Pipe => "|",
        Op::PipeAll => "|&",
        Op::Seq => ";",
    }
}
