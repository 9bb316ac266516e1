//! How the model's answer looks in a terminal: Markdown rendered (termimad) block by block as
//! the text streams in, and a spinner on stderr while nothing arrives. Off a terminal the text
//! is passed through unchanged, for scripts and tests.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Streamed text out: raw, or Markdown rendered a finished block at a time.
pub struct TextOut {
    markdown: Option<termimad::MadSkin>,
    /// Text not yet rendered: the block still being written.
    pending: String,
}

impl TextOut {
    /// Markdown when stdout is a terminal.
    pub fn for_stdout() -> TextOut {
        TextOut {
            markdown: std::io::stdout()
                .is_terminal()
                .then(termimad::MadSkin::default),
            pending: String::new(),
        }
    }

    /// Take a piece of streamed text; print what is complete.
    pub fn push(&mut self, text: &str) {
        if self.markdown.is_none() {
            print_raw(text);
            return;
        }
        self.pending.push_str(text);
        if let Some(end) = finished_blocks(&self.pending) {
            let done: String = self.pending.drain(..end).collect();
            self.render(&done);
        }
    }

    /// The answer ended: print the rest.
    pub fn finish(&mut self) {
        let rest = std::mem::take(&mut self.pending);
        if !rest.trim().is_empty() {
            self.render(&rest);
        }
    }

    fn render(&self, markdown: &str) {
        let Some(skin) = &self.markdown else {
            return print_raw(markdown);
        };
        let width = termimad::terminal_size().0.clamp(20, 120) as usize;
        print_raw(&skin.text(markdown, Some(width)).to_string());
    }
}

fn print_raw(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Where the finished blocks of `text` end: after its last blank line outside a code fence
/// (a table or a list is rendered whole, not line by line).
pub fn finished_blocks(text: &str) -> Option<usize> {
    let mut in_fence = false;
    let mut end = None;
    let mut offset = 0;
    let mut previous_blank = false;
    for line in text.split_inclusive('\n') {
        offset += line.len();
        if !line.ends_with('\n') {
            break;
        }
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_fence = !in_fence;
            // A closed fence is a finished block.
            if !in_fence {
                end = Some(offset);
            }
        } else if trimmed.is_empty() && !in_fence && !previous_blank {
            end = Some(offset);
        }
        previous_blank = trimmed.is_empty();
    }
    end
}

/// "thinking…" with a turning wheel on stderr (a terminal only) until stopped.
pub struct Spinner {
    running: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Spinner {
    pub fn new() -> Spinner {
        Spinner {
            running: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(None),
        }
    }

    /// Show the spinner (no-op off a terminal or when already shown).
    pub fn start(&self, label: &'static str) {
        if !std::io::stderr().is_terminal() || self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let running = self.running.clone();
        let handle = std::thread::spawn(move || {
            const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
            let mut frame = 0;
            while running.load(Ordering::SeqCst) {
                eprint!("\r{} {label}", FRAMES[frame % FRAMES.len()]);
                frame += 1;
                std::thread::sleep(Duration::from_millis(120));
            }
            // Erase the spinner's line.
            eprint!("\r{}\r", " ".repeat(label.len() + 2));
        });
        *self.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    }

    /// Remove the spinner before anything else is printed.
    pub fn stop(&self) {
        if !self.running.swap(false, Ordering::SeqCst) {
            return;
        }
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl Default for Spinner {
    fn default() -> Self {
        Spinner::new()
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_finish_at_blank_lines_outside_fences() {
        assert_eq!(finished_blocks("a paragraph"), None);
        assert_eq!(finished_blocks("one\n\ntwo"), Some(5));
        let fenced = "```\ncode\n\nmore\n";
        assert_eq!(finished_blocks(fenced), None, "the fence is still open");
        let closed = "```\ncode\n\nmore\n```\nafter";
        assert_eq!(finished_blocks(closed), Some(closed.len() - "after".len()));
    }

    #[test]
    fn rendered_markdown_loses_its_markup() {
        let skin = termimad::MadSkin::no_style();
        let shown = skin
            .text("# Title\n\n**bold** and `code`", Some(60))
            .to_string();
        assert!(shown.contains("Title") && shown.contains("bold"), "{shown}");
        assert!(!shown.contains("**") && !shown.contains('#'), "{shown}");
    }
}
