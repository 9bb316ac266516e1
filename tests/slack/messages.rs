//! Direct messages: answered and streamed by editing one message, escaped, never unfurled;
//! strangers told once; a redelivered event answered once; a 429's Retry-After honoured; a
//! reconnect asked for by Slack.

use crate::support::fake_slack::{dm, APP_TOKEN, BOT_TOKEN, DM, OWNER};
use crate::{shown, start, streamed_answer, wait_for_requests, WAIT};
use std::time::Duration;
use warden::channels::slack::format::{parts, MESSAGE_LIMIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_message_is_answered_by_one_streamed_message() {
    let s = start(&[]).await;
    let (envelope, _) = s.slack.send_event(dm(OWNER, "stream please", "1.000001"));
    s.slack
        .wait_until("the envelope is acknowledged", WAIT, |f| {
            f.acks().contains(&envelope)
        })
        .await;
    let expected = parts(&streamed_answer(), MESSAGE_LIMIT);
    assert_eq!(expected.len(), 1);
    s.slack
        .wait_until("the answer is shown", WAIT, |f| shown(f, DM) == expected)
        .await;
    let message = &s.slack.messages_in(DM)[0];
    assert!(message.thread_ts.is_none(), "a DM answer is not threaded");
    assert!(
        !message.edits.is_empty(),
        "the answer streamed into its message: {message:?}"
    );
    // Every version shown is escaped: no mention, broadcast or disguised link.
    for text in std::iter::once(&message.text).chain(&message.edits) {
        assert!(!text.contains('<') && !text.contains('>'), "{text}");
    }
    assert_eq!(message.body["unfurl_links"], false);
    assert_eq!(message.body["unfurl_media"], false);
    // Edits are paced (at most about one a second).
    let updates = s.slack.calls_of("chat.update");
    for pair in updates.windows(2) {
        assert!(
            pair[1].at - pair[0].at >= Duration::from_millis(900),
            "edits {:?} apart",
            pair[1].at - pair[0].at
        );
    }
    // Tokens went where they belong and nowhere in the log.
    for call in s.slack.calls() {
        let want = if call.method == "apps.connections.open" {
            APP_TOKEN
        } else {
            BOT_TOKEN
        };
        assert_eq!(call.token, want, "{}", call.method);
    }
    let stderr = s.bot.stderr();
    assert!(!stderr.contains(BOT_TOKEN) && !stderr.contains(APP_TOKEN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_is_told_once_and_gets_no_run() {
    let s = start(&[]).await;
    s.slack.send_event(dm("USTRANGER", "hello?", "1.000001"));
    let (last, _) = s.slack.send_event(dm("USTRANGER", "hello??", "1.000002"));
    s.slack
        .wait_until("both are acknowledged", WAIT, |f| f.acks().contains(&last))
        .await;
    s.slack
        .wait_until("the stranger is told", WAIT, |f| !f.ephemeral().is_empty())
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let told = s.slack.ephemeral();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0]["user"], "USTRANGER");
    assert!(told[0]["text"].as_str().unwrap().contains("USTRANGER"));
    assert_eq!(s.llm.request_count(), 0);
    assert!(s.slack.messages().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_event_is_answered_once() {
    let s = start(&[]).await;
    let event = dm(OWNER, "once", "1.000001");
    let (first, event_id) = s.slack.send_event(event.clone());
    // Slack sends it again in a new envelope (it missed the acknowledgement).
    s.slack.redeliver("env-again", &event_id, event);
    s.slack
        .wait_until("both envelopes are acknowledged", WAIT, |f| {
            let acks = f.acks();
            acks.contains(&first) && acks.contains(&"env-again".to_string())
        })
        .await;
    s.slack
        .wait_until("the answer arrives", WAIT, |f| {
            shown(f, DM) == ["answer: once"]
        })
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(shown(&s.slack, DM), ["answer: once"]);
    assert_eq!(s.llm.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_is_waited_out() {
    let s = start(&[]).await;
    s.slack.rate_limit("chat.postMessage", 1, 2);
    s.slack.send_event(dm(OWNER, "limited", "1.000001"));
    s.slack
        .wait_until("the answer arrives", WAIT, |f| {
            shown(f, DM) == ["answer: limited"]
        })
        .await;
    let posts = s.slack.calls_of("chat.postMessage");
    assert_eq!(posts.len(), 2, "one refused, one sent: {posts:?}");
    assert!(posts[0].limited && !posts[1].limited);
    let waited = posts[1].at - posts[0].at;
    assert!(
        waited >= Duration::from_secs(2),
        "Retry-After not honoured: {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_envelope_opens_a_new_connection() {
    let s = start(&[]).await;
    s.slack.disconnect();
    crate::connected(&s.slack, 2, &s.bot).await;
    s.slack.send_event(dm(OWNER, "still there?", "1.000001"));
    s.slack
        .wait_until("the answer arrives", WAIT, |f| {
            shown(f, DM) == ["answer: still there?"]
        })
        .await;
    wait_for_requests(&s.llm, 1).await;
}
