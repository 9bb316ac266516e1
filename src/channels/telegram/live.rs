//! What a run's live message shows: the text of the model's current step as it streams (when
//! the answer goes to the chat), with a status line under it while a tool runs ("⏳ Running
//! <code>ls</code>…"); before any text, the status line alone. When the model goes on after
//! its tools, the new step's text replaces the old; the final answer replaces it all.
//!
//! Rendering is pure: the markdown so far becomes Telegram HTML through the same converter as
//! the answer, so every edit is well-formed, and only the first message's worth (4096
//! characters, split where the answer will be split) is shown.

use super::format::{escape, markdown_to_html};
use super::split::split_html;
use crate::agent::AgentEvent;

/// Shown before anything else is known.
const WORKING: &str = "⏳ Working…";

#[derive(Debug, Default)]
pub struct Live {
    /// Whether model text is shown (it is not for a run whose answer is filtered first).
    stream: bool,
    /// The markdown of the model's current step.
    text: String,
    /// The HTML status line, while a tool runs.
    status: Option<String>,
    /// A tool ran since the last text: the next text begins a new step.
    new_step: bool,
}

/// One rendering of the live message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    pub html: String,
    /// Whether it shows model text (then it is the answer's draft), not only a status.
    pub has_text: bool,
}

impl Live {
    pub fn new(stream: bool) -> Live {
        Live {
            stream,
            ..Live::default()
        }
    }

    pub fn apply(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::TextDelta(delta) if self.stream => {
                if self.new_step {
                    self.text.clear();
                    self.new_step = false;
                }
                self.text.push_str(delta);
                self.status = None;
            }
            AgentEvent::TextDelta(_) => {}
            AgentEvent::ToolEnd { .. } => self.new_step = true,
            other => {
                if let Some(line) = status_line(other) {
                    self.status = Some(line);
                    self.new_step = true;
                }
            }
        }
    }

    /// The message as it should look now, at most `limit` UTF-16 units of HTML.
    pub fn render(&self, limit: usize) -> Shown {
        let status = self.status.as_deref();
        if !self.text.trim().is_empty() {
            let tail = status.map(|s| format!("\n\n{s}")).unwrap_or_default();
            let budget = limit.saturating_sub(tail.encode_utf16().count()).max(1);
            let html = markdown_to_html(&self.text);
            if let Some(first) = split_html(&html, budget).into_iter().next() {
                return Shown {
                    html: first + &tail,
                    has_text: true,
                };
            }
        }
        Shown {
            html: status.unwrap_or(WORKING).to_string(),
            has_text: false,
        }
    }
}

/// The status line for an event, if it changes the status.
fn status_line(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::ToolStart { name, summary, .. } if name == "bash" => {
            Some(format!("⏳ Running <code>{}</code>…", escape(summary)))
        }
        AgentEvent::ToolStart { name, summary, .. } => Some(format!(
            "⏳ {}: <code>{}</code>…",
            escape(name),
            escape(summary)
        )),
        AgentEvent::Progress(text) => Some(format!("⏳ {}", escape(text))),
        AgentEvent::Steered(_) => Some("⏳ Got your steer; continuing…".into()),
        AgentEvent::TextDelta(_) | AgentEvent::ToolEnd { .. } | AgentEvent::Measured(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditDecision;
    use crate::channels::telegram::split::MESSAGE_LIMIT;
    use std::time::Duration;

    fn delta(text: &str) -> AgentEvent {
        AgentEvent::TextDelta(text.into())
    }

    fn tool(summary: &str) -> [AgentEvent; 2] {
        [
            AgentEvent::ToolStart {
                id: "t".into(),
                name: "bash".into(),
                summary: summary.into(),
            },
            AgentEvent::ToolEnd {
                id: "t".into(),
                name: "bash".into(),
                decision: AuditDecision::Allow,
                is_error: false,
                duration: Duration::from_millis(5),
                detail: None,
            },
        ]
    }

    #[test]
    fn status_lines_escape_commands() {
        let line = status_line(&AgentEvent::ToolStart {
            id: "t".into(),
            name: "bash".into(),
            summary: "ls <dir> && echo".into(),
        });
        assert_eq!(
            line.as_deref(),
            Some("⏳ Running <code>ls &lt;dir&gt; &amp;&amp; echo</code>…")
        );
        assert_eq!(status_line(&delta("x")), None);
    }

    #[test]
    fn a_step_streams_then_shows_its_tool_then_the_next_step_replaces_it() {
        let mut live = Live::new(true);
        assert_eq!(live.render(MESSAGE_LIMIT).html, WORKING);
        live.apply(&delta("Let me **lo"));
        let shown = live.render(MESSAGE_LIMIT);
        assert!(shown.has_text);
        assert_eq!(shown.html, "Let me **lo");
        live.apply(&delta("ok**."));
        assert_eq!(live.render(MESSAGE_LIMIT).html, "Let me <b>look</b>.");
        let [start, end] = tool("ls <x>");
        live.apply(&start);
        assert_eq!(
            live.render(MESSAGE_LIMIT).html,
            "Let me <b>look</b>.\n\n⏳ Running <code>ls &lt;x&gt;</code>…"
        );
        live.apply(&end);
        live.apply(&delta("Found `a.txt`"));
        assert_eq!(live.render(MESSAGE_LIMIT).html, "Found <code>a.txt</code>");
    }

    #[test]
    fn a_silent_run_shows_only_its_status() {
        let mut live = Live::new(false);
        live.apply(&delta("HEARTBEAT_OK"));
        let [start, _] = tool("date");
        live.apply(&start);
        let shown = live.render(MESSAGE_LIMIT);
        assert!(!shown.has_text);
        assert_eq!(shown.html, "⏳ Running <code>date</code>…");
    }

    #[test]
    fn a_long_step_shows_its_first_message_only_within_the_limit() {
        let mut live = Live::new(true);
        let paragraph = format!("{}\n\n", "word ".repeat(150));
        for _ in 0..12 {
            live.apply(&delta(&paragraph));
        }
        let [start, _] = tool("sleep 1");
        live.apply(&start);
        let shown = live.render(MESSAGE_LIMIT);
        assert!(shown.html.encode_utf16().count() <= MESSAGE_LIMIT);
        assert!(shown.html.ends_with("⏳ Running <code>sleep 1</code>…"));
        let answer_first = split_html(&markdown_to_html(&live.text), MESSAGE_LIMIT);
        assert!(answer_first.len() > 1);
    }
}
