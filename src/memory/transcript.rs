//! A conversation as plain text lines — `User: …`, `Assistant: …`, `Assistant called read
//! {"path":…}`, `Tool result: …` — for the model that summarizes it and for the memory index
//! that makes compacted messages searchable. Long tool input and output are cut in the middle.

use crate::llm::{ContentBlock, Message, Role};

/// Longest tool input shown, in characters.
const TOOL_INPUT_CHARS: usize = 300;
/// Longest tool result shown, in characters.
const TOOL_RESULT_CHARS: usize = 1500;

/// The message as text, at most `max_chars` characters (cut in the middle with a marker).
pub fn render(message: &Message, max_chars: usize) -> String {
    let who = match message.role {
        Role::User => "User",
        Role::Assistant => "Assistant",
    };
    let mut parts: Vec<String> = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text, .. } if text.trim().is_empty() => {}
            ContentBlock::Text { text, .. } => parts.push(format!("{who}: {}", text.trim())),
            ContentBlock::Image { media_type, .. } => {
                parts.push(format!("{who}: [an image ({media_type})]"))
            }
            ContentBlock::ToolUse { name, input, .. } => parts.push(format!(
                "{who} called {name} {}",
                cut_middle(&input.to_string(), TOOL_INPUT_CHARS)
            )),
            ContentBlock::ToolResult {
                content, is_error, ..
            } => parts.push(format!(
                "Tool {}: {}",
                if *is_error { "error" } else { "result" },
                cut_middle(content.trim(), TOOL_RESULT_CHARS)
            )),
        }
    }
    cut_middle(&parts.join("\n"), max_chars)
}

/// `text` if it has at most `max` characters; otherwise its head and tail around a marker.
pub fn cut_middle(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let head_len = max * 2 / 3;
    let tail_len = max.saturating_sub(head_len);
    let head: String = text.chars().take(head_len).collect();
    let tail: String = text.chars().skip(total - tail_len).collect();
    format!(
        "{head} […{} characters cut…] {tail}",
        total - head_len - tail_len
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_text_calls_and_results() {
        let call = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text("let me look"),
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "read".into(),
                    input: json!({"path": "notes.txt"}),
                },
            ],
        };
        assert_eq!(
            render(&call, 1000),
            "Assistant: let me look\nAssistant called read {\"path\":\"notes.txt\"}"
        );
        let result = Message::tool_results(vec![ContentBlock::tool_result("t1", "denied", true)]);
        assert_eq!(render(&result, 1000), "Tool error: denied");
    }

    #[test]
    fn long_text_is_cut_in_the_middle() {
        let text: String = "a".repeat(50) + &"b".repeat(50);
        let cut = cut_middle(&text, 30);
        assert!(cut.starts_with("aaaaaaaaaaaaaaaaaaaa "), "{cut}");
        assert!(cut.ends_with(" bbbbbbbbbb"), "{cut}");
        assert!(cut.contains("70 characters cut"), "{cut}");
        assert_eq!(cut_middle("short", 30), "short");
    }
}
