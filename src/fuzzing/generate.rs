//! A grammar-aware generator of bash command strings, drawing program names and flags from the
//! policy under test and paths from the fuzz fixture, plus the constructs the policy must
//! refuse (substitutions, interpreters, wrappers, `$'…'`, here-documents, fd forms).

use crate::policy::Policy;
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::Rng;

/// Programs and flags known to the policy, gathered once.
pub struct Vocabulary {
    programs: Vec<(String, Vec<String>, Vec<String>)>,
}

/// Programs a policy must never let through unchecked; always in the mix.
const HOSTILE_PROGRAMS: &[&str] = &[
    "sh", "bash", "python3", "perl", "env", "xargs", "eval", "exec", "source", ".", "nohup",
    "busybox", "awk", "timeout", "nice", "command", "builtin", "trap", "alias", "export", "ssh",
    "curl", "make", "git", "find", "sed", "tar", "cp", "mv", "tee", "sort", "chmod", "ln",
];

/// Paths of the fuzz fixture (see `fixture.rs`), in the spellings attacks use.
const PATHS: &[&str] = &[
    "src/main.rs",
    "notes.txt",
    "README.md",
    "src",
    ".",
    "..",
    "../outside/secret.txt",
    "escape/secret.txt",
    "escape",
    "link_secret",
    "keys/id_ed25519",
    "~/.ssh/id_ed25519",
    "~/.gitconfig",
    "~",
    "~root",
    "/etc/shadow",
    "/etc/passwd",
    "/proc/self/environ",
    "/proc/1/root",
    "/dev/null",
    "/dev/tcp/127.0.0.1/80",
    "/tmp/x",
    ".git/config",
    ".git/hooks/pre-commit",
    ".gitattributes",
    "sub/.gitattributes",
    ".config/git/config",
    ".config",
    "cfgcopy",
    "gitlink/config",
    "hardlinked.txt",
    "names0",
    "-",
    "a b",
    "*",
    "src/*.rs",
    "?otes.txt",
    "[nr]otes.txt",
    "{a,b}",
    "src/{main,lib}.rs",
    "$HOME",
    "${HOME}/x",
    "$PWD/notes.txt",
    "./-rf",
    "--",
    "''",
    "\"\"",
    "build/out.txt",
    "deep/../../outside/secret.txt",
    "/",
    "/usr/bin/sh",
    "notes.txt/",
    "src//main.rs",
    "~/.ssh",
    "../../../../etc/passwd",
];

const WORDS: &[&str] = &[
    "hello",
    "-n",
    "-e",
    "1",
    "0",
    "'*.rs'",
    "x=1",
    "HEAD",
    "--",
    "-",
    "s/a/b/",
    "s/a/b/e",
    "w /tmp/x",
    "1d",
    "'$(id)'",
    "\"$(id)\"",
    "'`id`'",
    "\\;",
    "{}",
    "+",
    "-exec",
    "-delete",
    "--help",
    "-c",
    "core.pager=sh",
    "!sh",
    "$'\\x41'",
    "$'a\\nb'",
    "'a\"b'",
    "\"a'b\"",
    "a\\ b",
    "%s\\n",
    "--version",
    "-rf",
    "-R",
    "-1",
    "--output=x",
    "-oout",
    "BEGIN{system(\"id\")}",
    "'{print $1}'",
    "-F,",
    "status",
    "log",
    "diff",
    "show",
    "-C",
    "config",
    "--global",
    "alias.x=!sh",
    "-p",
    "--to-command=sh",
    "-I",
    "sh",
    "--checkpoint-action=exec=sh",
];

/// Arguments that make a program run code or write where it was not told to, if its rule is
/// wrong about it (awk's and sed's programs, find's actions, pagers, editors, hooks).
const PAYLOADS: &[&str] = &[
    "'BEGIN{system(\"id\")}'",
    "'{print > \"/tmp/x\"}'",
    "'{print | \"sh\"}'",
    "'1e id'",
    "'w /tmp/x'",
    "'s/x/y/e'",
    "-exec sh -c id ;",
    "-fprint /tmp/x",
    "--to-command=sh",
    "--use-compress-program=sh",
    "-I sh",
    "--command=id",
    "-c id",
    "--pager=sh",
    "--editor=sh",
    "--rsh=sh",
    "-e sh",
    "--exec=sh",
    "!sh",
    "|sh",
    "--output=/tmp/x",
    "-o /tmp/x",
    "--config=x",
    "--init-file=x",
    "--rcfile=x",
    "--script=x",
    "/tmp/x",
    "../outside/new.txt",
];

const REDIRECTS: &[&str] = &[
    ">",
    ">>",
    "<",
    "2>",
    "2>>",
    "&>",
    "&>>",
    ">|",
    "<>",
    "3>",
    "1>&2",
    ">&2",
    "2>&1",
    "0<",
    "<&0",
    ">&-",
    "2>/dev/null",
    "<<<",
];

impl Vocabulary {
    pub fn new(policy: &Policy) -> Vocabulary {
        let mut programs: Vec<(String, Vec<String>, Vec<String>)> = policy
            .programs()
            .map(|(name, rule)| {
                let flags: Vec<String> = rule.flags.keys().cloned().collect();
                let subs: Vec<String> = rule.subcommands.keys().cloned().collect();
                (name.clone(), flags, subs)
            })
            .collect();
        for name in HOSTILE_PROGRAMS {
            if !programs.iter().any(|(n, _, _)| n == name) {
                programs.push((name.to_string(), Vec::new(), Vec::new()));
            }
        }
        Vocabulary { programs }
    }

    /// One command string.
    pub fn script(&self, rng: &mut SmallRng) -> String {
        let mut out = Writer::default();
        let pipelines = weighted(rng, &[6, 3, 1]) + 1;
        for i in 0..pipelines {
            if i > 0 {
                let connector = *[" && ", " || ", "; ", "\n", " & ", " ;; "]
                    .choose_weighted(rng, |c| match *c {
                        " && " | "; " => 8,
                        " || " | "\n" => 4,
                        _ => 1,
                    })
                    .unwrap_or(&"; ");
                out.push(connector);
            }
            self.pipeline(rng, &mut out, 0);
        }
        out.finish()
    }

    /// One simple command of `program`, its arguments drawn mostly from what would make a
    /// wrong rule show (payloads), for the policy file's own programs.
    pub fn focused(&self, rng: &mut SmallRng, program: &str) -> String {
        let mut out = Writer::default();
        out.push(program);
        let flags = self
            .programs
            .iter()
            .find(|(name, _, _)| name == program)
            .map(|(_, flags, _)| flags.clone())
            .unwrap_or_default();
        for i in 0..rng.random_range(1..4) {
            out.push(" ");
            // Mostly a payload first: the sampled oracles run each new program + first word.
            if i == 0 && rng.random_bool(0.6) {
                out.push(pick(rng, PAYLOADS));
                continue;
            }
            match rng.random_range(0..10) {
                0..=3 => out.push(pick(rng, PAYLOADS)),
                4..=5 if !flags.is_empty() => {
                    let flag = flags.choose(rng).map(String::as_str).unwrap_or("-n");
                    self.flag(rng, &mut out, flag);
                }
                4..=7 => out.push(pick(rng, PATHS)),
                _ => out.push(pick(rng, WORDS)),
            }
        }
        out.finish()
    }

    fn pipeline(&self, rng: &mut SmallRng, out: &mut Writer, depth: usize) {
        if rng.random_ratio(1, 20) {
            out.push("! ");
        }
        let commands = weighted(rng, &[7, 3, 1]) + 1;
        for i in 0..commands {
            if i > 0 {
                out.push(if rng.random_ratio(1, 10) {
                    " |& "
                } else {
                    " | "
                });
            }
            if depth < 2 && rng.random_ratio(1, 8) {
                self.compound(rng, out, depth + 1);
            } else {
                self.command(rng, out);
            }
        }
    }

    fn compound(&self, rng: &mut SmallRng, out: &mut Writer, depth: usize) {
        match rng.random_range(0..7) {
            0 => {
                out.push("{ ");
                self.pipeline(rng, out, depth);
                out.push("; }");
            }
            1 => {
                out.push("( ");
                self.pipeline(rng, out, depth);
                out.push(" )");
            }
            2 => {
                out.push("if ");
                self.pipeline(rng, out, depth);
                out.push("; then ");
                self.pipeline(rng, out, depth);
                if rng.random_bool(0.5) {
                    out.push("; else ");
                    self.pipeline(rng, out, depth);
                }
                out.push("; fi");
            }
            3 => {
                out.push("for f in ");
                for _ in 0..rng.random_range(1..4) {
                    out.push(pick(rng, PATHS));
                    out.push(" ");
                }
                out.push("; do ");
                self.command(rng, out);
                out.push(" \"$f\"; done");
            }
            4 => {
                out.push("[[ -f ");
                out.push(pick(rng, PATHS));
                out.push(if rng.random_bool(0.5) {
                    " && -n x ]]"
                } else {
                    " ]]"
                });
            }
            5 => {
                out.push("[ -e ");
                out.push(pick(rng, PATHS));
                out.push(" ]");
            }
            _ => {
                out.push("while ");
                self.command(rng, out);
                out.push("; do break; done");
            }
        }
    }

    fn command(&self, rng: &mut SmallRng, out: &mut Writer) {
        if rng.random_ratio(1, 15) {
            out.push(pick(
                rng,
                &[
                    "LANG=C ",
                    "LD_PRELOAD=x.so ",
                    "PATH=. ",
                    "GIT_DIR=x ",
                    "TZ=UTC ",
                ],
            ));
        }
        // The vocabulary always holds the hostile programs, so there is one to choose.
        let Some((name, flags, subs)) = self.programs.choose(rng) else {
            return;
        };
        let name = spell(rng, name);
        out.push(&name);
        if !subs.is_empty() && rng.random_ratio(3, 4) {
            out.push(" ");
            out.push(subs.choose(rng).map(String::as_str).unwrap_or("status"));
        }
        let args = weighted(rng, &[2, 4, 4, 3, 2, 1]);
        for _ in 0..args {
            out.push(" ");
            if rng.random_ratio(1, 6) {
                out.push(pick(rng, PAYLOADS));
                continue;
            }
            match rng.random_range(0..10) {
                0..=2 if !flags.is_empty() => {
                    let flag = flags.choose(rng).map(String::as_str).unwrap_or("-n");
                    self.flag(rng, out, flag);
                }
                0..=4 => {
                    let path = pick(rng, PATHS);
                    out.push(&spell(rng, path));
                }
                5..=7 => {
                    let word = pick(rng, WORDS);
                    out.push(&spell(rng, word));
                }
                8 => self.substitution(rng, out),
                _ => self.redirect(rng, out),
            }
        }
        if rng.random_ratio(1, 4) {
            out.push(" ");
            self.redirect(rng, out);
        }
    }

    fn flag(&self, rng: &mut SmallRng, out: &mut Writer, flag: &str) {
        match rng.random_range(0..5) {
            // An abbreviation of a long flag.
            0 if flag.starts_with("--") && flag.len() > 4 => {
                let end = rng.random_range(3..flag.len());
                out.push(&flag[..end]);
            }
            // A value attached: --flag=value, -fVALUE.
            1 if flag.starts_with("--") => {
                out.push(flag);
                out.push("=");
                out.push(pick(rng, PATHS));
            }
            2 if flag.len() == 2 => {
                out.push(flag);
                out.push(pick(rng, PATHS));
            }
            // A cluster: -xf.
            3 if flag.len() == 2 => {
                out.push("-");
                out.push(pick(rng, &["r", "v", "x", "n", "i", "f", "o"]));
                out.push(&flag[1..]);
            }
            _ => {
                out.push(flag);
                out.push(" ");
                out.push(pick(rng, PATHS));
            }
        }
    }

    fn substitution(&self, rng: &mut SmallRng, out: &mut Writer) {
        let inner = pick(rng, &["id", "cat notes.txt", "echo x", "ls"]);
        let text = match rng.random_range(0..6) {
            0 => format!("$({inner})"),
            1 => format!("`{inner}`"),
            2 => format!("<({inner})"),
            3 => format!("\"$({inner})\""),
            4 => "$((1+1))".to_string(),
            _ => "${x:-$(id)}".to_string(),
        };
        out.push(&text);
    }

    fn redirect(&self, rng: &mut SmallRng, out: &mut Writer) {
        let op = pick(rng, REDIRECTS);
        out.push(op);
        if op.ends_with('>') || op.ends_with('<') || op == ">|" || op == "<>" || op == "&>>" {
            out.push(" ");
            out.push(pick(rng, PATHS));
        } else if op == "<<<" {
            out.push(" ");
            out.push(pick(rng, WORDS));
        }
        if rng.random_ratio(1, 6) {
            let quoted = rng.random_bool(0.5);
            out.push(if quoted { " <<'EOF'" } else { " <<EOF" });
            let body = pick(rng, &["hello", "$(id)", "`id`", "$HOME", "EOF x"]);
            out.heredocs.push(format!("{body}\nEOF"));
        }
    }
}

/// Quote a word one of the ways bash reads the same (or, sometimes, differently).
fn spell(rng: &mut SmallRng, word: &str) -> String {
    match rng.random_range(0..12) {
        0 => format!("'{word}'"),
        1 => format!("\"{word}\""),
        2 if !word.is_empty() => {
            let mid = word.len() / 2;
            if word.is_char_boundary(mid) {
                format!("{}''{}", &word[..mid], &word[mid..])
            } else {
                word.to_string()
            }
        }
        3 if !word.is_empty() => format!("\\{word}"),
        4 => format!("$'{word}'"),
        _ => word.to_string(),
    }
}

fn pick<'a>(rng: &mut SmallRng, items: &[&'a str]) -> &'a str {
    items.choose(rng).copied().unwrap_or("")
}

/// An index drawn with the given weights.
fn weighted(rng: &mut SmallRng, weights: &[u32]) -> usize {
    let total: u32 = weights.iter().sum();
    let mut roll = rng.random_range(0..total.max(1));
    for (i, w) in weights.iter().enumerate() {
        if roll < *w {
            return i;
        }
        roll -= w;
    }
    0
}

/// The command text, with here-document bodies placed after the line that opened them.
#[derive(Default)]
struct Writer {
    text: String,
    heredocs: Vec<String>,
}

impl Writer {
    fn push(&mut self, s: &str) {
        if s == "\n" {
            self.flush_heredocs();
        }
        self.text.push_str(s);
    }

    fn flush_heredocs(&mut self) {
        for body in std::mem::take(&mut self.heredocs) {
            self.text.push('\n');
            self.text.push_str(&body);
        }
    }

    fn finish(mut self) -> String {
        self.flush_heredocs();
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_same_seed_gives_the_same_commands() {
        let vocabulary = Vocabulary::new(&Policy::embedded_default());
        let run = |seed| {
            let mut rng = SmallRng::seed_from_u64(seed);
            (0..50)
                .map(|_| vocabulary.script(&mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let commands = run(1);
        assert!(commands.iter().all(|c| !c.is_empty()));
    }
}
