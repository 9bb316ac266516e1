//! The shape of a command the policy asks about: what an "Always in this chat" approval of it
//! covers. Computed from the checked IR, never from the command string: the program and the
//! words that name what it does (`git commit`, `cargo test`, `python3 tool.py`, `python3 -m
//! pytest`; for a program without subcommands or script, every argument), the directory it
//! runs in, and the policy's reasons for asking. Two commands have the same shape only when all
//! of these agree, so `python3 a.py` does not cover `python3 b.py`, `git commit` does not cover
//! `git push`, `rm -r build` does not cover `rm -r src`, and `cargo test` in `sub/` does not
//! cover `cargo test` in the workspace. A flag that asks for its own reason (`git clean -f`)
//! changes the reasons, so it is not covered by an approval of the command without it.

use super::ir::Script;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommandShape {
    /// The checked working directory.
    pub cwd: PathBuf,
    /// argv[0] and the words that name what runs.
    pub words: Vec<String>,
    /// Why the policy asks about it.
    pub reasons: Vec<String>,
}

impl CommandShape {
    /// The shapes of every command in `script` the policy asks about, in order, each once.
    pub fn of_script(script: &Script) -> Vec<CommandShape> {
        let mut shapes: Vec<CommandShape> = Vec::new();
        for command in script.commands() {
            let Some(ask) = &command.ask else { continue };
            let shape = CommandShape {
                cwd: command.cwd.clone(),
                words: ask.shape.clone(),
                reasons: ask.reasons.clone(),
            };
            if !shapes.contains(&shape) {
                shapes.push(shape);
            }
        }
        shapes
    }

    /// The identity of the shape, for storing and comparing (stable JSON of every part).
    pub fn key(&self) -> String {
        use serde_json::Value;
        let strings = |list: &[String]| Value::from(list.to_vec());
        // The JSON of (cwd, words, reasons); a folder name that is not UTF-8 is kept as its
        // bytes, so two such folders never share a key.
        let cwd = match self.cwd.to_str() {
            Some(text) => Value::from(text),
            None => Value::from(self.cwd.as_os_str().as_encoded_bytes().to_vec()),
        };
        Value::Array(vec![cwd, strings(&self.words), strings(&self.reasons)]).to_string()
    }

    /// For people: `git commit`, with `(in sub/dir/)` when it does not run in `workspace`
    /// itself.
    pub fn describe(&self, workspace: &Path) -> String {
        let mut text = shell_words::join(&self.words);
        if self.cwd != workspace {
            let dir = match self.cwd.strip_prefix(workspace) {
                Ok(rel) => format!("{}/", rel.display()),
                Err(_) => self.cwd.display().to_string(),
            };
            text.push_str(&format!(" (in {dir})"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Decision, Policy};
    use std::sync::Arc;

    struct Fixture {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        checker: crate::policy::Checker,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        for file in ["a.py", "b.py", "sub/c.py", "build/x", "src/y"] {
            let path = ws.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x\n").unwrap();
        }
        std::fs::write(ws.join("Cargo.toml"), "[package]\n").unwrap();
        let policy = Arc::new(Policy::embedded_default());
        let checker = policy.checker(&ws, &[], &ws).unwrap();
        Fixture {
            _dir: dir,
            ws,
            checker,
        }
    }

    impl Fixture {
        fn shapes(&mut self, command: &str) -> Vec<CommandShape> {
            let verdict = self.checker.check(command);
            assert_eq!(
                verdict.decision,
                Decision::Ask,
                "{command}: {}",
                verdict.reason
            );
            CommandShape::of_script(&verdict.script)
        }

        fn described(&mut self, command: &str) -> Vec<String> {
            let ws = self.ws.clone();
            self.shapes(command)
                .iter()
                .map(|s| s.describe(&ws))
                .collect()
        }
    }

    #[test]
    fn the_shape_is_the_program_and_what_it_runs() {
        let mut f = fixture();
        assert_eq!(f.described("python3 a.py --in data.csv"), ["python3 a.py"]);
        assert_eq!(f.described("python3 -u a.py"), ["python3 -u a.py"]);
        assert_eq!(
            f.described("python3 -m pytest -x src"),
            ["python3 -m pytest"]
        );
        assert_eq!(f.described("cargo test --release"), ["cargo test"]);
        assert_eq!(f.described("cargo +nightly test"), ["cargo +nightly test"]);
        assert_eq!(f.described("make -j4 test"), ["make -j4 test"]);
        assert_eq!(f.described("rm -r build"), ["rm -r build"]);
        assert_eq!(
            f.described("cd sub && python3 c.py"),
            ["python3 c.py (in sub/)"]
        );
        // Commands the policy allows have no shape; a line's asking commands each have one.
        assert_eq!(
            f.described("ls && python3 a.py | head -1 && cargo test"),
            ["python3 a.py", "cargo test"]
        );
    }

    #[test]
    fn only_identical_shapes_are_equal() {
        let mut f = fixture();
        let key = |f: &mut Fixture, c: &str| f.shapes(c)[0].key();
        let a = key(&mut f, "python3 a.py one");
        assert_eq!(a, key(&mut f, "python3 a.py two three"));
        assert_ne!(a, key(&mut f, "python3 b.py one"));
        assert_ne!(a, key(&mut f, "cd sub && python3 ../a.py"));
        assert_ne!(
            key(&mut f, "cargo test"),
            key(&mut f, "cargo build"),
            "another subcommand"
        );
        assert_ne!(key(&mut f, "rm -r build"), key(&mut f, "rm -r src"));
        assert_ne!(key(&mut f, "rm -r build"), key(&mut f, "rm -r build src"));
    }
}
