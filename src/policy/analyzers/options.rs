//! A command's words as sed and awk read them: the getopt-style option loop both analyzers
//! share, and the check that program text given as a word is not the name of a file.
//!
//! The reader tells operands from options (`--` ends the options; `-` alone is an operand),
//! splits `--name=value`, and hands a short cluster back whole (`-ne` stays `ne`): each program
//! knows which of its letters take a value, and takes it with [`Options::value`].

use crate::policy::Denial;
use std::path::Path;

/// Where a program's operands may stand among its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operands {
    /// Options may follow operands (GNU getopt's permutation: sed).
    Anywhere,
    /// The first operand ends the options (getopt with a leading `+`: gawk, so `awk prog
    /// --lint=x` reads a file named `--lint=x`).
    EndOptions,
}

/// One word, as the option loop sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word<'a> {
    Operand(&'a str),
    /// `--name` or `--name=value`.
    Long {
        name: &'a str,
        value: Option<&'a str>,
    },
    /// `-abc`: the letters after the dash.
    Short(&'a str),
}

pub struct Options<'a> {
    args: &'a [String],
    next: usize,
    ended: bool,
    operands: Operands,
}

impl<'a> Options<'a> {
    pub fn new(args: &'a [String], operands: Operands) -> Options<'a> {
        Options {
            args,
            next: 0,
            ended: false,
            operands,
        }
    }

    /// The next word, or `None` after the last.
    pub fn next_word(&mut self) -> Option<Word<'a>> {
        loop {
            let arg = self.args.get(self.next)?;
            self.next += 1;
            if self.ended || arg == "-" || !arg.starts_with('-') {
                if self.operands == Operands::EndOptions {
                    self.ended = true;
                }
                return Some(Word::Operand(arg));
            }
            if arg == "--" {
                self.ended = true;
                continue;
            }
            if let Some(long) = arg.strip_prefix("--") {
                let (name, value) = long
                    .split_once('=')
                    .map_or((long, None), |(n, v)| (n, Some(v)));
                return Some(Word::Long { name, value });
            }
            return Some(Word::Short(&arg[1..]));
        }
    }

    /// The word [`Options::next_word`] read last, as written (`-e`, `--source`).
    pub fn current(&self) -> &'a str {
        self.next
            .checked_sub(1)
            .and_then(|i| self.args.get(i))
            .map_or("", String::as_str)
    }

    /// The next word as the value of the option just read (`-e SCRIPT`); `None` at the end.
    pub fn value(&mut self) -> Option<&'a str> {
        let value = self.args.get(self.next)?;
        self.next += 1;
        Some(value)
    }

    /// Pass over the next word: an option's value that needs no check here.
    pub fn skip(&mut self) {
        self.next += 1;
    }
}

/// Refuse program text (`what`: "script", "program") that is also the name of an existing file
/// beneath `cwd`: `sed ~/.ssh/id_rsa` and `awk keys/id_rsa` would run a path as a program, a
/// mistake whose meaning nobody intended. `could_be_a_path` says which texts are looked up.
pub fn refuse_text_naming_a_file(
    program: &str,
    what: &str,
    texts: &[String],
    cwd: &Path,
    could_be_a_path: impl Fn(&str) -> bool,
) -> Result<(), Denial> {
    match texts
        .iter()
        .find(|t| could_be_a_path(t) && cwd.join(t.as_str()).symlink_metadata().is_ok())
    {
        Some(text) => Err(Denial::new(format!(
            "{program}: the {what} {text:?} is the name of an existing file; give the {what} \
             first (or with -e) and the files after it"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[&str], operands: Operands) -> Vec<String> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut options = Options::new(&args, operands);
        let mut out = Vec::new();
        while let Some(word) = options.next_word() {
            out.push(match word {
                Word::Operand(o) => format!("operand {o}"),
                Word::Long { name, value } => format!("long {name} {value:?}"),
                Word::Short("e") => {
                    format!("short e value {:?}", options.value())
                }
                Word::Short(letters) => format!("short {letters}"),
            });
        }
        out
    }

    #[test]
    fn options_operands_and_values() {
        assert_eq!(
            words(
                &["-n", "-e", "p", "file", "--in-place=.b", "-", "--", "-x"],
                Operands::Anywhere
            ),
            [
                "short n",
                "short e value Some(\"p\")",
                "operand file",
                "long in-place Some(\".b\")",
                "operand -",
                "operand -x",
            ]
        );
        assert_eq!(
            words(&["prog", "--lint=x", "-e"], Operands::EndOptions),
            ["operand prog", "operand --lint=x", "operand -e"]
        );
        assert_eq!(words(&["-e"], Operands::Anywhere), ["short e value None"]);
    }

    #[test]
    fn program_text_that_names_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("keys")).unwrap();
        std::fs::write(dir.path().join("keys/id"), "x").unwrap();
        let texts = ["1".to_string(), "keys/id".to_string()];
        let err =
            refuse_text_naming_a_file("awk", "program", &texts, dir.path(), |t| !t.is_empty())
                .unwrap_err();
        assert!(
            err.reason.contains("the program \"keys/id\" is the name"),
            "{}",
            err.reason
        );
        assert!(
            refuse_text_naming_a_file("sed", "script", &texts[..1], dir.path(), |t| t
                .contains('/'))
            .is_ok()
        );
    }
}
