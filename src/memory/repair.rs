//! Making a stored history acceptable to the providers, which insist that every `tool_result`
//! answers a `tool_use` of the assistant message right before it, and every `tool_use` is
//! answered. Two things break that: compaction (a kept result whose call was summarized away)
//! and a crash mid-run (a call stored, its result never). The database is not changed; the
//! repair is applied each time the history is loaded.

use crate::llm::{ContentBlock, Message, Role};
use std::collections::HashSet;

/// How much of an orphaned result's content stays, as text.
const ORPHAN_KEEP_CHARS: usize = 500;

/// The result given to a call whose run was interrupted before it answered.
pub const INTERRUPTED: &str = "not run: the run was interrupted before this call finished";

/// Repair `messages` in place; a well-formed history is left unchanged.
pub fn repair(messages: &mut Vec<Message>) {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len() + 1);
    // Calls of the previous assistant message not answered yet, in order.
    let mut pending: Vec<String> = Vec::new();
    for mut message in messages.drain(..) {
        match message.role {
            Role::Assistant => {
                if !pending.is_empty() {
                    out.push(Message::tool_results(interrupted(&pending)));
                }
                pending = message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolUse { id, .. } => Some(id.clone()),
                        _ => None,
                    })
                    .collect();
                out.push(message);
            }
            Role::User => {
                let answerable: HashSet<String> = pending.iter().cloned().collect();
                let mut answered = HashSet::new();
                for block in &mut message.content {
                    if let ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } = block
                    {
                        if answerable.contains(tool_use_id.as_str())
                            && answered.insert(tool_use_id.clone())
                        {
                            continue;
                        }
                        *block = orphan_text(tool_use_id, content, *is_error);
                    }
                }
                let missing: Vec<String> = pending
                    .drain(..)
                    .filter(|id| !answered.contains(id))
                    .collect();
                if !missing.is_empty() {
                    let mut content = interrupted(&missing);
                    content.append(&mut message.content);
                    message.content = content;
                }
                out.push(message);
            }
        }
    }
    if !pending.is_empty() {
        out.push(Message::tool_results(interrupted(&pending)));
    }
    // The providers want the conversation to open with the user.
    if out.first().is_some_and(|m| m.role == Role::Assistant) {
        out.insert(
            0,
            Message::user("[the start of this conversation is not available]"),
        );
    }
    *messages = out;
}

fn interrupted(ids: &[String]) -> Vec<ContentBlock> {
    ids.iter()
        .map(|id| ContentBlock::tool_result(id, INTERRUPTED, true))
        .collect()
}

/// A result without its call becomes text, so what it said is not lost.
fn orphan_text(id: &str, content: &str, is_error: bool) -> ContentBlock {
    let mut kept: String = content.chars().take(ORPHAN_KEEP_CHARS).collect();
    if kept.len() < content.len() {
        kept.push('…');
    }
    let kind = if is_error { "error" } else { "result" };
    ContentBlock::text(format!(
        "[{kind} of an earlier tool call {id}, whose call was summarized away: {kept}]"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    fn result(id: &str) -> Message {
        Message::tool_results(vec![ContentBlock::tool_result(id, "contents", false)])
    }

    #[test]
    fn a_well_formed_history_is_unchanged() {
        let original = vec![
            Message::user("read a"),
            call("t1"),
            result("t1"),
            Message::assistant("done"),
        ];
        let mut history = original.clone();
        repair(&mut history);
        assert_eq!(history, original);
    }

    #[test]
    fn an_orphaned_result_becomes_text() {
        let mut history = vec![
            Message::user("[summary]"),
            result("t1"),
            Message::assistant("done"),
        ];
        repair(&mut history);
        assert_eq!(history.len(), 3);
        match &history[1].content[0] {
            ContentBlock::Text { text, .. } => {
                assert!(text.contains("earlier tool call t1"), "{text}");
                assert!(text.contains("contents"), "{text}");
            }
            other => panic!("expected text, got {other:?}"),
        }
    }

    #[test]
    fn calls_cut_off_by_a_crash_get_an_interrupted_result() {
        // Crash after the call was stored; the next run appended the user's new message.
        let mut history = vec![Message::user("read a"), call("t1"), Message::user("hello?")];
        repair(&mut history);
        assert_eq!(history.len(), 3);
        assert!(matches!(
            &history[2].content[0],
            ContentBlock::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "t1"
        ));
        assert_eq!(history[2].text(), "hello?");

        // Crash as the last thing in the session.
        let mut history = vec![Message::user("read a"), call("t2")];
        repair(&mut history);
        assert_eq!(history.len(), 3);
        assert_eq!(history[2].role, Role::User);

        // Two answers in a row (an error note after a dangling call).
        let mut history = vec![
            Message::user("x"),
            call("t3"),
            Message::assistant("[error]"),
        ];
        repair(&mut history);
        assert_eq!(history.len(), 4);
        assert_eq!(history[2].role, Role::User);
    }

    #[test]
    fn a_history_starting_with_an_answer_gets_an_opening() {
        let mut history = vec![Message::assistant("hi")];
        repair(&mut history);
        assert_eq!(history[0].role, Role::User);
        assert_eq!(history.len(), 2);
    }
}
