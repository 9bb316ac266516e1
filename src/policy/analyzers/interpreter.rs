//! Interpreters (`python3`, `node`, `bash`…) run code the policy cannot read, so the default
//! policy denies them. A rule with `analyzer = "interpreter"` and `scripts = "/abs/dir"` allows
//! exactly one form — `INTERPRETER [listed flags] SCRIPT [ARGS…]` — where SCRIPT resolves
//! (symlinks followed) to an existing regular file under `scripts`. Inline code (`-c`, `-e`),
//! modules (`-m`), a program on standard input (`-`, or no script at all) and any flag the rule
//! does not list are refused. Skills use it to run their own files, and nothing else.
//!
//! The script's arguments are opaque to the policy, so each is checked as a path read (the
//! strict choice, as for unknown programs); words that are not paths resolve inside the cwd
//! and pass.

use super::AnalyzerContext;
use crate::policy::paths::Access;
use crate::policy::rules::{Analysis, FlagTakes, ProgramRule};
use crate::policy::Denial;

pub fn analyze(
    rule: &ProgramRule,
    program: &str,
    args: &[String],
    ctx: &AnalyzerContext,
) -> Result<Analysis, Denial> {
    let Some(root) = rule.scripts.as_deref() else {
        return Err(Denial::new(format!(
            "{program}: this interpreter rule names no script folder (`scripts`), so it runs \
             nothing"
        )));
    };
    let mut index = 0;
    while let Some(flag) = args.get(index).filter(|a| a.starts_with('-') && *a != "-") {
        index += 1;
        if flag == "--" {
            break;
        }
        let listed = rule
            .flags
            .get(flag.as_str())
            .is_some_and(|spec| spec.takes() == FlagTakes::Flag && spec.deny().is_none());
        if !listed {
            return Err(Denial::new(format!(
                "{program} {flag}: only a script file from {} may run; this flag is not allowed \
                 (no -c/-e code, no -m modules)",
                root.display()
            )));
        }
    }
    let script = match args.get(index).map(String::as_str) {
        None | Some("-") => {
            return Err(Denial::new(format!(
                "{program} needs a script file from {} (a program read from standard input is \
                 not allowed)",
                root.display()
            )))
        }
        Some(script) => script,
    };
    let resolved = ctx
        .paths
        .check(ctx.cwd, script, Access::Read)
        .map_err(|d| Denial::new(format!("{program}: {}", d.reason)))?;
    if !resolved.starts_with(root) {
        return Err(Denial::new(format!(
            "{program} {script}: only files in {} may run (it resolves to {})",
            root.display(),
            resolved.display()
        )));
    }
    if !std::fs::metadata(&resolved).is_ok_and(|m| m.is_file()) {
        return Err(Denial::new(format!(
            "{program} {script}: no such script in {}",
            root.display()
        )));
    }
    let mut analysis = Analysis::default();
    analysis.paths.push((script.to_string(), Access::Read));
    for arg in &args[index + 1..] {
        analysis.paths.push((arg.clone(), Access::Read));
        // `--out=/etc/x`: the value is checked on its own too.
        if let Some((_, value)) = arg.split_once('=').filter(|_| arg.starts_with('-')) {
            if !value.is_empty() {
                analysis.paths.push((value.to_string(), Access::Read));
            }
        }
    }
    Ok(analysis)
}

#[cfg(test)]
mod tests {
    use crate::policy::{Checker, Decision, PathPolicy, Policy};
    use std::path::Path;
    use std::sync::Arc;

    /// A skill-like setup: `skill/` holds the scripts, `ws/` is writable, `/outside` is not.
    fn checker(dir: &Path) -> (Checker, std::path::PathBuf) {
        let skill = dir.join("skill");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::write(skill.join("scripts/run.py"), "print('hi')\n").unwrap();
        std::fs::create_dir_all(dir.join("ws")).unwrap();
        std::fs::write(dir.join("ws/notes.py"), "print('notes')\n").unwrap();
        std::fs::write(dir.join("other.py"), "print('other')\n").unwrap();
        std::os::unix::fs::symlink(dir.join("other.py"), skill.join("link.py")).unwrap();
        let skill = skill.canonicalize().unwrap();
        let text = format!(
            "extends_default = true\n[programs.python3]\nanalyzer = \"interpreter\"\n\
             scripts = {:?}\nflags = {{ \"-u\" = \"flag\", \"-c\" = {{ deny = \"code\" }} }}\n",
            skill.display().to_string()
        );
        let policy = Arc::new(Policy::from_user_toml(&text, "test").unwrap());
        let paths = PathPolicy::new(
            &dir.join("ws"),
            &[],
            std::slice::from_ref(&skill),
            Path::new("/"),
        )
        .unwrap();
        (Checker::new(policy, paths), skill)
    }

    #[test]
    fn only_scripts_from_the_folder_run() {
        let dir = tempfile::tempdir().unwrap();
        let (mut checker, skill) = checker(dir.path());
        let ok = checker.check_in("python3 -u scripts/run.py Paris --n=3", &skill);
        assert_eq!(ok.decision, Decision::Allow, "{}", ok.reason);
        for (command, why) in [
            ("python3 -c 'import os'", "-c"),
            ("python3 -m http.server", "-m"),
            ("python3", "standard input"),
            ("python3 - < scripts/run.py", "standard input"),
            ("python3 link.py", "outside"),
            ("python3 ../ws/notes.py", "only files in"),
            ("python3 ../other.py", "outside"),
            ("python3 scripts/missing.py", "no such script"),
            ("python3 scripts/run.py /etc/passwd", "outside"),
            ("python3 scripts/run.py --in=/etc/passwd", "outside"),
            ("python3 -- -c", "no such script"),
        ] {
            let verdict = checker.check_in(command, &skill);
            assert_eq!(verdict.decision, Decision::Deny, "{command}");
            assert!(
                verdict.reason.contains(why),
                "{command}: {}",
                verdict.reason
            );
        }
    }

    #[test]
    fn a_rule_without_a_folder_runs_nothing() {
        let policy = Arc::new(
            Policy::from_user_toml("[programs.python3]\nanalyzer = \"interpreter\"\n", "t")
                .unwrap(),
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.py"), "").unwrap();
        let paths = PathPolicy::new(dir.path(), &[], &[], Path::new("/")).unwrap();
        let verdict = Checker::new(policy, paths).check("python3 a.py");
        assert_eq!(verdict.decision, Decision::Deny);
        assert!(
            verdict.reason.contains("no script folder"),
            "{}",
            verdict.reason
        );
    }
}
