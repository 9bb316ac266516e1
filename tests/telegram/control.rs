//! Controlling runs from the chat through the real `warden bot`: `/stop` aborts a long call
//! promptly, a full queue answers "busy", `/steer` reaches the running task, `/status` shows
//! the queue.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::fake_telegram::FakeTelegram;
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

/// `slow…` prompts take 30 s, `slowish…` 1.5 s; everything else is answered at once.
async fn llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| {
        let text = req.last_user_text();
        let turn = Turn::text(format!("answer: {text}"));
        if text.starts_with("slowish") {
            turn.delay(Duration::from_millis(1500))
        } else if text.starts_with("slow") {
            turn.delay(Duration::from_secs(30))
        } else {
            turn
        }
    })
    .await
}

async fn wait_for_requests(llm: &FakeLlm, n: usize) {
    let deadline = Instant::now() + WAIT;
    while llm.request_count() < n {
        assert!(Instant::now() < deadline, "the LLM got no request #{n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn start() -> (FakeTelegram, FakeLlm, BotProcess, tempfile::TempDir) {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let bot = BotProcess::start(&BotEnv::new(home.path(), tg.api_url(), llm.base_url()));
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    (tg, llm, bot, home)
}

fn texts(tg: &FakeTelegram) -> Vec<String> {
    tg.messages_to(OWNER)
        .iter()
        .map(|m| m.visible.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_aborts_a_long_call_promptly_and_the_chat_goes_on() {
    let (tg, llm, _bot, _home) = start().await;
    let (_, slow_id) = tg.push_text(OWNER, OWNER, "slow task");
    wait_for_requests(&llm, 1).await;
    let asked = Instant::now();
    tg.push_text(OWNER, OWNER, "/stop");
    tg.wait_until("the run stops", WAIT, |t| {
        t.messages_to(OWNER).iter().any(|m| m.visible == "Stopped.")
    })
    .await;
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "stopping took {:?}",
        asked.elapsed()
    );
    let stopped = tg.messages_to(OWNER);
    assert_eq!(stopped.len(), 1, "{:?}", texts(&tg));
    assert_eq!(stopped[0].reply_to, Some(slow_id));
    tg.push_text(OWNER, OWNER, "and now this");
    tg.wait_until("the next answer", WAIT, |t| t.messages_to(OWNER).len() == 2)
        .await;
    assert_eq!(texts(&tg)[1], "answer: and now this");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sixth_waiting_prompt_gets_busy_and_stop_drops_the_queue() {
    let (tg, llm, _bot, _home) = start().await;
    tg.push_text(OWNER, OWNER, "slow running");
    wait_for_requests(&llm, 1).await;
    let ids: Vec<i64> = (2..=7)
        .map(|n| tg.push_text(OWNER, OWNER, &format!("prompt {n}")).1)
        .collect();
    tg.wait_until("a busy reply", WAIT, |t| !t.messages_to(OWNER).is_empty())
        .await;
    let busy = tg.messages_to(OWNER);
    assert_eq!(busy.len(), 1, "{:?}", texts(&tg));
    assert!(
        busy[0].visible.starts_with("I'm busy: 5 messages"),
        "{}",
        busy[0].visible
    );
    assert_eq!(
        busy[0].reply_to,
        Some(ids[5]),
        "the sixth waiting prompt is refused"
    );

    tg.push_text(OWNER, OWNER, "/status");
    tg.wait_until("the status", WAIT, |t| t.messages_to(OWNER).len() == 2)
        .await;
    let status = &texts(&tg)[1];
    assert!(status.starts_with("Working for"), "{status}");
    assert!(
        status.contains("“slow running”") && status.contains("Waiting (5):"),
        "{status}"
    );
    assert!(status.contains("5. prompt 6"), "{status}");

    tg.push_text(OWNER, OWNER, "/stop");
    tg.wait_until("stopped and dropped", WAIT, |t| {
        t.messages_to(OWNER).len() == 4
    })
    .await;
    let all = texts(&tg);
    assert!(all.contains(&"Stopped.".to_string()), "{all:?}");
    assert!(
        all.contains(&"Dropped 5 waiting messages.".to_string()),
        "{all:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(llm.request_count(), 1, "dropped prompts never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_reaches_the_running_task() {
    let (tg, llm, _bot, _home) = start().await;
    tg.push_text(OWNER, OWNER, "slowish look around");
    wait_for_requests(&llm, 1).await;
    tg.push_text(OWNER, OWNER, "/steer also check the logs");
    tg.wait_until(
        "the steer is acknowledged, the run answers and the steer runs",
        WAIT,
        |t| t.messages_to(OWNER).len() == 3,
    )
    .await;
    let all = texts(&tg);
    assert!(all[0].contains("pass that on"), "{all:?}");
    assert_eq!(all[1], "answer: slowish look around");
    assert_eq!(all[2], "answer: also check the logs");
    // Steering with nothing running is simply the next prompt.
    tg.push_text(OWNER, OWNER, "/steer by the way");
    tg.wait_until("answered", WAIT, |t| t.messages_to(OWNER).len() == 4)
        .await;
    assert_eq!(texts(&tg)[3], "answer: by the way");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_shows_a_status_message_that_goes_away() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("read", serde_json::json!({"path": "notes.txt"})),
        Turn::text("the notes are empty").delay(Duration::from_millis(4500)),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let _bot = BotProcess::start(&BotEnv::new(home.path(), tg.api_url(), llm.base_url()));
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    tg.push_text(OWNER, OWNER, "what is in my notes?");
    tg.wait_until("the answer", WAIT, |t| {
        t.messages_to(OWNER)
            .iter()
            .any(|m| m.visible == "the notes are empty")
    })
    .await;
    let sent = tg.messages_to(OWNER);
    assert_eq!(sent.len(), 2, "{:?}", texts(&tg));
    assert_eq!(sent[0].visible, "⏳ read: notes.txt…");
    assert!(sent[0].text.contains("<code>notes.txt</code>"));
    assert!(sent[0].deleted, "the status message is removed");
    assert!(tg.count("sendChatAction") >= 2, "typing is repeated");
}
