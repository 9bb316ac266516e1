//! Where the person's lines come from. On a terminal: a line editor (rustyline) with history in
//! the data directory, multi-line input (a line ending in `\`, or an open ``` fence, goes on),
//! completion of slash commands, Ctrl-C that clears the line and Ctrl-D that quits. Otherwise
//! (a pipe, a test): plain lines from stdin, read by one thread so the prompt and the approver
//! never race for them.

use async_trait::async_trait;
use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::{DefaultHistory, History};
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};
use std::io::IsTerminal;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// What one read gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D, or the end of the input.
    Eof,
}

#[async_trait]
pub trait Input: Send + Sync {
    /// Show `prompt` and read one (possibly multi-line) entry.
    async fn read(&self, prompt: &str) -> Read;
    /// Ask a yes/no question; only `y`/`yes` is a yes, Ctrl-C and the end of input are no.
    async fn confirm(&self, question: &str) -> bool {
        match self.read(question).await {
            Read::Line(answer) => {
                matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
            }
            Read::Interrupted | Read::Eof => false,
        }
    }
    /// Remember an entry in the history (slash commands and prompts alike).
    fn remember(&self, _line: &str) {}
}

/// The line editor on a terminal, plain lines otherwise.
pub fn open(history: PathBuf, commands: &'static [&'static str]) -> Arc<dyn Input> {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        match LineEditor::new(history, commands) {
            Ok(editor) => return Arc::new(editor),
            Err(e) => tracing::warn!("no line editor ({e}); reading plain lines"),
        }
    }
    Arc::new(PlainLines::start())
}

/// The end of a line that continues on the next one.
const CONTINUED: char = '\\';

/// Multi-line rules and slash-command completion.
struct ChatHelper {
    commands: &'static [&'static str],
}

impl Validator for ChatHelper {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        Ok(if incomplete(ctx.input()) {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

/// Whether `text` goes on: it ends in `\`, or a ``` fence is open.
pub fn incomplete(text: &str) -> bool {
    let fences = text
        .lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count();
    text.ends_with(CONTINUED) || fences % 2 == 1
}

/// The entry as the model gets it: `\` line endings removed.
pub fn joined(text: &str) -> String {
    text.replace("\\\n", "\n")
}

impl Completer for ChatHelper {
    type Candidate = String;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let typed = &line[..pos];
        if !typed.starts_with('/') || typed.contains(' ') {
            return Ok((0, Vec::new()));
        }
        let matches = self
            .commands
            .iter()
            .filter(|c| c.starts_with(typed))
            .map(|c| c.to_string())
            .collect();
        Ok((0, matches))
    }
}

impl Hinter for ChatHelper {
    type Hint = String;
}
impl Highlighter for ChatHelper {}
impl Helper for ChatHelper {}

struct LineEditor {
    editor: Arc<Mutex<Editor<ChatHelper, DefaultHistory>>>,
    history: PathBuf,
}

impl LineEditor {
    fn new(history: PathBuf, commands: &'static [&'static str]) -> rustyline::Result<LineEditor> {
        let config = rustyline::Config::builder()
            .max_history_size(2000)?
            .auto_add_history(false)
            .build();
        let mut editor = Editor::with_config(config)?;
        editor.set_helper(Some(ChatHelper { commands }));
        // The history is the person's own words: private to them, like the database.
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&history);
        if let Err(e) = editor.load_history(&history) {
            tracing::warn!("reading the chat history {}: {e}", history.display());
        }
        Ok(LineEditor {
            editor: Arc::new(Mutex::new(editor)),
            history,
        })
    }
}

#[async_trait]
impl Input for LineEditor {
    async fn read(&self, prompt: &str) -> Read {
        let editor = self.editor.clone();
        let prompt = prompt.to_string();
        let read = tokio::task::spawn_blocking(move || {
            let mut editor = editor.lock().unwrap_or_else(|p| p.into_inner());
            editor.readline(&prompt)
        })
        .await;
        match read {
            Ok(Ok(line)) => Read::Line(line),
            Ok(Err(rustyline::error::ReadlineError::Interrupted)) => Read::Interrupted,
            Ok(Err(_)) | Err(_) => Read::Eof,
        }
    }

    fn remember(&self, line: &str) {
        let mut editor = self.editor.lock().unwrap_or_else(|p| p.into_inner());
        if editor.add_history_entry(line).unwrap_or(false) {
            let saved = editor
                .history_mut()
                .append(&self.history)
                .or_else(|_| editor.save_history(&self.history));
            if let Err(e) = saved {
                tracing::warn!("saving the chat history {}: {e}", self.history.display());
            }
        }
    }
}

/// Lines from a pipe: one reader thread; the prompt goes to stderr.
struct PlainLines {
    lines: tokio::sync::Mutex<mpsc::Receiver<String>>,
}

impl PlainLines {
    fn start() -> PlainLines {
        let (tx, rx) = mpsc::channel(16);
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            let mut line = String::new();
            loop {
                line.clear();
                match stdin.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let text = line.trim_end_matches(['\n', '\r']).to_string();
                        if tx.blocking_send(text).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        PlainLines {
            lines: tokio::sync::Mutex::new(rx),
        }
    }
}

#[async_trait]
impl Input for PlainLines {
    async fn read(&self, prompt: &str) -> Read {
        eprint!("{prompt}");
        let mut lines = self.lines.lock().await;
        let mut entry = String::new();
        loop {
            let Some(line) = lines.recv().await else {
                return if entry.is_empty() {
                    Read::Eof
                } else {
                    Read::Line(entry)
                };
            };
            if !entry.is_empty() {
                entry.push('\n');
            }
            entry.push_str(&line);
            if !incomplete(&entry) {
                return Read::Line(entry);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_backslash_or_an_open_fence_goes_on() {
        assert!(incomplete("first line \\"));
        assert!(incomplete("look:\n```rust\nfn main() {}"));
        assert!(!incomplete("look:\n```rust\nfn main() {}\n```"));
        assert!(!incomplete("a plain question"));
        assert_eq!(joined("one \\\ntwo"), "one \ntwo");
    }

    #[test]
    fn slash_commands_complete() {
        let helper = ChatHelper {
            commands: &["/help", "/history", "/new"],
        };
        let history = DefaultHistory::new();
        let ctx = Context::new(&history);
        let (start, found) = helper.complete("/h", 2, &ctx).unwrap();
        assert_eq!((start, found), (0, vec!["/help".into(), "/history".into()]));
        assert!(helper.complete("hello", 5, &ctx).unwrap().1.is_empty());
    }
}
