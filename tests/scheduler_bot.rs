//! The scheduler end to end: the real `warden bot` binary against the fake Bot API and the fake
//! LLM. The agent sets a reminder two seconds ahead with the `cron` tool; the reminder arrives
//! in the chat — after the user's run that was going on when it came due.

mod support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::fake_llm::{FakeLlm, Request, Turn};
use support::fake_telegram::{FakeTelegram, Sent};
use support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};

const WAIT: Duration = Duration::from_secs(30);
const STORY_TAKES: Duration = Duration::from_secs(4);

/// Whether the request's newest message carries tool results (the model's second step).
fn answers_a_tool_call(req: &Request) -> bool {
    req.messages().last().is_some_and(|m| {
        m["content"]
            .as_array()
            .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
    })
}

/// The model: schedules a reminder when asked, tells a slow story, and turns the scheduled
/// prompt into the reminder text.
async fn llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| {
        let text = req.last_user_text();
        if answers_a_tool_call(req) {
            Turn::text("OK, I will remind you.")
        } else if text.contains("Scheduled job") {
            Turn::text("Time to stretch!")
        } else if text.starts_with("remind me") {
            let at = chrono::Utc::now() + chrono::Duration::seconds(2);
            Turn::tool_use(
                "cron",
                json!({
                    "action": "add",
                    "at": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    "prompt": "Remind the user to stretch."
                }),
            )
        } else if text.starts_with("tell me a long story") {
            Turn::text("Once upon a time.").delay(STORY_TAKES)
        } else {
            Turn::text("?")
        }
    })
    .await
}

/// The answers in the owner's chat (status lines such as "⏳ Working…" left out).
fn answers(tg: &FakeTelegram) -> Vec<Sent> {
    tg.messages_to(OWNER)
        .into_iter()
        .filter(|m| !m.visible.starts_with('⏳'))
        .collect()
}

fn visible(tg: &FakeTelegram) -> Vec<String> {
    answers(tg).iter().map(|m| m.visible.clone()).collect()
}

#[tokio::test]
async fn a_reminder_set_by_the_agent_arrives_in_the_chat_after_the_users_run() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    let mut bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;

    tg.push_text(OWNER, OWNER, "remind me to stretch in 2 seconds");
    tg.wait_until("the agent confirms", WAIT, |t| !answers(t).is_empty())
        .await;
    let confirmed = Instant::now();
    // The cron tool's result reached the model: the job is stored for this chat.
    let result = llm.requests()[1].tool_results().pop().unwrap();
    assert!(!result.is_error, "{}", result.content);
    assert!(
        result.content.contains("→ telegram:4242"),
        "{}",
        result.content
    );

    // The user starts something slow; the reminder comes due while it runs.
    tg.push_text(OWNER, OWNER, "tell me a long story");
    tg.wait_until("the reminder arrives", WAIT, |t| answers(t).len() >= 3)
        .await;
    // The first answer ends with the summary of the job the run added.
    let shown = visible(&tg);
    let (answer, summary) = shown[0].split_once("\n\n").unwrap_or((&shown[0], ""));
    assert!(
        summary.starts_with("📝 This run changed what later runs see:\n• cron job added: #1 at ")
            && summary.ends_with(" → telegram:4242: Remind the user to stretch."),
        "{summary}"
    );
    assert_eq!(
        [answer, &shown[1], &shown[2]],
        [
            "OK, I will remind you.",
            "Once upon a time.",
            "Time to stretch!"
        ],
        "{:#?}\n{}",
        tg.messages_to(OWNER),
        bot.stderr()
    );
    let sent = answers(&tg);
    let requests = llm.requests();
    let story = requests
        .iter()
        .find(|r| r.last_user_text().starts_with("tell me a long story"))
        .unwrap();
    let reminder = requests
        .iter()
        .find(|r| r.last_user_text().contains("Scheduled job"))
        .unwrap();
    // The story's run had started before the reminder was due (two seconds after the model
    // asked for it), so the reminder really waited for it...
    assert!(story.at < requests[0].at + Duration::from_secs(2));
    // ...and its model call began only after the story's answer was sent.
    assert!(
        reminder.at >= sent[1].at,
        "the scheduled run overlapped the user's run"
    );
    assert!(sent[2].at >= confirmed + Duration::from_millis(1500));
    // The scheduled prompt says which job it is and where it comes from.
    let prompt = reminder.last_user_text();
    assert!(prompt.contains("Remind the user to stretch."), "{prompt}");
    assert!(prompt.contains("not typed by the user"), "{prompt}");

    let status = bot.terminate(WAIT);
    assert!(status.success(), "{status:?}\n{}", bot.stderr());
    let log = bot.stderr();
    assert!(log.contains("scheduler started"), "{log}");

    // The one-shot job deleted itself after running.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .env_clear()
        .env("HOME", home.path())
        .env("TELEGRAM_ALLOWED_USERS", OWNER.to_string())
        .args(["cron", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let jobs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(jobs, json!([]));
}
