//! Start-up after a crash or a shutdown: what the previous process left unfinished.
//!
//! A run that was in the agent's hands is **not run again** — it may have done part of its
//! work (files written, commands run, approvals given), and repeating that is worse than
//! asking. Its transcript is closed so the next run starts from a valid conversation, and its
//! answer becomes the notice that tells the chat ("I was restarted while working on: …").
//!
//! The bookkeeping comes first and sends nothing: every cut-off run gets its notice in one
//! transaction, and a start that fails there has told nobody anything. Then everything is
//! queued in its chat, in order — notices and stored answers are delivered from the first
//! part not known to have arrived, prompts that never started run — by the chats' actors, so
//! a notice is sent exactly like an answer: once, and never for a run already answered.

use super::actor::{interrupted_notice, Queued};
use super::store::{RunRow, RunState};
use super::{lock, Gateway, Recovery};
use crate::db::DbError;
use crate::llm::{Message, Role};
use crate::memory::sessions::SessionStore;

impl Gateway {
    /// Call once at start-up, before new prompts are submitted. What was taken up is logged.
    pub async fn recover(&self) -> Result<Recovery, DbError> {
        let report = self.take_up_unfinished().await?;
        if report.interrupted + report.requeued > 0 {
            tracing::info!(
                interrupted = report.interrupted,
                requeued = report.requeued,
                "recovered runs from the previous start"
            );
        }
        Ok(report)
    }

    async fn take_up_unfinished(&self) -> Result<Recovery, DbError> {
        let inner = &self.inner;
        let mut report = Recovery::default();
        let rows: Vec<RunRow> = inner
            .store
            .unfinished()?
            .into_iter()
            .filter(|row| inner.channel.serves(row.chat_id))
            .collect();
        // Cut off by a crash (still running), or by a shutdown (its notice is its answer).
        let cut_off = |row: &RunRow| match row.state {
            RunState::Running | RunState::Interrupted => true,
            RunState::Replying => row.outcome.as_deref() == Some("interrupted"),
            _ => false,
        };
        for row in rows.iter().filter(|row| cut_off(row)) {
            let session = inner.session_of(row);
            if let Err(e) = close_transcript(&inner.sessions, &session) {
                tracing::warn!(run = row.id, "closing an interrupted transcript: {e}");
            }
        }
        let notices: Vec<(i64, String)> = rows
            .iter()
            .filter(|row| matches!(row.state, RunState::Running | RunState::Interrupted))
            .map(|row| (row.id, interrupted_notice(row)))
            .collect();
        inner.store.set_interrupted(&notices)?;
        for row in &rows {
            if cut_off(row) {
                report.interrupted += 1;
            } else {
                report.requeued += 1;
            }
            let chats = &mut lock(&inner.chats);
            let slot = self.slot(chats, row.chat_key());
            lock(&slot.state).queue.push_back(Queued {
                run_id: row.id,
                preview: row.preview.clone(),
            });
            slot.wake.notify_one();
        }
        Ok(report)
    }
}

/// End a transcript cut off mid-run with an assistant note, so the model knows the last
/// prompt was not finished. (Tool calls left without results are answered by the session
/// store's repair each time the history is loaded.)
pub(super) fn close_transcript(sessions: &SessionStore, key: &str) -> Result<(), DbError> {
    let history = sessions.load(key)?;
    if history.last().is_some_and(|m| m.role == Role::User) {
        sessions.append(key, &Message::assistant(crate::agent::INTERRUPTED_NOTE))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::llm::ContentBlock;

    #[test]
    fn a_transcript_cut_after_a_tool_call_ends_with_a_note() {
        let store = SessionStore::new(crate::schema::open_in_memory().unwrap());
        store
            .append("t:1", &Message::user("delete the logs"))
            .unwrap();
        store
            .append(
                "t:1",
                &Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolUse {
                        id: "toolu_1".into(),
                        name: "bash".into(),
                        input: serde_json::json!({"command": "rm -r logs"}),
                    }],
                },
            )
            .unwrap();
        close_transcript(&store, "t:1").unwrap();
        // Loaded: the call is answered (repair) and the run ends with the note.
        let history = store.load("t:1").unwrap();
        assert_eq!(history.len(), 4);
        assert!(matches!(
            &history[2].content[0],
            ContentBlock::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "toolu_1"
        ));
        assert_eq!(history[3].role, Role::Assistant);
        assert!(history[3].text().contains("interrupted by a restart"));
        // A closed transcript is left alone.
        close_transcript(&store, "t:1").unwrap();
        assert_eq!(store.load("t:1").unwrap().len(), 4);
    }

    #[test]
    fn a_transcript_cut_after_the_prompt_gets_an_end() {
        let store = SessionStore::new(crate::schema::open_in_memory().unwrap());
        store.append("t:2", &Message::user("hello")).unwrap();
        close_transcript(&store, "t:2").unwrap();
        let history = store.load("t:2").unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[1].role, Role::Assistant);
        close_transcript(&store, "t:3").unwrap();
        assert!(store.load("t:3").unwrap().is_empty());
    }
}
