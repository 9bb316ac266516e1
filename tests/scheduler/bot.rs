//! The scheduler end to end: the real `warden bot` binary against the fake Bot API and the fake
//! LLM. The agent sets a reminder two seconds ahead with the `cron` tool; the reminder arrives
//! in the chat — after the user's run that was going on when it came due.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::fake_telegram::{FakeTelegram, Sent};
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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

#[tokio::test]
async fn a_job_delivers_into_its_topic() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::anthropic_with(|req: &Request| {
        let text = req.last_user_text();
        if answers_a_tool_call(req) {
            Turn::text("OK.")
        } else if text.contains("Scheduled job") && text.contains("Water the plants") {
            Turn::text("Water the plants now!")
        } else if text.contains("Scheduled job") && text.contains("Feed the cat") {
            Turn::text("Feed the cat now!")
        } else if text.starts_with("remind me") {
            let at = chrono::Utc::now() + chrono::Duration::seconds(2);
            Turn::tool_use(
                "cron",
                json!({
                    "action": "add",
                    "at": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    "prompt": "Feed the cat."
                }),
            )
        } else {
            Turn::text("?")
        }
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    // `warden cron add --topic`: the job answers in topic 9 of the owner's chat.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .env_clear()
        .env("HOME", home.path())
        .env("TELEGRAM_ALLOWED_USERS", OWNER.to_string())
        .args([
            "cron",
            "add",
            "--at",
            "+3s",
            "--topic",
            "9",
            "Water the plants.",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("→ telegram:4242:9"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    let mut bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    // The agent, asked in topic 3, schedules a job: it answers in topic 3.
    tg.push_topic_text(OWNER, 3, OWNER, "remind me to feed the cat");
    tg.wait_until("both jobs ran", WAIT, |t| {
        let shown = |topic| -> Vec<String> {
            t.messages_in(OWNER, Some(topic))
                .iter()
                .map(|m| m.visible.clone())
                .collect()
        };
        shown(9).contains(&"Water the plants now!".to_string())
            && shown(3).contains(&"Feed the cat now!".to_string())
    })
    .await;
    let shown = |topic| -> Vec<String> {
        tg.messages_in(OWNER, topic)
            .iter()
            .filter(|m| !m.visible.starts_with('⏳'))
            .map(|m| m.visible.clone())
            .collect()
    };
    assert_eq!(shown(Some(9)), ["Water the plants now!"]);
    let three = shown(Some(3));
    assert_eq!(three.len(), 2, "{three:?}");
    assert!(three[0].starts_with("OK."), "{three:?}");
    assert!(
        three[0].contains("→ telegram:4242:3: Feed the cat."),
        "{three:?}"
    );
    assert_eq!(three[1], "Feed the cat now!");
    assert!(shown(None).is_empty(), "{:?}", shown(None));
    // Each ran in its topic's session: the plants job never saw topic 3's conversation.
    let plants = llm
        .requests()
        .into_iter()
        .find(|r| r.last_user_text().contains("Water the plants"))
        .unwrap();
    let history = serde_json::to_string(plants.messages()).unwrap();
    assert!(!history.contains("feed the cat"), "{history}");
    let status = bot.terminate(WAIT);
    assert!(status.success(), "{status:?}\n{}", bot.stderr());
}
