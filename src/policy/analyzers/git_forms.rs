//! The read-only forms of git subcommands that also write: `branch` and `tag` only list,
//! `reflog` only shows, `stash` only lists, `remote` only lists or prints a URL (no network),
//! `config` only reads (the repository's own files, never an editor, never a write).

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

/// Refuse the writing forms of `sub`; other subcommands pass unchanged.
pub fn check(sub: &str, rule: &ProgramRule, rest: &[String]) -> Result<(), Denial> {
    let args = positionals(rule, rest);
    let why = match sub {
        "branch" if !args.is_empty() && !has_any(rest, &["--list", "-l", "--show-current"]) => {
            "git branch NAME creates a branch; only listing branches is allowed (use --list \
             PATTERN)"
        }
        "tag" if !args.is_empty() && !has_any(rest, &["--list", "-l"]) => {
            "git tag NAME creates a tag; only listing tags is allowed (use --list PATTERN)"
        }
        "reflog" if args.first().is_some_and(|a| *a != "show") => {
            "only `git reflog [show]` (expire and delete change the reflog)"
        }
        "stash" if args.as_slice() != ["list"] => {
            "only `git stash list` (other forms change the work tree or stashes)"
        }
        "remote" if args.first().is_some_and(|a| *a != "get-url") => {
            "only listing remotes (-v) and get-url (other forms change the configuration or \
             reach the network)"
        }
        "config" if !config_read(&args, rest) => {
            "only reading configuration (--get, --list, get, list, or one key)"
        }
        _ => return Ok(()),
    };
    Err(Denial::new(format!("git {sub}: {why}")))
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
        for (sub, rest) in [
            ("branch", "-a"),
            ("branch", "--list feat*"),
            ("tag", ""),
            ("tag", "-l v1.*"),
            ("reflog", ""),
            ("reflog", "show HEAD"),
            ("stash", "list"),
            ("remote", "-v"),
            ("remote", "get-url origin"),
            ("config", "--get user.name"),
            ("config", "--type bool core.bare"),
            ("config", "get user.email"),
            ("config", "-l"),
        ] {
            let r = if sub == "config" { &config } else { &plain };
            assert!(check(sub, r, &words(rest)).is_ok(), "git {sub} {rest}");
        }
        for (sub, rest) in [
            ("branch", "new-feature"),
            ("tag", "v2"),
            ("reflog", "expire --all"),
            ("reflog", "delete HEAD@{1}"),
            ("stash", ""),
            ("stash", "pop"),
            ("stash", "list extra"),
            ("remote", "add evil https://x"),
            ("remote", "show origin"),
            ("config", "core.pager sh"),
            ("config", "set core.pager sh"),
            ("config", "--type bool core.pager sh"),
            ("config", ""),
        ] {
            let r = if sub == "config" { &config } else { &plain };
            assert!(check(sub, r, &words(rest)).is_err(), "git {sub} {rest}");
        }
    }
}
