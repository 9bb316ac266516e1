//! The Slack channel through the real `warden bot`, a fake Slack (Web API and Socket Mode
//! WebSocket on 127.0.0.1) and the fake model: direct messages streamed, thread sessions,
//! strangers refused once, redeliveries answered once, rate limits honoured, reconnects, and
//! `kill -9` mid-run.

#[path = "../support/mod.rs"]
mod support;

support::test_threads::waiting_suite!(6);

mod approvals;
mod doctor;
mod durability;
mod files;
mod messages;
mod slash;
mod start;
mod threads;

use std::time::{Duration, Instant};
use support::fake_llm::{FakeLlm, Request, Turn};
use support::fake_slack::{bot_env, FakeSlack};
use support::warden_bot::{BotEnv, BotProcess};

const WAIT: Duration = Duration::from_secs(30);

/// The answer to "stream": long enough to stream for a few seconds, with characters Slack
/// reads as control sequences.
fn streamed_answer() -> String {
    "Counting <!channel> & <@UOTHER> <http://evil|harmless>: ".to_string()
        + &"one two three ".repeat(40)
}

/// `stream…`: [`streamed_answer`] in small, slow chunks; `slow…`: an answer after 30 s;
/// `run: CMD`: bash runs CMD, its result is the answer (`result: …`); `send: PATH`: send_file
/// uploads PATH; anything else:
/// `answer: PROMPT` at once.
async fn llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| {
        let (prompt, step) = req.prompt_and_step();
        if step > 0 || prompt.starts_with("run: ") || prompt.contains("\n\nrun: ") {
            let ask = prompt.rsplit("\n\n").next().unwrap_or(&prompt);
            if step == 0 && ask != prompt {
                // A message with a file: the note comes first, the instruction after it.
                let command = ask.strip_prefix("run: ").unwrap_or(ask);
                return Turn::tool_use("bash", serde_json::json!({ "command": command }));
            }
            return support::command_model::script(req);
        }
        if let Some(path) = prompt.strip_prefix("send: ") {
            return Turn::tool_use(
                "send_file",
                serde_json::json!({"path": path, "caption": "here <!channel>"}),
            );
        }
        let text = req.last_user_text();
        if text.starts_with("stream") {
            Turn::text(streamed_answer())
                .chunked(8)
                .gap(Duration::from_millis(60))
        } else if text.starts_with("slow") {
            Turn::text(format!("answer: {text}")).delay(Duration::from_secs(30))
        } else {
            Turn::text(format!("answer: {text}"))
        }
    })
    .await
}

struct Setup {
    slack: FakeSlack,
    llm: FakeLlm,
    env: BotEnv,
    bot: BotProcess,
    _home: tempfile::TempDir,
}

/// A Slack-only bot with `channels` allowed, connected to the fake's socket.
async fn start(channels: &[&str]) -> Setup {
    let slack = FakeSlack::start().await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let env = bot_env(&slack, home.path(), llm.base_url(), channels);
    let bot = BotProcess::start(&env);
    connected(&slack, 1, &bot).await;
    Setup {
        slack,
        llm,
        env,
        bot,
        _home: home,
    }
}

async fn connected(slack: &FakeSlack, n: usize, bot: &BotProcess) {
    let deadline = Instant::now() + WAIT;
    while slack.connections() < n {
        assert!(
            Instant::now() < deadline,
            "no Socket Mode connection #{n}; stderr:\n{}",
            bot.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_for_requests(llm: &FakeLlm, n: usize) {
    let deadline = Instant::now() + WAIT;
    while llm.request_count() < n {
        assert!(Instant::now() < deadline, "the model got no request #{n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the bot shows in `channel` now (each message's last edit).
fn shown(slack: &FakeSlack, channel: &str) -> Vec<String> {
    slack
        .messages_in(channel)
        .iter()
        .map(|m| m.shown().to_string())
        .collect()
}
