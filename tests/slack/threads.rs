//! In a channel, a mention starts a session in its thread and replies in that thread continue
//! it; another thread is another session; a channel that is not allowed gets no answer.

use crate::support::fake_slack::{mention, thread_reply, OWNER};
use crate::{shown, start, wait_for_requests, WAIT};

const CHANNEL: &str = "CTEAM01";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_is_one_session() {
    let s = start(&[CHANNEL]).await;
    s.slack
        .send_event(mention(CHANNEL, OWNER, "first", "10.000001", None));
    s.slack
        .wait_until("the mention is answered", WAIT, |f| {
            shown(f, CHANNEL) == ["answer: first"]
        })
        .await;
    let answer = &s.slack.messages_in(CHANNEL)[0];
    assert_eq!(answer.thread_ts.as_deref(), Some("10.000001"));

    // A reply in the thread, without a mention, continues the session.
    s.slack.send_event(thread_reply(
        CHANNEL,
        OWNER,
        "second",
        "10.000005",
        "10.000001",
    ));
    s.slack
        .wait_until("the reply is answered", WAIT, |f| {
            shown(f, CHANNEL).len() == 2
        })
        .await;
    wait_for_requests(&s.llm, 2).await;
    let second = s.llm.requests()[1].clone();
    let history = serde_json::to_string(second.messages()).unwrap();
    assert!(history.contains("first"), "same session: {history}");
    assert_eq!(
        s.slack.messages_in(CHANNEL)[1].thread_ts.as_deref(),
        Some("10.000001")
    );

    // Another mention outside the thread is a new session.
    s.slack
        .send_event(mention(CHANNEL, OWNER, "other", "20.000001", None));
    wait_for_requests(&s.llm, 3).await;
    let third = s.llm.requests()[2].clone();
    let history = serde_json::to_string(third.messages()).unwrap();
    assert!(!history.contains("first"), "a new session: {history}");

    // Chatter in the channel (no mention, no thread of warden's) is ignored.
    s.slack.send_event(serde_json::json!({
        "type": "message", "channel_type": "channel", "channel": CHANNEL, "user": OWNER,
        "text": "lunch?", "ts": "30.000001"
    }));
    s.slack
        .wait_until("the third answer", WAIT, |f| shown(f, CHANNEL).len() == 3)
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(s.llm.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_that_is_not_allowed_gets_no_answer() {
    let s = start(&[CHANNEL]).await;
    s.slack
        .send_event(mention("COTHER9", OWNER, "hi", "10.000001", None));
    s.slack
        .wait_until("the user is told", WAIT, |f| !f.ephemeral().is_empty())
        .await;
    let told = &s.slack.ephemeral()[0];
    assert!(told["text"].as_str().unwrap().contains("COTHER9"), "{told}");
    assert_eq!(s.llm.request_count(), 0);
}
