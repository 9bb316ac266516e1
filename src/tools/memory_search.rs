//! `memory_search`: the agent looks things up in its memory index — MEMORY.md, the daily
//! notes and the compacted parts of conversations. It reads and writes the memory files
//! themselves with the ordinary file tools.

use super::{Tool, ToolContext, ToolOutput};
use crate::llm::ToolSpec;
use crate::memory::MemoryIndex;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;

const DEFAULT_LIMIT: usize = 6;
const MAX_LIMIT: usize = 20;

pub struct MemorySearch {
    index: Arc<MemoryIndex>,
}

impl MemorySearch {
    pub fn new(index: Arc<MemoryIndex>) -> MemorySearch {
        MemorySearch { index }
    }
}

#[async_trait]
impl Tool for MemorySearch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_search".into(),
            description: "Search your memory: MEMORY.md, the daily notes in memory/, and older \
                          parts of conversations that were compacted. Use it before answering \
                          about earlier work, decisions, people, preferences or dates. Each \
                          result is `path:start-end (score)` and the passage: lines for files \
                          (read the file for more), message numbers for session:… results."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to look for"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}
                },
                "required": ["query"]
            }),
        }
    }

    async fn run(&self, input: &Value, _ctx: &ToolContext) -> ToolOutput {
        let Some(query) = input.get("query").and_then(Value::as_str) else {
            return ToolOutput::error("missing string argument `query`");
        };
        if query.trim().is_empty() {
            return ToolOutput::error("the query is empty");
        }
        let limit = input
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_LIMIT, |l| (l as usize).clamp(1, MAX_LIMIT));
        let hits = match self.index.search(query, limit).await {
            Ok(hits) => hits,
            Err(e) => return ToolOutput::error(format!("memory search failed: {e}")),
        };
        if hits.is_empty() {
            return ToolOutput::ok(format!("No memory matches {query:?}."));
        }
        let parts: Vec<String> = hits
            .iter()
            .map(|h| {
                format!(
                    "{}:{}-{} ({:.2})\n{}",
                    h.path,
                    h.start,
                    h.end,
                    h.score,
                    h.text.trim_end()
                )
            })
            .collect();
        ToolOutput::ok(parts.join("\n\n"))
    }
}
