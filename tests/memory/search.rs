//! The memory index and the `memory_search` tool through the real App and the fake LLM: a
//! fact the agent writes to MEMORY.md in one session is found in another; edits show at once;
//! a file deleted behind the agent's back never shows in results; unchanged content is not
//! re-indexed;
//! daily notes lose weight with age while MEMORY.md does not; symlinks are not followed; query
//! text is never FTS5 syntax.

use crate::support::app_config::{config, say};
use crate::support::fake_llm::{FakeLlm, Turn};
use serde_json::json;
use warden::app::App;

/// The text of the last tool result the fake was sent.
fn last_result(llm: &FakeLlm) -> String {
    llm.last_request()
        .tool_results()
        .pop()
        .expect("a tool result")
        .content
}

#[tokio::test]
async fn a_fact_written_in_one_session_is_found_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic(vec![
        // Session A: the model saves a fact with its ordinary write tool.
        Turn::tool_use(
            "write",
            json!({"path": "MEMORY.md", "content": "# Memory\n\n## About the user\n- Their cat is called Biscuit.\n- They drink green tea.\n"}),
        ),
        Turn::text("Noted."),
        // Session B: it searches.
        Turn::tool_use("memory_search", json!({"query": "what is the cat called?"})),
        Turn::text("Your cat is Biscuit."),
        // Session C: after an edit of the same size (Biscuit → Pretzel) right after the write.
        Turn::tool_use(
            "edit",
            json!({"path": "MEMORY.md", "old_string": "Biscuit", "new_string": "Pretzel"}),
        ),
        Turn::tool_use("memory_search", json!({"query": "cat"})),
        Turn::text("Pretzel."),
    ])
    .await;
    let app = App::build(config(dir.path(), &llm.base_url())).unwrap();
    say(&app, "test:a", "remember that my cat is Biscuit").await;
    let outcome = say(&app, "test:b", "what's my cat's name?").await;
    assert_eq!(outcome.text, "Your cat is Biscuit.");
    let result = last_result(&llm);
    assert!(result.starts_with("MEMORY.md:1-5 ("), "{result}");
    assert!(result.contains("Their cat is called Biscuit."), "{result}");
    // Session B's history never held the fact: it came from the index.
    let b = &llm.requests()[2];
    assert!(!b.body["messages"].to_string().contains("Biscuit"));
    assert!(b.tool_names().contains(&"memory_search".to_string()));

    say(&app, "test:c", "actually it's Pretzel").await;
    let result = last_result(&llm);
    assert!(result.contains("Pretzel"), "{result}");
    assert!(!result.contains("Biscuit"), "{result}");
}

#[tokio::test]
async fn deleted_files_disappear_and_unchanged_files_are_not_reindexed() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic(vec![]).await;
    let app = App::build(config(dir.path(), &llm.base_url())).unwrap();
    let ws = app.paths.workspace().to_path_buf();
    std::fs::write(
        ws.join("memory/2026-01-05.md"),
        "Booked the ferry to Tangier.\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.join("memory/trips")).unwrap();
    std::fs::write(
        ws.join("memory/trips/ideas.md"),
        "Maybe a ferry to Crete.\n",
    )
    .unwrap();
    // New files behind the agent's back: picked up by the next sync (at most a second later).
    app.memory.sync_files().unwrap();

    let hits = app.memory.search("ferry", 10).await.unwrap();
    let paths: Vec<&str> = hits.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(paths.len(), 2, "{hits:#?}");
    assert!(paths.contains(&"memory/2026-01-05.md"));
    assert!(paths.contains(&"memory/trips/ideas.md"));
    // Too few chunks with both words: those with either follow, the one with both first.
    let hits = app.memory.search("ferry Crete", 10).await.unwrap();
    assert_eq!(hits.len(), 2, "{hits:#?}");
    assert_eq!(hits[0].path, "memory/trips/ideas.md");
    assert!(hits[0].score > hits[1].score, "{hits:#?}");

    // Content unchanged, file touched: hashed again, not re-chunked.
    let content = std::fs::read(ws.join("memory/trips/ideas.md")).unwrap();
    std::fs::write(ws.join("memory/trips/ideas.md"), content).unwrap();
    let report = app.memory.sync_files().unwrap();
    assert_eq!((report.indexed, report.removed), (0, 0), "{report:?}");

    // Deleted behind the agent's back: gone from results, and from the index.
    std::fs::remove_file(ws.join("memory/2026-01-05.md")).unwrap();
    let hits = app.memory.search("ferry", 10).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].path, "memory/trips/ideas.md");
    assert!(app.memory.search("Tangier", 10).await.unwrap().is_empty());
    let sources: i64 = app
        .db
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM memory_sources WHERE path = 'memory/2026-01-05.md'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(sources, 0);
}

#[tokio::test]
async fn daily_notes_decay_with_age_and_memory_md_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic(vec![]).await;
    let mut config = config(dir.path(), &llm.base_url());
    config.memory.half_life_days = 30.0;
    let app = App::build(config).unwrap();
    let ws = app.paths.workspace().to_path_buf();
    let today = chrono::Local::now().date_naive();
    let old = today - chrono::Duration::days(60);
    let same = "The quarterly report is due on Friday.\n";
    std::fs::write(ws.join("MEMORY.md"), same).unwrap();
    std::fs::write(ws.join(format!("memory/{today}.md")), same).unwrap();
    std::fs::write(ws.join(format!("memory/{old}.md")), same).unwrap();
    app.memory.sync_files().unwrap();
    let hits = app.memory.search("quarterly report", 10).await.unwrap();
    assert_eq!(hits.len(), 3, "{hits:#?}");
    let score = |path: &str| hits.iter().find(|h| h.path == path).unwrap().score;
    let (memory, fresh, stale) = (
        score("MEMORY.md"),
        score(&format!("memory/{today}.md")),
        score(&format!("memory/{old}.md")),
    );
    assert!((memory - fresh).abs() < 1e-9, "{hits:#?}");
    // Two half-lives: a quarter of the weight.
    assert!((stale / memory - 0.25).abs() < 0.01, "{hits:#?}");
    assert_eq!(hits[2].path, format!("memory/{old}.md"));
}

#[tokio::test]
async fn symlinks_are_not_indexed_and_queries_are_never_syntax() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic(vec![]).await;
    let app = App::build(config(dir.path(), &llm.base_url())).unwrap();
    let ws = app.paths.workspace().to_path_buf();
    let outside = dir.path().join("secret.md");
    std::fs::write(&outside, "password hunter2 SECRETWORD\n").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("memory/leak.md")).unwrap();
    std::fs::create_dir(dir.path().join("elsewhere")).unwrap();
    std::fs::write(dir.path().join("elsewhere/x.md"), "SECRETWORD again\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), ws.join("memory/linked")).unwrap();
    app.memory.sync_files().unwrap();
    assert!(app
        .memory
        .search("SECRETWORD", 10)
        .await
        .unwrap()
        .is_empty());

    std::fs::write(
        ws.join("memory/notes.md"),
        "foo-bar NEAR baz \"quoted\" AND\n",
    )
    .unwrap();
    app.memory.sync_files().unwrap();
    for query in [
        "foo-bar",
        "NEAR(",
        "\"quoted",
        "AND OR NOT",
        "*",
        "baz:",
        "^foo",
    ] {
        let hits = app.memory.search(query, 5).await;
        assert!(hits.is_ok(), "{query}: {hits:?}");
    }
    let hits = app.memory.search("foo-bar", 5).await.unwrap();
    assert_eq!(hits[0].path, "memory/notes.md");
    assert!(app.memory.search("---", 5).await.unwrap().is_empty());
}
