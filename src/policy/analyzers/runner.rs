//! Programs that run the project's own code: an interpreter given a script file (`python3
//! tool.py`, `node app.js`) and build tools or test runners (`make`, `cargo build`, `npm test`).
//! What they run is in files the policy cannot read, so such a command is never allowed
//! outright: it is asked (the approval says it runs jailed), and the executor runs it only in a
//! sandbox that confines code (Landlock + seccomp, or Docker; never the weak host jail).
//!
//! Code written into the command itself stays refused: `-c`/`-e` strings, a program read from
//! standard input, an interactive prompt. A person approving `python3 tool.py` can open
//! `tool.py`; a string the model composed and a person skims is how an injection gets through.

use crate::policy::paths::Access;
use crate::policy::rules::{Analysis, ProgramRule, RunnerKind};
use crate::policy::Denial;

pub fn analyze(rule: &ProgramRule, program: &str, args: &[String]) -> Result<Analysis, Denial> {
    let Some(kind) = rule.runs else {
        return Err(Denial::new(format!(
            "{program}: this runner rule does not say how the program is given code (`runs`), \
             so it runs nothing"
        )));
    };
    // `--version`, `--help`: no project code runs.
    if args.len() == 1 && rule.no_code.contains(&args[0]) {
        return Ok(Analysis::default());
    }
    let (mut analysis, what) = match kind {
        RunnerKind::Script => script(rule, program, args)?,
        RunnerKind::None => {
            return Err(Denial::new(format!(
                "{program}: `runs = \"none\"` belongs on a subcommand, not on the program"
            )))
        }
        RunnerKind::Build => {
            // `cargo +nightly build`: rustup's toolchain choice comes first.
            let toolchain = usize::from(
                args.first()
                    .is_some_and(|first| first.starts_with('+') && first.len() > 1),
            );
            let args = &args[toolchain..];
            let mut analysis = rule.analyze_command(program, args)?;
            // The toolchain is part of the shape (`cargo +nightly test`); without subcommands
            // (`make TARGET…`) every argument is.
            analysis.shape = analysis.shape.map(|n| n + toolchain);
            let sub = args
                .iter()
                .find(|a| !a.starts_with('-'))
                .and_then(|s| rule.subcommands.get(s));
            if sub.is_some_and(|s| s.runs == Some(RunnerKind::None)) {
                return Ok(analysis);
            }
            // Targets, filters and the arguments passed on (`cargo run -- FILE`) mean what the
            // project decides: each word is checked as a read, as for a script's arguments.
            for arg in args.iter().filter(|a| !a.starts_with('-')) {
                analysis.paths.push((arg.clone(), Access::Read));
            }
            let what = match args.iter().find(|a| !a.starts_with('-')) {
                Some(sub) if !rule.subcommands.is_empty() => {
                    format!("{sub} runs what the project's files say")
                }
                _ => "runs what the project's files say".to_string(),
            };
            (analysis, what)
        }
    };
    analysis.runs_code = Some(what);
    Ok(analysis)
}

/// `INTERPRETER [OPTIONS] SCRIPT [ARGS…]` or `INTERPRETER [OPTIONS] -m MODULE [ARGS…]`.
fn script(
    rule: &ProgramRule,
    program: &str,
    args: &[String],
) -> Result<(Analysis, String), Denial> {
    let mut i = 0;
    let mut module = None;
    while let Some(arg) = args.get(i).filter(|a| a.starts_with('-') && *a != "-") {
        if arg == "--" {
            i += 1;
            break;
        }
        // `-m MODULE` (also `-um MODULE`, `-mMODULE`) ends the interpreter's options.
        if let Some(attached) = module_flag(rule, arg) {
            let (name, next) = match attached {
                Some(name) => (name, i + 1),
                None => (
                    args.get(i + 1).cloned().ok_or_else(|| {
                        Denial::new(format!("{program} {arg}: names no module to run"))
                    })?,
                    i + 2,
                ),
            };
            module = Some((next, name));
            break;
        }
        i += if rule.flag_consumes_next(arg) { 2 } else { 1 };
    }
    let options_end = module.as_ref().map_or(i.min(args.len()), |(end, _)| *end);
    // The interpreter's own options, with the rule's deny list (`-c`, `-e`, `-i`…).
    let mut analysis = rule.analyze(program, &args[..options_end])?;
    analysis.paths.clear();
    let (what, rest) = match module {
        Some((_, name)) => (
            format!("runs the module {name} (code from the workspace or installed packages)"),
            &args[options_end..],
        ),
        None => match args.get(options_end).map(String::as_str) {
            None | Some("-") => {
                return Err(Denial::new(format!(
                    "{program} without a script file would read its program from standard \
                     input or start a prompt; write the code to a file in the workspace and run \
                     that"
                )))
            }
            Some(script) => {
                analysis.paths.push((script.to_string(), Access::Read));
                (format!("runs {script}"), &args[options_end + 1..])
            }
        },
    };
    // The interpreter's options and the script or module name what runs; its arguments do not.
    analysis.shape = Some(args.len() - rest.len());
    // The script's arguments mean what the script decides: each is checked as a read, the
    // strict choice for words the policy cannot interpret — and so is the value of a
    // `--name=VALUE` option (argparse and getopt_long read it as the option's value).
    for arg in rest {
        let value = match arg.strip_prefix("--") {
            Some(option) => option.split_once('=').map(|(_, v)| v),
            None if arg.starts_with('-') => None,
            None => Some(arg.as_str()),
        };
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            analysis.paths.push((value.to_string(), Access::Read));
        }
    }
    Ok((analysis, what))
}

/// Whether the short-option word `arg` ends in `-m` (`Some(None)`: the module is the next
/// argument) or holds it attached (`Some(Some(name))`), read with the rule's flags.
fn module_flag(rule: &ProgramRule, arg: &str) -> Option<Option<String>> {
    if arg.starts_with("--") || !rule.flags.contains_key("-m") {
        return None;
    }
    let letters: Vec<char> = arg.chars().skip(1).collect();
    for (j, letter) in letters.iter().enumerate() {
        if *letter == 'm' {
            let rest: String = letters[j + 1..].iter().collect();
            return Some((!rest.is_empty()).then_some(rest));
        }
        // A flag taking a value swallows the rest of the word (`-W` `ignore`).
        if rule
            .flag_takes(&format!("-{letter}"))
            .is_some_and(crate::policy::rules::FlagTakes::takes_argument)
        {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python() -> ProgramRule {
        toml::from_str(
            r#"
            analyzer = "runner"
            runs = "script"
            no_code = ["--version", "-V"]
            unknown_flags = "deny"
            flags = { "-u" = "flag", "-B" = "flag", "-m" = "value", "-W" = "value", "-c" = { takes = "value", deny = "runs code given on the command line" }, "-i" = { deny = "starts a prompt" } }
            "#,
        )
        .unwrap()
    }

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn a_script_or_module_runs_code_and_inline_code_is_refused() {
        let rule = python();
        let version = analyze(&rule, "python3", &words("--version")).unwrap();
        assert!(version.runs_code.is_none() && version.paths.is_empty());

        let run = analyze(&rule, "python3", &words("-u tool.py --in data.csv -v")).unwrap();
        assert_eq!(run.runs_code.as_deref(), Some("runs tool.py"));
        let paths: Vec<&str> = run.paths.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["tool.py", "data.csv"]);
        // The fuzzer's finding: `--=link_secret` carried a path past the check.
        let valued = analyze(&rule, "python3", &words("t --=link --out=o.csv --flag=")).unwrap();
        let paths: Vec<&str> = valued.paths.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["t", "link", "o.csv"]);

        for cmd in [
            "-Bm pytest -x tests",
            "-mpytest -x tests",
            "-m pytest -x tests",
        ] {
            let module = analyze(&rule, "python3", &words(cmd)).unwrap();
            assert!(module.runs_code.unwrap().contains("module pytest"), "{cmd}");
            assert_eq!(
                module.paths,
                vec![("tests".to_string(), Access::Read)],
                "{cmd}"
            );
        }

        for (cmd, why) in [
            ("-c print(1)", "command line"),
            ("", "standard input"),
            ("-", "standard input"),
            ("-u", "standard input"),
            ("-i tool.py", "prompt"),
            ("-X dev tool.py", "-X"),
            ("-m", "no module"),
        ] {
            let err = analyze(&rule, "python3", &words(cmd)).unwrap_err().reason;
            assert!(err.contains(why), "python3 {cmd}: {err}");
        }
    }

    #[test]
    fn a_build_tool_runs_code_and_its_subcommands_decide() {
        let cargo: ProgramRule = toml::from_str(
            r#"
            analyzer = "runner"
            runs = "build"
            no_code = ["--version"]
            [subcommands.build]
            flags = { "--release" = "flag" }
            unknown_flags = "deny"
            [subcommands.install]
            decision = "deny"
            reason = "downloads crates"
            "#,
        )
        .unwrap();
        let build = analyze(&cargo, "cargo", &words("build --release")).unwrap();
        assert!(build.runs_code.unwrap().starts_with("build runs"));
        let err = analyze(&cargo, "cargo", &words("install ripgrep")).unwrap_err();
        assert!(err.reason.contains("downloads"), "{}", err.reason);
        assert!(analyze(&cargo, "cargo", &words("build --config x"))
            .unwrap_err()
            .reason
            .contains("--config"));
        let no_runs: ProgramRule = toml::from_str("analyzer = \"runner\"").unwrap();
        assert!(analyze(&no_runs, "make", &[]).is_err());
    }
}
