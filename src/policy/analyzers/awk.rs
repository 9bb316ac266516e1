//! `awk` (and gawk, mawk, nawk): the flags come from the TOML rule (strict); the program text is
//! read here, token by token, as awk's grammar reads it. What runs a command is refused:
//! `system()`, every `|` and `|&` (output to a command, `cmd | getline`, coprocesses), gawk's
//! indirect calls `@f()` and `@include`/`@load`/`@namespace`. `print > "file"` and `>>` name a
//! file written, `getline < "file"` a file read: only string literals are accepted there (a
//! computed name cannot be checked), their escapes decoded as awk decodes them (`"\057"` is
//! `/`; escapes the awks read differently are refused), and each is checked as a path. `-f progfile` is refused (its
//! contents are not visible at run time); operands are input files, except `name=value`
//! assignments. Anything the lexer does not understand is refused.

use super::options::{refuse_text_naming_a_file, Operands, Options, Word};
use crate::policy::paths::Access;
use crate::policy::rules::{Analysis, ProgramRule};
use crate::policy::Denial;

pub fn analyze(
    rule: &ProgramRule,
    program: &str,
    args: &[String],
    cwd: &std::path::Path,
) -> Result<Analysis, Denial> {
    // The generic analysis checks the flags (deny list, closed list) and their values.
    let generic = rule.analyze(program, args)?;
    let mut sources: Vec<String> = Vec::new();
    let mut operands: Vec<String> = Vec::new();
    let mut options = Options::new(args, Operands::EndOptions);
    while let Some(word) = options.next_word() {
        match word {
            Word::Operand(operand) => operands.push(operand.to_string()),
            Word::Long {
                name: "source",
                value: Some(value),
            } => sources.push(value.to_string()),
            // Any other `--name=value` carries its value with it.
            Word::Long { value: Some(_), .. } => {}
            Word::Short("e")
            | Word::Long {
                name: "source",
                value: None,
            } => {
                let arg = options.current();
                let text = options.value().ok_or_else(|| {
                    Denial::new(format!("{program} {arg}: missing the program text"))
                })?;
                sources.push(text.to_string());
            }
            _ if rule.flag_consumes_next(options.current()) => options.skip(),
            _ => {}
        }
    }
    if sources.is_empty() {
        if operands.is_empty() {
            return Err(Denial::new(format!("{program}: no program given")));
        }
        sources.push(operands.remove(0));
    }
    // `awk keys/id_rsa` runs the path as a program (a division).
    refuse_text_naming_a_file(program, "program", &sources, cwd, |s| !s.is_empty())?;
    let mut analysis = Analysis {
        ask: generic.ask,
        path_flags: generic.path_flags,
        ..Analysis::default()
    };
    // Flag values that are paths (none by default) keep their checks.
    analysis.paths.extend(
        generic
            .paths
            .into_iter()
            .filter(|(p, _)| !sources.contains(p) && !operands.contains(p)),
    );
    for source in &sources {
        let files = check_program(source)
            .map_err(|why| Denial::new(format!("{program} program: {why}")))?;
        analysis.paths.extend(files);
    }
    for operand in operands {
        // `var=value` assigns when awk reaches it; everything else is an input file.
        if is_assignment(&operand) || operand == "-" {
            continue;
        }
        analysis.paths.push((operand, Access::Read));
    }
    Ok(analysis)
}

/// `name=value` with an awk identifier before the `=`.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A string literal's value as awk computes it, for a file name. Only the escapes on which
/// the awks the jail may run (mawk, gawk, busybox) agree are decoded — `\"` `\\` `\a \b \f
/// \n \r \t \v`, octal `\ddd` and hex `\xhh` of an ASCII character —, so `".git\057config"`
/// is `.git/config`. The others are refused: they name different files in different awks
/// (`\/` is `/` in gawk and busybox, `\/` in mawk; `\e`, `\q`, `\x` without digits, octal
/// past 255), or no file at all (NUL, a byte that is not ASCII).
fn decode_string(raw: &str) -> Result<String, String> {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&next) = chars.get(i) else {
            return Err("a string ends in a backslash".into());
        };
        i += 1;
        let simple = match next {
            '"' => Some('"'),
            '\\' => Some('\\'),
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\u{b}'),
            _ => None,
        };
        if let Some(decoded) = simple {
            out.push(decoded);
            continue;
        }
        let (digits, radix, max) = match next {
            '0'..='7' => {
                i -= 1;
                (octal_digits(&chars[i..]), 8, 3)
            }
            'x' => (hex_digits(&chars[i..]), 16, 2),
            _ => {
                return Err(format!(
                    "the escape \\{next} means different characters in different awks"
                ))
            }
        };
        if digits == 0 || digits > max {
            return Err(format!(
                "the escape \\{next}… is read differently by different awks"
            ));
        }
        let text: String = chars[i..i + digits].iter().collect();
        i += digits;
        let value = u32::from_str_radix(&text, radix).map_err(|e| e.to_string())?;
        match char::from_u32(value) {
            Some(decoded) if (1..0x80).contains(&value) => out.push(decoded),
            _ => {
                return Err(format!(
                    "the escape for character {value} is not a character a file name can hold                      the same way in every awk"
                ))
            }
        }
    }
    Ok(out)
}

/// Leading octal digits (awk reads at most three; more digits are ordinary characters).
fn octal_digits(chars: &[char]) -> usize {
    chars
        .iter()
        .take(3)
        .take_while(|c| matches!(c, '0'..='7'))
        .count()
}

/// Leading hex digits, all of them: awks read two, old gawk every one, so more than two is
/// refused by the caller.
fn hex_digits(chars: &[char]) -> usize {
    chars.iter().take_while(|c| c.is_ascii_hexdigit()).count()
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Name(String),
    /// A string literal's text between the quotes, escapes as written.
    Str(String),
    Regex,
    Number,
    /// An operator or punctuation, as written (`>>`, `||`, `(`…).
    Op(String),
    /// A newline or `;`: ends a statement.
    End,
}

/// Split awk program text into tokens; `Err` on anything awk would not read either.
fn lex(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens: Vec<Token> = Vec::new();
    // For each open parenthesis: whether it holds the condition of if/while/for, after whose
    // `)` awk reads a `/` as a regular expression.
    let mut parens: Vec<bool> = Vec::new();
    // The last `)` closed such a condition.
    let mut closed_condition = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // Only the token right after a condition's `)` is affected (blanks do not count).
        if !matches!(c, ' ' | '\t' | '/')
            && !matches!(tokens.last(), Some(Token::Op(o)) if o == ")")
        {
            closed_condition = false;
        }
        match c {
            ' ' | '\t' | '\r' => i += 1,
            '\\' if chars.get(i + 1) == Some(&'\n') => i += 2,
            '\\' if chars.get(i + 1) == Some(&'\r') && chars.get(i + 2) == Some(&'\n') => i += 3,
            '\n' | ';' => {
                tokens.push(Token::End);
                i += 1;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' => {
                // Kept as written: escapes are decoded where the string names a file.
                let mut raw = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None | Some('\n') => return Err("a string is not closed".into()),
                        Some('"') => break,
                        Some('\\') => {
                            let next = chars.get(i + 1).ok_or("a string is not closed")?;
                            raw.push('\\');
                            raw.push(*next);
                            i += 2;
                        }
                        Some(ch) => {
                            raw.push(*ch);
                            i += 1;
                        }
                    }
                }
                i += 1;
                tokens.push(Token::Str(raw));
            }
            '/' if ambiguous_slash(tokens.last(), closed_condition) => {
                return Err(
                    "a `/` here is a division to some awks and starts a regular \
                            expression in others; add parentheses or spaces that make it one"
                        .into(),
                )
            }
            '/' if regex_may_start(tokens.last()) => {
                i += 1;
                let mut in_class = false;
                loop {
                    match chars.get(i) {
                        None | Some('\n') => {
                            return Err("a regular expression is not closed".into())
                        }
                        Some('\\') => i += 2,
                        Some('[') => {
                            in_class = true;
                            i += 1;
                        }
                        Some(']') => {
                            in_class = false;
                            i += 1;
                        }
                        Some('/') if !in_class => break,
                        // busybox and the one true awk end the regex here, gawk and mawk do
                        // not: what one reads as code the other reads as pattern.
                        Some('/') => {
                            return Err("a `/` inside a bracket of a regular expression ends \
                                        it in some awks and not in others; write `\\/`"
                                .into())
                        }
                        Some(_) => i += 1,
                    }
                }
                i += 1;
                tokens.push(Token::Regex);
            }
            c if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
                tokens.push(Token::Number);
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                tokens.push(Token::Name(chars[start..i].iter().collect()));
            }
            '@' => return Err("gawk's @ (indirect calls, @include, @load) is not allowed".into()),
            '`' => return Err("a backquote is not awk".into()),
            _ => {
                const OPS: &[&str] = &[
                    "|&", "||", "&&", ">>", ">=", "<=", "==", "!=", "!~", "++", "--", "+=", "-=",
                    "*=", "/=", "%=", "^=", "**",
                ];
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                if let Some(op) = OPS.iter().find(|op| two == **op) {
                    tokens.push(Token::Op(op.to_string()));
                    i += 2;
                } else if "{}()[],<>|!~+-*/%^?:=$&".contains(c) {
                    if c == '(' {
                        let condition = matches!(
                            tokens.last(),
                            Some(Token::Name(n)) if matches!(n.as_str(), "if" | "while" | "for")
                        );
                        parens.push(condition);
                    }
                    tokens.push(Token::Op(c.to_string()));
                    i += 1;
                    if c == ')' {
                        closed_condition = parens.pop().unwrap_or(false);
                        continue;
                    }
                } else {
                    return Err(format!("unexpected character {c:?}"));
                }
            }
        }
    }
    Ok(tokens)
}

/// Positions where awks disagree on `/`: after a postfix `++`/`--`, after `getline`, `length`
/// or `$`, and after the `)` of an if/while/for condition (a regex there, a division to a lexer
/// that only looks at the previous token).
fn ambiguous_slash(previous: Option<&Token>, closed_condition: bool) -> bool {
    match previous {
        Some(Token::Op(op)) if op == ")" => closed_condition,
        Some(Token::Op(op)) => matches!(op.as_str(), "++" | "--" | "$"),
        Some(Token::Name(name)) => matches!(name.as_str(), "getline" | "length"),
        _ => false,
    }
}

/// A `/` starts a regular expression unless it follows something that ends an operand (then it
/// divides), as awk's grammar decides.
fn regex_may_start(previous: Option<&Token>) -> bool {
    match previous {
        None | Some(Token::End) => true,
        Some(Token::Name(_)) | Some(Token::Str(_)) | Some(Token::Number) | Some(Token::Regex) => {
            false
        }
        Some(Token::Op(op)) => !matches!(op.as_str(), ")" | "]" | "$" | "++" | "--"),
    }
}

/// The files an awk program opens, or why it is refused.
pub fn check_program(text: &str) -> Result<Vec<(String, Access)>, String> {
    let tokens = lex(text)?;
    let mut files = Vec::new();
    // Inside `print`/`printf` arguments at this parenthesis depth, `>` redirects.
    let mut printing: Option<usize> = None;
    // After `getline` (and before the expression ends), `<` redirects its input.
    let mut reading = false;
    let mut depth = 0usize;
    let literal = |k: usize, what: &str| -> Result<String, String> {
        let file = match tokens.get(k) {
            Some(Token::Str(raw)) => {
                decode_string(raw).map_err(|why| format!("{what} \"{raw}\": {why}"))?
            }
            _ => {
                return Err(format!(
                    "{what} takes a file named by a string literal here (a computed name cannot \
                     be checked)"
                ))
            }
        };
        // A string followed by more of an expression is a computed name too.
        match tokens.get(k + 1) {
            None | Some(Token::End) => Ok(file),
            Some(Token::Op(op)) if matches!(op.as_str(), "}" | ")" | "&&" | "||") => Ok(file),
            _ => Err(format!(
                "{what} takes a file named by a single string literal here"
            )),
        }
    };
    for (k, token) in tokens.iter().enumerate() {
        match token {
            Token::Name(name) if name == "system" => {
                return Err("system() runs a shell command".into())
            }
            // Setting ARGV/ARGC makes awk read files the policy never saw; SYMTAB and FUNCTAB
            // reach variables and functions by computed names.
            Token::Name(name)
                if matches!(name.as_str(), "ARGV" | "ARGC" | "SYMTAB" | "FUNCTAB") =>
            {
                return Err(format!(
                    "{name} is not allowed (it changes which files awk reads)"
                ))
            }
            Token::Name(name) if name == "print" || name == "printf" => printing = Some(depth),
            Token::Name(name) if name == "getline" => reading = true,
            Token::Op(op) if op == "|" || op == "|&" => {
                return Err(format!(
                    "`{op}` sends output to or reads from a command (a pipe or coprocess)"
                ))
            }
            Token::Op(op) if op == "<" && reading => {
                files.push((literal(k + 1, "getline <")?, Access::Read));
                reading = false;
            }
            Token::Op(op) if (op == ">" || op == ">>") && printing == Some(depth) => {
                let target = literal(k + 1, &format!("print {op}"))?;
                if !matches!(target.as_str(), "/dev/stdout" | "/dev/stderr" | "-") {
                    files.push((target, Access::Write));
                }
                printing = None;
            }
            Token::Op(op) if op == "(" || op == "[" => depth += 1,
            Token::Op(op) if op == ")" || op == "]" => {
                depth = depth.saturating_sub(1);
                reading = false;
            }
            Token::Op(op) if matches!(op.as_str(), "{" | "}" | "&&" | "||" | ",") => {
                printing = printing.filter(|_| op == ",");
                reading = false;
            }
            Token::End => {
                printing = None;
                reading = false;
            }
            _ => {}
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_programs_pass_and_name_their_files() {
        for text in [
            "{print $1}",
            "{ s += $2 } END { print s }",
            "NR > 1 && $3 > 10",
            "$1 ~ /^a.b/ { n++ } END { print n / 2 }",
            "{ print ($1 > 2) }",
            "BEGIN { FS = \",\" } { printf \"%s\\n\", $2 }",
            "/a|b/ { print }",
            "{ x = a || b; getline; getline line }",
            "# a comment with system( in it\n{ print }",
            "{ print \"x\" > \"/dev/stderr\" }",
            "{ a = 4 / 2 / 1 }",
            "{ print ($1 + $2) / 2 }",
            "{ if (x) print $1 / 2 }",
            "$1 ~ /a\\/b[x]/",
            "{ print $NF }",
        ] {
            assert_eq!(check_program(text), Ok(vec![]), "{text}");
        }
        assert_eq!(
            check_program("{ print $1 > \"out/a.txt\"; print >> \"log\" }").unwrap(),
            [
                ("out/a.txt".to_string(), Access::Write),
                ("log".to_string(), Access::Write)
            ]
        );
        assert_eq!(
            check_program("BEGIN { while ((getline l < \"in.txt\") > 0) n++ }").unwrap(),
            [("in.txt".to_string(), Access::Read)]
        );
        assert_eq!(
            check_program("BEGIN { getline < \"a\"; getline $0 < \"b\" }").unwrap(),
            [
                ("a".to_string(), Access::Read),
                ("b".to_string(), Access::Read)
            ]
        );
    }

    #[test]
    fn commands_and_unchecked_files_are_refused() {
        for (text, why) in [
            ("BEGIN { system(\"id\") }", "system()"),
            ("BEGIN{system (\"id\")}", "system()"),
            ("{ print | \"sh\" }", "command"),
            ("BEGIN { \"id\" | getline x }", "command"),
            ("BEGIN { print \"x\" |& \"sh\" }", "coprocess"),
            ("{ print > $1 }", "string literal"),
            ("{ print > \"a\" $2 }", "single string literal"),
            ("BEGIN { getline l < ARGV[1] }", "string literal"),
            ("BEGIN { getline line < f }", "string literal"),
            ("BEGIN { getline < \"a\" \"b\" }", "single string literal"),
            ("BEGIN { f = \"system\"; @f(\"id\") }", "@"),
            ("@include \"x.awk\"", "@"),
            ("{ print \"unclosed }", "not closed"),
            ("$1 ~ /unclosed", "not closed"),
            (
                "BEGIN { ARGV[1] = \"/etc/shadow\"; ARGC = 2 } { print }",
                "ARGV",
            ),
            ("/[/; system(\"id\") #]/", "bracket"),
            (
                "{ i++ / \"a/; system(\"id\"); x=\"/ }",
                "division to some awks",
            ),
            ("{ if ($1) /x/ }", "division to some awks"),
        ] {
            let err = check_program(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn file_names_are_decoded_as_awk_decodes_them() {
        for (text, file) in [
            ("{ print > \".git\\057config\" }", ".git/config"),
            ("{ print > \".git\\x2fhooks/x\" }", ".git/hooks/x"),
            ("{ print > \"a\\\"b\" }", "a\"b"),
            ("{ print > \"a\\\\b\" }", "a\\b"),
            ("{ print > \"\\0570\" }", "/0"),
            ("{ print > \"a\\tb\" }", "a\tb"),
            ("BEGIN { getline < \"\\056env\" }", ".env"),
        ] {
            let files = check_program(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(files[0].0, file, "{text}");
        }
        for (text, why) in [
            ("{ print > \"a\\/b\" }", "different"),
            ("{ print > \"a\\qb\" }", "different"),
            ("{ print > \"a\\eb\" }", "different"),
            ("{ print > \"a\\x2fab\" }", "differently"),
            ("{ print > \"a\\xg\" }", "differently"),
            ("{ print > \"a\\0b\" }", "character 0"),
            ("{ print > \"a\\377\" }", "character 255"),
            ("{ print > \"a\\777\" }", "character 511"),
        ] {
            let err = check_program(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
        // An escape outside a file name refuses nothing.
        assert_eq!(check_program("{ printf \"\\q%s\\/\", $1 }"), Ok(vec![]));
    }

    #[test]
    fn operands_are_files_or_assignments() {
        assert!(is_assignment("n=3") && is_assignment("_x1=a=b"));
        assert!(!is_assignment("a-b=3") && !is_assignment("3x=1") && !is_assignment("=x"));
    }
}
