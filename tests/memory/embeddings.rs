//! Hybrid memory search against a fake OpenAI-compatible embeddings server on 127.0.0.1: the
//! vector half finds a passage that shares no word with the query; when the endpoint fails or
//! cannot be reached, search falls back to keywords (and leaves the endpoint alone for a
//! while rather than waiting on it at every search).

use crate::support;

use crate::support::app_config::config;
use crate::support::fake_embeddings::FakeEmbeddings;
use crate::support::fake_llm::FakeLlm;
use warden::app::App;
use warden::config::Secret;

fn app_with_embeddings(dir: &std::path::Path, llm: &FakeLlm, base_url: String) -> App {
    let mut config = config(dir, &llm.base_url());
    config.memory.embeddings.base_url = Some(base_url);
    config.memory.embeddings.model = "fake-embed".into();
    config.memory.embeddings.api_key = Secret::new("emb-key");
    let app = App::build(config).unwrap();
    let ws = app.paths.workspace();
    std::fs::write(
        ws.join("MEMORY.md"),
        "# Memory\nMy kitten sleeps all day on the sofa.\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("memory/notes.md"),
        "The boat leaves at nine from the harbour.\n",
    )
    .unwrap();
    // Written behind the agent's back: picked up by the next sync (at most a second later).
    app.memory.sync_files().unwrap();
    app
}

#[tokio::test]
async fn vectors_find_what_keywords_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic(vec![]).await;
    let embeddings = FakeEmbeddings::start().await;
    let app = app_with_embeddings(dir.path(), &llm, embeddings.base_url());

    // "feline" is in no file: only the vector side can match the kitten.
    let hits = app.memory.search("feline", 5).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].path, "MEMORY.md");
    assert!(hits[0].score > 0.2, "{hits:#?}");

    let requests = embeddings.requests();
    assert_eq!(requests.len(), 2, "the chunks, then the query");
    assert_eq!(requests[0].0.as_deref(), Some("Bearer emb-key"));
    assert_eq!(requests[0].1["model"], "fake-embed");
    assert_eq!(requests[0].1["input"].as_array().unwrap().len(), 2);
    assert_eq!(requests[1].1["input"][0], "feline");
    let unembedded: i64 = app
        .db
        .conn()
        .query_row(
            "SELECT COUNT(*) FROM memory_chunks WHERE embedding_model IS NOT 'fake-embed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(unembedded, 0);

    // Keywords and vectors agree: the harbour note first; chunks are not embedded again.
    let hits = app.memory.search("boat harbour", 5).await.unwrap();
    assert_eq!(hits[0].path, "memory/notes.md", "{hits:#?}");
    assert_eq!(embeddings.requests().len(), 3);
}

#[tokio::test]
async fn a_failing_endpoint_falls_back_to_keywords() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic(vec![]).await;
    let embeddings = FakeEmbeddings::start().await;
    embeddings.set_failing(true);
    let app = app_with_embeddings(dir.path(), &llm, embeddings.base_url());

    let hits = app.memory.search("kitten", 5).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].path, "MEMORY.md");
    assert!(app.memory.search("feline", 5).await.unwrap().is_empty());
    // One failed request; after that the endpoint is left alone for a while.
    assert_eq!(embeddings.requests().len(), 1);
    embeddings.set_failing(false);
    let hits = app.memory.search("sofa", 5).await.unwrap();
    assert_eq!(hits[0].path, "MEMORY.md");
    assert_eq!(embeddings.requests().len(), 1);
}

#[tokio::test]
async fn an_unreachable_endpoint_falls_back_to_keywords() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic(vec![]).await;
    let closed = support::refused::refused_addr();
    let app = app_with_embeddings(dir.path(), &llm, format!("http://{}/v1", closed.addr));
    let hits = app.memory.search("harbour", 5).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0].path, "memory/notes.md");
}
