//! Expansion of a [`RawWord`] into the literal argument(s) that will run, in bash's order:
//! brace expansion (`{a,b}`, `{1..3}`), tilde expansion (a leading `~`, and after `=`/`:` in a
//! word shaped like an assignment), variables (`$HOME`, `$PWD`, loop variables, a few sandbox
//! variables such as `$PATH`, the jail's `[network.secrets]` placeholders, and `$?` where the
//! caller allows it), then unquoted globs
//! against the filesystem with every match checked against the readable roots. The result is
//! final: the executor passes these strings to the program unchanged (only `$?` is written at
//! run time, at the offsets recorded here).

use super::assignments;
use super::paths::{Access, PathPolicy};
use super::words::{Part, RawWord};
use super::Denial;
use std::cell::Cell;
use std::path::Path;

/// Words one word may brace-expand into.
const MAX_BRACE_WORDS: usize = 10_000;

pub struct Expander<'a> {
    pub paths: &'a PathPolicy,
    pub cwd: &'a Path,
    pub max_glob_matches: usize,
    /// Variables bound by enclosing `for` loops, innermost last.
    /// `None`: set by a loop that has ended (its value depends on what ran).
    pub vars: &'a [(String, Option<String>)],
    pub unknown_variables: UnknownVariables,
    /// Variables the jail's environment sets to values known now (`Checker::set_jail_variables`).
    pub jail_vars: &'a [(String, String)],
    /// Set when a word used `~` or `$HOME`: a refusal then says what they meant.
    pub home_used: Cell<bool>,
}

/// How a variable the policy has no value for expands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnknownVariables {
    /// To nothing, as bash expands an unset variable: warden runs the expanded words itself
    /// and the sandbox's environment does not have it (what was checked is what runs).
    #[default]
    Empty,
    /// Refused: a real shell runs the command (the Claude Code hook), where it may be set.
    Refused,
}

/// Variables the sandbox's environment sets (their values are not the policy's to guess).
const SANDBOX_SETS: &[&str] = &[
    "TMPDIR",
    "PAGER",
    "GIT_PAGER",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_TERMINAL_PROMPT",
    "GIT_NO_LAZY_FETCH",
    "GIT_ALLOW_PROTOCOL",
];

/// Variables bash sets or changes by itself: not unset in any shell.
const SHELL_SETS: &[&str] = &[
    "SHELL",
    "SHLVL",
    "OLDPWD",
    "IFS",
    "PPID",
    "UID",
    "EUID",
    "GROUPS",
    "HOSTNAME",
    "HOSTTYPE",
    "MACHTYPE",
    "OSTYPE",
    "RANDOM",
    "SRANDOM",
    "SECONDS",
    "LINENO",
    "EPOCHSECONDS",
    "EPOCHREALTIME",
    "OPTIND",
    "OPTARG",
    "OPTERR",
    "PIPESTATUS",
    "FUNCNAME",
    "DIRSTACK",
    "HISTCMD",
    "HISTFILE",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "SHELLOPTS",
    "REPLY",
    "MAILCHECK",
];

/// One argument, and where `$?` stands in it: byte offsets of a `0` the executor replaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    pub text: String,
    pub status_at: Vec<usize>,
    /// Where command substitutions stand: (byte offset in `text`, which substitution of the
    /// word). The executor inserts their output there; `text` holds nothing for them.
    pub substitutions_at: Vec<(usize, usize)>,
}

/// A character of a word before variables are substituted, or a variable.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Lit {
        c: char,
        quoted: bool,
    },
    Var {
        name: String,
        quoted: bool,
    },
    /// The `n`th command substitution of the word.
    Subst {
        n: usize,
        quoted: bool,
    },
}

/// A character after substitution: quoted text is never globbed; `status` marks `$?`;
/// `subst` marks where the `n`th command substitution goes (its `c` is not part of the text).
#[derive(Clone, Copy, Debug)]
struct QChar {
    c: char,
    quoted: bool,
    status: bool,
    subst: Option<usize>,
}

impl Expander<'_> {
    /// One word into one or more arguments (braces and globs may make several). `$?` is
    /// refused: use [`Expander::expand_args`] where the command allows it.
    pub fn expand(&self, word: &RawWord) -> Result<Vec<String>, Denial> {
        let args = self.expand_args(word)?;
        if args.iter().any(|a| !a.status_at.is_empty()) {
            return Err(Denial::new(format!(
                "$? is not allowed here ({}): only as an argument of echo, printf, test, [ and \
                 expr",
                word.display()
            )));
        }
        Ok(args.into_iter().map(|a| a.text).collect())
    }

    /// A refusal of a command whose words used `~` or `$HOME`, with what they meant there
    /// (the workspace, for commands warden runs in its jail).
    pub fn explain_home(&self, denial: Denial) -> Denial {
        match self.paths.home_note() {
            Some(note) if self.home_used.get() => {
                Denial::new(format!("{} ({note})", denial.reason))
            }
            _ => denial,
        }
    }

    /// Like [`Expander::expand`], keeping where `$?` stands; command substitutions are refused.
    pub fn expand_args(&self, word: &RawWord) -> Result<Vec<Arg>, Denial> {
        refuse_substitutions(word)?;
        self.expand_args_with_substitutions(word)
    }

    /// Like [`Expander::expand_args`], keeping where command substitutions stand: only for a
    /// command's arguments, whose positions the checker judges (see `policy::substitution`).
    /// Such a word stays one argument: it may not be split, globbed or brace-expanded.
    pub fn expand_args_with_substitutions(&self, word: &RawWord) -> Result<Vec<Arg>, Denial> {
        if let Some(text) = plain_text(word) {
            return Ok(vec![Arg {
                text,
                status_at: Vec::new(),
                substitutions_at: Vec::new(),
            }]);
        }
        self.expand_by_character(word)
    }

    /// [`Expander::expand_args_with_substitutions`] for any word: one item per character.
    fn expand_by_character(&self, word: &RawWord) -> Result<Vec<Arg>, Denial> {
        refuse_process_substitution(word)?;
        let mut out = Vec::new();
        for items in brace_expand(items_of(word), word)? {
            let chars = self.substitute(&self.tilde(items, word)?, word)?;
            if chars.is_empty() && vanishes_when_empty(word) {
                continue;
            }
            let globbed = chars
                .iter()
                .any(|q| !q.quoted && matches!(q.c, '*' | '?' | '['));
            if chars.iter().any(|q| q.subst.is_some()) && globbed {
                return Err(Denial::new(format!(
                    "a command substitution in a glob pattern is not allowed ({})",
                    word.display()
                )));
            }
            if !globbed {
                out.push(arg_of(&chars));
                continue;
            }
            if chars.iter().any(|q| q.status) {
                return Err(Denial::new(format!(
                    "$? in a glob pattern is not allowed ({})",
                    word.display()
                )));
            }
            out.extend(self.glob(&chars, word)?.into_iter().map(|text| Arg {
                text,
                status_at: Vec::new(),
                substitutions_at: Vec::new(),
            }));
        }
        let substituted = out
            .iter()
            .filter(|a| !a.substitutions_at.is_empty())
            .count();
        if substituted > 0 && out.len() != 1 {
            return Err(Denial::new(format!(
                "a word with command substitution must stay one argument; {} expands to {} \
                 (brace expansion)",
                word.display(),
                out.len()
            )));
        }
        Ok(out)
    }

    /// A word as `[[ ]]` reads it: no brace expansion, no globbing, no splitting.
    pub fn expand_literal(&self, word: &RawWord) -> Result<String, Denial> {
        refuse_substitutions(word)?;
        refuse_process_substitution(word)?;
        let items = self.tilde(items_of(word), word)?;
        let chars = self.substitute(&items, word)?;
        if chars.iter().any(|q| q.status) {
            return Err(Denial::new(
                "$? is not allowed in a [[ ]] test; use [ or test",
            ));
        }
        Ok(chars.iter().map(|q| q.c).collect())
    }

    /// A leading unquoted `~` (up to the first `/`), and in a word shaped like an assignment
    /// (`NAME=…`, which bash also tilde-expands as an argument) every `~` after `=` or `:`.
    fn tilde(&self, items: Vec<Item>, word: &RawWord) -> Result<Vec<Item>, Denial> {
        let mut starts = vec![0];
        if let Some(eq) = assignment_value_start(&items) {
            starts.push(eq);
            for (i, item) in items.iter().enumerate().skip(eq) {
                if matches!(
                    item,
                    Item::Lit {
                        c: ':',
                        quoted: false
                    }
                ) {
                    starts.push(i + 1);
                }
            }
        }
        let mut out = Vec::with_capacity(items.len());
        let mut i = 0;
        while i < items.len() {
            if !(starts.contains(&i)
                && matches!(
                    items[i],
                    Item::Lit {
                        c: '~',
                        quoted: false
                    }
                ))
            {
                out.push(items[i].clone());
                i += 1;
                continue;
            }
            // The tilde-prefix: unquoted characters up to `/` (or `:` in an assignment).
            let mut end = i + 1;
            let mut user = String::new();
            let mut plain = true;
            while let Some(item) = items.get(end) {
                match item {
                    Item::Lit {
                        c: '/',
                        quoted: false,
                    } => break,
                    Item::Lit {
                        c: ':',
                        quoted: false,
                    } if i > 0 => break,
                    Item::Lit { c, quoted: false } => user.push(*c),
                    _ => plain = false,
                }
                end += 1;
            }
            if !plain {
                // bash does not expand a tilde-prefix with quoted parts: it stays literal.
                out.push(items[i].clone());
                i += 1;
                continue;
            }
            if !user.is_empty() {
                return Err(Denial::new(format!(
                    "~{user} in {}: only ~ (your home directory) is expanded; ~user, ~+ and ~- \
                     are not allowed",
                    word.display()
                )));
            }
            self.home_used.set(true);
            out.extend(path_chars(self.paths.home()).map(|c| Item::Lit { c, quoted: true }));
            i = end;
        }
        Ok(out)
    }

    fn substitute(&self, items: &[Item], word: &RawWord) -> Result<Vec<QChar>, Denial> {
        let mut out: Vec<QChar> = Vec::new();
        for item in items {
            match item {
                Item::Lit { c, quoted } => out.push(QChar {
                    c: *c,
                    quoted: *quoted,
                    status: false,
                    subst: None,
                }),
                Item::Subst { n, quoted } => {
                    if !quoted {
                        // bash would split the output into words and glob each one.
                        return Err(Denial::new(format!(
                            "an unquoted command substitution is split into words and globbed \
                             by bash; quote it: \"{}\"",
                            word.display()
                        )));
                    }
                    out.push(QChar {
                        c: '\0',
                        quoted: true,
                        status: false,
                        subst: Some(*n),
                    });
                }
                Item::Var { name, quoted } if name == "?" => {
                    let _ = quoted;
                    out.push(QChar {
                        c: '0',
                        quoted: true,
                        status: true,
                        subst: None,
                    });
                }
                Item::Var { name, quoted } => {
                    let value = self.variable(name, word)?;
                    if !quoted && value.contains([' ', '\t', '\n', '*', '?', '[']) {
                        return Err(Denial::new(format!(
                            "unquoted ${name} contains spaces or glob characters ({value:?}); \
                             quote it: \"${name}\""
                        )));
                    }
                    out.extend(value.chars().map(|c| QChar {
                        c,
                        quoted: true,
                        status: false,
                        subst: None,
                    }));
                }
            }
        }
        Ok(out)
    }

    fn variable(&self, name: &str, word: &RawWord) -> Result<String, Denial> {
        if let Some((_, value)) = self.vars.iter().rev().find(|(n, _)| n == name) {
            return value.clone().ok_or_else(|| {
                Denial::new(format!(
                    "${name} in {} is the variable of a loop that has ended: its value there \
                     depends on what ran (set it again first)",
                    word.display()
                ))
            });
        }
        match name {
            "HOME" => {
                self.home_used.set(true);
                Ok(path_chars(self.paths.home()).collect())
            }
            "PWD" => Ok(path_chars(self.cwd).collect()),
            other => match assignments::readable(other).or_else(|| {
                let set = self.jail_vars.iter().find(|(n, _)| n == other);
                set.map(|(_, value)| value.clone())
            }) {
                Some(value) => Ok(value),
                None if self.unknown_variables == UnknownVariables::Empty
                    && unset_everywhere(other) =>
                {
                    Ok(String::new())
                }
                None => Err(Denial::new(format!(
                    "the variable ${other} in {} is not allowed: only $HOME, $PWD, $PATH, $USER, \
                     $LOGNAME, $LANG, $TERM, $?, for-loop variables and variables the sandbox \
                     does not set (they expand to nothing) are expanded{}",
                    word.display(),
                    why_not_unset(other, self.unknown_variables)
                ))),
            },
        }
    }

    fn glob(&self, chars: &[QChar], word: &RawWord) -> Result<Vec<String>, Denial> {
        let shown = word.display();
        // The literal directory before the first glob character must itself be readable:
        // listing directories outside the roots would leak their contents.
        let first_glob = chars
            .iter()
            .position(|q| !q.quoted && matches!(q.c, '*' | '?' | '['))
            .unwrap_or(0);
        let literal: String = chars[..first_glob].iter().map(|q| q.c).collect();
        let base = match literal.rfind('/') {
            Some(0) => "/".to_string(),
            Some(i) => literal[..i].to_string(),
            None => ".".to_string(),
        };
        self.paths
            .check(self.cwd, &base, Access::Read)
            .map_err(|d| {
                Denial::new(format!(
                    "the glob {shown} lists a directory outside the roots: {}",
                    d.reason
                ))
            })?;

        let absolute = chars.first().is_some_and(|q| q.c == '/');
        let mut pattern = String::new();
        if !absolute {
            pattern.push_str(&glob::Pattern::escape(&self.cwd.to_string_lossy()));
            pattern.push('/');
        }
        let mut prev_star = false;
        let mut class_opened = false;
        for q in chars {
            let opens_class = !q.quoted && q.c == '[';
            if class_opened && !q.quoted && q.c == '^' {
                // bash negates a class with `^` as with `!`; the glob crate only knows `!`.
                pattern.push('!');
                prev_star = false;
            } else if q.quoted && matches!(q.c, '*' | '?' | '[' | ']') {
                pattern.push_str(&glob::Pattern::escape(&q.c.to_string()));
                prev_star = false;
            } else if !q.quoted && q.c == '*' {
                // bash without globstar treats `**` like `*`; the glob crate would recurse.
                if !prev_star {
                    pattern.push('*');
                }
                prev_star = true;
            } else {
                pattern.push(q.c);
                prev_star = false;
            }
            class_opened = opens_class;
        }
        // The glob crate's `require_literal_leading_dot` drops every hidden entry, even for
        // `.h*`; bash matches a leading dot when the pattern's component starts with one, so
        // that rule is applied here, component by component.
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        let written: String = chars.iter().map(|q| q.c).collect();
        let literal_dot: Vec<bool> = written.split('/').map(|c| c.starts_with('.')).collect();
        let literal_word = || vec![chars.iter().map(|q| q.c).collect::<String>()];
        let Ok(paths) = glob::glob_with(&pattern, options) else {
            // bash leaves an invalid pattern (e.g. an unclosed `[`) as a literal word.
            return Ok(literal_word());
        };
        let prefix = format!("{}/", self.cwd.to_string_lossy());
        let mut matches = Vec::new();
        for entry in paths {
            let path = entry.map_err(|e| Denial::new(format!("the glob {shown} failed: {e}")))?;
            let text = path
                .to_str()
                .ok_or_else(|| Denial::new(format!("the glob {shown} matched a non-UTF-8 name")))?;
            // bash 5.2 (globskipdots) never lets a pattern match `.` or `..`.
            if text.ends_with("/.") || text.ends_with("/..") || text == "." || text == ".." {
                continue;
            }
            let arg = if absolute {
                text.to_string()
            } else {
                text.strip_prefix(&prefix).unwrap_or(text).to_string()
            };
            let hidden_by_wildcard = arg
                .split('/')
                .zip(&literal_dot)
                .any(|(component, dot)| component.starts_with('.') && !dot);
            if hidden_by_wildcard {
                continue;
            }
            self.paths
                .check(self.cwd, &arg, Access::Read)
                .map_err(|d| {
                    Denial::new(format!("the glob {shown} matches {arg}: {}", d.reason))
                })?;
            matches.push(arg);
            if matches.len() > self.max_glob_matches {
                return Err(Denial::new(format!(
                    "the glob {shown} matches more than {} files",
                    self.max_glob_matches
                )));
            }
        }
        if matches.is_empty() {
            return Ok(literal_word());
        }
        Ok(matches)
    }
}

/// A plain name that neither the sandbox nor bash itself sets: bash would expand it to "".
fn unset_everywhere(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("BASH")
        && !SANDBOX_SETS.contains(&name)
        && !SHELL_SETS.contains(&name)
}

/// Whether a line may set `name` as a shell variable: a plain name nobody else sets, nor one
/// the policy gives a value of its own (`$PATH`, `$HOME`…).
pub fn settable(name: &str) -> bool {
    unset_everywhere(name)
        && assignments::readable(name).is_none()
        && !matches!(name, "HOME" | "PWD" | "LANG" | "TERM")
}

fn why_not_unset(name: &str, unknown: UnknownVariables) -> String {
    if unknown == UnknownVariables::Refused {
        " (a real shell runs this command, where it may be set)".to_string()
    } else if SANDBOX_SETS.contains(&name) {
        format!(" (the sandbox sets ${name})")
    } else if name.starts_with("BASH") || SHELL_SETS.contains(&name) {
        format!(" (bash sets ${name} itself)")
    } else {
        " (a positional or special parameter)".to_string()
    }
}

/// Whether `word` is only unquoted variables and unquoted text: empty after expansion, bash
/// drops it instead of passing an empty argument.
fn vanishes_when_empty(word: &RawWord) -> bool {
    word.parts.iter().any(|p| matches!(p, Part::Var { .. }))
        && word.parts.iter().all(|p| match p {
            Part::Text { quoted, .. } | Part::Var { quoted, .. } | Part::Subst { quoted, .. } => {
                !quoted
            }
            Part::Proc { .. } => false,
        })
}

fn arg_of(chars: &[QChar]) -> Arg {
    let mut text = String::with_capacity(chars.len());
    let mut status_at = Vec::new();
    let mut substitutions_at = Vec::new();
    for q in chars {
        if let Some(n) = q.subst {
            substitutions_at.push((text.len(), n));
            continue;
        }
        if q.status {
            status_at.push(text.len());
        }
        text.push(q.c);
    }
    Arg {
        text,
        status_at,
        substitutions_at,
    }
}

/// The argument of a word that expands to itself: literal text only, with no unquoted `{`
/// (braces), `~` (home) or `*`, `?`, `[` (globs). Most words are such; the general path (one
/// item per character) gives them the same single argument.
fn plain_text(word: &RawWord) -> Option<String> {
    let mut text = String::new();
    for part in &word.parts {
        let Part::Text {
            text: piece,
            quoted,
        } = part
        else {
            return None;
        };
        if !quoted && piece.contains(['{', '~', '*', '?', '[']) {
            return None;
        }
        text.push_str(piece);
    }
    Some(text)
}

/// Command substitution outside a command's arguments (a redirection target, an assignment,
/// a `for` list, `[[ ]]`): the value would choose a file or a word the policy checks.
fn refuse_substitutions(word: &RawWord) -> Result<(), Denial> {
    if word.substitutions().is_empty() {
        return Ok(());
    }
    Err(Denial::new(format!(
        "command substitution is not allowed here ({}): its output is known only when it runs, \
         so it may stand only where any text is harmless — an argument of echo or printf, or a \
         string operand of test or [",
        word.display()
    )))
}

/// `<(…)` anywhere the checker does not take it as a read-only pipe (a word of its own in a
/// command's arguments): a redirection target, an assignment, a `for` list, part of a word.
fn refuse_process_substitution(word: &RawWord) -> Result<(), Denial> {
    if !word.has_process_substitution() {
        return Ok(());
    }
    Err(Denial::new(format!(
        "process substitution is not allowed here ({}): <(…) may only be a whole argument \
         that the program reads as a file (comm -13 <(sort a) <(sort b))",
        word.display()
    )))
}

/// The items of a word; `<(…)` was refused before (see [`refuse_process_substitution`]).
fn items_of(word: &RawWord) -> Vec<Item> {
    let mut items = Vec::new();
    let mut substitutions = 0;
    for part in &word.parts {
        match part {
            Part::Text { text, quoted } => {
                items.extend(text.chars().map(|c| Item::Lit { c, quoted: *quoted }))
            }
            Part::Var { name, quoted } => items.push(Item::Var {
                name: name.clone(),
                quoted: *quoted,
            }),
            Part::Subst { quoted, .. } => {
                items.push(Item::Subst {
                    n: substitutions,
                    quoted: *quoted,
                });
                substitutions += 1;
            }
            Part::Proc { .. } => {}
        }
    }
    items
}

/// Where the value of an assignment-shaped word (`NAME=value`, all unquoted) starts.
fn assignment_value_start(items: &[Item]) -> Option<usize> {
    for (i, item) in items.iter().enumerate() {
        match item {
            Item::Lit {
                c: '=',
                quoted: false,
            } if i > 0 => return Some(i + 1),
            Item::Lit { c, quoted: false } if c.is_ascii_alphanumeric() || *c == '_' => {
                if i == 0 && c.is_ascii_digit() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    None
}

fn path_chars(path: &Path) -> impl Iterator<Item = char> + '_ {
    path.to_str()
        .unwrap_or("/nonexistent-non-utf8-path")
        .chars()
}

fn is_open(item: &Item) -> bool {
    matches!(
        item,
        Item::Lit {
            c: '{',
            quoted: false
        }
    )
}

fn is_close(item: &Item) -> bool {
    matches!(
        item,
        Item::Lit {
            c: '}',
            quoted: false
        }
    )
}

fn is_comma(item: &Item) -> bool {
    matches!(
        item,
        Item::Lit {
            c: ',',
            quoted: false
        }
    )
}

/// bash's brace expansion: the first `{` with a matching `}` and either a top-level comma or a
/// sequence (`x..y[..step]`) is expanded, each result expanded again. Anything else stays
/// literal (`{}`, `{a}`, `${`).
fn brace_expand(items: Vec<Item>, word: &RawWord) -> Result<Vec<Vec<Item>>, Denial> {
    let mut done = Vec::new();
    let mut work = vec![items];
    while let Some(items) = work.pop() {
        match expand_first_brace(&items)? {
            Some(results) => work.extend(results.into_iter().rev()),
            None => done.push(items),
        }
        if done.len() + work.len() > MAX_BRACE_WORDS {
            return Err(Denial::new(format!(
                "the brace expansion {} makes more than {MAX_BRACE_WORDS} words",
                word.display()
            )));
        }
    }
    Ok(done)
}

/// Expand the first expandable brace of a word; `None` when it has none.
fn expand_first_brace(items: &[Item]) -> Result<Option<Vec<Vec<Item>>>, Denial> {
    for open in 0..items.len() {
        if !is_open(&items[open]) {
            continue;
        }
        // `${` is parameter syntax, never a brace expansion.
        if open > 0 && matches!(items[open - 1], Item::Lit { c: '$', .. }) {
            continue;
        }
        let mut depth = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for (i, item) in items.iter().enumerate().skip(open) {
            if is_open(item) {
                depth += 1;
            } else if is_close(item) {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            } else if depth == 1 && is_comma(item) {
                commas.push(i);
            }
        }
        let Some(close) = close else {
            continue;
        };
        let (prefix, inner, suffix) =
            (&items[..open], &items[open + 1..close], &items[close + 1..]);
        let alternatives: Vec<Vec<Item>> = if !commas.is_empty() {
            let mut parts = Vec::new();
            let mut start = open + 1;
            for &comma in commas.iter().chain(std::iter::once(&close)) {
                parts.push(items[start..comma].to_vec());
                start = comma + 1;
            }
            parts
        } else if let Some(seq) = sequence(inner)? {
            seq.into_iter()
                .map(|s| s.chars().map(|c| Item::Lit { c, quoted: false }).collect())
                .collect()
        } else {
            continue;
        };
        return Ok(Some(
            alternatives
                .into_iter()
                .map(|alt| {
                    let mut word = prefix.to_vec();
                    word.extend(alt);
                    word.extend_from_slice(suffix);
                    word
                })
                .collect(),
        ));
    }
    Ok(None)
}

/// `{1..5}`, `{05..10}`, `{1..10..2}`, `{a..e}`, `{5..1}`: the words, or `None` when the
/// braces do not hold a sequence (bash then leaves them literal).
fn sequence(inner: &[Item]) -> Result<Option<Vec<String>>, Denial> {
    let mut text = String::new();
    for item in inner {
        match item {
            Item::Lit { c, quoted: false } => text.push(*c),
            _ => return Ok(None),
        }
    }
    let parts: Vec<&str> = text.split("..").collect();
    let (from, to, step) = match parts.as_slice() {
        [a, b] => (*a, *b, None),
        [a, b, s] => (*a, *b, Some(*s)),
        _ => return Ok(None),
    };
    let step: i64 = match step {
        Some(s) => match s.parse::<i64>() {
            Ok(n) => n.unsigned_abs().max(1) as i64,
            Err(_) => return Ok(None),
        },
        None => 1,
    };
    let too_many = || {
        Denial::new(format!(
            "the sequence {{{text}}} makes more than {MAX_BRACE_WORDS} words"
        ))
    };
    if let (Ok(a), Ok(b)) = (from.parse::<i64>(), to.parse::<i64>()) {
        let count = (a - b).unsigned_abs() / step as u64 + 1;
        if count > MAX_BRACE_WORDS as u64 {
            return Err(too_many());
        }
        let padded = |s: &str| {
            let digits = s.trim_start_matches('-');
            digits.len() > 1 && digits.starts_with('0')
        };
        let width = if padded(from) || padded(to) {
            from.len().max(to.len())
        } else {
            0
        };
        let mut out = Vec::new();
        let mut n = a;
        loop {
            out.push(if width > 0 {
                if n < 0 {
                    format!("-{:0w$}", -n, w = width - 1)
                } else {
                    format!("{n:0width$}")
                }
            } else {
                n.to_string()
            });
            if n == b {
                break;
            }
            let next = if a < b { n + step } else { n - step };
            if (a < b && next > b) || (a > b && next < b) {
                break;
            }
            n = next;
        }
        return Ok(Some(out));
    }
    let single = |s: &str| {
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => Some(c as i64),
            _ => None,
        }
    };
    if let (Some(a), Some(b)) = (single(from), single(to)) {
        let mut out = Vec::new();
        let mut n = a;
        loop {
            // Between `Z` and `a` lie punctuation characters; bash emits them too.
            out.push(char::from_u32(n as u32).unwrap_or('?').to_string());
            if n == b {
                break;
            }
            let next = if a < b { n + step } else { n - step };
            if (a < b && next > b) || (a > b && next < b) {
                break;
            }
            n = next;
        }
        return Ok(Some(out));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(text: &str) -> RawWord {
        let mut w = RawWord::default();
        w.append_literal(text);
        w
    }

    fn braces(text: &str) -> Vec<String> {
        brace_expand(items_of(&word(text)), &word(text))
            .unwrap()
            .into_iter()
            .map(|items| {
                items
                    .iter()
                    .map(|i| match i {
                        Item::Lit { c, .. } => *c,
                        Item::Var { .. } | Item::Subst { .. } => '$',
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn brace_expansion_follows_bash() {
        // Each expectation is what `bash -c 'echo …'` prints.
        assert_eq!(braces("{a..c}"), ["a", "b", "c"]);
        assert_eq!(braces("{05..7}"), ["05", "06", "07"]);
        assert_eq!(braces("{1..10..3}"), ["1", "4", "7", "10"]);
        assert_eq!(braces("{c..a}"), ["c", "b", "a"]);
        assert_eq!(braces("{-2..1}"), ["-2", "-1", "0", "1"]);
        assert_eq!(braces("{a,b}{1,2}"), ["a1", "a2", "b1", "b2"]);
        assert_eq!(braces("x{a,b{c,d}}y"), ["xay", "xbcy", "xbdy"]);
        assert_eq!(braces("{a}"), ["{a}"]);
        assert_eq!(braces("{}"), ["{}"]);
        assert_eq!(braces("{a,}"), ["a", ""]);
        assert_eq!(braces("${a,b}"), ["${a,b}"]);
        assert_eq!(braces("{1..x}"), ["{1..x}"]);
        assert!(brace_expand(items_of(&word("{1..100000}")), &word("x")).is_err());
        assert!(brace_expand(
            items_of(&word(
                "{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"
            )),
            &word("x")
        )
        .is_err());
    }

    #[test]
    fn plain_words_expand_as_the_general_path_expands_them() {
        let dir = tempfile::tempdir().unwrap();
        let paths = PathPolicy::new(dir.path(), &[], &[], dir.path()).unwrap();
        let expander = Expander {
            paths: &paths,
            cwd: paths.workspace(),
            max_glob_matches: 100,
            vars: &[],
            unknown_variables: UnknownVariables::Empty,
            jail_vars: &[],
            home_used: Default::default(),
        };
        let quoted = |text: &str| {
            let mut w = RawWord::default();
            w.parts.push(Part::Text {
                text: text.into(),
                quoted: true,
            });
            w
        };
        let mut mixed = word("a=");
        mixed.append(quoted("{x,y}*"));
        mixed.append(word("b:c"));
        let mut fast = 0;
        for w in [
            word("ls"),
            word("-la"),
            word("s/a/b/"),
            word("a=b:c"),
            word("x}"),
            word("a,b"),
            word("$"),
            word(""),
            quoted(""),
            quoted("{a,b}"),
            quoted("~/x"),
            quoted("*.rs"),
            mixed,
            word("{a,b}"),
            word("~/x"),
            word("a=~"),
            word("*.rs"),
            word("x[1]"),
            word("?"),
        ] {
            if plain_text(&w).is_some() {
                fast += 1;
            }
            assert_eq!(
                expander.expand_args_with_substitutions(&w),
                expander.expand_by_character(&w),
                "{w:?}"
            );
        }
        assert_eq!(fast, 13);
    }

    #[test]
    fn assignment_shaped_words_are_found() {
        assert_eq!(assignment_value_start(&items_of(&word("a=~/x"))), Some(2));
        assert_eq!(assignment_value_start(&items_of(&word("--p=~/x"))), None);
        assert_eq!(assignment_value_start(&items_of(&word("1a=x"))), None);
        assert_eq!(assignment_value_start(&items_of(&word("=x"))), None);
    }
}
