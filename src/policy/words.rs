//! Words as bash sees them: quotes, backslash escapes, ANSI-C `$'…'` strings and
//! concatenation resolved into literal characters that remember whether they were quoted
//! (quoted `*`, `{` and `~` are not syntax), plus `$NAME`/`${NAME}`/`$?` references, which the
//! expander resolves (or refuses), and command substitutions `$(…)`, kept as their source for
//! the checker (see `policy::substitution`). Every other run-time expansion is denied here.

use super::node_kind;
use super::Denial;
use tree_sitter::Node;

/// One word before expansion.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawWord {
    pub parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// Literal text; `quoted` text is never globbed or split.
    Text { text: String, quoted: bool },
    /// `$NAME` / `${NAME}` / `$?`.
    Var { name: String, quoted: bool },
    /// `$(command)` or `` `command` ``: the command's source text.
    Subst { source: String, quoted: bool },
    /// `<(command)`: the command's source text. Only a word of its own, in a command's
    /// arguments, is allowed (see `policy::substitution`); the expander refuses it elsewhere.
    Proc { source: String },
}

impl RawWord {
    fn push_text(&mut self, text: &str, quoted: bool) {
        if text.is_empty() {
            // An empty quoted string still makes a word: `""` is one empty argument.
            if quoted && self.parts.is_empty() {
                self.parts.push(Part::Text {
                    text: String::new(),
                    quoted,
                });
            }
            return;
        }
        if let Some(Part::Text {
            text: last,
            quoted: q,
        }) = self.parts.last_mut()
        {
            if *q == quoted {
                last.push_str(text);
                return;
            }
        }
        self.parts.push(Part::Text {
            text: text.to_string(),
            quoted,
        });
    }

    /// [`RawWord::push_text`] of text already owned (kept, not copied, when it starts a part).
    fn push_owned(&mut self, text: String, quoted: bool) {
        match self.parts.last() {
            Some(Part::Text { quoted: q, .. }) if *q == quoted => self.push_text(&text, quoted),
            _ if text.is_empty() => self.push_text(&text, quoted),
            _ => self.parts.push(Part::Text { text, quoted }),
        }
    }

    /// Append unquoted literal text (a reserved symbol standing as a word, such as `[`).
    pub fn append_literal(&mut self, text: &str) {
        self.push_text(text, false);
    }

    /// Concatenate another word onto this one (`a"b"` or a line continuation).
    pub fn append(&mut self, other: RawWord) {
        for part in other.parts {
            match part {
                Part::Text { text, quoted } => self.push_text(&text, quoted),
                var => self.parts.push(var),
            }
        }
    }

    /// The word as typed, roughly, for messages.
    pub fn display(&self) -> String {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Text { text, .. } => text.clone(),
                Part::Var { name, .. } => format!("${name}"),
                Part::Subst { source, .. } => format!("$({source})"),
                Part::Proc { source } => format!("<({source})"),
            })
            .collect()
    }

    /// The source of `<(…)` when the word is nothing else.
    pub fn process_substitution(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Proc { source }] => Some(source),
            _ => None,
        }
    }

    /// Whether a `<(…)` stands anywhere in the word.
    pub fn has_process_substitution(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Proc { .. }))
    }

    /// The sources of its command substitutions, in order.
    pub fn substitutions(&self) -> Vec<&str> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Subst { source, .. } => Some(source.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Node kinds that form (part of) a word.
pub fn is_word_node(kind: &str) -> bool {
    matches!(
        kind,
        "word"
            | "string"
            | "raw_string"
            | "ansi_c_string"
            | "concatenation"
            | "simple_expansion"
            | "expansion"
            | "number"
            | "translated_string"
            | "command_substitution"
            | "process_substitution"
            | "arithmetic_expansion"
            | "brace_expression"
            | "extglob_pattern"
    )
}

/// Resolve a word node into literal parts, denying run-time expansions.
pub fn resolve(node: Node, src: &str) -> Result<RawWord, Denial> {
    let mut word = RawWord::default();
    resolve_into(node, src, &mut word, 0)?;
    Ok(word)
}

fn resolve_into(node: Node, src: &str, word: &mut RawWord, depth: usize) -> Result<(), Denial> {
    if depth > 32 {
        return Err(Denial::new("a word is nested too deeply"));
    }
    let text = &src[node.byte_range()];
    match node_kind::of(node) {
        "word" | "number" => push_unquoted(word, text)?,
        "raw_string" => word.push_text(strip_delimiters(text, "'", "'")?, true),
        "ansi_c_string" => {
            word.push_text(&decode_ansi_c(strip_delimiters(text, "$'", "'")?)?, true)
        }
        "string" => resolve_double_quoted(node, src, word)?,
        "concatenation" => {
            let mut cursor = node.walk();
            let mut pos = node.start_byte();
            for child in node.children(&mut cursor) {
                if child.start_byte() != pos {
                    return Err(Denial::new(format!(
                        "unparsed text inside the word {text:?}"
                    )));
                }
                resolve_into(child, src, word, depth + 1)?;
                pos = child.end_byte();
            }
            if pos != node.end_byte() {
                return Err(Denial::new(format!(
                    "unparsed text inside the word {text:?}"
                )));
            }
        }
        // `{1..3}`: left as text; the expander performs brace expansion as bash does.
        "brace_expression" => word.push_text(text, false),
        "simple_expansion" | "expansion" => word.parts.push(Part::Var {
            name: variable_name(node, src)?,
            quoted: false,
        }),
        "command_substitution" => word.parts.push(Part::Subst {
            source: substitution_source(text)?,
            quoted: false,
        }),
        "process_substitution" => word.parts.push(Part::Proc {
            source: process_source(text)?,
        }),
        kind => return Err(Denial::new(denied_word(kind, text))),
    }
    Ok(())
}

/// `"…"`: literal text with the four double-quote escapes, plus allowed variables.
fn resolve_double_quoted(node: Node, src: &str, word: &mut RawWord) -> Result<(), Denial> {
    let text = &src[node.byte_range()];
    if !(text.len() >= 2 && text.starts_with('"') && text.ends_with('"')) {
        return Err(Denial::new(format!("unsupported string {text:?}")));
    }
    let (inner_start, inner_end) = (node.start_byte() + 1, node.end_byte() - 1);
    let mut pos = inner_start;
    let mut cursor = node.walk();
    word.push_text("", true);
    for child in node.children(&mut cursor) {
        match node_kind::of(child) {
            "\"" => continue,
            // Literal runs are taken from the source between expansions (tree-sitter may
            // split them, e.g. at newlines), so string_content itself is not needed.
            "string_content" => continue,
            "simple_expansion" | "expansion" => {
                word.push_text(
                    &unescape_double_quoted(&src[pos..child.start_byte()])?,
                    true,
                );
                word.parts.push(Part::Var {
                    name: variable_name(child, src)?,
                    quoted: true,
                });
                pos = child.end_byte();
            }
            "command_substitution" => {
                // tree-sitter may start the node at spaces before `$(` (after `$?`): inside
                // quotes they are text.
                let node_text = &src[child.byte_range()];
                let start = child.start_byte() + (node_text.len() - node_text.trim_start().len());
                word.push_text(&unescape_double_quoted(&src[pos..start])?, true);
                word.parts.push(Part::Subst {
                    source: substitution_source(&src[start..child.end_byte()])?,
                    quoted: true,
                });
                pos = child.end_byte();
            }
            kind => return Err(Denial::new(denied_word(kind, &src[child.byte_range()]))),
        }
    }
    word.push_text(&unescape_double_quoted(&src[pos..inner_end])?, true);
    Ok(())
}

/// The command inside `$(…)` or `` `…` ``. Inside backticks a backslash is an escape of its own
/// (`` \` ``, `\$`, `\\`), read differently from `$(…)`: such a backtick form is refused.
fn substitution_source(text: &str) -> Result<String, Denial> {
    let inner = if let Some(inner) = text.strip_prefix("$(").and_then(|t| t.strip_suffix(')')) {
        inner
    } else if let Some(inner) = text.strip_prefix('`').and_then(|t| t.strip_suffix('`')) {
        if inner.contains('\\') {
            return Err(Denial::new(format!(
                "a backslash inside backticks ({text}) is read differently from $(…); write \
                 $(…) instead"
            )));
        }
        inner
    } else {
        return Err(Denial::new(format!(
            "unsupported command substitution {text:?}"
        )));
    };
    if inner.trim().is_empty() {
        return Err(Denial::new(format!(
            "the command substitution {text} is empty"
        )));
    }
    Ok(inner.to_string())
}

/// The command inside `<(…)`. `>(…)` hands the program a pipe to write into, and what its
/// command then does with that text is never checked: refused.
fn process_source(text: &str) -> Result<String, Denial> {
    if text.starts_with(">(") {
        return Err(Denial::new(format!(
            "output process substitution is not allowed ({}): the program would write into a \
             command whose input the policy cannot see; write to a file and run the command on \
             it",
            text.chars().take(60).collect::<String>()
        )));
    }
    let Some(inner) = text.strip_prefix("<(").and_then(|t| t.strip_suffix(')')) else {
        return Err(Denial::new(format!(
            "unsupported process substitution {text:?}"
        )));
    };
    if inner.trim().is_empty() {
        return Err(Denial::new(format!(
            "the process substitution {text} is empty"
        )));
    }
    Ok(inner.to_string())
}

/// The name in `$NAME` or `${NAME}`; any operator (`${x:-y}`, `${#x}`, `$@`) is denied.
fn variable_name(node: Node, src: &str) -> Result<String, Denial> {
    let text = &src[node.byte_range()];
    let name = text
        .strip_prefix("${")
        .and_then(|t| t.strip_suffix('}'))
        .or_else(|| text.strip_prefix('$'))
        .unwrap_or("");
    let valid = name == "?"
        || (!name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit()));
    if !valid {
        return Err(Denial::new(format!(
            "the expansion {text} is not allowed (only plain $NAME, ${{NAME}} and $? are: no \
             operators, positional parameters or special variables)"
        )));
    }
    Ok(name.to_string())
}

/// Unquoted text: a backslash quotes the next character (it becomes quoted text: `\*` is a
/// literal star, never a glob; `\~` never a home); backslash-newline disappears.
fn push_unquoted(word: &mut RawWord, text: &str) -> Result<(), Denial> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(next) => {
                    word.push_text(&std::mem::take(&mut out), false);
                    word.push_text(next.encode_utf8(&mut [0; 4]), true);
                }
                None => out.push('\\'),
            },
            '$' if chars.peek().is_some_and(|n| starts_expansion(*n)) => {
                return Err(Denial::new(format!(
                    "unsupported expansion in {text:?} (only plain $NAME, ${{NAME}} and $? references are)"
                )))
            }
            '`' => {
                return Err(Denial::new(format!(
                    "command substitution is not allowed ({text:?})"
                )))
            }
            c => out.push(c),
        }
    }
    word.push_owned(out, false);
    Ok(())
}

/// The text of unquoted source, escapes resolved (tests).
#[cfg(test)]
fn unescape_unquoted(text: &str) -> Result<String, Denial> {
    let mut word = RawWord::default();
    push_unquoted(&mut word, text)?;
    Ok(word
        .parts
        .iter()
        .map(|p| match p {
            Part::Text { text, .. } => text.as_str(),
            Part::Var { .. } | Part::Subst { .. } | Part::Proc { .. } => "",
        })
        .collect())
}

/// Inside `"…"` only `\$`, `` \` ``, `\"`, `\\` and backslash-newline are escapes.
fn unescape_double_quoted(text: &str) -> Result<String, Denial> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some('$' | '`' | '"' | '\\') => out.push(chars.next().unwrap_or('\\')),
                Some('\n') => {
                    chars.next();
                }
                _ => out.push('\\'),
            },
            '$' if chars.peek().is_some_and(|n| starts_expansion(*n)) => {
                return Err(Denial::new(format!(
                    "unsupported expansion in \"{text}\" (only plain $NAME, ${{NAME}} and $? references are)"
                )))
            }
            '`' => {
                return Err(Denial::new(format!(
                    "command substitution is not allowed (\"{text}\")"
                )))
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// An unquoted here-document body: like double quotes but `"` is not special; any `$` or
/// backtick that bash would expand is denied (quote the delimiter to pass text literally).
pub fn unescape_heredoc(text: &str) -> Result<String, Denial> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some('$' | '`' | '\\') => out.push(chars.next().unwrap_or('\\')),
                Some('\n') => {
                    chars.next();
                }
                _ => out.push('\\'),
            },
            '$' if chars.peek().is_some_and(|n| starts_expansion(*n)) => {
                return Err(Denial::new(
                    "the here-document body contains expansions ($...); quote the delimiter \
                     (<<'EOF') to pass the text literally",
                ))
            }
            '`' => {
                return Err(Denial::new(
                    "the here-document body contains command substitution (`...`); quote the \
                     delimiter (<<'EOF') to pass the text literally",
                ))
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Characters after `$` that make bash expand something.
fn starts_expansion(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            '_' | '{' | '(' | '[' | '@' | '*' | '#' | '?' | '-' | '$' | '!' | '\'' | '"'
        )
}

fn strip_delimiters<'a>(text: &'a str, open: &str, close: &str) -> Result<&'a str, Denial> {
    text.strip_prefix(open)
        .and_then(|t| t.strip_suffix(close))
        .filter(|_| text.len() >= open.len() + close.len())
        .ok_or_else(|| Denial::new(format!("unterminated quoted string {text:?}")))
}

/// Decode the escapes of `$'…'`. A NUL ends the string in bash, so it is denied.
fn decode_ansi_c(body: &str) -> Result<String, Denial> {
    let mut out: Vec<u8> = Vec::with_capacity(body.len());
    let bytes = body.as_bytes();
    let mut i = 0;
    let hex = |s: &[u8], max: usize| -> (u32, usize) {
        let mut value = 0u32;
        let mut n = 0;
        while n < max && n < s.len() && (s[n] as char).is_ascii_hexdigit() {
            value = value * 16 + (s[n] as char).to_digit(16).unwrap_or(0);
            n += 1;
        }
        (value, n)
    };
    while i < bytes.len() {
        if bytes[i] != b'\\' || i + 1 >= bytes.len() {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let esc = bytes[i + 1];
        i += 2;
        match esc {
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'e' | b'E' => out.push(27),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'\\' | b'\'' | b'"' | b'?' => out.push(esc),
            b'0'..=b'7' => {
                let mut value = u32::from(esc - b'0');
                let mut n = 0;
                while n < 2 && i < bytes.len() && (b'0'..=b'7').contains(&bytes[i]) {
                    value = value * 8 + u32::from(bytes[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push((value & 0xff) as u8);
            }
            b'x' => {
                let (value, n) = hex(&bytes[i..], 2);
                if n == 0 {
                    out.extend_from_slice(b"\\x");
                } else {
                    out.push(value as u8);
                }
                i += n;
            }
            b'u' | b'U' => {
                let (value, n) = hex(&bytes[i..], if esc == b'u' { 4 } else { 8 });
                i += n;
                let c = char::from_u32(value)
                    .filter(|_| n > 0)
                    .ok_or_else(|| Denial::new(format!("invalid unicode escape in $'{body}'")))?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            b'c' if i < bytes.len() => {
                out.push(bytes[i] & 0x1f);
                i += 1;
            }
            other => {
                out.push(b'\\');
                out.push(other);
            }
        }
    }
    if out.contains(&0) {
        return Err(Denial::new(format!(
            "$'{body}' contains a NUL byte, which bash would silently cut off"
        )));
    }
    String::from_utf8(out).map_err(|_| Denial::new(format!("$'{body}' decodes to invalid UTF-8")))
}

fn denied_word(kind: &str, text: &str) -> String {
    let short: String = text.chars().take(60).collect();
    match kind {
        "command_substitution" => format!("command substitution is not allowed ({short})"),
        "process_substitution" => format!("process substitution is not allowed ({short})"),
        "arithmetic_expansion" => format!("arithmetic expansion is not allowed ({short})"),
        "brace_expression" => format!("brace expansion is not allowed ({short})"),
        "translated_string" => {
            format!("locale-translated strings $\"…\" are not allowed ({short})")
        }
        "extglob_pattern" => format!("extended glob patterns are not allowed ({short})"),
        _ => format!("unsupported word `{kind}` ({short:?})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_escapes_decode() {
        assert_eq!(
            decode_ansi_c(r"a\x41\t\u00e9\cA\101").unwrap(),
            "aA\té\u{1}A"
        );
        assert!(decode_ansi_c(r"a\0b").unwrap_err().reason.contains("NUL"));
        assert!(decode_ansi_c(r"\xff").is_err(), "invalid UTF-8 is denied");
    }

    #[test]
    fn unquoted_backslashes_quote_the_next_character() {
        assert_eq!(unescape_unquoted(r"c\at").unwrap(), "cat");
        assert_eq!(unescape_unquoted("a\\\nb").unwrap(), "ab");
        assert_eq!(unescape_unquoted(r"a\ b").unwrap(), "a b");
        assert_eq!(unescape_unquoted("foo$").unwrap(), "foo$");
        assert!(unescape_unquoted("a$b").is_err());
    }

    #[test]
    fn double_quote_escapes_are_only_the_four() {
        assert_eq!(
            unescape_double_quoted(r#"a\nb\$c\"d\\e"#).unwrap(),
            r#"a\nb$c"d\e"#
        );
        assert!(unescape_double_quoted("x$(id)").is_err());
    }

    #[test]
    fn heredoc_bodies_with_expansions_are_denied() {
        assert_eq!(unescape_heredoc("cost: \\$5\n").unwrap(), "cost: $5\n");
        assert!(unescape_heredoc("home: $HOME\n").is_err());
        assert!(unescape_heredoc("x `id`\n").is_err());
        assert_eq!(unescape_heredoc("price $ 5\n").unwrap(), "price $ 5\n");
    }
}
