//! A session's taint, kept beside its transcript. A run is tainted by what its history holds
//! (see [`crate::taint`]); but history is compacted into a model-written summary, and a
//! summary carries no tool results to derive taint from. So every source that taints a run is
//! also recorded for the session, and the session stays tainted — across compaction and
//! restarts — until the user trusts it again (`/trust`, `warden session trust`), which also
//! stops the history before that moment from counting. `/new` starts a generation with none.

use super::sessions::SessionStore;
use crate::db::DbError;
use crate::llm::{Author, ContentBlock, Message};
use crate::taint::Taint;
use rusqlite::{params, OptionalExtension};

pub const SCHEMA: &str = "
CREATE TABLE session_taint (
    session    TEXT NOT NULL,
    generation INTEGER NOT NULL,
    source     TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (session, generation, source)
);
CREATE TABLE session_trust (
    session    TEXT NOT NULL,
    generation INTEGER NOT NULL,
    -- messages up to this id no longer taint the session
    through_id INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (session, generation)
);
";

/// Sources recorded per session generation (more are not: the session is tainted already).
const MAX_RECORDED: i64 = 64;

/// What a run of a session starts from.
#[derive(Clone, Debug, Default)]
pub struct RunStart {
    /// The history sent to the model.
    pub history: Vec<Message>,
    /// The taint the run starts with: what the session recorded, and what its history since
    /// the user last trusted it holds.
    pub taint: Taint,
}

impl SessionStore {
    /// The history of `key` and the taint a run of it starts with; `untrusted` are the
    /// workspace's untrusted folders.
    pub fn run_start(&self, key: &str, untrusted: &[String]) -> Result<RunStart, DbError> {
        let live = self.live(key)?;
        let through = self.trusted_through(key, live.generation)?;
        let history = live.history();
        let since: Vec<Message> = match through {
            None => history.clone(),
            Some(id) => {
                let mut since = Vec::new();
                if let Some(summary) = live.summary.as_ref().filter(|s| s.last_id > id) {
                    since.push(super::sessions::summary_message(summary));
                }
                since.extend(
                    live.messages
                        .iter()
                        .filter(|m| m.id > id)
                        .map(|m| m.message.clone()),
                );
                since
            }
        };
        let taint = Taint::from_history(&since, untrusted);
        let recorded = self.recorded_taint(key, live.generation)?;
        for source in &recorded {
            taint.add(source.clone());
        }
        let mut history = history;
        // A summary of a tainted conversation says so: it may retell what a page said.
        if let (Some(_), Some(first)) = (&live.summary, history.first_mut()) {
            for block in &mut first.content {
                if let ContentBlock::Text {
                    author: Author::Warden,
                    untrusted,
                    ..
                } = block
                {
                    untrusted.extend(recorded.iter().cloned());
                }
            }
        }
        Ok(RunStart { history, taint })
    }

    /// Remember that the session took untrusted content from `sources`.
    pub fn record_taint(&self, key: &str, sources: &[String]) -> Result<(), DbError> {
        if sources.is_empty() {
            return Ok(());
        }
        let generation = self.generation(key)?;
        let conn = self.database().conn();
        let count: i64 = conn.query_row(
            "SELECT COUNT(*) FROM session_taint WHERE session = ?1 AND generation = ?2",
            params![key, generation],
            |r| r.get(0),
        )?;
        for source in sources
            .iter()
            .take(MAX_RECORDED.saturating_sub(count) as usize)
        {
            conn.execute(
                "INSERT OR IGNORE INTO session_taint (session, generation, source)
                 VALUES (?1, ?2, ?3)",
                params![key, generation, source],
            )?;
        }
        Ok(())
    }

    /// What taints the session now, for `/trust` and `warden session trust` to show.
    pub fn taint_sources(&self, key: &str, untrusted: &[String]) -> Result<Vec<String>, DbError> {
        Ok(self.run_start(key, untrusted)?.taint.sources())
    }

    /// The user trusts the session again: what tainted it (returned, for the reply) no longer
    /// does, and the history up to now stops counting.
    pub fn trust(&self, key: &str, untrusted: &[String]) -> Result<Vec<String>, DbError> {
        let cleared = self.taint_sources(key, untrusted)?;
        let generation = self.generation(key)?;
        let conn = self.database().conn();
        let newest: i64 = conn.query_row(
            "SELECT COALESCE(MAX(id), 0) FROM messages WHERE session = ?1 AND generation = ?2",
            params![key, generation],
            |r| r.get(0),
        )?;
        conn.execute(
            "INSERT INTO session_trust (session, generation, through_id) VALUES (?1, ?2, ?3)
             ON CONFLICT (session, generation) DO UPDATE SET through_id = excluded.through_id,
                 created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            params![key, generation, newest],
        )?;
        conn.execute(
            "DELETE FROM session_taint WHERE session = ?1 AND generation = ?2",
            params![key, generation],
        )?;
        Ok(cleared)
    }

    fn trusted_through(&self, key: &str, generation: i64) -> Result<Option<i64>, DbError> {
        Ok(self
            .database()
            .conn()
            .query_row(
                "SELECT through_id FROM session_trust WHERE session = ?1 AND generation = ?2",
                params![key, generation],
                |r| r.get(0),
            )
            .optional()?)
    }

    fn recorded_taint(&self, key: &str, generation: i64) -> Result<Vec<String>, DbError> {
        let conn = self.database().conn();
        let mut stmt = conn.prepare(
            "SELECT source FROM session_taint WHERE session = ?1 AND generation = ?2
             ORDER BY created_at, source",
        )?;
        let rows = stmt.query_map(params![key, generation], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Role;
    use serde_json::json;

    fn store() -> SessionStore {
        SessionStore::new(crate::schema::open_in_memory().unwrap())
    }

    fn fetched(id: &str) -> Vec<Message> {
        vec![
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: id.into(),
                    name: "web_fetch".into(),
                    input: json!({"url": "https://page.example/"}),
                }],
            },
            Message::tool_results(vec![ContentBlock::tool_result(id, "page text", false)]),
        ]
    }

    #[test]
    fn a_recorded_source_outlives_compaction_and_trust_clears_it() {
        let s = store();
        let key = "telegram:1";
        s.append(key, &Message::user("read the page")).unwrap();
        for m in fetched("1") {
            s.append(key, &m).unwrap();
        }
        let last = s.append(key, &Message::assistant("done")).unwrap();
        assert!(s.run_start(key, &[]).unwrap().taint.is_tainted());
        // Compacted into a summary: the history no longer shows the fetch...
        let generation = s.generation(key).unwrap();
        s.compact(key, generation, last, "the user read a page", "model")
            .unwrap();
        let start = s.run_start(key, &[]).unwrap();
        assert!(!Taint::from_history(&start.history, &[]).is_tainted());
        assert!(!start.taint.is_tainted(), "nothing recorded yet");
        // ...but what the run recorded is kept.
        s.record_taint(key, &["web_fetch https://page.example/".into()])
            .unwrap();
        let start = s.run_start(key, &[]).unwrap();
        assert_eq!(start.taint.sources(), ["web_fetch https://page.example/"]);
        // The summary is warden's, marked with what tainted the conversation.
        assert!(matches!(
            &start.history[0].content[0],
            ContentBlock::Text { author: Author::Warden, untrusted, .. } if untrusted.len() == 1
        ));
        // /trust: cleared, and said what it cleared.
        let cleared = s.trust(key, &[]).unwrap();
        assert_eq!(cleared, ["web_fetch https://page.example/"]);
        assert!(!s.run_start(key, &[]).unwrap().taint.is_tainted());
    }

    #[test]
    fn trust_stops_the_history_before_it_from_counting_but_not_what_comes_after() {
        let s = store();
        let key = "terminal:default";
        for m in fetched("1") {
            s.append(key, &m).unwrap();
        }
        assert!(s.run_start(key, &[]).unwrap().taint.is_tainted());
        s.trust(key, &[]).unwrap();
        assert!(!s.run_start(key, &[]).unwrap().taint.is_tainted());
        for m in fetched("2") {
            s.append(key, &m).unwrap();
        }
        assert!(s.run_start(key, &[]).unwrap().taint.is_tainted());
        // A new conversation starts clean.
        s.record_taint(key, &["x".into()]).unwrap();
        s.reset(key).unwrap();
        assert!(!s.run_start(key, &[]).unwrap().taint.is_tainted());
    }
}
