//! Bash's grammar over the flat token stream: a list is and-or lists joined by `;` or
//! newlines; an and-or list is pipelines joined by `&&` or `||`; a pipeline is `!`-optional
//! units joined by `|` or `|&`; a unit is a simple command (assignments, words and
//! redirections, every redirection belonging to the simple command it is written in) or a
//! compound command — `{ list; }`, `( list )`, `if`, `while`/`until`, `for … in`, `[[ … ]]` —
//! followed by redirections that apply to all of it.

use super::cond::CondExpr;
use super::ir::Connector;
use super::syntax::{Assignment, Op, RawRedirect, RawTarget, RedirectOp, Reserved, Token};
use super::words::RawWord;
use super::Denial;

/// Compound commands nested deeper than this are refused (bounds recursion).
const MAX_NESTING: usize = 32;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawScript {
    pub steps: Vec<RawStep>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawStep {
    pub connector: Connector,
    /// `! pipeline`
    pub negated: bool,
    pub commands: Vec<RawUnit>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawUnit {
    Simple(RawCommand),
    Compound {
        compound: RawCompound,
        redirects: Vec<RawRedirect>,
        /// Written before `|&`.
        stderr_to_pipe: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawCompound {
    Group(RawScript),
    Subshell(RawScript),
    If {
        branches: Vec<(RawScript, RawScript)>,
        otherwise: Option<RawScript>,
    },
    Loop {
        until: bool,
        condition: RawScript,
        body: RawScript,
    },
    For {
        name: String,
        words: Vec<RawWord>,
        body: RawScript,
    },
    Cond(CondExpr),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawCommand {
    pub assignments: Vec<Assignment>,
    pub words: Vec<RawWord>,
    pub redirects: Vec<RawRedirect>,
    /// Written before `|&`: stderr joins stdout into the pipe.
    pub stderr_to_pipe: bool,
}

/// Build the script from tokens, denying dangling operators and commands with no name.
pub fn parse(tokens: Vec<Token>) -> Result<RawScript, Denial> {
    let mut parser = Parser { tokens, at: 0 };
    let script = parser.list(&[], 0)?;
    if let Some(token) = parser.tokens.get(parser.at) {
        return Err(Denial::new(format!(
            "unexpected {} in the command",
            describe(token)
        )));
    }
    if script.steps.is_empty() {
        return Err(Denial::new("the command is empty"));
    }
    Ok(script)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    /// The token at `at`, moved out (the parser never looks back), and `at` past it.
    fn take(&mut self) -> Option<Token> {
        let token = std::mem::replace(self.tokens.get_mut(self.at)?, Token::Op(Op::Seq));
        self.at += 1;
        Some(token)
    }

    fn peek_reserved(&self) -> Option<Reserved> {
        match self.peek() {
            Some(Token::Reserved(r)) => Some(*r),
            _ => None,
        }
    }

    fn expect(&mut self, want: Reserved, context: &str) -> Result<(), Denial> {
        if self.peek_reserved() == Some(want) {
            self.at += 1;
            return Ok(());
        }
        Err(Denial::new(format!(
            "{context}: expected `{}`",
            reserved_text(want)
        )))
    }

    /// And-or lists separated by `;`/newlines, up to one of `end` (not consumed) or the end.
    fn list(&mut self, end: &[Reserved], depth: usize) -> Result<RawScript, Denial> {
        if depth > MAX_NESTING {
            return Err(Denial::new("compound commands are nested too deeply"));
        }
        let mut script = RawScript::default();
        let mut connector = Connector::Seq;
        loop {
            // Separators with nothing between them (`ls;` then a newline) are harmless.
            while matches!(self.peek(), Some(Token::Op(Op::Seq))) {
                if script.steps.is_empty() && connector == Connector::Seq && self.at == 0 {
                    return Err(Denial::new("`;` has no command before it"));
                }
                self.at += 1;
            }
            match self.peek() {
                None => break,
                Some(Token::Reserved(r)) if end.contains(r) => break,
                _ => {}
            }
            let (negated, commands) = self.pipeline(depth)?;
            script.steps.push(RawStep {
                connector,
                negated,
                commands,
            });
            connector = match self.peek() {
                Some(Token::Op(Op::And)) => Connector::And,
                Some(Token::Op(Op::Or)) => Connector::Or,
                Some(Token::Op(Op::Seq)) => Connector::Seq,
                None => break,
                Some(Token::Reserved(r)) if end.contains(r) => break,
                Some(other) => {
                    return Err(Denial::new(format!(
                        "unexpected {} after a command",
                        describe(other)
                    )))
                }
            };
            self.at += 1;
            if connector != Connector::Seq {
                let dangling = match self.peek() {
                    None => true,
                    Some(Token::Op(_)) => true,
                    Some(Token::Reserved(r)) => end.contains(r),
                    _ => false,
                };
                if dangling {
                    return Err(Denial::new(format!(
                        "`{}` has no command after it",
                        if connector == Connector::And {
                            "&&"
                        } else {
                            "||"
                        }
                    )));
                }
            }
        }
        Ok(script)
    }

    fn pipeline(&mut self, depth: usize) -> Result<(bool, Vec<RawUnit>), Denial> {
        let negated = self.peek_reserved() == Some(Reserved::Bang);
        if negated {
            self.at += 1;
        }
        let mut units = vec![self.unit(depth)?];
        while let Some(&Token::Op(op @ (Op::Pipe | Op::PipeAll))) = self.peek() {
            self.at += 1;
            if let Some(last) = units.last_mut() {
                match last {
                    RawUnit::Simple(c) => c.stderr_to_pipe = op == Op::PipeAll,
                    RawUnit::Compound { stderr_to_pipe, .. } => *stderr_to_pipe = op == Op::PipeAll,
                }
            }
            if matches!(self.peek(), None | Some(Token::Op(_))) {
                return Err(Denial::new("`|` has no command after it"));
            }
            units.push(self.unit(depth)?);
        }
        Ok((negated, units))
    }

    fn unit(&mut self, depth: usize) -> Result<RawUnit, Denial> {
        let compound = match self.peek() {
            Some(Token::Reserved(Reserved::OpenBrace)) => {
                self.at += 1;
                let body = self.nonempty(&[Reserved::CloseBrace], depth, "{ }")?;
                self.expect(Reserved::CloseBrace, "a { group")?;
                RawCompound::Group(body)
            }
            Some(Token::Reserved(Reserved::OpenParen)) => {
                self.at += 1;
                let body = self.nonempty(&[Reserved::CloseParen], depth, "( )")?;
                self.expect(Reserved::CloseParen, "a ( subshell")?;
                RawCompound::Subshell(body)
            }
            Some(Token::Reserved(Reserved::If)) => {
                self.at += 1;
                self.if_clause(depth)?
            }
            Some(&Token::Reserved(r @ (Reserved::While | Reserved::Until))) => {
                self.at += 1;
                let condition = self.nonempty(&[Reserved::Do], depth, "a loop's condition")?;
                let body = self.do_group(depth)?;
                RawCompound::Loop {
                    until: r == Reserved::Until,
                    condition,
                    body,
                }
            }
            Some(Token::ForHeader { .. } | Token::Cond(_)) => match self.take() {
                Some(Token::ForHeader { name, words }) => {
                    let body = self.do_group(depth)?;
                    RawCompound::For { name, words, body }
                }
                Some(Token::Cond(expr)) => RawCompound::Cond(expr),
                _ => return Err(Denial::new("a command is missing")),
            },
            Some(&Token::Reserved(r)) => {
                return Err(Denial::new(format!(
                    "unexpected `{}` where a command should be",
                    reserved_text(r)
                )))
            }
            Some(&Token::Op(op)) => {
                return Err(Denial::new(format!(
                    "`{}` has no command before it",
                    op_text(op)
                )))
            }
            None => return Err(Denial::new("a command is missing")),
            Some(_) => return self.simple(),
        };
        let mut redirects = Vec::new();
        while let Some(Token::Redirect(_)) = self.peek() {
            if let Some(Token::Redirect(r)) = self.take() {
                redirects.push(r);
            }
        }
        if let Some(Token::Word(w)) = self.peek() {
            return Err(Denial::new(format!(
                "unexpected word {:?} after a compound command",
                w.display()
            )));
        }
        Ok(RawUnit::Compound {
            compound,
            redirects,
            stderr_to_pipe: false,
        })
    }

    fn nonempty(
        &mut self,
        end: &[Reserved],
        depth: usize,
        what: &str,
    ) -> Result<RawScript, Denial> {
        let list = self.list(end, depth + 1)?;
        if list.steps.is_empty() {
            return Err(Denial::new(format!("{what} holds no command")));
        }
        Ok(list)
    }

    fn do_group(&mut self, depth: usize) -> Result<RawScript, Denial> {
        self.expect(Reserved::Do, "a loop")?;
        let body = self.nonempty(&[Reserved::Done], depth, "a loop's body")?;
        self.expect(Reserved::Done, "a loop")?;
        Ok(body)
    }

    /// After `if`: `COND then BODY (elif COND then BODY)* (else BODY)? fi`.
    fn if_clause(&mut self, depth: usize) -> Result<RawCompound, Denial> {
        let mut branches = Vec::new();
        let mut otherwise = None;
        loop {
            let condition = self.nonempty(&[Reserved::Then], depth, "an if's condition")?;
            self.expect(Reserved::Then, "an if")?;
            let body = self.nonempty(
                &[Reserved::Elif, Reserved::Else, Reserved::Fi],
                depth,
                "an if's branch",
            )?;
            branches.push((condition, body));
            match self.peek_reserved() {
                Some(Reserved::Elif) => self.at += 1,
                Some(Reserved::Else) => {
                    self.at += 1;
                    otherwise = Some(self.nonempty(&[Reserved::Fi], depth, "an else branch")?);
                    self.expect(Reserved::Fi, "an if")?;
                    break;
                }
                _ => {
                    self.expect(Reserved::Fi, "an if")?;
                    break;
                }
            }
        }
        Ok(RawCompound::If {
            branches,
            otherwise,
        })
    }

    /// Assignments, words and redirections up to an operator, a reserved word or the end.
    fn simple(&mut self) -> Result<RawUnit, Denial> {
        let mut command = RawCommand::default();
        while let Some(token) = self.peek() {
            match token {
                Token::Word(_) | Token::Redirect(_) => {}
                Token::Assign(_) if command.words.is_empty() => {}
                Token::Assign(a) => {
                    // tree-sitter only makes assignments before the name; be strict anyway.
                    return Err(Denial::new(format!(
                        "unexpected assignment {}= after the command name",
                        a.name
                    )));
                }
                _ => break,
            }
            match self.take() {
                Some(Token::Word(word)) => command.words.push(word),
                Some(Token::Redirect(redirect)) => command.redirects.push(redirect),
                Some(Token::Assign(assignment)) => command.assignments.push(assignment),
                _ => {}
            }
        }
        finish_command(&command)?;
        Ok(RawUnit::Simple(command))
    }
}

fn finish_command(command: &RawCommand) -> Result<(), Denial> {
    if command.words.is_empty() {
        // `name=value` alone sets a shell variable (the checker decides which and where).
        if !command.assignments.is_empty() {
            if command.redirects.is_empty() {
                return Ok(());
            }
            return Err(Denial::new(
                "an assignment with a redirection and no command is not allowed (it would \
                 create or truncate a file with no program)",
            ));
        }
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
    Ok(())
}

fn describe(token: &Token) -> String {
    match token {
        Token::Word(w) => format!("word {:?}", w.display()),
        Token::Redirect(_) => "redirection".into(),
        Token::Op(op) => format!("`{}`", op_text(*op)),
        Token::Assign(a) => format!("assignment {}=", a.name),
        Token::Reserved(r) => format!("`{}`", reserved_text(*r)),
        Token::ForHeader { name, .. } => format!("`for {name}`"),
        Token::Cond(_) => "[[ ]] test".into(),
    }
}

fn reserved_text(r: Reserved) -> &'static str {
    match r {
        Reserved::If => "if",
        Reserved::Then => "then",
        Reserved::Elif => "elif",
        Reserved::Else => "else",
        Reserved::Fi => "fi",
        Reserved::While => "while",
        Reserved::Until => "until",
        Reserved::Do => "do",
        Reserved::Done => "done",
        Reserved::OpenBrace => "{",
        Reserved::CloseBrace => "}",
        Reserved::OpenParen => "(",
        Reserved::CloseParen => ")",
        Reserved::Bang => "!",
    }
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
