//! Compaction through the real App against the fake LLM: a long conversation reaches the soft
//! threshold (one flush turn that writes the daily note with the ordinary write tool), then the
//! hard one (the older part summarized, the newest kept verbatim); the next run starts from the
//! summary; originals stay in the database and become searchable; a failing model yields the
//! statistical summary; large transcripts are summarized in chunks and merged; every request
//! sent is a well-formed tool-call history.

use crate::support::app_config::{config, say};
use crate::support::fake_llm::{FakeLlm, Request, Turn};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use warden::app::App;
use warden::llm::{Message, Provider};
use warden::memory::sessions::StoredMessage;
use warden::memory::summary::Summarizer;

const FLUSH_MARK: &str = "[warden: memory flush]";

fn is_summary(req: &Request) -> bool {
    req.system()
        .unwrap_or_default()
        .contains("You summarize conversations")
}

fn is_flush(req: &Request) -> bool {
    req.messages()
        .iter()
        .any(|m| m.to_string().contains(FLUSH_MARK))
}

fn is_main(req: &Request) -> bool {
    !is_summary(req) && !is_flush(req)
}

fn blocks(message: &Value) -> Vec<Value> {
    message["content"].as_array().cloned().unwrap_or_default()
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        content => content
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str())
            .collect(),
    }
}

/// Every tool_result answers a tool_use of the message right before it, and every tool_use
/// is answered in the message right after it (what the Anthropic API enforces).
fn assert_well_formed(req: &Request) {
    let messages = req.messages();
    assert_eq!(messages.first().map(|m| &m["role"]), Some(&json!("user")));
    for (i, m) in messages.iter().enumerate() {
        let uses: Vec<String> = blocks(m)
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap().to_string())
            .collect();
        let results = |m: &Value| -> Vec<String> {
            blocks(m)
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| b["tool_use_id"].as_str().unwrap().to_string())
                .collect()
        };
        if !uses.is_empty() {
            let next = messages.get(i + 1).map(results).unwrap_or_default();
            assert_eq!(next, uses, "request #{}: calls of message {i}", req.index);
        }
        let own = results(m);
        if !own.is_empty() {
            let prev: Vec<String> = blocks(&messages[i - 1])
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(own, prev, "request #{}: results of message {i}", req.index);
        }
    }
}

/// The daily note the flush instruction names (`memory/YYYY-MM-DD.md`).
fn daily_note(req: &Request) -> String {
    let body = req.body.to_string();
    let at = body
        .find("appending it to memory/")
        .expect("the daily note path")
        + 16;
    body[at..at + 20].to_string()
}

fn ends_with_results(req: &Request) -> bool {
    req.messages()
        .last()
        .is_some_and(|m| blocks(m).iter().any(|b| b["type"] == "tool_result"))
}

/// The fake model: writes a note when asked to flush, summarizes with `summary`, and answers
/// everything else reporting 2000 input tokens per message it was sent.
fn script(summary: Turn) -> impl Fn(&Request) -> Turn + Send + Sync + 'static {
    move |req: &Request| {
        if is_summary(req) {
            return summary.clone();
        }
        if is_flush(req) {
            if ends_with_results(req) {
                return Turn::text("NO_REPLY");
            }
            return Turn::tool_use(
                "write",
                json!({"path": daily_note(req), "content": "- The user is planning a trip to Lisbon in May.\n"}),
            );
        }
        let n = req.messages().len() as u64;
        Turn::text(format!("answer to {n} messages")).usage(2000 * n, 10)
    }
}

/// A user message of about 2000 characters with a unique word, `zebraN`.
fn long_message(i: usize) -> String {
    let mut text = format!("Message {i} about zebra{i}. ");
    while text.len() < 2000 {
        text.push_str("Some more details about the plan that take up room. ");
    }
    text
}

fn small_window(config: &mut warden::config::Config) {
    config.memory.context_window = 20_000;
    config.memory.soft_threshold = 0.5;
    config.memory.hard_threshold = 0.8;
    config.memory.keep_recent = 0.05;
}

fn count(app: &App, sql: &str) -> i64 {
    app.db.conn().query_row(sql, [], |r| r.get(0)).unwrap()
}

#[tokio::test]
async fn a_long_conversation_flushes_then_compacts_and_the_next_run_starts_from_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic_with(script(Turn::text(
        "SUMMARY: the user described zebras 1 to 5.",
    )))
    .await;
    let mut config = config(dir.path(), &llm.base_url());
    small_window(&mut config);
    let app = App::build(config).unwrap();
    let session = "test:long";

    // Reported input: 2000, 6000, 10000 (soft: 10000), 14000, 18000 (hard: 16000).
    let mut per_run: Vec<Vec<Request>> = Vec::new();
    for i in 1..=7 {
        let before = llm.request_count();
        let outcome = say(&app, session, &long_message(i)).await;
        assert!(outcome.text.starts_with("answer"), "{}", outcome.text);
        per_run.push(llm.requests()[before..].to_vec());
    }
    for req in llm.requests() {
        assert_well_formed(&req);
    }
    let flushes: Vec<usize> = (0..7)
        .filter(|&r| per_run[r].iter().any(is_flush))
        .map(|r| r + 1)
        .collect();
    let compactions: Vec<usize> = (0..7)
        .filter(|&r| per_run[r].iter().any(is_summary))
        .map(|r| r + 1)
        .collect();
    assert_eq!(flushes, [4], "one flush, at the soft threshold");
    assert_eq!(compactions, [6], "one compaction, at the hard threshold");

    // The flush wrote the daily note through the write tool (audited like any call).
    let flush_requests: Vec<&Request> = per_run[3].iter().filter(|r| is_flush(r)).collect();
    assert_eq!(flush_requests.len(), 2, "the write, then NO_REPLY");
    let note = daily_note(flush_requests[0]);
    let written = std::fs::read_to_string(app.paths.workspace().join(&note)).unwrap();
    assert!(written.contains("Lisbon"), "{written}");
    assert_eq!(
        count(
            &app,
            "SELECT COUNT(*) FROM audit WHERE tool = 'write' AND decision = 'allow'"
        ),
        1
    );
    // The flush exchange is not part of the conversation.
    assert!(per_run[4]
        .iter()
        .all(|r| !r.body.to_string().contains(FLUSH_MARK)));

    // The summary request carried the older messages, not the kept ones.
    let summary_request = per_run[5].iter().find(|r| is_summary(r)).unwrap();
    let transcript = summary_request.body.to_string();
    assert!(transcript.contains("zebra1") && transcript.contains("zebra5"));
    assert!(!transcript.contains("zebra6"));

    // The call after compaction: summary, the last answer, the new message.
    let main6 = per_run[5].iter().find(|r| is_main(r)).unwrap();
    let messages = main6.messages();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert!(text_of(&messages[0]).contains("[Summary of the earlier conversation"));
    assert!(text_of(&messages[0]).contains("SUMMARY: the user described zebras 1 to 5."));
    assert_eq!(messages[1]["role"], "assistant");
    assert!(text_of(&messages[2]).contains("zebra6"));
    assert!(!main6.body.to_string().contains("zebra2"));

    // The next run starts from the summary plus the recent messages.
    let main7 = per_run[6].iter().find(|r| is_main(r)).unwrap();
    let texts: Vec<String> = main7.messages().iter().map(text_of).collect();
    assert_eq!(texts.len(), 5, "{texts:#?}");
    assert!(texts[0].contains("SUMMARY: the user described zebras"));
    assert!(texts[2].contains("zebra6") && texts[4].contains("zebra7"));

    // Originals stay, marked compacted; the marker records the model's summary.
    assert_eq!(
        count(&app, "SELECT COUNT(*) FROM messages WHERE compacted = 1"),
        9
    );
    assert_eq!(count(&app, "SELECT COUNT(*) FROM messages"), 14);
    let method: String = app
        .db
        .conn()
        .query_row("SELECT method FROM compactions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(method, "model");

    // The compacted messages and the flushed note are searchable.
    let hits = app.memory.search("zebra2", 5).await.unwrap();
    assert_eq!(hits[0].path, "session:test:long", "{hits:#?}");
    assert!(hits[0].text.contains("zebra2"));
    let hits = app.memory.search("Lisbon trip", 5).await.unwrap();
    assert_eq!(hits[0].path, note, "{hits:#?}");
}

#[tokio::test]
async fn when_the_model_cannot_summarize_a_statistical_summary_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic_with(script(Turn::error_message(400, "prompt is too long"))).await;
    let mut config = config(dir.path(), &llm.base_url());
    small_window(&mut config);
    config.memory.flush = false;
    let app = App::build(config).unwrap();
    for i in 1..=6 {
        say(&app, "test:fallback", &long_message(i)).await;
    }
    assert!(!llm.requests().iter().any(is_flush), "flush is off");
    assert!(llm.requests().iter().any(is_summary));
    let last = llm.last_request();
    assert_well_formed(&last);
    let summary = text_of(&last.messages()[0]);
    assert!(summary.contains("Written without the model"), "{summary}");
    assert!(summary.contains("9 messages: 5 from the user"), "{summary}");
    assert!(
        summary.contains("first user request: \"Message 1 about zebra1."),
        "{summary}"
    );
    assert!(
        summary.contains("last user request: \"Message 5 about zebra5."),
        "{summary}"
    );
    let method: String = app
        .db
        .conn()
        .query_row("SELECT method FROM compactions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(method, "statistics");
    // Nothing was lost: every message is still in the database.
    assert_eq!(count(&app, "SELECT COUNT(*) FROM messages"), 12);
}

#[tokio::test]
async fn tool_heavy_histories_stay_well_formed_across_compaction() {
    let dir = tempfile::tempdir().unwrap();
    // Each run: the model reads a big file, then answers.
    let llm = FakeLlm::anthropic_with(|req: &Request| {
        if is_summary(req) {
            return Turn::text("SUMMARY: files were read.");
        }
        let n = req.messages().len() as u64;
        if ends_with_results(req) {
            Turn::text("read it").usage(1500 * n, 10)
        } else {
            Turn::tool_use("read", json!({"path": "big.txt"})).usage(1500 * n, 10)
        }
    })
    .await;
    let mut config = config(dir.path(), &llm.base_url());
    small_window(&mut config);
    config.memory.flush = false;
    config.memory.keep_recent = 0.1;
    let app = App::build(config).unwrap();
    std::fs::write(app.paths.workspace().join("big.txt"), "data ".repeat(1200)).unwrap();
    for i in 1..=6 {
        say(&app, "test:tools", &format!("read big.txt again ({i})")).await;
    }
    assert!(llm.requests().iter().any(is_summary), "it compacted");
    for req in llm.requests().iter().filter(|r| is_main(r)) {
        assert_well_formed(req);
    }
}

#[tokio::test]
async fn large_transcripts_are_summarized_in_chunks_then_merged() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    let llm = FakeLlm::anthropic_with(move |req: &Request| {
        let prompt = req.last_user_text();
        log.lock().unwrap().push(prompt.clone());
        if prompt.contains("Merge them") {
            Turn::text("MERGED")
        } else {
            Turn::text(format!("PART{}", log.lock().unwrap().len()))
        }
    })
    .await;
    let provider: Box<dyn Provider> = llm.provider();
    let messages: Vec<StoredMessage> = (1..=6)
        .map(|i| StoredMessage {
            id: i,
            message: Message::user(long_message(i as usize)),
            usage: None,
            created_at: "2026-11-21T09:00:00.000Z".into(),
        })
        .collect();
    let cancel = tokio_util::sync::CancellationToken::new();
    let summarizer = Summarizer {
        provider: provider.as_ref(),
        cancel: &cancel,
        max_tokens: 500,
        chunk_chars: 4500,
    };
    let summary = summarizer
        .summarize(Some("EARLIER-SUMMARY"), &messages)
        .await
        .unwrap();
    assert_eq!(summary, "MERGED");
    let prompts = seen.lock().unwrap().clone();
    // Two messages of ~2000 characters per 4500-character chunk: three chunks, one merge.
    assert_eq!(prompts.len(), 4, "{prompts:#?}");
    assert!(prompts[0].contains("EARLIER-SUMMARY") && prompts[0].contains("part 1 of 3"));
    assert!(prompts[0].contains("zebra1") && prompts[0].contains("zebra2"));
    assert!(!prompts[1].contains("EARLIER-SUMMARY") && prompts[1].contains("zebra3"));
    assert!(prompts[3].contains("PART1") && prompts[3].contains("PART3"));
}

#[tokio::test]
async fn stopping_a_run_during_the_summary_leaves_the_history_alone() {
    use std::time::Duration;
    use warden::agent::{RunControl, RunEnd, RunRequest};
    use warden::llm::ContentBlock;
    use warden::tools::approval::NoApprover;

    let dir = tempfile::tempdir().unwrap();
    let slow_summary = Turn::text("too late").delay(Duration::from_secs(20));
    let llm = FakeLlm::anthropic_with(script(slow_summary)).await;
    let mut config = config(dir.path(), &llm.base_url());
    small_window(&mut config);
    config.memory.flush = false;
    let app = Arc::new(App::build(config).unwrap());
    for i in 1..=5 {
        say(&app, "test:stop", &long_message(i)).await;
    }
    let control = RunControl::new();
    let run = tokio::spawn({
        let (app, control) = (app.clone(), control.clone());
        async move {
            app.agent
                .run(RunRequest {
                    session: "test:stop".into(),
                    input: vec![ContentBlock::text(long_message(6))],
                    approver: Arc::new(NoApprover),
                    outbox: Arc::new(warden::tools::outbox::Nowhere::TERMINAL),
                    events: Arc::new(|_| {}),
                    control,
                    background: warden::tools::background::ignore_background(),
                    patience: None,
                })
                .await
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !llm.requests().iter().any(is_summary) {
        assert!(std::time::Instant::now() < deadline, "no summary request");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    control.abort();
    let outcome = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the run stops promptly")
        .unwrap()
        .unwrap();
    assert_eq!(outcome.end, RunEnd::Aborted);
    assert_eq!(count(&app, "SELECT COUNT(*) FROM compactions"), 0);
    assert_eq!(
        count(&app, "SELECT COUNT(*) FROM messages WHERE compacted = 1"),
        0
    );
}
