//! `warden bot` is two processes: the gateway (`warden-bot`), which waits for messages, and an
//! agent worker (`warden-full agent-worker`) it starts for runs. Checked from outside through
//! /proc: the bot holds no worker while idle, the worker does not carry the bot token, it stops
//! after `worker_idle_secs`, a crashed worker fails only its run (the chat is told in plain
//! words, the log has the details), and a `kill -9` of the bot
//! takes the worker and its sandboxed command down with it.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::fake_telegram::FakeTelegram;
use crate::support::procs::{descendants, exe_name, gone, worker_of};
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use serde_json::json;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

/// `run: CMD` calls bash with CMD; `slow` takes 30 s to answer; anything else is echoed.
async fn llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| {
        let text = req.last_user_text();
        if let Some(result) = req.tool_results().pop() {
            return Turn::text(format!("result: {}", result.content));
        }
        match text.strip_prefix("run: ") {
            Some(command) => Turn::tool_use("bash", json!({ "command": command })),
            None if text == "slow" => Turn::text("late").delay(Duration::from_secs(30)),
            None => Turn::text(format!("answer: {text}")),
        }
    })
    .await
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn answer_to(tg: &FakeTelegram, n: usize) -> String {
    tg.wait_until("an answer", WAIT, |t| t.messages_to(OWNER).len() >= n)
        .await;
    tg.messages_to(OWNER)[n - 1].visible.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_starts_for_a_run_without_the_token_and_stops_when_idle() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    env.write_config("[telegram]\nworker_idle_secs = 2\n");
    let bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    let pid = bot.pid();
    assert_eq!(
        exe_name(pid),
        "warden-bot",
        "the bot process is the gateway"
    );
    // The start-up check's worker has exited: nothing but the gateway waits for messages.
    wait_for("the start-up worker to exit", || worker_of(pid).is_none()).await;

    tg.push_text(OWNER, OWNER, "hello");
    assert_eq!(answer_to(&tg, 1).await, "answer: hello");
    let worker = worker_of(pid).expect("a worker serves runs");
    assert_eq!(exe_name(worker), "warden-full");
    match std::fs::read(format!("/proc/{worker}/environ")) {
        Ok(environ) => {
            let environ = String::from_utf8_lossy(&environ);
            assert!(
                !environ.contains("TELEGRAM_BOT_TOKEN") && !environ.contains(TOKEN),
                "the worker got the bot token"
            );
            assert!(environ.contains("ANTHROPIC_API_KEY"));
        }
        // warden-full is not dumpable: only root may read its environ.
        Err(e) if unsafe { libc::geteuid() } != 0 => {
            eprintln!("skipped the worker's environ check: {e} (needs root)")
        }
        Err(e) => panic!("reading the worker's environ: {e}"),
    }

    // worker_idle_secs after its last run it is gone; the next message starts another.
    wait_for("the idle worker to stop", || worker_of(pid).is_none()).await;
    tg.push_text(OWNER, OWNER, "again");
    assert_eq!(answer_to(&tg, 2).await, "answer: again");
    assert!(tg.rejected().is_empty(), "{:?}", tg.rejected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_run_fails_that_run_and_the_next_run_gets_a_new_one() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let bot = BotProcess::start(&BotEnv::new(home.path(), tg.api_url(), llm.base_url()));
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    tg.push_text(OWNER, OWNER, "slow");
    wait_for("the model call", || llm.request_count() >= 1).await;
    let worker = worker_of(bot.pid()).expect("a worker runs the prompt");
    unsafe {
        libc::kill(worker as i32, libc::SIGKILL);
    }
    // The chat hears what happened in its own words; the signal is for the log.
    let failed = answer_to(&tg, 1).await;
    assert_eq!(
        failed,
        "I was interrupted and could not finish “slow”. Tap /retry to try again."
    );
    // The chat may hear it before the log line has come through the stderr pipe.
    bot.wait_for_log("the agent worker stopped (signal: 9 (SIGKILL))", WAIT)
        .await;
    tg.push_text(OWNER, OWNER, "after");
    assert_eq!(answer_to(&tg, 2).await, "answer: after");
    assert_ne!(worker_of(bot.pid()), Some(worker));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_bot_takes_its_worker_and_sandboxed_command_down() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let mut bot = BotProcess::start(&BotEnv::new(home.path(), tg.api_url(), llm.base_url()));
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    tg.push_text(OWNER, OWNER, "run: sleep 37");
    let pid = bot.pid();
    wait_for("the jailed sleep", || {
        descendants(pid).iter().any(|(_, cmd)| cmd == "sleep 37")
    })
    .await;
    let below = descendants(pid);
    bot.kill9();
    for (child, cmd) in &below {
        wait_for(&format!("{cmd} ({child}) to end"), || gone(*child, cmd)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_refreshes_an_expiring_sign_in_and_sends_its_token() {
    use crate::support::fake_oauth::FakeOAuth;
    use warden::oauth::{TokenStore, Tokens};
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let oauth = FakeOAuth::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    env.write_config(&format!(
        "[llm]\nproviders = [\"anthropic\"]\n\n{}",
        oauth.config_block("anthropic")
    ));
    // Signed in earlier; the access token expires in ten seconds.
    let (access, refresh) = oauth.issue_tokens();
    let store = TokenStore::new(&home.path().join(".warden/oauth"), "anthropic");
    store
        .save(&Tokens {
            access_token: access.clone(),
            refresh_token: Some(refresh),
            expires_at: Some(chrono::Utc::now().timestamp() + 10),
            scope: None,
        })
        .unwrap();
    let mut bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    tg.push_text(OWNER, OWNER, "hello");
    assert_eq!(answer_to(&tg, 1).await, "answer: hello");
    assert_eq!(oauth.refreshes(), 1);
    let renewed = store.load().unwrap().unwrap().access_token;
    assert_ne!(renewed, access);
    let request = &llm.requests()[0];
    // The sign-in goes before the key the environment also has.
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {renewed}").as_str())
    );
    assert!(request.header("x-api-key").is_none());
    bot.terminate(WAIT);
    let log = bot.stderr();
    assert!(
        !log.contains(&renewed) && !log.contains("refresh-secret"),
        "{log}"
    );
}
