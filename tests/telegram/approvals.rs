//! Approvals over Telegram, in process: the bot from the library with a test tool that asks
//! the approver for every call (and leaves a marker file when it runs), against the fake Bot
//! API and the fake LLM. Approve runs it; Deny, a timeout or /stop do not; a stranger's press
//! does not count; the request message is edited to show the outcome.

use crate::support;

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::fake_telegram::{FakeTelegram, Sent};
use crate::support::warden_bot::{OWNER, TOKEN};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use warden::agent::{Agent, SystemPrompt};
use warden::app::App;
use warden::audit::AuditDecision;
use warden::bot::BotApp;
use warden::channels::telegram::TelegramBot;
use warden::config::{Config, Secret};
use warden::llm::ToolSpec;
use warden::memory::sessions::SessionStore;
use warden::tools::approval::{Approval, ApprovalRequest};
use warden::tools::{Tool, ToolContext, ToolOutput, ToolSet};

const WAIT: Duration = Duration::from_secs(20);

/// Asks before every call; when approved, creates `<markers>/<name>`.
struct Guarded {
    markers: PathBuf,
}

#[async_trait]
impl Tool for Guarded {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "guarded".into(),
            description: "creates a marker file, with the user's approval".into(),
            input_schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let name = input["name"].as_str().unwrap_or("x").to_string();
        let request = ApprovalRequest {
            session: ctx.session.clone(),
            tool: "guarded".into(),
            command: format!("touch {name} <&>"),
            reason: "the test tool always asks".into(),
            always: None,
            detail: None,
        };
        match ctx.approver.approve(&request).await {
            Approval::Approved => {
                std::fs::write(self.markers.join(&name), "ran").unwrap();
                ToolOutput::ok("ran")
            }
            Approval::Denied(why) => ToolOutput {
                content: format!("Not run: {why}"),
                is_error: true,
                decision: AuditDecision::Rejected,
                reason: why,
                exit_code: None,
                network: None,
            },
        }
    }
}

struct Setup {
    tg: FakeTelegram,
    _llm: FakeLlm,
    markers: PathBuf,
    shutdown: CancellationToken,
    bot: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

/// The model calls `guarded` with the user's text as the name, then reports the result.
async fn setup(approval_timeout_secs: u64) -> Setup {
    let llm = FakeLlm::anthropic_with(|req: &Request| match req.tool_results().pop() {
        Some(result) => Turn::text(format!("tool said: {}", result.content)),
        None => Turn::tool_use("guarded", json!({"name": req.last_user_text()})),
    })
    .await;
    let tg = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let markers = dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let mut config = Config {
        workspace: dir.path().join("workspace"),
        data_dir: dir.path().join("data"),
        ..Config::default()
    };
    config.llm.anthropic.api_key = Secret::new("test-key");
    config.llm.anthropic.base_url = Some(llm.base_url());
    config.telegram.token = Secret::new(TOKEN);
    config.telegram.api_url = Some(tg.api_url());
    config.telegram.allowed_users = vec![OWNER];
    config.telegram.approval_timeout_secs = approval_timeout_secs;
    let mut app = App::build(config).unwrap();
    let mut tools = ToolSet::new(app.db.clone(), dir.path().join("out"));
    tools.add(Arc::new(Guarded {
        markers: markers.clone(),
    }));
    app.agent = Arc::new(Agent::new(
        Arc::from(llm.provider()),
        Arc::new(tools),
        SessionStore::new(app.db.clone()),
        SystemPrompt::new(dir.path(), vec!["guarded".into()]),
        5,
    ));
    let bot = TelegramBot::connect(BotApp::in_process(&app).telegram())
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let bot = tokio::spawn(bot.run(shutdown.clone()));
    Setup {
        tg,
        _llm: llm,
        markers,
        shutdown,
        bot,
        _dir: dir,
    }
}

impl Setup {
    /// Send `name` and wait for the approval request it causes.
    async fn ask(&self, name: &str) -> Sent {
        self.tg.push_text(OWNER, OWNER, name);
        let wanted = format!("touch {name} <&>");
        self.tg
            .wait_until("the approval request", WAIT, |t| {
                t.messages_to(OWNER)
                    .iter()
                    .any(|m| m.visible.contains(&wanted))
            })
            .await;
        let request = self
            .tg
            .messages_to(OWNER)
            .into_iter()
            .find(|m| m.visible.contains(&wanted))
            .unwrap();
        assert!(request.html);
        assert!(request.visible.contains("Approval needed"));
        assert!(request.visible.contains("the test tool always asks"));
        request
    }

    /// Wait for the final answer and return it.
    async fn answer(&self) -> String {
        self.tg
            .wait_until("the answer", WAIT, |t| {
                t.messages_to(OWNER)
                    .iter()
                    .any(|m| m.visible.starts_with("tool said:") || m.visible == "Stopped.")
            })
            .await;
        self.tg
            .messages_to(OWNER)
            .into_iter()
            .find(|m| m.visible.starts_with("tool said:") || m.visible == "Stopped.")
            .unwrap()
            .visible
    }

    /// The request message's text after its last edit.
    fn outcome(&self, request: &Sent) -> String {
        let now = self
            .tg
            .messages_to(OWNER)
            .into_iter()
            .find(|m| m.message_id == request.message_id)
            .unwrap();
        assert!(now.keyboard.is_none(), "the buttons are gone");
        now.edits.last().cloned().unwrap_or_default()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.bot.await.unwrap().unwrap();
    }
}

fn button(request: &Sent, index: usize) -> String {
    let keyboard = request.keyboard.as_ref().expect("buttons");
    keyboard["inline_keyboard"][0][index]["callback_data"]
        .as_str()
        .unwrap()
        .to_string()
}

fn callback_answers(tg: &FakeTelegram) -> Vec<String> {
    tg.calls()
        .iter()
        .filter(|c| c.method == "answercallbackquery")
        .map(|c| c.body["text"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_runs_the_command_and_a_strangers_press_does_not_count() {
    let s = setup(120).await;
    let request = s.ask("alpha").await;
    assert!(
        request
            .text
            .contains("<pre>touch alpha &lt;&amp;&gt;</pre>"),
        "{}",
        request.text
    );
    let approve = button(&request, 0);
    // A stranger presses Approve: refused, still waiting.
    s.tg.push_callback(99, OWNER, request.message_id, &approve);
    s.tg.wait_until("the stranger is told", WAIT, |t| {
        !callback_answers(t).is_empty()
    })
    .await;
    assert_eq!(
        callback_answers(&s.tg),
        ["You are not allowed to approve commands here."]
    );
    assert!(!s.markers.join("alpha").exists());
    // The owner approves: it runs and the agent continues with the result.
    s.tg.push_callback(OWNER, OWNER, request.message_id, &approve);
    assert_eq!(s.answer().await, "tool said: ran");
    assert!(s.markers.join("alpha").exists());
    assert!(s.outcome(&request).ends_with("✅ Approved by User4242."));
    // The press is answered concurrently with the run: wait for it rather than race it.
    s.tg.wait_until("the approval is answered", WAIT, |t| {
        callback_answers(t).len() >= 2
    })
    .await;
    assert_eq!(callback_answers(&s.tg)[1], "Approved.");
    // A second press on the old button changes nothing.
    s.tg.push_callback(OWNER, OWNER, request.message_id, &approve);
    s.tg.wait_until("the late press is answered", WAIT, |t| {
        callback_answers(t).len() == 3
    })
    .await;
    assert_eq!(
        callback_answers(&s.tg)[2],
        "This request is no longer waiting."
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_does_not_run_it_and_the_agent_is_told() {
    let s = setup(120).await;
    let request = s.ask("beta").await;
    s.tg.push_callback(OWNER, OWNER, request.message_id, &button(&request, 1));
    assert_eq!(
        s.answer().await,
        "tool said: Not run: denied by User4242 in Telegram"
    );
    assert!(!s.markers.join("beta").exists());
    assert!(s.outcome(&request).ends_with("❌ Denied by User4242."));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_within_the_timeout_means_deny() {
    let s = setup(1).await;
    let started = Instant::now();
    let request = s.ask("gamma").await;
    assert_eq!(s.answer().await, "tool said: Not run: no answer within 1 s");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(!s.markers.join("gamma").exists());
    assert!(s
        .outcome(&request)
        .ends_with("⌛ No answer within 1 s: denied."));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_while_waiting_for_approval_denies_and_stops() {
    let s = setup(120).await;
    let request = s.ask("delta").await;
    s.tg.push_text(OWNER, OWNER, "/stop");
    assert_eq!(s.answer().await, "Stopped.");
    assert!(!s.markers.join("delta").exists());
    assert!(s
        .outcome(&request)
        .ends_with("⏹ The run was stopped: denied."));
    // A press after the stop finds nothing waiting.
    s.tg.push_callback(OWNER, OWNER, request.message_id, &button(&request, 0));
    s.tg.wait_until("the press is answered", WAIT, |t| {
        !callback_answers(t).is_empty()
    })
    .await;
    assert_eq!(
        callback_answers(&s.tg),
        ["This request is no longer waiting."]
    );
    assert!(!s.markers.join("delta").exists());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_not_held_up_by_a_slow_download_in_the_same_chat() {
    let s = setup(60).await;
    let request = s.ask("eta").await;
    // A big document on a slow link arrives before the owner presses Approve.
    s.tg.add_slow_file("big", b"big file".to_vec(), Duration::from_secs(10));
    s.tg.push_message(
        OWNER,
        OWNER,
        support::fake_telegram::document_fields("big", "big.txt", 8, None),
    );
    s.tg.wait_for_calls("getFile", 1, WAIT).await;
    let pressed = Instant::now();
    s.tg.push_callback(OWNER, OWNER, request.message_id, &button(&request, 0));
    assert!(s.answer().await.starts_with("tool said: ran"));
    assert!(
        pressed.elapsed() < Duration::from_secs(7),
        "the approval waited {:?} for the download",
        pressed.elapsed()
    );
    assert!(s.outcome(&request).ends_with("✅ Approved by User4242."));
    assert!(s.markers.join("eta").exists());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_asked_and_answered_in_its_own_topic() {
    let s = setup(120).await;
    s.tg.push_topic_text(OWNER, 5, OWNER, "alpha");
    s.tg.push_topic_text(OWNER, 6, OWNER, "beta");
    s.tg.wait_until("both approval requests", WAIT, |t| {
        t.approvals_to(OWNER).len() == 2
    })
    .await;
    let in_topic = |topic: i64| {
        s.tg.messages_in(OWNER, Some(topic))
            .into_iter()
            .find(|m| m.visible.starts_with("🔐 Approval needed"))
            .expect("a request in the topic")
    };
    let alpha = in_topic(5);
    let beta = in_topic(6);
    assert!(alpha.visible.contains("touch alpha"), "{}", alpha.visible);
    assert!(beta.visible.contains("touch beta"), "{}", beta.visible);
    // Alpha's button pressed from topic 6 does not answer it.
    s.tg.push_callback_in(OWNER, OWNER, Some(6), alpha.message_id, &button(&alpha, 0));
    s.tg.wait_until("the wrong topic is told", WAIT, |t| {
        !callback_answers(t).is_empty()
    })
    .await;
    assert_eq!(
        callback_answers(&s.tg),
        ["This request belongs to another chat or topic."]
    );
    assert!(!s.markers.join("alpha").exists());
    // Denying beta in topic 6 leaves alpha waiting; approving alpha in topic 5 runs it.
    s.tg.press(OWNER, &beta, 0, 1);
    s.tg.press(OWNER, &alpha, 0, 0);
    s.tg.wait_until("both answers", WAIT, |t| {
        [5, 6].iter().all(|topic| {
            t.messages_in(OWNER, Some(*topic))
                .iter()
                .any(|m| m.visible.starts_with("tool said:"))
        })
    })
    .await;
    let answer = |topic: i64| {
        s.tg.messages_in(OWNER, Some(topic))
            .into_iter()
            .find(|m| m.visible.starts_with("tool said:"))
            .unwrap()
            .visible
    };
    assert_eq!(answer(5), "tool said: ran");
    assert!(answer(6).starts_with("tool said: Not run"), "{}", answer(6));
    assert!(s.markers.join("alpha").exists());
    assert!(!s.markers.join("beta").exists());
    assert!(s.tg.messages_in(OWNER, None).is_empty());
    s.stop().await;
}

/// The real bash tool and the real Telegram approvals on one injected clock: "Always in this
/// chat" for 1 hour answers the same shape without asking until the hour is up, then asks
/// again; `warden approvals list` shows the rule's scope and expiry while it lasts, and not
/// after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_for_an_hour_applies_and_then_expires() {
    use crate::support::command_model;
    use warden::app::Core;
    use warden::scheduler::TestClock;
    use warden::tools::approval_rules::ApprovalRules;

    let llm = FakeLlm::anthropic_with(command_model::script).await;
    let tg = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        workspace: dir.path().join("workspace"),
        data_dir: dir.path().join("data"),
        ..Config::default()
    };
    config.llm.anthropic.api_key = Secret::new("test-key");
    config.llm.anthropic.base_url = Some(llm.base_url());
    config.telegram.token = Secret::new(TOKEN);
    config.telegram.api_url = Some(tg.api_url());
    config.telegram.allowed_users = vec![OWNER];
    let start = chrono::DateTime::parse_from_rfc3339("2026-11-26T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let clock = Arc::new(TestClock::new(start));
    let mut app = App::build(config.clone()).unwrap();
    let mut core = Core::build(config).unwrap();
    core.clock = clock.clone();
    let tools = core.workspace_tools(None);
    let names = tools.names();
    app.agent = Arc::new(Agent::new(
        Arc::from(llm.provider()),
        Arc::new(tools),
        SessionStore::new(app.db.clone()),
        SystemPrompt::new(dir.path(), names),
        5,
    ));
    let bot_app = BotApp::in_process(&app);
    let mut telegram = bot_app.telegram();
    telegram.approval_rules =
        ApprovalRules::new(app.db.clone()).with_clock(clock.clone(), chrono_tz::Tz::UTC);
    let bot = TelegramBot::connect(telegram).await.unwrap();
    let shutdown = CancellationToken::new();
    let bot = tokio::spawn(bot.run(shutdown.clone()));

    let sent = std::cell::Cell::new(0usize);
    // Send `run: COMMAND`; the approval request it posts, if it asks; then its answer.
    let run = |command: &str| {
        sent.set(sent.get() + 1);
        let n = sent.get();
        let before = tg.approvals_to(OWNER).len();
        tg.push_text(OWNER, OWNER, &format!("run: {command}"));
        let tg = &tg;
        async move {
            tg.wait_until("an approval request or the answer", WAIT, |t| {
                t.approvals_to(OWNER).len() > before || results(t).len() >= n
            })
            .await;
            (tg.approvals_to(OWNER).len() > before).then(|| tg.approvals_to(OWNER)[before].clone())
        }
    };
    let answer = |n: usize| {
        let tg = &tg;
        async move {
            tg.wait_until("the answer", WAIT, |t| results(t).len() >= n)
                .await;
            results(tg)[n - 1].clone()
        }
    };
    let workspace = app.paths.workspace().to_path_buf();
    let line = "mkdir -p scratch && rm -r scratch";

    let request = run(line).await.expect("rm -r asks");
    let keyboard = &request.keyboard.as_ref().unwrap()["inline_keyboard"];
    let labels: Vec<&str> = keyboard[1]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["⏱ 1 hour", "📅 Today", "♾ Until revoked"]);
    assert!(
        request.visible.contains(
            "for 1 hour, today or until revoked) would approve from now on: rm -r scratch"
        ),
        "{}",
        request.visible
    );
    tg.press(OWNER, &request, 1, 0);
    assert!(answer(1).await.contains("[exit code 0]"));
    assert!(!workspace.join("scratch").exists());
    tg.wait_until("the request shows the stored rule", WAIT, |t| {
        t.messages_to(OWNER).iter().any(|m| {
            m.edits
                .iter()
                .any(|e| e.contains("in this chat for 1 hour: rm -r scratch"))
        })
    })
    .await;
    let rules = ApprovalRules::new(app.db.clone()).with_clock(clock.clone(), chrono_tz::Tz::UTC);
    let listed = rules.list(None).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].expires_at.as_deref(),
        Some("2026-11-26T11:00:00Z")
    );

    // Within the hour: the same shape runs without a question.
    clock.advance(chrono::Duration::minutes(59));
    assert!(run(line).await.is_none(), "not asked within the hour");
    assert!(answer(2).await.contains("[exit code 0]"));
    // Another directory to delete is another shape: asked.
    let request = run("mkdir -p other && rm -r other").await.expect("asks");
    tg.press(OWNER, &request, 0, 1);
    assert!(answer(3).await.contains("denied"));

    // The hour is up: asked again, and the rule is gone from the list.
    clock.advance(chrono::Duration::minutes(1));
    let request = run(line).await.expect("asks again after the hour");
    tg.press(OWNER, &request, 0, 1);
    assert!(answer(4).await.contains("denied"));
    assert!(
        rules.list(None).unwrap().is_empty(),
        "expired rules are dropped"
    );
    shutdown.cancel();
    bot.await.unwrap().unwrap();
}

fn results(t: &FakeTelegram) -> Vec<String> {
    t.messages_to(OWNER)
        .into_iter()
        .filter(|m| m.visible.starts_with("result:"))
        .map(|m| m.visible)
        .collect()
}
