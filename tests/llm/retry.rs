//! Retries through the real client: which failures are retried, how long it waits (within the
//! retry budget, or a request's own patience), when it gives up, that the first retry is
//! announced once, and that nothing is retried once the answer has begun to stream. Then
//! through the real `warden bot`: an 8 s overload is waited out and every message answered,
//! and a run that still fails is run again with `/retry`.

use crate::support;

use crate::support::fake_llm::{quick_http, FakeLlm, Request, Turn};
use crate::support::fake_telegram::FakeTelegram;
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use warden::llm::{ChatRequest, LlmError, Message, NoEvents, OpenAi, Provider, StreamEvent};

fn ask() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        ..ChatRequest::default()
    }
}

async fn chat(provider: &dyn Provider) -> Result<warden::llm::ChatResponse, LlmError> {
    provider
        .chat(&ask(), &NoEvents, &CancellationToken::new())
        .await
}

#[tokio::test]
async fn overloaded_529_is_retried_until_it_answers() {
    let llm = FakeLlm::anthropic(vec![
        Turn::error(529),
        Turn::error(529),
        Turn::text("third time lucky"),
    ])
    .await;
    let resp = chat(llm.provider().as_ref()).await.unwrap();
    assert_eq!(resp.text(), "third time lucky");
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test]
async fn retries_stop_at_max_attempts_with_the_server_message() {
    let llm = FakeLlm::anthropic(vec![Turn::error(529), Turn::error(529), Turn::error(529)]).await;
    let err = chat(llm.provider().as_ref()).await.unwrap_err();
    assert_eq!(err.status(), Some(529));
    assert_eq!(
        err.to_string(),
        "anthropic: HTTP 529 (3 attempt(s)): overloaded_error: Overloaded"
    );
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test]
async fn rate_limit_retry_after_is_honored() {
    let llm = FakeLlm::openai(vec![
        Turn::error(429).retry_after("1"),
        Turn::text("after the wait"),
    ])
    .await;
    let resp = chat(llm.provider().as_ref()).await.unwrap();
    assert_eq!(resp.text(), "after the wait");
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at - requests[0].at;
    // quick_http's own backoff is at most 100 ms: only retry-after explains a 1 s wait.
    assert!(waited >= Duration::from_secs(1), "waited {waited:?}");
    assert!(waited < Duration::from_millis(1800), "waited {waited:?}");
}

#[tokio::test]
async fn retry_after_longer_than_the_cap_is_not_waited_for() {
    let llm = FakeLlm::anthropic(vec![
        Turn::error(429).retry_after("3600"),
        Turn::text("never"),
    ])
    .await;
    let started = Instant::now();
    let err = chat(llm.provider().as_ref()).await.unwrap_err();
    assert_eq!(err.status(), Some(429));
    assert_eq!(llm.request_count(), 1);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn client_errors_are_not_retried_and_never_show_the_key() {
    let llm = FakeLlm::anthropic(vec![
        Turn::error_message(400, "messages: text content blocks must be non-empty"),
        Turn::text("never"),
    ])
    .await;
    let provider = llm.provider_with(
        llm.settings()
            .with_api_key("fake-anthropic-key-very-secret"),
    );
    let err = chat(provider.as_ref()).await.unwrap_err();
    assert_eq!(err.status(), Some(400));
    assert_eq!(llm.request_count(), 1);
    let text = err.to_string();
    assert_eq!(
        text,
        "anthropic: HTTP 400 (1 attempt(s)): invalid_request_error: messages: text content \
         blocks must be non-empty"
    );
    assert!(!format!("{err:?}").contains("fake-anthropic-key-very-secret"));
}

#[tokio::test]
async fn a_key_echoed_by_the_server_is_redacted() {
    let llm = FakeLlm::openai(vec![Turn::error_message(
        401,
        "Incorrect API key provided: fake-openai-key-1234567890",
    )])
    .await;
    let provider = llm.provider_with(llm.settings().with_api_key("fake-openai-key-1234567890"));
    let err = chat(provider.as_ref()).await.unwrap_err().to_string();
    assert!(!err.contains("fake-openai-key-1234567890"), "{err}");
    assert!(
        err.contains("Incorrect API key provided: <redacted>"),
        "{err}"
    );
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let closed = support::refused::refused_addr();
    let settings = OpenAi::default_settings()
        .with_base_url(format!("http://{}/v1", closed.addr))
        .with_http(quick_http());
    let provider = OpenAi::new(settings).unwrap();
    let err = chat(&provider).await.unwrap_err();
    assert!(
        matches!(err, LlmError::Connect { attempts: 3, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("openai: cannot reach the server (3 attempt(s))"),
        "{text}"
    );
    assert!(!text.contains("127.0.0.1"), "the URL stays out: {text}");
}

#[tokio::test]
async fn nothing_is_retried_once_the_answer_streams() {
    let llm = FakeLlm::anthropic(vec![
        Turn::text("half an ans").stream_error("overloaded_error", "Overloaded"),
        Turn::text("a second answer would repeat output"),
    ])
    .await;
    let err = chat(llm.provider().as_ref()).await.unwrap_err();
    assert!(matches!(err, LlmError::Stream { .. }), "{err:?}");
    assert_eq!(llm.request_count(), 1);
    assert_eq!(llm.remaining(), 1);
}

#[tokio::test]
async fn cancelling_during_a_retry_wait_returns_at_once() {
    let llm = FakeLlm::anthropic(vec![Turn::error(503).retry_after("4"), Turn::text("late")]).await;
    let provider = llm.provider();
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel();
        })
    };
    let started = Instant::now();
    let err = provider.chat(&ask(), &NoEvents, &cancel).await.unwrap_err();
    canceller.await.unwrap();
    assert!(err.is_cancelled(), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(llm.request_count(), 1);
}

/// A model that answers 529 to everything until a moment the test sets.
async fn overloaded_until(until: Arc<Mutex<Option<Instant>>>) -> FakeLlm {
    FakeLlm::anthropic_with(move |req: &Request| {
        let busy = until.lock().unwrap().is_some_and(|t| Instant::now() < t);
        match busy {
            true => Turn::error(529),
            false => Turn::text(format!("answer: {}", req.last_user_text())),
        }
    })
    .await
}

#[tokio::test]
async fn an_outage_is_retried_for_the_budget_and_the_first_retry_is_announced_once() {
    let until = Arc::new(Mutex::new(Some(
        Instant::now() + Duration::from_millis(1500),
    )));
    let llm = overloaded_until(until.clone()).await;
    let mut settings = llm.settings();
    settings.http.retry.max_attempts = u32::MAX;
    settings.http.retry.budget = Duration::from_secs(10);
    let provider = llm.provider_with(settings);
    let events = Mutex::new(Vec::new());
    let sink = |event: StreamEvent| events.lock().unwrap().push(event);
    let resp = provider
        .chat(&ask(), &sink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(resp.text(), "answer: hi");
    assert!(llm.request_count() > 3, "{}", llm.request_count());
    let announced: Vec<StreamEvent> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, StreamEvent::Retrying { .. }))
        .cloned()
        .collect();
    assert_eq!(
        announced,
        [StreamEvent::Retrying {
            provider: "anthropic".into(),
            status: Some(529),
            budget_secs: 10,
        }]
    );

    // A request's own patience replaces the budget: 300 ms of a 1.5 s outage is not enough.
    *until.lock().unwrap() = Some(Instant::now() + Duration::from_millis(1500));
    let started = Instant::now();
    let err = provider
        .chat(
            &ChatRequest {
                patience: Some(Duration::from_millis(300)),
                ..ask()
            },
            &NoEvents,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(529));
    assert!(
        started.elapsed() < Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
}

const WAIT: Duration = Duration::from_secs(40);

/// The bot's messages in `chat` that showed `fragment` at some point (sent or edited).
fn showed(tg: &FakeTelegram, chat: i64, fragment: &str) -> usize {
    tg.messages_to(chat)
        .iter()
        .filter(|m| m.visible.contains(fragment) || m.edits.iter().any(|e| e.contains(fragment)))
        .count()
}

/// The model is overloaded for 8 s while messages arrive in three chats. Each run waits it
/// out within the one-minute budget, each chat is told once that the model is busy and that
/// warden keeps trying, and every message is answered, once, when it recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_8_s_model_overload_is_waited_out_and_every_message_is_answered_once() {
    let until = Arc::new(Mutex::new(None));
    let llm = overloaded_until(until.clone()).await;
    let tg = FakeTelegram::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let mut env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    let chats = [OWNER, OWNER + 1, OWNER + 2];
    env.allowed = chats.map(|c| c.to_string()).join(",");
    let _bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    tg.push_text(OWNER, OWNER, "warm up");
    tg.wait_until("the worker is up", WAIT, |t| {
        t.messages_to(OWNER).len() == 1
    })
    .await;

    *until.lock().unwrap() = Some(Instant::now() + Duration::from_secs(8));
    let mut sent = vec![
        (OWNER, tg.push_text(OWNER, OWNER, "a1").1, "a1"),
        (OWNER, tg.push_text(OWNER, OWNER, "a2").1, "a2"),
        (chats[1], tg.push_text(chats[1], chats[1], "b1").1, "b1"),
        (chats[2], tg.push_text(chats[2], chats[2], "c1").1, "c1"),
    ];
    tokio::time::sleep(Duration::from_secs(4)).await;
    sent.push((chats[1], tg.push_text(chats[1], chats[1], "b2").1, "b2"));
    let replies = |t: &FakeTelegram, chat: i64, id: i64| -> Vec<String> {
        t.messages_to(chat)
            .into_iter()
            .filter(|m| m.reply_to == Some(id) && !m.deleted)
            .map(|m| m.visible)
            .collect()
    };
    tg.wait_until("every message is answered", WAIT, |t| {
        sent.iter()
            .all(|&(chat, id, _)| !replies(t, chat, id).is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    for &(chat, id, text) in &sent {
        assert_eq!(
            replies(&tg, chat, id),
            [format!("answer: {text}")],
            "{text}"
        );
    }
    for chat in chats {
        assert_eq!(
            showed(
                &tg,
                chat,
                "The model is busy (HTTP 529); warden keeps trying for up to 60 s"
            ),
            1,
            "chat {chat}: {:#?}",
            tg.messages_to(chat)
        );
    }
}

/// An overload longer than the budget (here 2 s) fails the run, in plain words with a /retry
/// to tap; the tap runs it again once the model is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_still_fails_is_run_again_with_one_tap_on_retry() {
    let until = Arc::new(Mutex::new(None));
    let llm = overloaded_until(until.clone()).await;
    let tg = FakeTelegram::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    env.write_config("[llm]\nretry_budget_secs = 2\n");
    let bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;

    *until.lock().unwrap() = Some(Instant::now() + Duration::from_secs(30));
    let (_, id) = tg.push_text(OWNER, OWNER, "the report");
    tg.wait_until("the failure", WAIT, |t| {
        t.messages_to(OWNER).iter().any(|m| m.reply_to == Some(id))
    })
    .await;
    let failed = tg.messages_to(OWNER);
    let failed = failed.iter().find(|m| m.reply_to == Some(id)).unwrap();
    assert_eq!(
        failed.visible,
        "The model stayed overloaded while I kept trying, so I could not answer “the report”. \
         Tap /retry to try again."
    );
    // The details are in the log.
    bot.wait_for_log("HTTP 529", WAIT).await;

    *until.lock().unwrap() = None;
    tg.push_text(OWNER, OWNER, "/retry");
    tg.wait_until("the answer", WAIT, |t| {
        t.messages_to(OWNER)
            .iter()
            .any(|m| m.visible == "answer: the report" && m.reply_to == Some(id))
    })
    .await;
    // Tapped again: everything since was answered.
    tg.push_text(OWNER, OWNER, "/retry");
    tg.wait_until("the reply", WAIT, |t| {
        t.messages_to(OWNER)
            .iter()
            .any(|m| m.visible.starts_with("Nothing to retry"))
    })
    .await;
    let runs = llm
        .requests()
        .iter()
        .filter(|r| r.last_user_text() == "the report")
        .count();
    assert!(runs >= 2, "{runs}");
}
