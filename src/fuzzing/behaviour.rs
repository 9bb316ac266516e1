//! Oracle (d), real behaviour: an allowed command runs for real — its programs on a scratch
//! copy of the fixture, in the host jail, through `warden exec` — under `strace -f` started
//! from outside the jail. Any program executed that is not in the checked IR, any file opened
//! for writing outside the writable roots or that the policy checked as read-only, any open of
//! the fixture's secrets (outside the workspace) and any network socket is a failure: this sees
//! rules that are wrong about what a flag or argument does, which the invariant (built on the
//! same rules) cannot.

use crate::policy::ir::Script;
use crate::policy::paths::Access;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How to run `warden exec` under strace.
pub struct Tracer {
    /// The `warden` front binary.
    pub warden: PathBuf,
    pub strace: PathBuf,
    pub policy_file: Option<PathBuf>,
}

impl Tracer {
    /// `None` when strace is not installed (the oracle is then skipped, and the report says so).
    pub fn find(policy_file: Option<&Path>) -> Option<Tracer> {
        let strace = ["/usr/bin/strace", "/bin/strace"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())?;
        let exe = std::env::current_exe().ok()?;
        let warden = exe.parent()?.join("warden");
        warden.exists().then(|| Tracer {
            warden,
            strace,
            policy_file: policy_file.map(Path::to_path_buf),
        })
    }

    /// Run `command` in `workspace` (whose fixture root holds the secrets) and judge what it
    /// did against `ir`, the IR checked for that same workspace: `Ok(None)` clean,
    /// `Ok(Some(why))` a finding, `Err` when the run itself failed (inconclusive, not a finding:
    /// a loaded machine can make strace miss its deadline).
    pub fn judge(
        &self,
        command: &str,
        ir: &Script,
        root: &Path,
        allowed: &BTreeSet<String>,
    ) -> Result<Option<String>, String> {
        let workspace = root.join("ws");
        let log = root.join("strace.log");
        let stderr_log = root.join("stderr.log");
        let config = root.join("config.toml");
        std::fs::write(&config, "").map_err(|e| format!("fuzz config: {e}"))?;
        let mut cmd = Command::new(&self.strace);
        cmd.args(["-f", "-qq", "-s", "4096", "-e"])
            .arg("trace=process,open,openat,creat,chdir,socket,connect")
            .arg("-o")
            .arg(&log)
            .arg(&self.warden)
            .arg("exec")
            .arg("--workspace")
            .arg(&workspace)
            .args(["--timeout", "5"]);
        if let Some(policy) = &self.policy_file {
            cmd.arg("--policy").arg(policy);
        }
        cmd.arg("--")
            .arg(command)
            .env("HOME", root.join("home"))
            .env("WARDEN_CONFIG", &config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(&stderr_log)
                    .map(Stdio::from)
                    .map_err(|e| format!("fuzz stderr log: {e}"))?,
            );
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start strace: {e}"))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if child.try_wait().map_err(|e| e.to_string())?.is_some() {
                break;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{command}` did not finish within 20 s under strace"
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let text = std::fs::read_to_string(&log).map_err(|e| format!("strace log: {e}"))?;
        // The write verifier undid a change to the protected set the IR did not declare: the
        // policy let through a write it should have seen.
        let stderr = std::fs::read_to_string(&stderr_log).unwrap_or_default();
        if let Some(at) = stderr.find(REFUSED_AFTER_RUN) {
            return Ok(Some(format!(
                "the write verifier had to undo what it did: {}",
                stderr[at..].trim_end()
            )));
        }
        Ok(judge_log(&text, ir, root, allowed).err())
    }
}

/// How the write verifier's refusal begins (`verify::Refusal`).
const REFUSED_AFTER_RUN: &str = "refused after it ran";

/// Whether `path` (physical) is in the protected set of `workspace`: where git reads config,
/// hooks or attributes, or a default instruction file. `git` runs: its own config writes are
/// the verifier's to judge.
fn protected(path: &Path, workspace: &Path, runs_git: bool) -> bool {
    let Ok(rel) = path.strip_prefix(workspace) else {
        return false;
    };
    let names: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let attributes = names
        .iter()
        .any(|n| n == ".gitattributes" || n == ".gitmodules");
    let in_git = names.iter().position(|n| n == ".git").is_some_and(|at| {
        let inside = &names[at + 1..];
        match inside.first().map(String::as_str) {
            Some("hooks") => true,
            Some("config" | "config.worktree") => !runs_git,
            Some("commondir") => true,
            Some("info") => inside.get(1).is_some_and(|n| n == "attributes"),
            _ => false,
        }
    });
    let home_config = matches!(names.first().map(String::as_str), Some(".gitconfig"))
        || (names.len() > 1 && names[0] == ".config" && names[1] == "git");
    let instructions =
        names.len() == 1 && ["AGENTS.md", "SOUL.md", "TOOLS.md"].contains(&names[0].as_str());
    attributes || in_git || home_config || instructions
}

/// One system call of the log, resumed lines joined.
#[derive(Debug)]
struct Call {
    pid: u32,
    name: String,
    args: String,
    result: String,
}

fn parse(text: &str) -> Vec<Call> {
    let mut pending: BTreeMap<u32, String> = BTreeMap::new();
    let mut calls = Vec::new();
    for line in text.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(pid) = pid.trim().parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        let full = if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            pending.insert(pid, head.to_string());
            continue;
        } else if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((_, tail)) = resumed.split_once(" resumed>") else {
                continue;
            };
            match pending.remove(&pid) {
                Some(head) => format!("{head}{tail}"),
                None => continue,
            }
        } else {
            rest.to_string()
        };
        if full.starts_with("+++") || full.starts_with("---") {
            continue;
        }
        // `name(args) = result`; strace pads before `=` when a call was resumed.
        let Some(open) = full.find('(') else { continue };
        let Some(eq) = full.rfind(" = ") else {
            continue;
        };
        let Some(close) = full[..eq].trim_end().strip_suffix(')').map(str::len) else {
            continue;
        };
        if close < open {
            continue;
        }
        calls.push(Call {
            pid,
            name: full[..open].to_string(),
            args: full[open + 1..close].to_string(),
            result: full[eq + 3..].to_string(),
        });
    }
    calls
}

/// The first double-quoted string of an argument list, unescaped as strace escapes it.
fn first_string(args: &str) -> Option<String> {
    let start = args.find('"')? + 1;
    let mut out = Vec::new();
    let bytes = args.as_bytes();
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some(String::from_utf8_lossy(&out).into_owned()),
            b'\\' if i + 1 < bytes.len() => {
                i += 1;
                match bytes[i] {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'x' if i + 2 < bytes.len() => {
                        let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
                        out.push(u8::from_str_radix(hex, 16).ok()?);
                        i += 2;
                    }
                    other => out.push(other),
                }
            }
            other => out.push(other),
        }
        i += 1;
    }
    None
}

/// For `execve("/bin/sh", ["sh", "-c", "WORDS"], …)` where WORDS are plain words (letters,
/// digits, `-`, `_`, `.`, spaces: no shell syntax), the program WORDS names, and WORDS.
fn fixed_shell_command(args: &str) -> Option<(String, String)> {
    let path = first_string(args)?;
    let shell = Path::new(&path).file_name()?.to_str()?;
    if !matches!(shell, "sh" | "dash" | "bash") {
        return None;
    }
    let mut rest = &args[args.find('[')?..];
    let mut words = Vec::new();
    while let Some(start) = rest.find('"') {
        if rest[..start].contains(']') {
            break;
        }
        words.push(first_string(rest)?);
        // Past this string's closing quote (the words accepted below hold no quotes).
        let after = rest[start + 1..].find('"').map(|end| start + end + 2)?;
        rest = &rest[after..];
    }
    match words.as_slice() {
        [_, flag, line]
            if flag == "-c"
                && !line.is_empty()
                && line
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || " -_.".contains(c)) =>
        {
            line.split_whitespace()
                .next()
                .map(|program| (program.to_string(), line.clone()))
        }
        _ => None,
    }
}

fn is_warden(path: &str) -> bool {
    Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("warden"))
}

/// The programs a script's `#!` line runs: its interpreter and, through `env`, the one `env`
/// looks up (`#!/usr/bin/env node` gives `env` and `node`). Empty for a binary.
fn script_interpreters(path: &Path) -> BTreeSet<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let Some(line) = head[..read].strip_prefix(b"#!") else {
        return BTreeSet::new();
    };
    let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next().unwrap_or_default());
    let mut words = line.split_whitespace();
    let mut names = BTreeSet::new();
    let base = |word: &str| {
        Path::new(word)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    };
    if let Some(interpreter) = words.next().and_then(base) {
        if interpreter == "env" {
            if let Some(target) = words.find(|w| !w.starts_with('-')).and_then(base) {
                names.insert(target);
            }
        }
        names.insert(interpreter);
    }
    names
}

/// The path as the kernel walks it: component by component, a symlink resolved where it
/// stands, so `link/..` is the link target's parent (not the lexical `.`).
fn physical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => out = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                out.push(name);
                if let Ok(real) = out.canonicalize() {
                    out = real;
                }
            }
        }
    }
    out
}

/// `allowed`: programs the policy allows anyway (a wrapper such as `egrep` running `grep` is
/// no finding; `awk` running `sh` is).
fn judge_log(
    text: &str,
    ir: &Script,
    root: &Path,
    allowed: &BTreeSet<String>,
) -> Result<(), String> {
    let calls = parse(text);
    let workspace = root.join("ws");
    let mut programs: BTreeSet<String> = ir
        .commands()
        .filter_map(|c| c.argv.first())
        .filter_map(|p| Path::new(p).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    programs.extend(allowed.iter().cloned());
    let argv_words: Vec<&String> = ir.commands().flat_map(|c| c.argv.iter().skip(1)).collect();
    let declared: Vec<&Path> = ir.written_paths();
    let runs_git = ir.commands().any(|c| crate::verify::is_git(&c.argv));
    let read_only: BTreeSet<PathBuf> = ir
        .commands()
        .flat_map(|c| c.paths.iter())
        .filter(|p| p.access == Access::Read)
        .map(|p| p.path.clone())
        .collect();
    // The descriptors of warden's `<(…)` pipes: the policy accepted each as a file the
    // program reads.
    let pipe_fds: BTreeSet<String> = ir
        .commands()
        .flat_map(|c| c.process_substitutions.iter())
        .map(|p| p.fd.to_string())
        .collect();
    let is_pipe_fd = |path: &str| {
        let fd_of = |rest: &str| rest.strip_prefix("fd/").map(str::to_owned);
        let fd = path.strip_prefix("/dev/").and_then(fd_of).or_else(|| {
            let rest = path.strip_prefix("/proc/")?;
            let (pid, rest) = rest.split_once('/')?;
            (pid == "self" || pid.bytes().all(|b| b.is_ascii_digit()))
                .then(|| fd_of(rest))
                .flatten()
        });
        fd.is_some_and(|fd| pipe_fds.contains(&fd))
    };
    let cwd_of = |program: &str| -> PathBuf {
        ir.commands()
            .find(|c| {
                c.argv
                    .first()
                    .and_then(|a| Path::new(a).file_name())
                    .is_some_and(|n| n.to_string_lossy() == program)
            })
            .map(|c| c.cwd.clone())
            .unwrap_or_else(|| workspace.clone())
    };
    let jail_tmp = std::env::temp_dir();
    // Which processes are jailed: those that executed a program that is not warden, and
    // everything they started.
    let mut jailed: BTreeMap<u32, PathBuf> = BTreeMap::new();
    // A program that is a script (npm is `#!/usr/bin/env node`) runs its interpreter in the
    // same process: that exec is the program itself, not another one.
    let mut interpreters: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    let mut failures = Vec::new();
    for call in &calls {
        let inherited = jailed.get(&call.pid).cloned();
        match call.name.as_str() {
            "execve" | "execveat" => {
                let Some(path) = first_string(&call.args) else {
                    continue;
                };
                if is_warden(&path) {
                    continue;
                }
                let name = Path::new(&path)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                // GNU tar starts its (fixed) compressor as `sh -c gzip`: a shell given one
                // plain command line of an allowed program is that program — unless the line
                // came from the checked arguments (awk's system("id")): then arguments are code.
                let name = match fixed_shell_command(&call.args) {
                    Some((program, line))
                        if programs.contains(&program)
                            && !argv_words.iter().any(|w| w.contains(line.as_str())) =>
                    {
                        program
                    }
                    _ => name,
                };
                let known = programs.contains(&name)
                    || interpreters
                        .get(&call.pid)
                        .is_some_and(|names| names.contains(&name));
                if inherited.is_none() && call.result == "0" {
                    jailed.insert(call.pid, cwd_of(&name));
                }
                if inherited.is_some() || call.result == "0" {
                    if !known {
                        failures.push(format!(
                            "ran {path}, neither a program of the IR nor one the policy allows"
                        ));
                    }
                    if call.result == "0" {
                        interpreters.insert(call.pid, script_interpreters(Path::new(&path)));
                    }
                }
            }
            "clone" | "clone3" | "fork" | "vfork" => {
                if let (Some(cwd), Ok(child)) = (inherited, call.result.trim().parse::<u32>()) {
                    jailed.insert(child, cwd);
                }
            }
            "chdir" => {
                if let (Some(cwd), Some(dir), "0") =
                    (inherited, first_string(&call.args), call.result.as_str())
                {
                    jailed.insert(call.pid, physical(&cwd.join(dir)));
                }
            }
            "open" | "openat" | "creat" => {
                let (Some(cwd), Some(path)) = (inherited, first_string(&call.args)) else {
                    continue;
                };
                // A path relative to a directory descriptor (openat(fd, …)) is not traced
                // back to its directory: judged only when absolute.
                let relative_to_fd = call.name == "openat"
                    && !call.args.starts_with("AT_FDCWD")
                    && !path.starts_with('/');
                if relative_to_fd {
                    continue;
                }
                // O_NOFOLLOW opens the last component itself, never what a symlink names.
                let joined = cwd.join(&path);
                let absolute = match (
                    call.args.contains("O_NOFOLLOW"),
                    joined.parent(),
                    joined.file_name(),
                ) {
                    (true, Some(parent), Some(name)) => physical(parent).join(name),
                    _ => physical(&joined),
                };
                let writes = call.name == "creat"
                    || ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"]
                        .iter()
                        .any(|f| call.args.contains(f));
                if writes && (is_pipe_fd(&path) || is_pipe_fd(&absolute.to_string_lossy())) {
                    failures.push(format!(
                        "opened {path} (warden's pipe for a process substitution) for writing; \
                         the policy checked it as read-only"
                    ));
                } else if absolute.starts_with(root) && !absolute.starts_with(&workspace) {
                    failures.push(format!(
                        "opened {} (a secret outside the workspace)",
                        absolute.display()
                    ));
                } else if writes {
                    let allowed_place = absolute.starts_with(&workspace)
                        || absolute.starts_with("/dev")
                        || absolute.starts_with("/proc/self")
                        || absolute
                            .strip_prefix(&jail_tmp)
                            .ok()
                            .and_then(|rest| rest.components().next())
                            .is_some_and(|c| {
                                c.as_os_str().to_string_lossy().starts_with("warden-jail-")
                            });
                    if !allowed_place {
                        failures.push(format!(
                            "opened {} for writing, outside the writable roots",
                            absolute.display()
                        ));
                    } else if read_only.contains(&absolute) {
                        failures.push(format!(
                            "opened {} for writing; the policy checked it as read-only",
                            absolute.display()
                        ));
                    } else if protected(&absolute, &workspace, runs_git)
                        && !declared.iter().any(|d| absolute.starts_with(d))
                    {
                        failures.push(format!(
                            "opened {} for writing: a protected file the IR does not declare",
                            absolute.display()
                        ));
                    }
                }
            }
            "socket" | "connect" if inherited.is_some() && call.args.contains("AF_INET") => {
                failures.push(format!("{}({}): network", call.name, call.args));
            }
            _ => {}
        }
    }
    failures.dedup();
    match failures.is_empty() {
        true => Ok(()),
        false => Err(failures.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undeclared_write_to_the_protected_set_is_a_finding() {
        let ws = Path::new("/r/ws");
        for hit in [
            "/r/ws/.git/hooks/pre-commit",
            "/r/ws/.git/config",
            "/r/ws/sub/.git/info/attributes",
            "/r/ws/a/.gitattributes",
            "/r/ws/.gitconfig",
            "/r/ws/.config/git/config",
            "/r/ws/AGENTS.md",
        ] {
            assert!(protected(Path::new(hit), ws, false), "{hit}");
        }
        for miss in [
            "/r/ws/.git/index",
            "/r/ws/docs/AGENTS.md",
            "/r/ws/gitconfig",
            "/r/other/.git/config",
        ] {
            assert!(!protected(Path::new(miss), ws, false), "{miss}");
        }
        // git writes its own config; the verifier judges what it wrote.
        assert!(!protected(Path::new("/r/ws/.git/config"), ws, true));
        assert!(protected(Path::new("/r/ws/.git/hooks/x"), ws, true));

        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/.git/hooks")).unwrap();
        let log = format!(
            "101 execve(\"/usr/bin/awk\", [\"awk\"], 0x1 /* 3 vars */) = 0\n\
             101 openat(AT_FDCWD, \"{}/ws/.git/hooks/post-merge\", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3\n",
            root.display()
        );
        let allowed = BTreeSet::from(["awk".to_string()]);
        let found = judge_log(&log, &Script::default(), &root, &allowed).unwrap_err();
        assert!(
            found.contains("protected file the IR does not declare"),
            "{found}"
        );
    }

    #[test]
    fn a_log_is_read_with_resumed_calls_and_children() {
        let log = "100 execve(\"/usr/local/bin/warden-full\", [\"warden\"], 0x1 /* 3 vars */) = 0\n\
                   101 execve(\"/usr/bin/awk\", [\"awk\"], 0x1 /* 3 vars */) = 0\n\
                   101 openat(AT_FDCWD, \"/etc/ld.so.cache\", O_RDONLY|O_CLOEXEC) = 3\n\
                   101 vfork( <unfinished ...>\n\
                   102 execve(\"/bin/sh\", [\"sh\", \"-c\", \"id\"], 0x1 /* 3 vars */) = 0\n\
                   101 <... vfork resumed>) = 102\n\
                   100 openat(AT_FDCWD, \"/etc/shadow\", O_RDONLY) = -1 EACCES (Permission denied)\n";
        let calls = parse(log);
        assert_eq!(calls.len(), 6, "{calls:#?}");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/sub/deeper")).unwrap();
        std::os::unix::fs::symlink("sub/deeper", root.join("ws/deep")).unwrap();
        assert_eq!(physical(&root.join("ws/deep/../..")), root.join("ws"));
        assert_eq!(
            fixed_shell_command(r#""/bin/sh", ["sh", "-c", "gzip -d"], 0x1 /* 3 vars */"#),
            Some(("gzip".to_string(), "gzip -d".to_string()))
        );
        for other in [
            r#""/bin/sh", ["sh", "-c", "id; gzip"], 0x1 /* 3 vars */"#,
            r#""/usr/bin/awk", ["awk", "-c", "gzip"], 0x1"#,
        ] {
            assert_eq!(fixed_shell_command(other), None, "{other}");
        }
        let padded =
            parse("7 execve(\"/x\", [] <unfinished ...>\n7 <... execve resumed>)    = 0\n");
        assert_eq!(padded[0].result, "0");
        assert_eq!(calls[3].name, "execve");
        assert_eq!(
            first_string("AT_FDCWD, \"a\\\"b\\x41\", O_RDONLY").unwrap(),
            "a\"bA"
        );
    }

    #[test]
    fn a_scripts_interpreter_is_the_program_itself_and_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let npm = root.join("npm");
        std::fs::write(&npm, "#!/usr/bin/env node\nrequire('x')\n").unwrap();
        std::fs::write(root.join("awk"), [0x7f, b'E', b'L', b'F']).unwrap();
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(script_interpreters(&npm), names(&["env", "node"]));
        assert!(script_interpreters(&root.join("awk")).is_empty());
        let allowed = names(&["npm"]);
        let exec = |pid: u32, path: &str, result: &str| {
            format!("{pid} execve(\"{path}\", [\"x\"], 0x1 /* 3 vars */) = {result}\n")
        };
        let npm = npm.display().to_string();
        // env looks node up along PATH, in the process npm's exec started.
        let itself = exec(101, &npm, "0")
            + &exec(
                101,
                "/usr/local/bin/node",
                "-1 ENOENT (No such file or directory)",
            )
            + &exec(101, "/usr/bin/node", "0");
        assert_eq!(
            judge_log(&itself, &Script::default(), &root, &allowed),
            Ok(())
        );
        // Once node runs, a child of it starting node again is another program.
        let child = itself + "101 vfork() = 102\n" + &exec(102, "/usr/bin/node", "0");
        let found = judge_log(&child, &Script::default(), &root, &allowed).unwrap_err();
        assert!(found.contains("ran /usr/bin/node"), "{found}");
        // Nor does a binary program's process get to start it.
        let binary = exec(103, &root.join("awk").display().to_string(), "0")
            + &exec(103, "/usr/bin/node", "0");
        let allowed = names(&["awk"]);
        assert!(judge_log(&binary, &Script::default(), &root, &allowed).is_err());
    }
}
