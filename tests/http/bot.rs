//! `warden bot` with `[http] listen`: the HTTP API on the bot's own gateway, against the fake
//! Bot API and the fake model. An approval asked in the Telegram chat waits in
//! `GET /v1/approvals` too; the first answer from either channel decides, and the other is
//! told — the Telegram message is edited to say it was answered over HTTP, or the HTTP answer
//! is refused with 409 when Telegram answered first.

use crate::llm;
use crate::support::fake_telegram::{FakeTelegram, Sent};
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use crate::support::warden_serve::{free_port, Client, API_TOKEN};
use crate::WAIT;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Bot {
    tg: FakeTelegram,
    api: Client,
    bot: BotProcess,
    home: tempfile::TempDir,
    _llm: crate::support::fake_llm::FakeLlm,
}

impl Bot {
    async fn start() -> Bot {
        let llm = llm().await;
        let tg = FakeTelegram::start(TOKEN).await;
        let home = tempfile::tempdir().unwrap();
        let workspace = home.path().join(".warden/workspace");
        for dir in ["somedir", "keepdir"] {
            std::fs::create_dir_all(workspace.join(dir)).unwrap();
            std::fs::write(workspace.join(dir).join("file.txt"), "x").unwrap();
        }
        let mut env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
        let port = free_port();
        env.write_config(&format!("[http]\nlisten = \"127.0.0.1:{port}\"\n"));
        env.extra
            .push(("WARDEN_HTTP_TOKEN".into(), API_TOKEN.into()));
        let bot = BotProcess::start(&env);
        let api = Client::new(&format!("http://127.0.0.1:{port}"), Some(API_TOKEN));
        api.wait_healthy(WAIT).await;
        Bot {
            tg,
            api,
            bot,
            home,
            _llm: llm,
        }
    }

    fn workspace(&self) -> PathBuf {
        self.home.path().join(".warden/workspace")
    }

    /// The Telegram approval request, as it shows now.
    fn request_now(&self, request: &Sent) -> Sent {
        self.tg
            .messages_to(OWNER)
            .into_iter()
            .find(|m| m.message_id == request.message_id)
            .expect("the request message")
    }

    /// The inbox's entry for a request whose command contains `command`.
    async fn inbox_entry(&self, command: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let list = self.api.get("/v1/approvals").await.body;
            if let Some(found) = list["approvals"].as_array().and_then(|all| {
                all.iter()
                    .find(|a| a["command"].as_str().unwrap_or("").contains(command))
            }) {
                return found.clone();
            }
            assert!(Instant::now() < deadline, "not in the inbox: {list}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn answer_in_chat(&self, fragment: &str) {
        self.tg
            .wait_until(fragment, WAIT, |t| {
                t.messages_to(OWNER)
                    .iter()
                    .any(|m| m.visible.contains(fragment))
            })
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_approval_answered_over_http_runs_and_the_chat_is_told() {
    let b = Bot::start().await;
    b.tg.push_text(OWNER, OWNER, "run: rm -r somedir");
    let request = b.tg.approval(OWNER, 1, WAIT).await;
    let entry = b.inbox_entry("rm -r somedir").await;
    assert_eq!(entry["tool"], "bash");
    assert!(!entry["reason"].as_str().unwrap().is_empty(), "{entry}");
    assert!(b.workspace().join("somedir").exists(), "nothing ran yet");

    let path = format!("/v1/approvals/{}", entry["id"].as_str().unwrap());
    let answer = b.api.post(&path, json!({"decision": "approve"})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    b.answer_in_chat("result:").await;
    assert!(!b.workspace().join("somedir").exists(), "approved: removed");
    let shown = b.request_now(&request);
    assert!(
        shown.shown().contains("Approved over HTTP"),
        "the chat's request says where the answer came from: {:?}",
        shown.edits
    );
    let list = b.api.get("/v1/approvals").await.body;
    assert_eq!(
        list["approvals"],
        json!([]),
        "answered: gone from the inbox"
    );
    // A press in the chat afterwards changes nothing.
    b.tg.press(OWNER, &request, 0, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(b
        .request_now(&request)
        .shown()
        .contains("Approved over HTTP"));

    // The API's own threads run on the same gateway.
    let id = b.api.message("home", "hello there").await;
    let run = b.api.wait_status(&id, "succeeded", WAIT).await;
    assert_eq!(run["output"], "answer: hello there", "{run}");
    let stderr = b.bot.stderr();
    assert!(stderr.contains("HTTP API on http://127.0.0.1:"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_answer_after_telegrams_is_refused_with_409() {
    let b = Bot::start().await;
    b.tg.push_text(OWNER, OWNER, "run: rm -r keepdir");
    let request = b.tg.approval(OWNER, 1, WAIT).await;
    let entry = b.inbox_entry("rm -r keepdir").await;
    // Deny in the chat (row 0: Approve, Deny).
    b.tg.press(OWNER, &request, 0, 1);
    b.answer_in_chat("result:").await;
    assert!(b.workspace().join("keepdir").exists(), "denied: kept");

    let path = format!("/v1/approvals/{}", entry["id"].as_str().unwrap());
    let late = b.api.post(&path, json!({"decision": "approve"})).await;
    assert_eq!(late.status, 409, "{}", late.body);
    let why = late.body["error"].as_str().unwrap();
    assert!(why.contains("in Telegram"), "{why}");
    assert!(
        b.workspace().join("keepdir").exists(),
        "the late answer ran nothing"
    );
    assert!(b.request_now(&request).shown().contains("Denied by"));
}

#[test]
fn doctor_shows_the_listener_warden_bot_serves() {
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let dir = home.path().join(".warden");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!("[http]\nlisten = \"127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("WARDEN_HTTP_TOKEN", API_TOKEN)
        .args(["doctor", "--offline"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("`warden serve` and `warden bot` listen on http://127.0.0.1:{port}");
    assert!(
        text.contains(&want),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
