//! `sed`: the flags come from the TOML rule (strict); the scripts are parsed here, command by
//! command, following GNU sed's reader. `e` and the `s///e` flag are denied (they run
//! commands); `r`/`R` file names are read paths, `w`/`W`/`s///w` file names write paths; with
//! `-i` the input files are written. Anything the parser does not recognise is denied.

use super::options::{refuse_text_naming_a_file, Operands, Options, Word};
use super::AnalyzerContext;
use crate::policy::paths::Access;
use crate::policy::rules::{Analysis, ProgramRule};
use crate::policy::Denial;

pub fn analyze(
    rule: &ProgramRule,
    program: &str,
    args: &[String],
    ctx: &AnalyzerContext,
) -> Result<Analysis, Denial> {
    // Let the generic analysis check flags (deny lists, strictness) and collect positionals
    // as read paths; then reinterpret them with sed's own rules.
    let generic = rule.analyze(program, args)?;
    let mut scripts: Vec<String> = Vec::new();
    // `-f FILE`: scripts read from files, checked here as if written inline.
    let mut script_files: Vec<String> = Vec::new();
    let mut in_place = false;
    // `-i[SUFFIX]`: the backup name; `*` in it stands for the file's name.
    let mut suffix = String::new();
    let mut positionals: Vec<String> = Vec::new();
    let mut options = Options::new(args, Operands::Anywhere);
    while let Some(word) = options.next_word() {
        match word {
            Word::Operand(operand) => positionals.push(operand.to_string()),
            // Long options, abbreviated as GNU getopt allows.
            Word::Long { name, value } if abbreviates(name, "expression") => {
                scripts.push(attached_or_next(value, &mut options)?);
            }
            Word::Long { name, value } if abbreviates(name, "file") => {
                script_files.push(attached_or_next(value, &mut options)?);
            }
            Word::Long { name, value } if abbreviates(name, "in-place") => {
                in_place = true;
                suffix = value.unwrap_or_default().to_string();
            }
            Word::Long { name, value: None } if abbreviates(name, "line-length") => {
                options.skip();
            }
            Word::Long { .. } => {}
            Word::Short(letters) => {
                let cluster: Vec<char> = letters.chars().collect();
                for (j, c) in cluster.iter().enumerate() {
                    let rest: String = cluster[j + 1..].iter().collect();
                    match c {
                        'e' | 'f' => {
                            let value = if rest.is_empty() {
                                attached_or_next(None, &mut options)?
                            } else {
                                rest
                            };
                            if *c == 'e' {
                                scripts.push(value);
                            } else {
                                script_files.push(value);
                            }
                            break;
                        }
                        // -i takes an optional attached suffix: `-ie` is suffix "e", not -i -e.
                        'i' => {
                            in_place = true;
                            suffix = rest;
                            break;
                        }
                        'l' => {
                            if rest.is_empty() {
                                options.skip();
                            }
                            break;
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    if !script_files.is_empty() && ctx.earlier_writes {
        return Err(Denial::new(format!(
            "{program} -f must run as its own command, not after a command that writes files in \
             the same string: the script checked now may not be the one sed reads"
        )));
    }
    let mut file_paths = Vec::new();
    for file in &script_files {
        let text = read_script_file(file, ctx)
            .map_err(|why| Denial::new(format!("{program} -f {file}: {why}")))?;
        file_paths.extend(
            check_script(&text)
                .map_err(|why| Denial::new(format!("{program} script file {file}: {why}")))?,
        );
        file_paths.push((file.clone(), Access::Read));
    }
    if scripts.is_empty() && script_files.is_empty() {
        if positionals.is_empty() {
            return Err(Denial::new(format!("{program}: no script given")));
        }
        scripts.push(positionals.remove(0));
    }
    // `sed ~/.ssh/id_rsa` reads the path as a script (`/home/` an address, `w` a command
    // writing a file named by the rest). A script without a `/` is no such mistake.
    refuse_text_naming_a_file(program, "script", &scripts, ctx.cwd, |s| s.contains('/'))?;
    let mut analysis = Analysis {
        ask: generic.ask,
        paths: file_paths,
        ..Analysis::default()
    };
    for script in &scripts {
        analysis.paths.extend(
            check_script(script)
                .map_err(|why| Denial::new(format!("{program} script {script:?}: {why}")))?,
        );
    }
    let access = if in_place {
        Access::Write
    } else {
        Access::Read
    };
    let files: Vec<String> = positionals.into_iter().filter(|p| p != "-").collect();
    if in_place && !suffix.is_empty() && suffix != "*" {
        for file in &files {
            for backup in backup_names(file, &suffix) {
                analysis.paths.push((backup, Access::Write));
            }
        }
    }
    analysis
        .paths
        .extend(files.into_iter().map(|p| (p, access)));
    Ok(analysis)
}

/// Where `sed -i SUFFIX` renames the original file to. GNU sed puts SUFFIX after the name, or,
/// when SUFFIX holds `*`, replaces each `*` with the file's name — so `-i'../../x/*'` is a path
/// of its own. Every reading (relative to the file's folder or to the cwd, `*` as the base
/// name or as the name as written) is returned, and each is checked as a write.
fn backup_names(file: &str, suffix: &str) -> Vec<String> {
    let pattern = if suffix.contains('*') {
        suffix.to_string()
    } else {
        format!("*{suffix}")
    };
    let (dir, base) = match file.rfind('/') {
        Some(i) => (&file[..=i], &file[i + 1..]),
        None => ("", file),
    };
    let mut names = vec![
        format!("{dir}{}", pattern.replace('*', base)),
        pattern.replace('*', base),
        format!("{dir}{}", pattern.replace('*', file)),
        pattern.replace('*', file),
    ];
    names.sort();
    names.dedup();
    names
}

/// `--exp` for `--expression`: GNU getopt takes any unambiguous prefix of a long option.
fn abbreviates(name: &str, option: &str) -> bool {
    !name.is_empty() && option.starts_with(name)
}

/// An option's value: attached (`--expression=p`), else the next word.
fn attached_or_next(attached: Option<&str>, options: &mut Options) -> Result<String, Denial> {
    match attached {
        Some(value) => Ok(value.to_string()),
        None => options
            .value()
            .map(str::to_string)
            .ok_or_else(|| Denial::new("sed -e: missing the script")),
    }
}

/// A script file's text (at most 64 KiB, UTF-8), read beneath the roots.
fn read_script_file(file: &str, ctx: &AnalyzerContext) -> Result<String, String> {
    use std::io::Read;
    const MAX: u64 = 64 * 1024;
    if file == "-" {
        return Err("a script read from standard input cannot be checked".into());
    }
    let path = ctx
        .paths
        .check(ctx.cwd, file, Access::Read)
        .map_err(|d| d.reason)?;
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot be read to check it: {e}"))?;
    if bytes.len() as u64 > MAX {
        return Err(format!("is larger than {MAX} bytes; too large to check"));
    }
    String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())
}

/// Parse a sed script; returns the files it reads (`r`, `R`) and writes (`w`, `W`, `s///w`:
/// GNU sed creates them when it reads the script, run or not), or why it is refused.
pub fn check_script(script: &str) -> Result<Vec<(String, Access)>, String> {
    let mut p = Reader {
        s: script.chars().collect(),
        i: 0,
    };
    let mut files = Vec::new();
    let mut depth = 0usize;
    loop {
        p.skip(|c| c.is_whitespace() || c == ';');
        let Some(c) = p.peek() else { break };
        if c == '#' {
            p.until_newline();
            continue;
        }
        p.address()?;
        p.skip(|c| c == ' ' || c == '\t');
        if p.peek() == Some(',') {
            p.i += 1;
            p.skip(|c| c == ' ' || c == '\t');
            p.address2()?;
        }
        p.skip(|c| c == ' ' || c == '\t' || c == '!');
        let cmd = p.next().ok_or("an address without a command")?;
        match cmd {
            '{' => {
                depth += 1;
                continue;
            }
            '}' => {
                depth = depth.checked_sub(1).ok_or("unmatched }")?;
            }
            '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {}
            'q' | 'Q' | 'l' | 'L' => {
                p.skip(|c| c == ' ' || c == '\t');
                p.skip(|c| c.is_ascii_digit());
            }
            ':' | 'b' | 't' | 'T' => {
                // Labels end at ';' or a newline (stricter than a label containing ';').
                p.skip(|c| c == ' ' || c == '\t');
                p.skip(|c| c != ';' && c != '\n' && c != '}');
            }
            'a' | 'i' | 'c' => p.text_to_end_of_line(),
            'r' | 'R' | 'w' | 'W' => {
                // The file name runs to the end of the line, `;` and `}` included.
                let file = p.until_newline().trim_start().to_string();
                if file.is_empty() {
                    return Err(format!("`{cmd}` without a file name"));
                }
                let access = if matches!(cmd, 'w' | 'W') {
                    Access::Write
                } else {
                    Access::Read
                };
                files.push((file, access));
                continue;
            }
            'e' => return Err("the `e` command runs a shell command".into()),
            'v' => p.skip(|c| c != ';' && c != '\n' && c != '}'),
            's' => {
                if let Some(file) = p.substitute()? {
                    files.push((file, Access::Write));
                    continue;
                }
            }
            'y' => {
                let delim = p.next().ok_or("`y` without a delimiter")?;
                p.delimited(delim)?;
                p.delimited(delim)?;
            }
            other => return Err(format!("unknown sed command {other:?}")),
        }
        p.skip(|c| c == ' ' || c == '\t');
        match p.peek() {
            None | Some(';') | Some('\n') | Some('}') | Some('#') => {}
            Some(other) => return Err(format!("unexpected {other:?} after the `{cmd}` command")),
        }
    }
    if depth != 0 {
        return Err("unmatched {".into());
    }
    Ok(files)
}

struct Reader {
    s: Vec<char>,
    i: usize,
}

impl Reader {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn skip(&mut self, pred: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&pred) {
            self.i += 1;
        }
    }

    fn until_newline(&mut self) -> String {
        let start = self.i;
        self.skip(|c| c != '\n');
        self.s[start..self.i].iter().collect()
    }

    /// GNU one-liner text for a/i/c: to the end of the line, continued by a trailing `\`.
    fn text_to_end_of_line(&mut self) {
        loop {
            let line = self.until_newline();
            if line.ends_with('\\') && self.peek() == Some('\n') {
                self.i += 1;
                continue;
            }
            break;
        }
    }

    fn address(&mut self) -> Result<(), String> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                self.skip(|c| c.is_ascii_digit());
                if self.peek() == Some('~') {
                    self.i += 1;
                    self.skip(|c| c.is_ascii_digit());
                }
            }
            Some('$') => self.i += 1,
            Some('/') => {
                self.i += 1;
                self.delimited('/')?;
                self.skip(|c| c == 'I' || c == 'M');
            }
            Some('\\') => {
                self.i += 1;
                let delim = self.next().ok_or("a \\ address without a delimiter")?;
                self.delimited(delim)?;
                self.skip(|c| c == 'I' || c == 'M');
            }
            _ => {}
        }
        Ok(())
    }

    fn address2(&mut self) -> Result<(), String> {
        match self.peek() {
            Some('+') | Some('~') => {
                self.i += 1;
                self.skip(|c| c.is_ascii_digit());
                Ok(())
            }
            _ => self.address(),
        }
    }

    /// Read up to the unescaped delimiter (GNU's match_slash: brackets are not special).
    fn delimited(&mut self, delim: char) -> Result<(), String> {
        if delim == '\n' || delim == '\\' {
            return Err("invalid delimiter".into());
        }
        while let Some(c) = self.next() {
            if c == '\\' {
                self.next().ok_or("unterminated expression")?;
            } else if c == delim {
                return Ok(());
            }
        }
        Err(format!("unterminated expression (missing {delim:?})"))
    }

    /// `s/RE/REPLACEMENT/FLAGS`; the file a `w` flag writes, which ends the line.
    fn substitute(&mut self) -> Result<Option<String>, String> {
        let delim = self.next().ok_or("`s` without a delimiter")?;
        self.delimited(delim)?;
        self.delimited(delim)?;
        while let Some(flag) = self.peek() {
            match flag {
                'g' | 'p' | 'i' | 'I' | 'm' | 'M' => self.i += 1,
                c if c.is_ascii_digit() => self.i += 1,
                'e' => return Err("the s///e flag runs the pattern space as a command".into()),
                'w' => {
                    self.i += 1;
                    let file = self.until_newline().trim_start().to_string();
                    if file.is_empty() {
                        return Err("the s///w flag without a file name".into());
                    }
                    return Ok(Some(file));
                }
                ';' | '\n' | '}' | '#' | ' ' | '\t' => break,
                other => return Err(format!("unknown s/// flag {other:?}")),
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::check_script;
    use crate::policy::paths::Access;

    #[test]
    fn benign_scripts_pass() {
        for s in [
            "s/foo/bar/g",
            "1d;$d",
            "/^#/d",
            "s|a/b|c|2",
            "10,+3p",
            ":a;N;$!ba;s/\\n/ /g",
            "y/abc/xyz/",
            "/x/{s/a/b/;p}",
            "a hello; w /etc/passwd",
            "0~2d",
            "\\,foo,d",
        ] {
            assert!(check_script(s).is_ok(), "{s}: {:?}", check_script(s));
        }
    }

    #[test]
    fn exec_and_write_are_refused() {
        for s in [
            "e id",
            "1e id",
            "s/x/id/e",
            "s/a/b/;e",
            "$!{e date\n}",
            "s/a/b/ge",
            "w",
            "s/a/b/w",
        ] {
            assert!(check_script(s).is_err(), "{s} should be refused");
        }
    }

    #[test]
    fn file_commands_report_their_files() {
        let read = |f: &str| (f.to_string(), Access::Read);
        let write = |f: &str| (f.to_string(), Access::Write);
        assert_eq!(
            check_script("r /etc/passwd").unwrap(),
            [read("/etc/passwd")]
        );
        assert_eq!(check_script("1R notes.txt").unwrap(), [read("notes.txt")]);
        assert_eq!(check_script("/x/w out.txt").unwrap(), [write("out.txt")]);
        // The name runs to the end of the line: `;p` is part of it.
        assert_eq!(check_script("W a;p").unwrap(), [write("a;p")]);
        assert_eq!(
            check_script("s/a/b/gw /tmp/out\np").unwrap(),
            [write("/tmp/out")]
        );
    }
}
