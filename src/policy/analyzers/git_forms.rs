//! What a git subcommand's flags cannot say: `reflog` only shows, `remote` lists or prints a
//! URL (no network) and changes a remote only with approval, `submodule` likewise, `config`
//! reads (the repository's own files, never an editor) and sets only keys that name no program
//! (`user.name`), `merge` uses only git's built-in strategies (`-s NAME` runs a program
//! `git-merge-NAME` otherwise), `worktree` only lists, `notes` only lists and shows, `help` only
//! lists (a page is shown by man through a pager).

use crate::policy::rules::ProgramRule;
use crate::policy::Denial;

/// The positional arguments of `rest`, read with the subcommand's own flags (a flag's value is
/// not a positional; `--` ends options).
fn positionals<'a>(rule: &ProgramRule, rest: &'a [String]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut options_ended = false;
    while i < rest.len() {
        let a = rest[i].as_str();
        if options_ended || !a.starts_with('-') || a == "-" {
            out.push(a);
        } else if a == "--" {
            options_ended = true;
        } else if rule.flag_consumes_next(a) {
            i += 1;
        }
        i += 1;
    }
    out
}

fn has_any(rest: &[String], flags: &[&str]) -> bool {
    rest.iter().any(|a| {
        flags
            .iter()
            .any(|f| a == f || (f.starts_with("--") && a.starts_with(&format!("{f}="))))
    })
}

/// Refuse the writing forms of `sub`, or say why one needs approval; other subcommands pass
/// unchanged.
pub fn check(sub: &str, rule: &ProgramRule, rest: &[String]) -> Result<Vec<String>, Denial> {
    let args = positionals(rule, rest);
    let form = args.first().copied();
    if let Some(form) = form.filter(|f| {
        (sub == "remote" && CHANGING_REMOTE_FORMS.contains(f))
            || (sub == "submodule" && CHANGING_SUBMODULE_FORMS.contains(f))
    }) {
        return Ok(vec![format!(
            "git {sub} {form}: changes where the repository's {sub}s point (a later fetch, \
             push or update would go there)"
        )]);
    }
    let why = match sub {
        "reflog"
            if args
                .first()
                .is_some_and(|a| matches!(*a, "expire" | "delete" | "drop")) =>
        {
            "only showing the reflog (expire, delete and drop change it)".to_string()
        }
        "remote" if form.is_some_and(|a| !LOCAL_REMOTE_FORMS.contains(&a)) => format!(
            "only listing, {} and (with approval) {} (other forms reach the network)",
            LOCAL_REMOTE_FORMS.join(", "),
            CHANGING_REMOTE_FORMS.join(", ")
        ),
        "commit" if !commit_has_message(rule, rest) => {
            "a commit needs its message on the command line (-m, -F, -C, --no-edit, --fixup or \
             --squash): git would start an editor"
                .to_string()
        }
        "config" if !config_read(&args, rest) && !config_set(&args, rest) => format!(
            "only reading configuration (--get, --list, get, list, or one key) and setting {} \
             in the repository",
            SETTABLE.join(", ")
        ),
        "merge" => match strategy(rule, rest) {
            Some(name) if !BUILT_IN_STRATEGIES.contains(&name) => format!(
                "the strategy {name:?} is not one of git's own ({}): git would run a program \
                 named git-merge-{name}",
                BUILT_IN_STRATEGIES.join(", ")
            ),
            _ => return Ok(Vec::new()),
        },
        "submodule" if form.is_some_and(|a| !SUBMODULE_FORMS.contains(&a)) => format!(
            "only {} and (with approval) {} (other forms clone, fetch or run commands in \
             submodules)",
            SUBMODULE_FORMS.join(", "),
            CHANGING_SUBMODULE_FORMS.join(", ")
        ),
        "worktree" if form != Some("list") => {
            "only `git worktree list` (add, move, remove, prune, lock and repair change \
             worktrees and their metadata)"
                .to_string()
        }
        "notes" if form.is_some_and(|a| !matches!(a, "list" | "show")) => {
            "only `git notes list` and `git notes show` (the other forms write notes refs or \
             start an editor)"
                .to_string()
        }
        "help" if form.is_some() => {
            "`git help NAME` runs man and a pager; `git NAME -h` prints the options, `git help \
             -a` and `git help -g` list commands and guides"
                .to_string()
        }
        "stash" if args.first().is_some_and(|a| !STASH_FORMS.contains(a)) => format!(
            "`git stash {}` is not one of {} (a pathspec goes after --)",
            args[0],
            STASH_FORMS.join(", ")
        ),
        _ => return Ok(Vec::new()),
    };
    Err(Denial::new(format!("git {sub}: {why}")))
}

/// `git submodule` forms that only show (the git analyzer also refuses `submodule` in a
/// repository that has any).
const SUBMODULE_FORMS: &[&str] = &["status", "summary"];

/// `git submodule` forms that change where submodules come from or drop their work trees:
/// asked.
const CHANGING_SUBMODULE_FORMS: &[&str] = &["set-url", "set-branch", "sync", "deinit"];

/// `git remote` forms that change where a remote points (its own configuration): asked.
const CHANGING_REMOTE_FORMS: &[&str] = &["add", "set-url", "rename"];

/// `git remote` forms allowed as they are: listing, printing a URL, forgetting a remote.
const LOCAL_REMOTE_FORMS: &[&str] = &["get-url", "remove", "rm"];

/// Whether a commit gets its message without an editor.
fn commit_has_message(rule: &ProgramRule, rest: &[String]) -> bool {
    let long = has_any(
        rest,
        &[
            "--message",
            "--file",
            "--reuse-message",
            "--no-edit",
            "--fixup",
            "--squash",
        ],
    );
    let short = rest.iter().enumerate().any(|(i, a)| {
        a.starts_with('-')
            && !a.starts_with("--")
            && ['m', 'F', 'C']
                .iter()
                .any(|letter| short_value(rule, a, *letter, rest.get(i + 1)).is_some())
    });
    long || short
}

/// Keys `git config KEY VALUE` may set in the repository: none names a program or a file.
const SETTABLE: &[&str] = &[
    "user.name",
    "user.email",
    "init.defaultbranch",
    "core.autocrlf",
    "core.eol",
    "core.ignorecase",
    "core.filemode",
];

const BUILT_IN_STRATEGIES: &[&str] = &["ort", "recursive", "resolve", "octopus", "ours", "subtree"];

const STASH_FORMS: &[&str] = &[
    "list", "show", "push", "save", "pop", "apply", "drop", "clear", "branch",
];

/// The value of the short option `letter` in the cluster `word` (`-qs ours`, `-sours`), read
/// with the rule's flags: a letter taking a value swallows the rest of the word.
fn short_value<'a>(
    rule: &ProgramRule,
    word: &'a str,
    letter: char,
    next: Option<&'a String>,
) -> Option<&'a str> {
    for (at, c) in word.char_indices().skip(1) {
        let takes = rule
            .flag_takes(&format!("-{c}"))
            .is_some_and(crate::policy::rules::FlagTakes::takes_argument);
        if c == letter {
            let attached = &word[at + c.len_utf8()..];
            return if attached.is_empty() {
                next.map(String::as_str)
            } else {
                Some(attached)
            };
        }
        if takes {
            return None;
        }
    }
    None
}

/// `git config [--local] KEY VALUE` or `git config set [--local] KEY VALUE` for a settable key.
fn config_set(args: &[&str], rest: &[String]) -> bool {
    let flags_ok = rest
        .iter()
        .filter(|a| a.starts_with('-'))
        .all(|a| a == "--local");
    let pair = match args {
        ["set", key, _value] | [key, _value] => key.to_ascii_lowercase(),
        _ => return false,
    };
    flags_ok && SETTABLE.contains(&pair.as_str())
}

/// The value of `-s NAME` / `--strategy NAME` / `--strategy=NAME` / `-sNAME`, if given (the last
/// one wins, as in git; any one that is not built in is refused, so each is checked).
fn strategy<'a>(rule: &ProgramRule, rest: &'a [String]) -> Option<&'a str> {
    let mut found = None;
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i].as_str();
        if a == "--" {
            break;
        }
        let value = if a == "--strategy" {
            rest.get(i + 1).map(String::as_str)
        } else if let Some(v) = a.strip_prefix("--strategy=") {
            Some(v)
        } else if a.starts_with('-') && !a.starts_with("--") {
            short_value(rule, a, 's', rest.get(i + 1))
        } else {
            None
        };
        if let Some(v) = value {
            if !BUILT_IN_STRATEGIES.contains(&v) {
                return Some(v);
            }
            found = Some(v);
        }
        i += if rule.flag_consumes_next(a) { 2 } else { 1 };
    }
    found
}

/// `git config` in a reading form: `get`/`list`, a `--get*`/`--list` flag, or one key.
fn config_read(args: &[&str], rest: &[String]) -> bool {
    let new_syntax_read = matches!(args.first(), Some(&"get") | Some(&"list"));
    let old_syntax_read = has_any(
        rest,
        &[
            "--get",
            "--get-all",
            "--get-regexp",
            "--get-urlmatch",
            "--get-color",
            "--get-colorbool",
            "--list",
            "-l",
        ],
    );
    let single_key = args.len() == 1
        && !matches!(
            args[0],
            "set" | "unset" | "rename-section" | "remove-section" | "edit"
        );
    new_syntax_read || old_syntax_read || single_key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(flags: &str) -> ProgramRule {
        toml::from_str(flags).unwrap()
    }

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn only_the_reading_forms_pass() {
        let plain = rule("");
        let config = rule("flags = { \"--type\" = \"value\", \"--default\" = \"value\" }");
        let merge =
            rule("flags = { \"-s\" = \"value\", \"--strategy\" = \"value\", \"-m\" = \"value\" }");
        let pick = |sub: &str| match sub {
            "config" => &config,
            "merge" | "commit" => &merge,
            _ => &plain,
        };
        for (sub, rest) in [
            ("reflog", ""),
            ("reflog", "show HEAD"),
            ("stash", ""),
            ("stash", "pop"),
            ("stash", "push -m wip -- src"),
            ("remote", "-v"),
            ("remote", "get-url origin"),
            ("remote", "remove origin"),
            ("reflog", "main"),
            ("commit", "-m fix"),
            ("commit", "--no-edit --amend"),
            ("config", "--get user.name"),
            ("config", "--type bool core.bare"),
            ("config", "get user.email"),
            ("config", "-l"),
            ("config", "user.name Alice"),
            ("config", "--local User.Email a@b"),
            ("config", "set init.defaultBranch main"),
            ("merge", "feature"),
            ("merge", "-s ours -m x feature"),
            ("merge", "--strategy=ort feature"),
        ] {
            assert_eq!(
                check(sub, pick(sub), &words(rest)),
                Ok(vec![]),
                "git {sub} {rest}"
            );
        }
        for (sub, rest) in [
            ("remote", "add origin https://example.com/r.git"),
            ("remote", "set-url origin ext::sh"),
            ("remote", "rename origin up"),
            ("submodule", "set-url lib ../other"),
            ("submodule", "sync"),
        ] {
            let asks = check(sub, pick(sub), &words(rest)).unwrap();
            assert!(
                asks[0].contains("changes where"),
                "git {sub} {rest}: {asks:?}"
            );
        }
        for (sub, rest) in [
            ("reflog", "expire --all"),
            ("reflog", "delete HEAD@{1}"),
            ("stash", "evil"),
            ("remote", "show origin"),
            ("remote", "prune origin"),
            ("commit", "--amend"),
            ("commit", "-a"),
            ("config", "core.pager sh"),
            ("config", "set core.pager sh"),
            ("config", "--type bool core.pager sh"),
            ("config", "core.hooksPath ."),
            ("config", "--global user.name x"),
            ("config", ""),
            ("merge", "-s pwn feature"),
            ("merge", "-spwn feature"),
            ("merge", "--strategy=pwn feature"),
            ("merge", "-s ours -s pwn feature"),
            ("merge", "-qs pwn feature"),
        ] {
            assert!(
                check(sub, pick(sub), &words(rest)).is_err(),
                "git {sub} {rest}"
            );
        }
    }
}
