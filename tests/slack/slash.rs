//! `/warden new|status|approvals` over Socket Mode, answered only to whoever typed it.

use crate::support::fake_slack::{dm, FakeSlack, DM, OWNER};
use crate::{start, wait_for_requests, WAIT};

/// The ephemeral answers to `user`, in order.
fn told(slack: &FakeSlack, user: &str) -> Vec<String> {
    slack
        .ephemeral()
        .into_iter()
        .filter(|e| e["user"] == user)
        .map(|e| e["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn slash(slack: &FakeSlack, user: &str, channel: &str, text: &str) -> String {
    let before = told(slack, user).len();
    slack.slash(user, channel, text);
    slack
        .wait_until("the answer to /warden", WAIT, |f| {
            told(f, user).len() > before
        })
        .await;
    told(slack, user)[before].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_start_over_show_status_and_list_approvals() {
    let s = start(&[]).await;
    s.slack
        .send_event(dm(OWNER, "remember the first", "1.000001"));
    s.slack
        .wait_until("the answer", WAIT, |f| !f.messages_in(DM).is_empty())
        .await;
    let status = slash(&s.slack, OWNER, DM, "status").await;
    assert_eq!(status, "Nothing is running.");
    let approvals = slash(&s.slack, OWNER, DM, "approvals").await;
    assert!(approvals.contains("Nothing is approved"), "{approvals}");
    assert_eq!(
        slash(&s.slack, OWNER, DM, "new").await,
        "Started a new conversation."
    );
    // The next message starts without the earlier one.
    s.slack.send_event(dm(OWNER, "second", "1.000002"));
    wait_for_requests(&s.llm, 2).await;
    let history = serde_json::to_string(s.llm.requests()[1].messages()).unwrap();
    assert!(!history.contains("remember the first"), "{history}");
    assert!(slash(&s.slack, OWNER, DM, "what")
        .await
        .contains("/warden new"));
    assert!(slash(&s.slack, OWNER, "CTEAM01", "new")
        .await
        .contains("each thread is its own conversation"));
    let stranger = slash(&s.slack, "USTRANGER", DM, "new").await;
    assert!(
        stranger.contains("USTRANGER") && stranger.contains("allowed"),
        "{stranger}"
    );
}
