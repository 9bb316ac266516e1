//! Oracle (c), a differential against real bash: an allowed command string is run by bash
//! itself — in the host jail (`warden jail`), in a scratch copy of the fixture — with every
//! program name defined as a function that records its argv and working directory instead of
//! running. Everything bash would have run must be a command of warden's IR (same program,
//! same cwd, the recorded arguments in order within warden's argv, which may only add the
//! safety options it inserts). A difference is a parser differential: bash would run something
//! the policy never checked.

use crate::policy::ir::Script;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where the recorder writes, inside the scratch workspace (writable in the jail).
const LOG_NAME: &str = ".warden-bash-record";

pub struct Bash {
    /// The `warden` front binary (its `jail` subcommand).
    pub warden: PathBuf,
}

/// One recorded call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub cwd: PathBuf,
    pub argv: Vec<String>,
}

impl Bash {
    pub fn find() -> Option<Bash> {
        let exe = std::env::current_exe().ok()?;
        let warden = exe.parent()?.join("warden");
        (warden.exists() && Path::new("/bin/bash").exists()).then_some(Bash { warden })
    }

    /// What bash runs for `command` in `root/ws` (HOME is `root/ws` too, as in the jail), with
    /// `names` recorded.
    pub fn record(
        &self,
        command: &str,
        root: &Path,
        names: &BTreeSet<String>,
    ) -> Result<Vec<Recorded>, String> {
        let workspace = root.join("ws");
        let log = workspace.join(LOG_NAME);
        let mut script = format!(
            "HOME={home}; __log={log}; \
             __rec() {{ builtin printf '%s\\0' \"$PWD\" \"$@\" >> \"$__log\"; \
             builtin printf '\\n' >> \"$__log\"; return 0; }}\n",
            home = quote(&workspace.to_string_lossy()),
            log = quote(&log.to_string_lossy()),
        );
        for name in names {
            if name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-+[".contains(c))
            {
                script.push_str(&format!("{name}() {{ __rec {name} \"$@\"; }}\n"));
            }
        }
        script.push_str(command);
        script.push('\n');
        let config = root.join("bash-config.toml");
        std::fs::write(&config, "").map_err(|e| e.to_string())?;
        let mut child = Command::new(&self.warden)
            .arg("jail")
            .arg("--workspace")
            .arg(&workspace)
            .args([
                "--timeout",
                "5",
                "--",
                "/bin/bash",
                "--norc",
                "--noprofile",
                "-c",
            ])
            .arg(&script)
            .env("WARDEN_CONFIG", &config)
            .current_dir(&workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start warden jail: {e}"))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while child.try_wait().map_err(|e| e.to_string())?.is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err("bash did not finish within 15 s".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let bytes = std::fs::read(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        Ok(parse(&bytes))
    }
}

fn parse(bytes: &[u8]) -> Vec<Recorded> {
    let mut out = Vec::new();
    let mut fields: Vec<String> = Vec::new();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == 0 {
            fields.push(String::from_utf8_lossy(&bytes[start..i]).into_owned());
            start = i + 1;
        } else if b == b'\n' && start == i {
            // A record ends with a newline right after its last NUL.
            if !fields.is_empty() {
                let cwd = PathBuf::from(fields.remove(0));
                out.push(Recorded {
                    cwd,
                    argv: std::mem::take(&mut fields),
                });
            }
            start = i + 1;
        }
    }
    out
}

/// Single-quote for bash.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// Compare what bash ran with the IR: `Err` names the first call the IR does not hold.
pub fn compare(recorded: &[Recorded], ir: &Script) -> Result<(), String> {
    for call in recorded {
        let cwd = call.cwd.canonicalize().unwrap_or_else(|_| call.cwd.clone());
        let matched = ir.commands().any(|c| {
            c.cwd == cwd
                && c.argv.first() == call.argv.first()
                && (is_subsequence(&call.argv, &c.argv)
                    || (!c.process_substitutions.is_empty()
                        && is_subsequence(&pipes_unnamed(&call.argv, None), &{
                            let places: Vec<usize> =
                                c.process_substitutions.iter().map(|p| p.arg).collect();
                            pipes_unnamed(&c.argv, Some(&places))
                        })))
        });
        if !matched {
            return Err(format!(
                "bash ran {:?} in {}, which the checked IR does not hold",
                call.argv,
                cwd.display()
            ));
        }
    }
    Ok(())
}

/// argv with the paths of process substitutions' pipes written as one marker: bash picks its
/// own descriptor (`/dev/fd/63`), warden another. `places`: where warden's stand; `None`: any
/// `/dev/fd/N` (what bash ran).
fn pipes_unnamed(argv: &[String], places: Option<&[usize]>) -> Vec<String> {
    let is_pipe = |i: usize, word: &str| match places {
        Some(places) => places.contains(&i),
        None => word
            .strip_prefix("/dev/fd/")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
    };
    argv.iter()
        .enumerate()
        .map(|(i, word)| {
            if is_pipe(i, word) {
                "<(…)".to_string()
            } else {
                word.clone()
            }
        })
        .collect()
}

/// `small` in order within `big` (warden inserts safety options, never removes words).
fn is_subsequence(small: &[String], big: &[String]) -> bool {
    let mut rest = big.iter();
    small.iter().all(|word| rest.any(|w| w == word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_back_and_compared_as_subsequences() {
        let bytes = b"/w\0ls\0-l\0\n/w\0cat\0a b\0\n";
        let recorded = parse(bytes);
        assert_eq!(recorded.len(), 2);
        assert_eq!(recorded[1].argv, ["cat", "a b"]);
        let a: Vec<String> = ["git", "status"].iter().map(|s| s.to_string()).collect();
        let b: Vec<String> = ["git", "-c", "x=y", "status"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(is_subsequence(&a, &b));
        assert!(!is_subsequence(&b, &a));
    }

    #[test]
    fn a_process_substitutions_pipe_matches_whatever_descriptor_bash_chose() {
        let words = |w: &[&str]| -> Vec<String> { w.iter().map(|s| s.to_string()).collect() };
        let bash = pipes_unnamed(&words(&["comm", "-13", "/dev/fd/63", "/dev/fd/62"]), None);
        let ir = pipes_unnamed(
            &words(&["comm", "-13", "/dev/fd/9", "/dev/fd/8"]),
            Some(&[2, 3]),
        );
        assert_eq!(bash, ir);
        // Only warden's own places: a path written out stays itself.
        let ir = pipes_unnamed(&words(&["cat", "/dev/fd/9", "/dev/fd/3"]), Some(&[1]));
        assert_eq!(ir, ["cat", "<(…)", "/dev/fd/3"]);
    }
}
