//! `kill -9` mid-run, then a restart: the interrupted run is reported in place of its
//! streamed draft (not run again), the message queued behind it is answered, each once.

use crate::support::fake_slack::{dm, DM, OWNER};
use crate::support::warden_bot::BotProcess;
use crate::{connected, shown, start, wait_for_requests, WAIT};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_loses_nothing_and_repeats_nothing() {
    let mut s = start(&[]).await;
    let (_, _) = s.slack.send_event(dm(OWNER, "slow one", "1.000001"));
    wait_for_requests(&s.llm, 1).await;
    let (queued, _) = s.slack.send_event(dm(OWNER, "queued behind", "1.000002"));
    s.slack
        .wait_until("the queued message is acknowledged", WAIT, |f| {
            f.acks().contains(&queued)
        })
        .await;
    // Acknowledged means recorded; give the handler a moment to queue it too (either way it
    // must survive).
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.bot.kill9();
    assert!(s.slack.messages().is_empty(), "{:?}", s.slack.messages());

    let bot = BotProcess::start(&s.env);
    connected(&s.slack, 2, &bot).await;
    s.slack
        .wait_until("both are answered", WAIT, |f| shown(f, DM).len() >= 2)
        .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let shown = shown(&s.slack, DM);
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(
        shown[0].contains("restarted while working on") && shown[0].contains("slow one"),
        "{shown:?}"
    );
    assert_eq!(shown[1], "answer: queued behind");
    let slow_runs = s
        .llm
        .requests()
        .iter()
        .filter(|q| q.last_user_text() == "slow one")
        .count();
    assert_eq!(slow_runs, 1, "the interrupted run is not run again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_stream_turns_the_draft_into_the_notice_not_a_second_message() {
    let mut s = start(&[]).await;
    s.slack.send_event(dm(OWNER, "stream forever", "1.000001"));
    s.slack
        .wait_until("the draft was edited", WAIT, |f| {
            f.messages_in(DM)
                .first()
                .is_some_and(|m| !m.edits.is_empty())
        })
        .await;
    // Let the draft's id reach the database (it is stored as soon as the message exists).
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.bot.kill9();
    let drafts = s.slack.messages_in(DM).len();
    assert_eq!(drafts, 1);

    let bot = BotProcess::start(&s.env);
    connected(&s.slack, 2, &bot).await;
    s.slack
        .wait_until("the draft shows the restart notice", WAIT, |f| {
            f.messages_in(DM)[0]
                .shown()
                .contains("restarted while working on")
        })
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        s.slack.messages_in(DM).len(),
        1,
        "no second message: {:?}",
        shown(&s.slack, DM)
    );
}
