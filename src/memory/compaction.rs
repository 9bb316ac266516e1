//! Keeping a session inside the model's context window. Before each model call the agent asks
//! the [`Compactor`], which estimates how full the context is and
//!
//! - at the soft threshold runs one flush turn (see [`super::flush`]): the model saves what
//!   matters into `memory/YYYY-MM-DD.md` with its ordinary file tools, once per compaction
//!   cycle of a session generation;
//! - at the hard threshold replaces the older part of the history by a summary (the model's,
//!   or a statistical one when the model fails), keeping the newest messages verbatim within a
//!   budget. The originals stay in the database, marked compacted, and go into the memory index.
//!
//! The estimate is the provider's reported usage for the last answer plus a character
//! heuristic (with a safety margin) for what was added since; only the heuristic when no
//! answer since the last compaction reported usage.

use super::call_site::CallSite;
use super::flush;
use super::index::MemoryIndex;
use super::sessions::{Compaction, LiveSession, SessionStore, StoredMessage};
use super::summary::{self, Method, Summarizer};
use crate::config::MemoryConfig;
use crate::llm::{ContentBlock, Message, Role, ToolSpec};
use std::sync::Arc;

/// Bytes per token in the heuristic (about right for English; CJK and code are denser, hence
/// counting bytes rather than characters).
pub const BYTES_PER_TOKEN: f64 = 4.0;
/// The heuristic overestimates by this factor: compacting early is cheap, overflowing is not.
pub const SAFETY_MARGIN: f64 = 1.2;
/// What an image costs (Anthropic's estimate for a ~1 megapixel image).
const IMAGE_TOKENS: u64 = 1600;
/// Role and framing per message.
const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Share of the window one summarization request may fill with transcript.
const SUMMARY_CHUNK_SHARE: f64 = 0.4;

/// The thresholds, in tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub context_window: u64,
    pub soft_tokens: u64,
    pub hard_tokens: u64,
    /// Budget for the newest messages kept verbatim.
    pub keep_tokens: u64,
    pub flush: bool,
    pub summary_max_tokens: u32,
}

impl From<&MemoryConfig> for Settings {
    fn from(c: &MemoryConfig) -> Settings {
        let share = |f: f64| (c.context_window as f64 * f) as u64;
        Settings {
            context_window: c.context_window,
            soft_tokens: share(c.soft_threshold),
            hard_tokens: share(c.hard_threshold),
            keep_tokens: share(c.keep_recent),
            flush: c.flush,
            summary_max_tokens: c.summary_max_tokens,
        }
    }
}

/// Tokens of a text by the heuristic.
pub fn estimate_text(text: &str) -> u64 {
    (text.len() as f64 / BYTES_PER_TOKEN * SAFETY_MARGIN).ceil() as u64
}

/// Tokens of a message by the heuristic.
pub fn estimate_message(message: &Message) -> u64 {
    let blocks: u64 = message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text, .. } => estimate_text(text),
            ContentBlock::Image { .. } => IMAGE_TOKENS,
            ContentBlock::ToolUse { name, input, .. } => {
                estimate_text(name) + estimate_text(&input.to_string())
            }
            ContentBlock::ToolResult { content, .. } => estimate_text(content),
        })
        .sum();
    blocks + MESSAGE_OVERHEAD_TOKENS
}

/// How full the context of the next call will be, in tokens.
pub fn estimate(live: &LiveSession, system: &str, tools: &[ToolSpec]) -> u64 {
    let stale_before = live.summary.as_ref().map_or(0, |c| c.last_id);
    let anchor = live
        .messages
        .iter()
        .rposition(|m| m.usage.is_some() && m.id > stale_before);
    let after = |from: usize| -> u64 {
        live.messages[from..]
            .iter()
            .map(|m| estimate_message(&m.message))
            .sum()
    };
    match anchor {
        // The reported input covered everything before that answer, system and tools included.
        Some(i) => {
            let usage = live.messages[i].usage.unwrap_or_default();
            usage.input_tokens + usage.output_tokens + after(i + 1)
        }
        None => {
            let tools_json = serde_json::to_string(tools).unwrap_or_default();
            let summary = live
                .summary
                .as_ref()
                .map_or(0, |c| estimate_text(&c.summary) + MESSAGE_OVERHEAD_TOKENS);
            estimate_text(system) + estimate_text(&tools_json) + summary + after(0)
        }
    }
}

/// Where the kept part starts: the newest messages within `budget` tokens, at least the last
/// message (and the call its results answer), never starting with tool results, which would be
/// cut off from their call.
pub fn split_point(messages: &[StoredMessage], budget: u64) -> usize {
    let n = messages.len();
    if n == 0 {
        return 0;
    }
    let mut start = n;
    let mut used = 0;
    while start > 0 {
        let cost = estimate_message(&messages[start - 1].message);
        if start < n && used + cost > budget {
            break;
        }
        used += cost;
        start -= 1;
    }
    let is_results = |m: &StoredMessage| {
        m.message.role == Role::User
            && m.message
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
    };
    // The last message is tool results: keep the call they answer with them.
    if start == n - 1 && is_results(&messages[start]) {
        start = start.saturating_sub(1);
    }
    while start < n - 1 && is_results(&messages[start]) {
        start += 1;
    }
    start
}

pub struct Compactor {
    sessions: SessionStore,
    settings: Settings,
    index: Option<Arc<MemoryIndex>>,
}

impl Compactor {
    pub fn new(sessions: SessionStore, settings: Settings) -> Compactor {
        Compactor {
            sessions,
            settings,
            index: None,
        }
    }

    /// Re-index the compacted messages (and memory files) after each compaction.
    pub fn with_index(mut self, index: Arc<MemoryIndex>) -> Compactor {
        self.index = Some(index);
        self
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Flush at the soft threshold, compact at the hard one. Returns the new history when it
    /// changed. Never fails the run: problems are logged and the history is left as it is.
    pub async fn before_call(&self, site: &CallSite<'_>) -> Option<Vec<Message>> {
        let live = match self.sessions.live(site.session) {
            Ok(live) => live,
            Err(e) => {
                tracing::warn!(
                    session = site.session,
                    "compaction: loading the session: {e}"
                );
                return None;
            }
        };
        let tokens = estimate(&live, site.system, &site.tools.specs());
        if tokens < self.settings.soft_tokens {
            return None;
        }
        if self.settings.flush {
            self.flush_once(site, &live).await;
        }
        if tokens < self.settings.hard_tokens || site.cancel.is_cancelled() {
            return None;
        }
        match self.compact(site, live).await {
            Ok(Some(_)) => match self.sessions.load(site.session) {
                Ok(history) => Some(history),
                Err(e) => {
                    tracing::warn!(session = site.session, "reloading after compaction: {e}");
                    None
                }
            },
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(session = site.session, "compaction failed: {e}");
                None
            }
        }
    }

    async fn flush_once(&self, site: &CallSite<'_>, live: &LiveSession) {
        let (key, generation, epoch) = (site.session, live.generation, live.compactions);
        match self.sessions.flushed(key, generation, epoch) {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => {
                tracing::warn!(session = key, "memory flush: {e}");
                return;
            }
        }
        (site.progress)("Saving notes to memory before the conversation is compacted".into());
        let today = chrono::Local::now().date_naive();
        let outcome = match flush::run(site, live.history(), today).await {
            Ok(report) => format!("{} tool calls; {}", report.tool_calls, report.text),
            // Stopped by the user: the flush may run again before the next call.
            Err(e) if e.is_cancelled() => return,
            Err(e) => {
                tracing::warn!(session = key, "memory flush failed: {e}");
                format!("failed: {e}")
            }
        };
        // Recorded even when it failed: one attempt per cycle, not one per model call.
        if let Err(e) = self.sessions.record_flush(key, generation, epoch, &outcome) {
            tracing::warn!(session = key, "recording the memory flush: {e}");
        }
    }

    /// Summarize the older part of the live history and mark it compacted. `Ok(None)` when
    /// there is nothing older than the part kept verbatim.
    pub async fn compact(
        &self,
        site: &CallSite<'_>,
        live: LiveSession,
    ) -> Result<Option<Compaction>, crate::db::DbError> {
        let split = split_point(&live.messages, self.settings.keep_tokens);
        let older = &live.messages[..split];
        let Some(through) = older.last() else {
            return Ok(None);
        };
        (site.progress)(format!(
            "Compacting the conversation: summarizing {} older messages",
            older.len()
        ));
        let previous = live.summary.as_ref().map(|c| c.summary.as_str());
        let summarizer = Summarizer {
            provider: site.provider,
            cancel: site.cancel,
            max_tokens: self.settings.summary_max_tokens,
            chunk_chars: self.chunk_chars(),
        };
        let (text, method) = match summarizer.summarize(previous, older).await {
            Ok(text) => (text, Method::Model),
            // Stopped by the user: no compaction rather than a worse summary.
            Err(e) if e.is_cancelled() => return Ok(None),
            Err(e) => {
                tracing::warn!(session = site.session, "summary by the model failed: {e}");
                (summary::statistics(previous, older), Method::Statistics)
            }
        };
        let compaction = self.sessions.compact(
            site.session,
            live.generation,
            through.id,
            &text,
            method.as_str(),
        )?;
        if let Some(index) = &self.index {
            if let Err(e) = index.sync() {
                tracing::warn!("memory index after compaction: {e}");
            }
        }
        Ok(Some(compaction))
    }

    /// Transcript characters per summarization request.
    fn chunk_chars(&self) -> usize {
        let tokens = self.settings.context_window as f64 * SUMMARY_CHUNK_SHARE;
        (tokens * BYTES_PER_TOKEN / SAFETY_MARGIN) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Usage;
    use serde_json::json;

    fn stored(id: i64, message: Message) -> StoredMessage {
        StoredMessage {
            id,
            message,
            usage: None,
            created_at: "2026-11-21T09:00:00.000Z".into(),
        }
    }

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.into(),
                name: "read".into(),
                input: json!({"path": "a"}),
            }],
        }
    }

    fn result(id: &str, size: usize) -> Message {
        Message::tool_results(vec![ContentBlock::tool_result(id, "x".repeat(size), false)])
    }

    #[test]
    fn the_heuristic_overestimates_plain_text() {
        assert_eq!(estimate_text(&"a".repeat(400)), 120);
        assert_eq!(estimate_message(&Message::user("a".repeat(400))), 124);
    }

    #[test]
    fn reported_usage_anchors_the_estimate_until_a_compaction_makes_it_stale() {
        let mut live = LiveSession {
            key: "t".into(),
            generation: 0,
            compactions: 0,
            summary: None,
            messages: vec![
                stored(1, Message::user("hi")),
                stored(2, Message::assistant("hello")),
                stored(3, Message::user("a".repeat(400))),
            ],
        };
        live.messages[1].usage = Some(Usage {
            input_tokens: 5000,
            output_tokens: 10,
        });
        assert_eq!(estimate(&live, "system", &[]), 5000 + 10 + 124);
        live.summary = Some(Compaction {
            id: 1,
            session: "t".into(),
            generation: 0,
            from_id: 1,
            through_id: 1,
            last_id: 2,
            summary: "s".into(),
            method: "model".into(),
            created_at: "2026-11-21T09:00:00.000Z".into(),
        });
        let heuristic = estimate(&live, "system", &[]);
        assert!(heuristic < 1000, "{heuristic}");
    }

    #[test]
    fn the_split_keeps_recent_messages_and_never_orphans_results() {
        let messages = vec![
            stored(1, Message::user("start")),
            stored(2, call("t1")),
            stored(3, result("t1", 4000)),
            stored(4, call("t2")),
            stored(5, result("t2", 400)),
            stored(6, Message::assistant("done")),
        ];
        // A budget that fits the last two messages would start at results #5, cut off from
        // their call: the start moves to the answer after them instead.
        let split = split_point(&messages, 135);
        assert_eq!(messages[split].id, 6);
        // Everything fits: nothing older to summarize.
        assert_eq!(split_point(&messages, 1_000_000), 0);
        // Nothing fits: still the last message.
        assert_eq!(split_point(&messages, 0), 5);
        // Mid-run, the last message is results: its call stays with it.
        let split = split_point(&messages[..5], 0);
        assert_eq!(messages[split].id, 4);
    }
}
