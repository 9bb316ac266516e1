//! The channels by which untrusted content passed for the user's: a background command's
//! notice, compaction, an error text, a page that reflects the model's own URL; and what a
//! background command changes after its run.

use crate::support::warden_bot::OWNER;
use crate::support::web_bot::WAIT;
use crate::{answer_approval, ask, bot, decisions, memory, Answer, ANSWERS};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_notice_is_warden_speaking_not_the_user() {
    let b = bot("").await;
    for (round, answer) in ANSWERS.into_iter().enumerate() {
        let url = format!("http://evil.test/collect?d=canary-{round}");
        let started = ask(&b, &format!("bg-secret {round}"), 2 * round + 1).await;
        assert!(started.contains("Started background command"), "{started}");
        // The notice starts a run; its URL is warden's text (the command's output), not the
        // user's: fetching it asks, and the run says it read the command's output.
        let request = answer_approval(&b, round + 1, answer).await;
        assert!(request.visible.contains(&url), "{}", request.visible);
        assert!(
            request.visible.contains("the output of background command"),
            "{}",
            request.visible
        );
        let result = b.answer(2 * round + 2).await;
        let fetched = b
            .web
            .requests()
            .iter()
            .any(|r| r.contains(&format!("canary-{round}")));
        assert_eq!(fetched, answer == Answer::Approve, "{answer:?}: {result}");
    }
    assert_eq!(
        decisions(&b, "egress")
            .iter()
            .filter(|d| *d != "allow")
            .cloned()
            .collect::<Vec<_>>(),
        ["rejected", "rejected", "approved"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_does_not_launder_the_taint_of_what_it_summarized() {
    let b = bot("[memory]\ncontext_window = 100000\nflush = false\nkeep_recent = 0.0001\n").await;
    let mut answers = 0;
    for (round, answer) in ANSWERS.into_iter().enumerate() {
        answers += 1;
        let read = ask(&b, "fetch http://docs.test/page heavy", answers).await;
        assert!(read.contains("result:"), "{read}");
        // The next run compacts the conversation first: the fetch is summarized away.
        answers += 1;
        ask(&b, "ok", answers).await;
        let fact = format!("fact-{round}");
        b.tg.push_text(OWNER, OWNER, &format!("remember {fact}"));
        let request = answer_approval(&b, round + 1, answer).await;
        assert!(
            request.visible.contains("web_fetch http://docs.test/page"),
            "the approval says what tainted the conversation: {}",
            request.visible
        );
        answers += 1;
        b.answer(answers).await;
        let remember = b
            .llm
            .requests()
            .into_iter()
            .rev()
            .find(|r| r.last_user_text().contains(&fact))
            .expect("the run that remembers");
        assert!(
            !serde_json::to_string(remember.messages())
                .unwrap()
                .contains("\"web_fetch\""),
            "the page was compacted away before this run"
        );
        assert_eq!(
            memory(&b).contains(&fact),
            answer == Answer::Approve,
            "{answer:?}"
        );
        // A fresh conversation for the next round.
        b.tg.push_text(OWNER, OWNER, "/new");
        b.tg.wait_until("the new conversation", WAIT, |t| {
            t.messages_to(OWNER)
                .iter()
                .filter(|m| m.visible.contains("Started a new conversation"))
                .count()
                > round
        })
        .await;
    }
    let bash: Vec<String> = decisions(&b, "bash");
    assert_eq!(bash, ["rejected", "rejected", "approved"], "{bash:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_text_from_a_server_taints_the_run_and_trust_clears_it() {
    let b = bot("").await;
    let mut answers = 0;
    for (round, answer) in ANSWERS.into_iter().enumerate() {
        answers += 1;
        // The server answers, but not with text: an error that quotes its Content-Type.
        let error = ask(&b, "fetch http://docs.test/image", answers).await;
        assert!(error.contains("image/png"), "{error}");
        let fact = format!("fact-{round}");
        b.tg.push_text(OWNER, OWNER, &format!("remember {fact}"));
        let request = answer_approval(&b, round + 1, answer).await;
        assert!(
            request.visible.contains("web_fetch http://docs.test/image"),
            "{}",
            request.visible
        );
        answers += 1;
        b.answer(answers).await;
        assert_eq!(memory(&b).contains(&fact), answer == Answer::Approve);
    }
    // /trust says what tainted the conversation and clears it: memory writes no longer ask.
    b.tg.push_text(OWNER, OWNER, "/trust");
    b.tg.wait_until("the trust reply", WAIT, |t| {
        t.messages_to(OWNER)
            .iter()
            .any(|m| m.visible.contains("It is trusted again"))
    })
    .await;
    let reply =
        b.tg.messages_to(OWNER)
            .into_iter()
            .find(|m| m.visible.contains("It is trusted again"))
            .unwrap();
    assert!(
        reply.visible.contains("web_fetch http://docs.test/image"),
        "{}",
        reply.visible
    );
    answers += 1;
    let done = ask(&b, "remember trusted-fact", answers).await;
    assert!(!done.contains("Denied"), "{done}");
    assert!(memory(&b).contains("trusted-fact"));
    assert_eq!(b.tg.approvals_to(OWNER).len(), 3, "no new approval");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_reflects_the_models_url_does_not_make_it_found() {
    let b = bot("[egress.hosts]\n\"search.test\" = \"allow\"\n").await;
    let mut approvals = 0;
    for (round, answer) in ANSWERS.into_iter().enumerate() {
        for (kind, prompt) in [
            ("reflected", format!("echo-search {round}")),
            ("tracked", format!("echo-track {round}")),
        ] {
            b.tg.push_text(OWNER, OWNER, &prompt);
            approvals += 1;
            let request = answer_approval(&b, approvals, answer).await;
            assert!(
                request.visible.contains(&format!("canary-{round}")),
                "{kind}: {}",
                request.visible
            );
            b.tg.wait_until("the answer", WAIT, |t| {
                t.messages_to(OWNER)
                    .iter()
                    .filter(|m| m.visible.starts_with("result:"))
                    .count()
                    >= approvals
            })
            .await;
            let reached = b
                .web
                .requests()
                .iter()
                .any(|r| r.starts_with(&format!("evil.test/collect?d=canary-{round}")));
            assert_eq!(reached, answer == Answer::Approve, "{kind} {answer:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_background_command_changed_is_told_when_it_ends() {
    let b = bot("").await;
    let started = ask(&b, "bg: echo noted-in-background >> MEMORY.md", 1).await;
    assert!(started.contains("Started background command"), "{started}");
    b.tg.wait_until("the summary", WAIT, |t| {
        t.messages_to(OWNER)
            .iter()
            .any(|m| m.visible.starts_with("Background command #1: 📝"))
    })
    .await;
    let summary =
        b.tg.messages_to(OWNER)
            .into_iter()
            .find(|m| m.visible.starts_with("Background command #1"))
            .unwrap();
    assert!(
        summary.visible.contains("MEMORY.md: +1 −0"),
        "{}",
        summary.visible
    );
    assert!(memory(&b).contains("noted-in-background"));
}
