//! Sessions survive crashes. The real binary (`warden chat`, session `terminal:default`) is
//! killed with SIGKILL while the model's answer stalls mid-stream after a tool call: every
//! message already sent is in the database, and the next run continues from them. A crash
//! between storing a tool call and its result leaves a history the provider would reject;
//! the next run sends it repaired.

use crate::support::app_config::{config, say};
use crate::support::fake_llm::{FakeLlm, Turn};
use crate::support::warden_run::warden_chat;
use serde_json::json;
use std::io::Write;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use warden::app::App;
use warden::llm::{ContentBlock, Message, Role};
use warden::memory::repair::INTERRUPTED;
use warden::memory::sessions::SessionStore;

fn chat(home: &std::path::Path, llm: &FakeLlm) -> Child {
    warden_chat(home, llm)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

async fn wait_until(what: &str, timeout: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn kill_9_mid_run_loses_no_message_already_sent() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("write", json!({"path": "notes.txt", "content": "buy milk"})),
        // The answer starts streaming, then the server goes silent.
        Turn::text("I wrote the note and now I am thinking about").stall_after(3),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let mut child = chat(home.path(), &llm);
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"please note: buy milk\n")
        .unwrap();
    wait_until("the second model call", Duration::from_secs(30), || {
        llm.request_count() >= 2
    })
    .await;
    // Let the stalled stream begin, then kill without warning.
    tokio::time::sleep(Duration::from_millis(200)).await;
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success());

    // Everything said before the kill is in the database.
    let db = warden::schema::open(&home.path().join(".warden/warden.db")).unwrap();
    let history = SessionStore::new(db.clone())
        .load("terminal:default")
        .unwrap();
    assert_eq!(history.len(), 3, "{history:#?}");
    assert_eq!(history[0].text(), "please note: buy milk");
    assert!(matches!(
        &history[1].content[0],
        ContentBlock::ToolUse { name, .. } if name == "write"
    ));
    assert!(matches!(
        &history[2].content[0],
        ContentBlock::ToolResult { content, is_error: false, .. } if content.contains("wrote 8 bytes")
    ));
    let note = home.path().join(".warden/workspace/notes.txt");
    assert_eq!(std::fs::read_to_string(note).unwrap(), "buy milk");
    drop(db);

    // Run again: the conversation goes on from those messages.
    llm.push(Turn::text("Welcome back."));
    let mut child = chat(home.path(), &llm);
    {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"are you still there?\n").unwrap();
    } // EOF: chat ends after this run.
    let finished = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(finished.success());
    let last = llm.last_request();
    let sent = last.body["messages"].to_string();
    assert!(sent.contains("please note: buy milk"), "{sent}");
    assert!(sent.contains("\"tool_use\""), "{sent}");
    assert!(sent.contains("wrote 8 bytes"), "{sent}");
    assert!(sent.contains("are you still there?"), "{sent}");
    assert_eq!(last.tool_results().len(), 1);
}

#[tokio::test]
async fn a_call_cut_off_by_a_crash_is_answered_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::anthropic(vec![Turn::text("Sorry, that was interrupted.")]).await;
    let app = App::build(config(dir.path(), &llm.base_url())).unwrap();
    // What a crash between storing the call and running it leaves behind.
    let store = app.agent.sessions();
    store
        .append("test:crash", &Message::user("list my files"))
        .unwrap();
    store
        .append(
            "test:crash",
            &Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "toolu_lost".into(),
                    name: "list_dir".into(),
                    input: json!({}),
                }],
            },
        )
        .unwrap();
    say(&app, "test:crash", "hello?").await;
    let results = llm.last_request().tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].tool_use_id, "toolu_lost");
    assert!(results[0].is_error);
    assert_eq!(results[0].content, INTERRUPTED);
    // The database keeps what really happened; the repair is made on load.
    assert_eq!(store.live("test:crash").unwrap().messages.len(), 4);
}
