//! From a tree-sitter-bash tree to a flat, source-ordered token stream.
//!
//! tree-sitter's shapes do not follow bash's grammar: a trailing redirect wraps a whole list,
//! arguments after a redirect are folded into the redirect, and a here-document swallows the
//! rest of its line (`cat <<EOF | sh` puts `| sh` inside the heredoc node). Rather than trusting
//! shapes, every node is flattened, in source order, into words, redirections and operators;
//! `grammar.rs` then applies bash's own rules to that stream. Compound commands (`{ }`, `( )`,
//! `if`, `while`/`until`, `for … in`) become reserved-word tokens around their lists; `[ … ]`
//! becomes the `[` program with its words; `[[ … ]]` is read by `cond.rs`. Any node kind not
//! handled here is denied: what the policy does not positively understand never runs.

use super::cond::{self, CondExpr};
use super::node_kind;
use super::words::{self, RawWord};
use super::Denial;
use tree_sitter::Node;

/// Deepest nesting the flattener follows (real commands are shallow; this bounds recursion).
const MAX_DEPTH: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    Word(RawWord),
    Redirect(RawRedirect),
    Op(Op),
    /// `NAME=value` written before a command's name.
    Assign(Assignment),
    /// A reserved word or grouping symbol of a compound command.
    Reserved(Reserved),
    /// `for NAME in WORDS` (what follows is `do … done`).
    ForHeader {
        name: String,
        words: Vec<RawWord>,
    },
    /// `[[ expression ]]`.
    Cond(CondExpr),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub name: String,
    pub value: RawWord,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    If,
    Then,
    Elif,
    Else,
    Fi,
    While,
    Until,
    Do,
    Done,
    /// `{`
    OpenBrace,
    /// `}`
    CloseBrace,
    /// `(` of a subshell
    OpenParen,
    /// `)` of a subshell
    CloseParen,
    /// `!` before a pipeline
    Bang,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    And,
    Or,
    Pipe,
    /// `|&`: pipe stdout and stderr.
    PipeAll,
    /// `;` or a newline.
    Seq,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawRedirect {
    /// The descriptor written before the operator (`2>`), if any.
    pub fd: Option<u8>,
    pub op: RedirectOp,
    pub target: RawTarget,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedirectOp {
    /// `<`
    In,
    /// `>` and `>|`
    Out,
    /// `>>`
    Append,
    /// `&>` (and `>&` with a file name)
    OutAll,
    /// `&>>`
    AppendAll,
    /// `>&N`
    DupOut,
    /// `<&N`
    DupIn,
    /// `>&-` / `<&-`
    Close,
    /// `<<` / `<<-`
    HereDoc,
    /// `<<<`
    HereString,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawTarget {
    Word(RawWord),
    /// The here-document body, already unescaped; `expands` is false for a quoted delimiter.
    Body(String),
    None,
}

/// Flatten a parsed program into tokens, or deny with the first thing not understood.
pub fn tokens(root: Node, src: &str) -> Result<Vec<Token>, Denial> {
    if root.has_error() {
        return Err(Denial::new(describe_error(root, src)));
    }
    deny_split_characters(root, src)?;
    let mut out = Vec::new();
    Flattener { src, out: &mut out }.container(root, 0, true)?;
    Ok(out)
}

struct Flattener<'a, 'o> {
    src: &'a str,
    out: &'o mut Vec<Token>,
}

impl Flattener<'_, '_> {
    fn text(&self, node: Node) -> &str {
        &self.src[node.byte_range()]
    }

    /// Children of a node that sequences statements: `program`, `list`, `pipeline`,
    /// `redirected_statement` and the trailing part of a `heredoc_redirect`.
    /// `newline_separates` is true only at program level, where statements may be separated
    /// by nothing but a newline.
    fn container(
        &mut self,
        node: Node,
        depth: usize,
        newline_separates: bool,
    ) -> Result<(), Denial> {
        let mut cursor = node.walk();
        let mut prev_end: Option<usize> = None;
        let mut prev_was_statement = false;
        for child in node.children(&mut cursor) {
            if node_kind::of(child) == "comment" {
                continue;
            }
            if is_statement(node_kind::of(child)) && prev_was_statement {
                // Two statements with no operator between them: only a newline may do that.
                let gap = &self.src[prev_end.unwrap_or(child.start_byte())..child.start_byte()];
                if !(newline_separates && gap.contains('\n')) {
                    return Err(Denial::new(format!(
                        "cannot tell how {:?} is joined to the command before it",
                        self.text(child)
                    )));
                }
                self.out.push(Token::Op(Op::Seq));
            }
            self.node(child, depth + 1)?;
            prev_was_statement = is_statement(node_kind::of(child));
            prev_end = Some(child.end_byte());
        }
        Ok(())
    }

    fn node(&mut self, node: Node, depth: usize) -> Result<(), Denial> {
        if depth > MAX_DEPTH {
            return Err(Denial::new("the command is nested too deeply"));
        }
        match node_kind::of(node) {
            "program" => self.container(node, depth, true),
            "list" | "pipeline" | "redirected_statement" => self.container(node, depth, false),
            // The lists inside compound commands may be separated by newlines alone.
            "subshell" | "compound_statement" | "if_statement" | "elif_clause" | "else_clause"
            | "while_statement" | "do_group" => self.container(node, depth, true),
            "negated_command" => self.container(node, depth, false),
            "for_statement" => self.for_statement(node, depth),
            "test_command" => self.test_command(node),
            "if" => self.reserved(Reserved::If),
            "then" => self.reserved(Reserved::Then),
            "elif" => self.reserved(Reserved::Elif),
            "else" => self.reserved(Reserved::Else),
            "fi" => self.reserved(Reserved::Fi),
            "while" => self.reserved(Reserved::While),
            "until" => self.reserved(Reserved::Until),
            "do" => self.reserved(Reserved::Do),
            "done" => self.reserved(Reserved::Done),
            "{" => self.reserved(Reserved::OpenBrace),
            "}" => self.reserved(Reserved::CloseBrace),
            "(" => self.reserved(Reserved::OpenParen),
            ")" => self.reserved(Reserved::CloseParen),
            "!" => self.reserved(Reserved::Bang),
            "command" => self.command(node, depth),
            // `name=value` on its own: a shell variable for the rest of the line (the checker
            // decides which names and where).
            "variable_assignment" => self.assignment(node),
            "variable_assignments" => {
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    match node_kind::of(child) {
                        "variable_assignment" => self.assignment(child)?,
                        kind => {
                            return Err(Denial::new(unsupported_construct(kind, self.text(child))))
                        }
                    }
                }
                Ok(())
            }
            "file_redirect" => self.file_redirect(node),
            "herestring_redirect" => self.herestring(node),
            "heredoc_redirect" => self.heredoc(node, depth),
            "&&" => self.op(Op::And),
            "||" => self.op(Op::Or),
            "|" => self.op(Op::Pipe),
            "|&" => self.op(Op::PipeAll),
            ";" => self.op(Op::Seq),
            kind => Err(Denial::new(unsupported_construct(kind, self.text(node)))),
        }
    }

    fn op(&mut self, op: Op) -> Result<(), Denial> {
        self.out.push(Token::Op(op));
        Ok(())
    }

    fn reserved(&mut self, word: Reserved) -> Result<(), Denial> {
        self.out.push(Token::Reserved(word));
        Ok(())
    }

    /// `for NAME in WORDS; do … done`. `for NAME; do` (the script's arguments) and `select`
    /// are refused: there are no arguments, and select reads a terminal.
    fn for_statement(&mut self, node: Node, depth: usize) -> Result<(), Denial> {
        let mut cursor = node.walk();
        let mut name: Option<String> = None;
        let mut words_list: Option<Vec<RawWord>> = None;
        let mut last_word_end: Option<usize> = None;
        for child in node.children(&mut cursor) {
            match node_kind::of(child) {
                "for" => {}
                "select" => {
                    return Err(Denial::new(
                        "select loops read a choice from a terminal; they are not supported",
                    ))
                }
                "variable_name" => name = Some(self.text(child).to_string()),
                "in" => words_list = Some(Vec::new()),
                ";" | "comment" => last_word_end = None,
                "do_group" => {
                    let name = name
                        .take()
                        .ok_or_else(|| Denial::new("a for loop without a variable"))?;
                    let words = words_list.take().ok_or_else(|| {
                        Denial::new(format!(
                            "`for {name}` without `in WORDS` loops over the script's arguments, \
                             and a command string has none; write the words: for {name} in a b"
                        ))
                    })?;
                    self.out.push(Token::ForHeader { name, words });
                    self.node(child, depth + 1)?;
                }
                kind if words::is_word_node(kind) => {
                    let list = words_list
                        .as_mut()
                        .ok_or_else(|| Denial::new("unexpected word in a for loop"))?;
                    let word = words::resolve(child, self.src)?;
                    let joins = match last_word_end {
                        Some(end) => words_join(&self.src[end..child.start_byte()])?,
                        None => false,
                    };
                    match (joins, list.last_mut()) {
                        (true, Some(prev)) => prev.append(word),
                        _ => list.push(word),
                    }
                    last_word_end = Some(child.end_byte());
                }
                kind => return Err(Denial::new(unsupported_construct(kind, self.text(child)))),
            }
        }
        Ok(())
    }

    /// `[ … ]` is the `[` program: its words, as bash splits them (tree-sitter's expression
    /// tree is flattened back into source-ordered words; an operator bash would read as shell
    /// syntax inside the brackets — `<`, `>`, `&&`, `(` — is refused). `[[ … ]]` is a
    /// conditional expression with its own grammar (`cond.rs`).
    fn test_command(&mut self, node: Node) -> Result<(), Denial> {
        let text = self.text(node);
        if text.starts_with("[[") {
            let expr = cond::parse(node, self.src)?;
            self.out.push(Token::Cond(expr));
            return Ok(());
        }
        let mut pieces: Vec<(usize, usize, RawWord)> = Vec::new();
        collect_test_words(node, self.src, &mut pieces, 0)?;
        let mut last_end: Option<usize> = None;
        for (start, end, word) in pieces {
            let joins = match last_end {
                Some(prev) => words_join(&self.src[prev..start])?,
                None => false,
            };
            match (joins, self.out.last_mut()) {
                (true, Some(Token::Word(prev))) => prev.append(word),
                _ => self.out.push(Token::Word(word)),
            }
            last_end = Some(end);
        }
        Ok(())
    }

    /// A simple command: its name, arguments and redirections in source order.
    fn command(&mut self, node: Node, depth: usize) -> Result<(), Denial> {
        let mut cursor = node.walk();
        let mut last_word_end: Option<usize> = None;
        for child in node.children(&mut cursor) {
            match node_kind::of(child) {
                "command_name" => {
                    let inner = child
                        .named_child(0)
                        .ok_or_else(|| Denial::new("a command without a name"))?;
                    self.word(inner, &mut last_word_end)?;
                }
                // Which names and values are harmless is the checker's call (`env.rs`).
                "variable_assignment" => self.assignment(child)?,
                "file_redirect" => {
                    self.file_redirect(child)?;
                    last_word_end = None;
                }
                "herestring_redirect" => {
                    self.herestring(child)?;
                    last_word_end = None;
                }
                "heredoc_redirect" => {
                    self.heredoc(child, depth)?;
                    last_word_end = None;
                }
                "comment" => {}
                _ if words::is_word_node(node_kind::of(child)) => {
                    self.word(child, &mut last_word_end)?
                }
                kind => return Err(Denial::new(unsupported_construct(kind, self.text(child)))),
            }
        }
        Ok(())
    }

    /// `NAME=value` before a command. `NAME+=value` and arrays are refused.
    fn assignment(&mut self, node: Node) -> Result<(), Denial> {
        let mut cursor = node.walk();
        let mut name: Option<String> = None;
        let mut value = RawWord::default();
        let mut seen_equals = false;
        for child in node.children(&mut cursor) {
            match node_kind::of(child) {
                "variable_name" if name.is_none() => name = Some(self.text(child).to_string()),
                "=" => seen_equals = true,
                kind if seen_equals && words::is_word_node(kind) => {
                    value.append(words::resolve(child, self.src)?)
                }
                _ => {
                    return Err(Denial::new(format!(
                        "the assignment {:?} is not a plain NAME=value",
                        self.text(node)
                    )))
                }
            }
        }
        let name = name.ok_or_else(|| Denial::new("an assignment without a name"))?;
        if !seen_equals {
            return Err(Denial::new(format!(
                "the assignment {:?} is not a plain NAME=value",
                self.text(node)
            )));
        }
        self.out.push(Token::Assign(Assignment { name, value }));
        Ok(())
    }

    /// Emit a word, joining it to the previous word when bash would: no blank between them,
    /// or only line continuations (`a\<newline>b` is the single word `ab`).
    fn word(&mut self, node: Node, last_word_end: &mut Option<usize>) -> Result<(), Denial> {
        let word = words::resolve(node, self.src)?;
        let joins = match *last_word_end {
            Some(end) => words_join(&self.src[end..node.start_byte()])?,
            None => false,
        };
        match (joins, self.out.last_mut()) {
            (true, Some(Token::Word(prev))) => prev.append(word),
            _ => self.out.push(Token::Word(word)),
        }
        *last_word_end = Some(node.end_byte());
        Ok(())
    }

    fn file_redirect(&mut self, node: Node) -> Result<(), Denial> {
        let mut fd = None;
        let mut op: Option<(&str, usize)> = None;
        let mut target: Option<RawWord> = None;
        let mut target_is_number = false;
        let mut trailing_end: Option<usize> = None;
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            let kind = node_kind::of(child);
            match kind {
                "file_descriptor" => fd = Some(parse_fd(self.text(child))?),
                ">" | ">>" | "<" | "&>" | "&>>" | ">&" | "<&" | ">|" | ">&-" | "<&-" => {
                    op = Some((kind, child.end_byte()))
                }
                _ if words::is_word_node(kind) => {
                    if target.is_none() {
                        target_is_number = kind == "number";
                        target = Some(words::resolve(child, self.src)?);
                        trailing_end = Some(child.end_byte());
                    } else {
                        // tree-sitter folds the command's later arguments into the redirect;
                        // in bash they are ordinary arguments of the command.
                        let mut end = trailing_end;
                        self.word_after_redirect(child, &mut end)?;
                        trailing_end = end;
                    }
                }
                "comment" => {}
                other => return Err(Denial::new(unsupported_construct(other, self.text(child)))),
            }
        }
        let (op_text, _) = op.ok_or_else(|| Denial::new("a redirection without an operator"))?;
        let op = match (op_text, &target) {
            ("<", _) => RedirectOp::In,
            (">" | ">|", _) => RedirectOp::Out,
            (">>", _) => RedirectOp::Append,
            ("&>", _) => RedirectOp::OutAll,
            ("&>>", _) => RedirectOp::AppendAll,
            (">&-" | "<&-", _) => RedirectOp::Close,
            (">&", Some(_)) if target_is_number => RedirectOp::DupOut,
            ("<&", Some(_)) if target_is_number => RedirectOp::DupIn,
            (">&", Some(_)) if fd.is_none() => RedirectOp::OutAll,
            (op, _) => {
                return Err(Denial::new(format!(
                    "redirection {:?} is not supported",
                    format!("{op}{}", self.text(node).split(op).nth(1).unwrap_or(""))
                )))
            }
        };
        // `<&-` closes stdin and `>&-` stdout unless a descriptor is written.
        let fd = match (op, fd) {
            (RedirectOp::Close, None) => Some(if op_text.starts_with('<') { 0 } else { 1 }),
            (_, fd) => fd,
        };
        let target = match (op, target) {
            (RedirectOp::Close, None) => RawTarget::None,
            (RedirectOp::Close, Some(_)) => {
                return Err(Denial::new("a closing redirection (>&-) takes no target"))
            }
            (_, Some(word)) => RawTarget::Word(word),
            (_, None) => return Err(Denial::new("a redirection without a target")),
        };
        // The folded-in arguments were pushed before this redirect; keep source order by
        // inserting the redirect ahead of them. Bash applies redirects after argv anyway, so
        // only their order relative to other redirects matters, which is preserved.
        self.out
            .push(Token::Redirect(RawRedirect { fd, op, target }));
        Ok(())
    }

    fn word_after_redirect(&mut self, node: Node, end: &mut Option<usize>) -> Result<(), Denial> {
        let word = words::resolve(node, self.src)?;
        if let Some(prev_end) = *end {
            if words_join(&self.src[prev_end..node.start_byte()])? {
                return Err(Denial::new(format!(
                    "cannot tell where the redirection target ends in {:?}",
                    self.text(node)
                )));
            }
        }
        self.out.push(Token::Word(word));
        *end = Some(node.end_byte());
        Ok(())
    }

    fn herestring(&mut self, node: Node) -> Result<(), Denial> {
        let mut word = None;
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            match node_kind::of(child) {
                "<<<" => {}
                kind if words::is_word_node(kind) && word.is_none() => {
                    word = Some(words::resolve(child, self.src)?)
                }
                kind => return Err(Denial::new(unsupported_construct(kind, self.text(child)))),
            }
        }
        let word = word.ok_or_else(|| Denial::new("a here-string without text"))?;
        self.out.push(Token::Redirect(RawRedirect {
            fd: None,
            op: RedirectOp::HereString,
            target: RawTarget::Word(word),
        }));
        Ok(())
    }

    /// `<<DELIM` / `<<-DELIM`: the redirect itself, then whatever tree-sitter nested after the
    /// delimiter on the same line (operators, the rest of a pipeline, more redirects).
    fn heredoc(&mut self, node: Node, depth: usize) -> Result<(), Denial> {
        let mut strip_tabs = false;
        let mut start: Option<Node> = None;
        let mut body: Option<Node> = None;
        let mut end: Option<Node> = None;
        let mut rest = Vec::new();
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            match node_kind::of(child) {
                "<<" => {}
                "<<-" => strip_tabs = true,
                "heredoc_start" => start = Some(child),
                "heredoc_body" => body = Some(child),
                "heredoc_end" => end = Some(child),
                _ => rest.push(child),
            }
        }
        let start = start.ok_or_else(|| Denial::new("a here-document without a delimiter"))?;
        let end = end.ok_or_else(|| Denial::new("a here-document that is never terminated"))?;
        let (delimiter, quoted) = heredoc_delimiter(self.text(start))?;
        if self.text(end) != delimiter {
            return Err(Denial::new(format!(
                "here-document ends with {:?} but was opened with {delimiter:?}",
                self.text(end)
            )));
        }
        let text = heredoc_text(self.src, body.unwrap_or(end), end, strip_tabs, &delimiter)?;
        let text = if quoted {
            text
        } else {
            words::unescape_heredoc(&text)?
        };
        self.out.push(Token::Redirect(RawRedirect {
            fd: None,
            op: RedirectOp::HereDoc,
            target: RawTarget::Body(text),
        }));
        let mut prev_was_statement = false;
        for child in rest {
            if is_statement(node_kind::of(child)) && prev_was_statement {
                return Err(Denial::new(format!(
                    "cannot tell how {:?} is joined to the here-document",
                    self.text(child)
                )));
            }
            prev_was_statement = is_statement(node_kind::of(child));
            self.node(child, depth + 1)?;
        }
        Ok(())
    }
}

/// The words of a `[ … ]` test in source order, with their byte ranges.
fn collect_test_words(
    node: Node,
    src: &str,
    out: &mut Vec<(usize, usize, RawWord)>,
    depth: usize,
) -> Result<(), Denial> {
    if depth > MAX_DEPTH {
        return Err(Denial::new("the test is nested too deeply"));
    }
    let text = &src[node.byte_range()];
    let literal = |out: &mut Vec<(usize, usize, RawWord)>| {
        let mut word = RawWord::default();
        word.append_literal(text);
        out.push((node.start_byte(), node.end_byte(), word));
    };
    match node_kind::of(node) {
        "test_command" | "unary_expression" | "binary_expression" => {
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                collect_test_words(child, src, out, depth + 1)?;
            }
        }
        "[" | "]" | "test_operator" | "!" | "=" | "==" | "!=" => literal(out),
        kind if words::is_word_node(kind) => out.push((
            node.start_byte(),
            node.end_byte(),
            words::resolve(node, src)?,
        )),
        _ => {
            return Err(Denial::new(format!(
                "{text:?} inside [ ] is shell syntax to bash, not a word of the test; quote it \
                 or use the `test` program with separate commands"
            )))
        }
    }
    Ok(())
}

fn is_statement(kind: &str) -> bool {
    matches!(
        kind,
        "command"
            | "pipeline"
            | "list"
            | "redirected_statement"
            | "subshell"
            | "compound_statement"
            | "if_statement"
            | "while_statement"
            | "for_statement"
            | "c_style_for_statement"
            | "case_statement"
            | "function_definition"
            | "variable_assignment"
            | "variable_assignments"
            | "declaration_command"
            | "unset_command"
            | "test_command"
            | "negated_command"
    )
}

/// Whether the source between two adjacent word nodes makes them one bash word.
fn words_join(gap: &str) -> Result<bool, Denial> {
    if gap.is_empty() {
        return Ok(true);
    }
    if gap.bytes().all(|c| matches!(c, b' ' | b'\t' | b'\n')) {
        return Ok(false);
    }
    let rest = gap.replace("\\\n", "");
    if rest.is_empty() {
        return Ok(true);
    }
    if rest.chars().all(|c| c == ' ' || c == '\t' || c == '\n') {
        return Ok(false);
    }
    Err(Denial::new(format!("unparsed text {rest:?} between words")))
}

fn parse_fd(text: &str) -> Result<u8, Denial> {
    match text.parse::<u8>() {
        Ok(fd) if fd <= 9 => Ok(fd),
        _ => Err(Denial::new(format!(
            "redirection of descriptor {text:?} is not supported (0-9 only)"
        ))),
    }
}

/// The delimiter word and whether any part of it was quoted (which turns off expansion).
fn heredoc_delimiter(raw: &str) -> Result<(String, bool), Denial> {
    let quoted = raw.contains(['\'', '"', '\\']);
    let delimiter: String = raw
        .chars()
        .filter(|c| !matches!(c, '\'' | '"' | '\\'))
        .collect();
    if delimiter.is_empty() || delimiter.contains(['$', '`']) {
        return Err(Denial::new(format!(
            "unsupported here-document delimiter {raw:?}"
        )));
    }
    Ok((delimiter, quoted))
}

/// The body text between the line after the operator and the terminating line, with leading
/// tabs removed for `<<-`. Computed from the source because the node's range varies.
fn heredoc_text(
    src: &str,
    body_or_end: Node,
    end: Node,
    strip_tabs: bool,
    delimiter: &str,
) -> Result<String, Denial> {
    let line_start = |pos: usize| src[..pos].rfind('\n').map_or(0, |i| i + 1);
    let body_start = line_start(body_or_end.start_byte());
    let end_line = line_start(end.start_byte());
    let indent = &src[end_line..end.start_byte()];
    let indent_ok = indent.is_empty() || (strip_tabs && indent.chars().all(|c| c == '\t'));
    if !indent_ok || body_start > end_line {
        return Err(Denial::new(format!(
            "the here-document terminator {delimiter:?} is not on a line of its own"
        )));
    }
    let body = &src[body_start..end_line];
    if !strip_tabs {
        return Ok(body.to_string());
    }
    Ok(body
        .split_inclusive('\n')
        .map(|line| line.trim_start_matches('\t'))
        .collect())
}

/// A reason for a node kind the policy does not run.
fn unsupported_construct(kind: &str, text: &str) -> String {
    let short: String = text.chars().take(60).collect();
    match kind {
        "&" => "background jobs (&) are not allowed: warden waits for every command".into(),
        "c_style_for_statement" => format!(
            "arithmetic for loops (( )) are not supported ({short:?}): use for x in {{1..N}}"
        ),
        "case_statement" => {
            format!("case statements are not supported ({short:?}): use if with [ ] tests")
        }
        "function_definition" => format!("defining shell functions is not allowed ({short:?})"),
        "variable_assignment" | "variable_assignments" | "declaration_command" => format!(
            "setting shell variables is not allowed ({short:?}): commands cannot change the \
             environment"
        ),
        "unset_command" => format!("unset is not allowed ({short:?})"),
        "command_substitution" => format!("command substitution is not allowed ({short:?})"),
        "process_substitution" => format!("process substitution is not allowed ({short:?})"),
        ";;" | ";&" | ";;&" => format!("unexpected case terminator {short:?}"),
        _ => format!("unsupported shell construct `{kind}` ({short:?})"),
    }
}

/// Every node must start and end on a character boundary of the original text (the parser saw
/// an ASCII shadow of it); otherwise slicing would be wrong, so the command is refused.
fn deny_split_characters(root: Node, src: &str) -> Result<(), Denial> {
    // Every offset within ASCII text is a character boundary (the parser saw text of the
    // same length).
    if src.is_ascii() {
        return Ok(());
    }
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if !src.is_char_boundary(node.start_byte()) || !src.is_char_boundary(node.end_byte()) {
            return Err(Denial::new(
                "the command could not be parsed (a token splits a character)",
            ));
        }
        if cursor.goto_first_child() || cursor.goto_next_sibling() {
            continue;
        }
        loop {
            if !cursor.goto_parent() {
                return Ok(());
            }
            if cursor.goto_next_sibling() {
                break;
            }
        }
    }
}

/// The first ERROR or MISSING node, described for a person.
fn describe_error(root: Node, src: &str) -> String {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_missing() {
            return format!(
                "the command is incomplete: missing {:?} at byte {}",
                node_kind::of(node),
                node.start_byte()
            );
        }
        if node.is_error() {
            let text: String = src[node.byte_range()].chars().take(60).collect();
            return format!(
                "the command could not be parsed (syntax error near {text:?} at byte {})",
                node.start_byte()
            );
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    "the command could not be parsed".into()
}
