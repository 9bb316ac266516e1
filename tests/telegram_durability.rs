//! Durability of `warden bot`: after `kill -9` mid-run and a restart no update is lost and
//! none is answered twice; the interrupted run is reported, not silently dropped (and not run
//! again). SIGTERM lets a short run finish and records a long one as interrupted.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::fake_llm::{FakeLlm, Request, Turn};
use support::fake_telegram::FakeTelegram;
use support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};

const WAIT: Duration = Duration::from_secs(20);

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

/// Messages the bot sent in reply to each message id.
fn replies(tg: &FakeTelegram) -> HashMap<i64, Vec<String>> {
    let mut map: HashMap<i64, Vec<String>> = HashMap::new();
    for m in tg.messages_to(OWNER) {
        if let Some(id) = m.reply_to {
            map.entry(id).or_default().push(m.visible.clone());
        }
    }
    map
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_loses_nothing_and_answers_nothing_twice() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    let mut bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;

    let (_, first) = tg.push_text(OWNER, OWNER, "slow first");
    let (_, queued) = tg.push_text(OWNER, OWNER, "queued behind");
    wait_for_requests(&llm, 1).await;
    let (_, second) = tg.push_text(OWNER, OWNER, "second");
    // The bot confirms `second` (asks for a later offset) once it is on disk and queued.
    tg.wait_until("second is recorded", WAIT, |t| t.unconfirmed() == 0)
        .await;
    // `third` may or may not have been fetched when the process dies.
    let (_, third) = tg.push_text(OWNER, OWNER, "third");
    tokio::time::sleep(Duration::from_millis(30)).await;
    bot.kill9();
    assert!(
        tg.messages_to(OWNER).is_empty(),
        "nothing was answered before the kill: {:?}",
        tg.messages_to(OWNER)
    );

    let _bot = BotProcess::start(&env);
    tg.wait_until("every message is answered", WAIT, |t| {
        let r = replies(t);
        [first, queued, second, third]
            .iter()
            .all(|id| r.contains_key(id))
    })
    .await;
    // Give a duplicate time to show up.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let r = replies(&tg);
    for id in [first, queued, second, third] {
        assert_eq!(r[&id].len(), 1, "message {id} answered {:?}", r[&id]);
    }
    assert!(
        r[&first][0].starts_with("I was restarted while working on: “slow first”"),
        "{:?}",
        r[&first]
    );
    assert_eq!(r[&queued], ["answer: queued behind"]);
    assert_eq!(r[&second], ["answer: second"]);
    assert_eq!(r[&third], ["answer: third"]);
    let slow_runs = llm
        .requests()
        .iter()
        .filter(|q| q.last_user_text() == "slow first")
        .count();
    assert_eq!(slow_runs, 1, "the interrupted run was not run again");
    // The next run sees the interrupted one closed in its history.
    let next = llm
        .requests()
        .into_iter()
        .find(|q| q.last_user_text() == "queued behind")
        .unwrap();
    let history = serde_json::to_string(next.messages()).unwrap();
    assert!(history.contains("interrupted by a restart"), "{history}");
    assert!(tg.rejected().is_empty(), "{:?}", tg.rejected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_short_run_finish_and_records_a_long_one() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    env.write_config("[telegram]\nshutdown_grace_secs = 3\n");

    // A run that finishes within the grace period is answered before the exit.
    let mut bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    let (_, short) = tg.push_text(OWNER, OWNER, "slowish short");
    wait_for_requests(&llm, 1).await;
    let status = bot.terminate(WAIT);
    assert!(status.success(), "{status:?}: {}", bot.stderr());
    assert_eq!(
        replies(&tg).get(&short).cloned().unwrap_or_default(),
        ["answer: slowish short"],
        "{}",
        bot.stderr()
    );

    // One that does not is recorded as interrupted and reported at the next start.
    let polls = tg.count("getUpdates");
    let mut bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", polls + 1, WAIT).await;
    let (_, long) = tg.push_text(OWNER, OWNER, "slow long");
    wait_for_requests(&llm, 2).await;
    let stopping = Instant::now();
    let status = bot.terminate(WAIT);
    assert!(status.success(), "{status:?}: {}", bot.stderr());
    assert!(stopping.elapsed() < Duration::from_secs(10));
    assert!(!replies(&tg).contains_key(&long));

    let _bot = BotProcess::start(&env);
    tg.wait_until("the restart notice", WAIT, |t| {
        replies(t).contains_key(&long)
    })
    .await;
    assert!(replies(&tg)[&long][0].starts_with("I was restarted while working on: “slow long”"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_in_a_topic_loses_nothing_and_answers_in_the_topic_once() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    let mut bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;

    let (_, first) = tg.push_topic_text(OWNER, 7, OWNER, "slow first");
    let (_, queued) = tg.push_topic_text(OWNER, 7, OWNER, "queued behind");
    wait_for_requests(&llm, 1).await;
    // Another topic is another queue: it is answered while topic 7 waits on its slow run.
    let (_, other) = tg.push_topic_text(OWNER, 8, OWNER, "other topic");
    tg.wait_until("topic 8 is answered", WAIT, |t| {
        !t.messages_in(OWNER, Some(8)).is_empty()
    })
    .await;
    let (_, second) = tg.push_topic_text(OWNER, 7, OWNER, "second");
    tg.wait_until("second is recorded", WAIT, |t| t.unconfirmed() == 0)
        .await;
    bot.kill9();
    assert!(tg.messages_in(OWNER, Some(7)).is_empty());

    let _bot = BotProcess::start(&env);
    tg.wait_until("every message is answered", WAIT, |t| {
        let r = replies(t);
        [first, queued, second, other]
            .iter()
            .all(|id| r.contains_key(id))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let r = replies(&tg);
    for id in [first, queued, second, other] {
        assert_eq!(r[&id].len(), 1, "message {id} answered {:?}", r[&id]);
    }
    assert!(
        r[&first][0].starts_with("I was restarted while working on: “slow first”"),
        "{:?}",
        r[&first]
    );
    assert_eq!(r[&queued], ["answer: queued behind"]);
    assert_eq!(r[&second], ["answer: second"]);
    assert_eq!(r[&other], ["answer: other topic"]);
    // Everything about topic 7 — the restart notice too — went into topic 7.
    let in_seven: Vec<i64> = tg
        .messages_in(OWNER, Some(7))
        .iter()
        .filter_map(|m| m.reply_to)
        .collect();
    assert_eq!(in_seven.len(), 3, "{in_seven:?}");
    assert!([first, queued, second]
        .iter()
        .all(|id| in_seven.contains(id)));
    assert!(tg.messages_in(OWNER, None).is_empty());
    // The topic's next run sees the interrupted one closed in the topic's own history.
    let next = llm
        .requests()
        .into_iter()
        .find(|q| q.last_user_text() == "queued behind")
        .unwrap();
    let history = serde_json::to_string(next.messages()).unwrap();
    assert!(history.contains("interrupted by a restart"), "{history}");
    assert!(!history.contains("other topic"), "{history}");
    assert!(tg.rejected().is_empty(), "{:?}", tg.rejected());
}
