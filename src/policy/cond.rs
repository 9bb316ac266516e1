//! `[[ expression ]]`, read with bash's own grammar.
//!
//! tree-sitter-bash splits the expression into the right words and operators but nests them
//! with the wrong precedence (`! $x = y` as `(! $x) = y`), so only its leaves are used: they are
//! flattened back into source order and parsed here as bash does — `||` below `&&` below `!`,
//! parentheses, unary tests (`-f word`), binary tests (`word == word`) and a lone word (`-n`).
//! The checker turns the result into `test` commands joined by `&&`/`||` (see `check.rs`).

use super::node_kind;
use super::words::{self, RawWord};
use super::Denial;
use tree_sitter::Node;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CondExpr {
    And(Box<CondExpr>, Box<CondExpr>),
    Or(Box<CondExpr>, Box<CondExpr>),
    Not(Box<CondExpr>),
    /// `-f word`
    Unary(String, RawWord),
    /// `word op word`
    Binary(RawWord, String, RawWord),
    /// `word`: true when not empty.
    Word(RawWord),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Word(RawWord),
    Op(String),
}

/// Operators that take one operand.
const UNARY: &[&str] = &[
    "-a", "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t", "-u", "-w", "-x",
    "-G", "-L", "-N", "-O", "-S", "-z", "-n", "-o", "-v", "-R",
];
/// Operators between two operands.
const BINARY: &[&str] = &[
    "==", "=", "!=", "<", ">", "=~", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-ef", "-nt", "-ot",
];

/// Parse a `test_command` node that starts with `[[`.
pub fn parse(node: Node, src: &str) -> Result<CondExpr, Denial> {
    let mut pieces = Vec::new();
    let mut cursor = node.walk();
    let children: Vec<Node> = node.children(&mut cursor).collect();
    let inner = match children.as_slice() {
        [open, inner @ .., close]
            if node_kind::of(*open) == "[[" && node_kind::of(*close) == "]]" =>
        {
            inner
        }
        _ => return Err(Denial::new("a [[ test that is not closed by ]]")),
    };
    for child in inner {
        flatten(*child, src, &mut pieces, 0)?;
    }
    let mut parser = Parser { pieces, at: 0 };
    let expr = parser.or()?;
    if parser.at != parser.pieces.len() {
        return Err(Denial::new(format!(
            "cannot read the [[ ]] test {:?} the way bash does",
            &src[node.byte_range()]
        )));
    }
    Ok(expr)
}

/// Leaves in source order; adjacent leaves with nothing between them form one word.
fn flatten(node: Node, src: &str, out: &mut Vec<Piece>, depth: usize) -> Result<(), Denial> {
    if depth > 64 {
        return Err(Denial::new("the [[ ]] test is nested too deeply"));
    }
    let text = &src[node.byte_range()];
    match node_kind::of(node) {
        "binary_expression" | "unary_expression" | "parenthesized_expression" => {
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                flatten(child, src, out, depth + 1)?;
            }
        }
        "test_operator" | "&&" | "||" | "!" | "(" | ")" | "==" | "=" | "!=" | "<" | ">" | "=~" => {
            out.push(Piece::Op(text.to_string()))
        }
        "regex" => {
            return Err(Denial::new(
                "=~ regular expressions in [[ ]] are not supported (bash's regex dialect is not \
                 the policy's); use grep -E",
            ))
        }
        kind if words::is_word_node(kind) => out.push(Piece::Word(words::resolve(node, src)?)),
        kind => {
            return Err(Denial::new(format!(
                "unsupported `{kind}` in a [[ ]] test ({text:?})"
            )))
        }
    }
    Ok(())
}

struct Parser {
    pieces: Vec<Piece>,
    at: usize,
}

impl Parser {
    fn peek_op(&self) -> Option<&str> {
        match self.pieces.get(self.at) {
            Some(Piece::Op(op)) => Some(op.as_str()),
            _ => None,
        }
    }

    fn or(&mut self) -> Result<CondExpr, Denial> {
        let mut left = self.and()?;
        while self.peek_op() == Some("||") {
            self.at += 1;
            left = CondExpr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<CondExpr, Denial> {
        let mut left = self.not()?;
        while self.peek_op() == Some("&&") {
            self.at += 1;
            left = CondExpr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<CondExpr, Denial> {
        if self.peek_op() == Some("!") {
            self.at += 1;
            return Ok(CondExpr::Not(Box::new(self.not()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<CondExpr, Denial> {
        let bad = || Denial::new("cannot read this [[ ]] test the way bash does");
        match self.pieces.get(self.at).cloned() {
            Some(Piece::Op(op)) if op == "(" => {
                self.at += 1;
                let inner = self.or()?;
                if self.peek_op() != Some(")") {
                    return Err(bad());
                }
                self.at += 1;
                Ok(inner)
            }
            // A unary operator is only one when an operand follows (bash: `[[ -f ]]` tests the
            // word "-f").
            Some(Piece::Op(op)) if UNARY.contains(&op.as_str()) => {
                match self.pieces.get(self.at + 1).cloned() {
                    Some(Piece::Word(word)) => {
                        self.at += 2;
                        Ok(CondExpr::Unary(op, word))
                    }
                    _ => Err(bad()),
                }
            }
            Some(Piece::Word(left)) => {
                self.at += 1;
                match self.peek_op().map(str::to_string) {
                    Some(op) if BINARY.contains(&op.as_str()) => {
                        self.at += 1;
                        match self.pieces.get(self.at).cloned() {
                            Some(Piece::Word(right)) => {
                                self.at += 1;
                                Ok(CondExpr::Binary(left, op, right))
                            }
                            _ => Err(bad()),
                        }
                    }
                    _ => Ok(CondExpr::Word(left)),
                }
            }
            _ => Err(bad()),
        }
    }
}
