//! Expansion of a [`RawWord`] into the literal argument(s) that will run: `~` and `$HOME` to the
//! home directory, `$PWD` to the checked cwd, unquoted globs against the filesystem with every
//! match checked against the readable roots. Brace expansion and other variables are denied.
//! The result is final: the executor passes these strings to the program unchanged.

use super::paths::{Access, PathPolicy};
use super::words::{Part, RawWord};
use super::Denial;
use std::path::Path;

pub struct Expander<'a> {
    pub paths: &'a PathPolicy,
    pub cwd: &'a Path,
    pub max_glob_matches: usize,
}

/// A character of a word and whether it was quoted.
type QChar = (char, bool);

impl Expander<'_> {
    /// One word into one or more arguments (a glob may match several files).
    pub fn expand(&self, word: &RawWord) -> Result<Vec<String>, Denial> {
        let chars = self.substitute(word)?;
        deny_brace_expansion(&chars, word)?;
        if !chars
            .iter()
            .any(|&(c, q)| !q && matches!(c, '*' | '?' | '['))
        {
            return Ok(vec![chars.iter().map(|&(c, _)| c).collect()]);
        }
        self.glob(&chars, word)
    }

    fn substitute(&self, word: &RawWord) -> Result<Vec<QChar>, Denial> {
        let mut out: Vec<QChar> = Vec::new();
        for part in &word.parts {
            match part {
                Part::Text { text, quoted } => out.extend(text.chars().map(|c| (c, *quoted))),
                Part::Tilde { user } if user.is_empty() => {
                    out.extend(path_chars(self.paths.home()).map(|c| (c, true)))
                }
                Part::Tilde { user } => {
                    return Err(Denial::new(format!(
                        "~{user}: only ~ (your home directory) is expanded; ~user, ~+ and ~- are \
                         not allowed"
                    )))
                }
                Part::Var { name, quoted } => {
                    let value = match name.as_str() {
                        "HOME" => path_chars(self.paths.home()).collect::<String>(),
                        "PWD" => path_chars(self.cwd).collect::<String>(),
                        other => {
                            return Err(Denial::new(format!(
                                "the variable ${other} is not allowed: only $HOME and $PWD are \
                                 expanded (their values are then checked)"
                            )))
                        }
                    };
                    if !quoted && value.contains([' ', '\t', '\n', '*', '?', '[']) {
                        return Err(Denial::new(format!(
                            "unquoted ${name} contains spaces or glob characters; quote it"
                        )));
                    }
                    out.extend(value.chars().map(|c| (c, true)));
                }
            }
        }
        Ok(out)
    }

    fn glob(&self, chars: &[QChar], word: &RawWord) -> Result<Vec<String>, Denial> {
        let shown = word.display();
        // The literal directory before the first glob character must itself be readable:
        // listing directories outside the roots would leak their contents.
        let first_glob = chars
            .iter()
            .position(|&(c, q)| !q && matches!(c, '*' | '?' | '['))
            .unwrap_or(0);
        let literal: String = chars[..first_glob].iter().map(|&(c, _)| c).collect();
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

        let absolute = chars.first().is_some_and(|&(c, _)| c == '/');
        let mut pattern = String::new();
        if !absolute {
            pattern.push_str(&glob::Pattern::escape(&self.cwd.to_string_lossy()));
            pattern.push('/');
        }
        let mut prev_star = false;
        for &(c, quoted) in chars {
            if quoted && matches!(c, '*' | '?' | '[' | ']') {
                pattern.push_str(&glob::Pattern::escape(&c.to_string()));
                prev_star = false;
            } else if !quoted && c == '*' {
                // bash without globstar treats `**` like `*`; the glob crate would recurse.
                if !prev_star {
                    pattern.push('*');
                }
                prev_star = true;
            } else {
                pattern.push(c);
                prev_star = false;
            }
        }
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: true,
        };
        let literal_word = || vec![chars.iter().map(|&(c, _)| c).collect::<String>()];
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
            let arg = if absolute {
                text.to_string()
            } else {
                text.strip_prefix(&prefix).unwrap_or(text).to_string()
            };
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

fn path_chars(path: &Path) -> impl Iterator<Item = char> + '_ {
    path.to_str()
        .unwrap_or("/nonexistent-non-utf8-path")
        .chars()
}

/// `{a,b}` and `{1..3}` would be expanded by bash into several words: denied.
fn deny_brace_expansion(chars: &[QChar], word: &RawWord) -> Result<(), Denial> {
    let mut open: Option<usize> = None;
    for (i, &(c, quoted)) in chars.iter().enumerate() {
        if quoted {
            continue;
        }
        match c {
            '{' => open = Some(i),
            '}' => {
                if let Some(start) = open {
                    let inner: String = chars[start + 1..i].iter().map(|&(c, _)| c).collect();
                    let unquoted_comma = chars[start + 1..i].iter().any(|&(c, q)| !q && c == ',');
                    if unquoted_comma || inner.contains("..") {
                        return Err(Denial::new(format!(
                            "brace expansion is not allowed ({}): list the arguments explicitly",
                            word.display()
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
