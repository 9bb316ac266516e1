//! Taint: whether a run has untrusted content in its context, and from where. A run is tainted
//! from the moment a web page, search results, a skill's output, a sub-agent's answer after it
//! read any of these, a file from `attachments/` or an image the
//! user sent enters the conversation — in this run, or earlier in the session's history that
//! the model still sees. From then on the model may be following someone else's instructions,
//! so what it does that persists or leaves (egress, memory files, cron jobs) is explained, and
//! later gated, with [`Taint::why`].
//!
//! One [`Taint`] per run, shared by every tool call of the run through the `ToolContext`.

use crate::llm::{ContentBlock, Message, Role};
use std::sync::{Arc, Mutex};

/// Sources remembered per run (more are counted, not listed).
const MAX_SOURCES: usize = 8;

#[derive(Clone, Debug, Default)]
pub struct Taint {
    inner: Arc<Mutex<Sources>>,
}

#[derive(Debug, Default)]
struct Sources {
    listed: Vec<String>,
    more: usize,
}

impl Taint {
    /// An untainted run.
    pub fn new() -> Taint {
        Taint::default()
    }

    /// Untrusted content entered the run: `source` says what, for the user
    /// (`web_fetch https://example.com/`, `the skill weather`, `attachments/report.pdf`).
    pub fn add(&self, source: impl Into<String>) {
        let source = source.into();
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if s.listed.contains(&source) {
            return;
        }
        if s.listed.len() < MAX_SOURCES {
            s.listed.push(source);
        } else {
            s.more += 1;
        }
    }

    /// A separate copy with `more` sources added: what the run would be if it went on to read
    /// them (the shared taint is left as it is).
    pub fn with(&self, more: &[String]) -> Taint {
        let copy = Taint::new();
        for source in self.sources().into_iter().chain(more.iter().cloned()) {
            copy.add(source);
        }
        copy
    }

    pub fn is_tainted(&self) -> bool {
        let s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        !s.listed.is_empty()
    }

    /// The sources, in the order they arrived (the first [`MAX_SOURCES`]).
    pub fn sources(&self) -> Vec<String> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .listed
            .clone()
    }

    /// "this run read untrusted content from: …", or `None` for an untainted run.
    pub fn why(&self) -> Option<String> {
        let s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if s.listed.is_empty() {
            return None;
        }
        let more = match s.more {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        Some(format!(
            "this run read untrusted content from: {}{more}",
            s.listed.join(", ")
        ))
    }

    /// The taint a run starts with: untrusted content already in the history it sends the
    /// model (earlier `web_fetch`, `web_search` and `skill` calls that returned a result,
    /// `read`s and bash lines naming an `untrusted` folder, `delegate` answers marked with
    /// [`SUB_AGENT_MARK`], images, documents and forwarded messages the user sent, including
    /// in this run's own message).
    pub fn from_history(history: &[Message], untrusted: &[String]) -> Taint {
        let taint = Taint::new();
        // Only calls whose result reached the model (a refusal carries nothing in).
        let delivered: std::collections::HashMap<&str, &str> = history
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error: false,
                } => Some((tool_use_id.as_str(), content.as_str())),
                _ => None,
            })
            .collect();
        for message in history {
            for block in &message.content {
                match block {
                    ContentBlock::ToolUse {
                        id, name, input, ..
                    } if message.role == Role::Assistant && delivered.contains_key(id.as_str()) => {
                        let result = delivered[id.as_str()];
                        if let Some(source) = source_of_call(name, input, result, untrusted) {
                            taint.add(format!("{source} (earlier in this conversation)"));
                        }
                    }
                    ContentBlock::Image { .. } if message.role == Role::User => {
                        taint.add("an image sent in the chat");
                    }
                    ContentBlock::Text {
                        text, untrusted, ..
                    } if message.role == Role::User => {
                        // Content marked with where it came from (a background command's
                        // output, a summary of a tainted conversation).
                        for source in untrusted {
                            taint.add(source.clone());
                        }
                        if text.contains(FORWARDED_MARK) {
                            taint.add("a forwarded message");
                        }
                        if text.contains(DOCUMENT_MARK) {
                            taint.add("a document sent in the chat");
                        }
                    }
                    _ => {}
                }
            }
        }
        taint
    }
}

/// How the channels introduce what others wrote: a forwarded message, a document's note.
/// A user who types them only taints their own run (the safe direction).
pub const FORWARDED_MARK: &str = "[Forwarded message";
pub const DOCUMENT_MARK: &str = "[The user sent a file";
/// How a `delegate` result says that its sub-agent read untrusted content.
pub const SUB_AGENT_MARK: &str = "[The sub-agent read untrusted content";

/// Whether a tool call brings untrusted content into the context, as far as its input (or,
/// for `delegate`, its result) tells: a `read` of any path with an untrusted folder's name as
/// a component, a bash line that mentions one (over-tainting is safe).
fn source_of_call(
    name: &str,
    input: &serde_json::Value,
    result: &str,
    untrusted: &[String],
) -> Option<String> {
    let field = |k: &str| input.get(k).and_then(|v| v.as_str()).unwrap_or("");
    match name {
        "web_fetch" => Some(format!("web_fetch {}", field("url"))),
        "web_search" => Some(format!("web_search {:?}", field("query"))),
        "skill" => Some(format!("the skill {}", field("name"))),
        // `SERVER__tool`: an MCP server's answer.
        mcp if mcp.contains("__") => Some(format!("the MCP tool {mcp}")),
        "delegate" if result.contains(SUB_AGENT_MARK) => Some("a sub-agent's answer".into()),
        "read" => {
            let path = field("path");
            std::path::Path::new(path)
                .components()
                .any(|c| untrusted.iter().any(|u| c.as_os_str() == u.as_str()))
                .then(|| path.to_string())
        }
        "bash" => {
            let command = field("command");
            untrusted
                .iter()
                .any(|u| command.contains(u.as_str()))
                .then(|| format!("bash `{command}`"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_run_starts_clean_and_lists_its_sources_once() {
        let taint = Taint::new();
        assert!(!taint.is_tainted());
        assert_eq!(taint.why(), None);
        taint.add("web_fetch https://a.example/");
        taint.add("web_fetch https://a.example/");
        let shared = taint.clone();
        shared.add("the skill weather");
        assert!(taint.is_tainted());
        assert_eq!(
            taint.why().unwrap(),
            "this run read untrusted content from: web_fetch https://a.example/, the skill weather"
        );
        for i in 0..20 {
            taint.add(format!("s{i}"));
        }
        assert_eq!(taint.sources().len(), MAX_SOURCES);
        assert!(taint.why().unwrap().ends_with("and 14 more"));
    }

    fn untrusted() -> Vec<String> {
        vec!["attachments".into()]
    }

    #[test]
    fn history_with_untrusted_content_taints_the_run() {
        let clean = vec![
            Message::user("hello https://a.example/"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "1".into(),
                    name: "read".into(),
                    input: json!({"path": "MEMORY.md"}),
                }],
            },
        ];
        assert!(!Taint::from_history(&clean, &untrusted()).is_tainted());

        let mut fetched = clean.clone();
        fetched.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "9".into(),
                name: "web_fetch".into(),
                input: json!({"url": "https://refused.example/"}),
            }],
        });
        fetched.push(Message::tool_results(vec![ContentBlock::tool_result(
            "9",
            "Denied: …",
            true,
        )]));
        assert!(
            !Taint::from_history(&fetched, &untrusted()).is_tainted(),
            "a refused fetch brought nothing in"
        );
        fetched.push(Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::ToolUse {
                    id: "2".into(),
                    name: "web_fetch".into(),
                    input: json!({"url": "https://b.example/"}),
                },
                ContentBlock::ToolUse {
                    id: "3".into(),
                    name: "read".into(),
                    input: json!({"path": "./attachments/x.pdf"}),
                },
            ],
        });
        fetched.push(Message::tool_results(vec![
            ContentBlock::tool_result("2", "page", false),
            ContentBlock::tool_result("3", "pdf text", false),
        ]));
        let taint = Taint::from_history(&fetched, &untrusted());
        assert_eq!(
            taint.sources(),
            vec![
                "web_fetch https://b.example/ (earlier in this conversation)",
                "./attachments/x.pdf (earlier in this conversation)"
            ]
        );

        let photo = vec![Message {
            role: Role::User,
            content: vec![ContentBlock::Image {
                media_type: "image/jpeg".into(),
                data_base64: String::new(),
            }],
        }];
        assert!(Taint::from_history(&photo, &untrusted()).is_tainted());

        let forwarded = vec![Message::user(format!("{FORWARDED_MARK} from Eve]\nhi"))];
        assert_eq!(
            Taint::from_history(&forwarded, &untrusted()).sources(),
            ["a forwarded message"]
        );
        let bash = vec![
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "4".into(),
                    name: "bash".into(),
                    input: json!({"command": "head attachments/x.csv"}),
                }],
            },
            Message::tool_results(vec![ContentBlock::tool_result("4", "a,b", false)]),
        ];
        assert!(Taint::from_history(&bash, &untrusted()).is_tainted());
    }

    #[test]
    fn searches_and_sub_agents_that_read_the_web_taint_later_runs() {
        let call = |id: &str, name: &str, input: serde_json::Value| Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.into(),
                name: name.into(),
                input,
            }],
        };
        let history = vec![
            call("1", "web_search", json!({"query": "rust serde"})),
            Message::tool_results(vec![ContentBlock::tool_result("1", "results", false)]),
            call("2", "delegate", json!({"task": "sum", "tools": ["read"]})),
            Message::tool_results(vec![ContentBlock::tool_result("2", "42", false)]),
        ];
        assert_eq!(
            Taint::from_history(&history, &untrusted()).sources(),
            ["web_search \"rust serde\" (earlier in this conversation)"]
        );
        let marked = vec![
            call(
                "3",
                "delegate",
                json!({"task": "read the page", "tools": ["web_fetch"]}),
            ),
            Message::tool_results(vec![ContentBlock::tool_result(
                "3",
                format!("It says hi.\n\n{SUB_AGENT_MARK} while working on this…]"),
                false,
            )]),
        ];
        assert_eq!(
            Taint::from_history(&marked, &untrusted()).sources(),
            ["a sub-agent's answer (earlier in this conversation)"]
        );
    }
}
