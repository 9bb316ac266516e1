//! The `bash` tool through the real `warden bot`: `rm -r DIR` is an `ask` decision, so the
//! command is posted with Approve / Deny buttons; approved it runs in the sandbox, denied it
//! does not (checked from outside, on the workspace). `/stop` kills a running `sleep 30`.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::fake_telegram::{FakeTelegram, Sent};
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use serde_json::json;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

/// `run: CMD` makes the model call bash with CMD, then report the tool result.
async fn llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| {
        // Answer a tool result only when it is the newest message (earlier turns carry theirs).
        let newest_is_result = req.messages().last().is_some_and(|m| {
            m["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
        });
        if newest_is_result {
            let result = req
                .tool_results()
                .pop()
                .expect("the newest message holds a tool result");
            return Turn::text(format!("result: {}", result.content));
        }
        let text = req.last_user_text();
        let command = text.strip_prefix("run: ").unwrap_or("true");
        Turn::tool_use("bash", json!({"command": command}))
    })
    .await
}

struct Setup {
    tg: FakeTelegram,
    _llm: FakeLlm,
    _bot: BotProcess,
    home: tempfile::TempDir,
}

async fn start() -> Setup {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join(".warden/workspace");
    for dir in ["somedir", "keepdir"] {
        std::fs::create_dir_all(workspace.join(dir)).unwrap();
        std::fs::write(workspace.join(dir).join("file.txt"), "x").unwrap();
    }
    let bot = BotProcess::start(&BotEnv::new(home.path(), tg.api_url(), llm.base_url()));
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    assert_eq!(
        llm.request_count(),
        0,
        "nothing runs before a message arrives"
    );
    Setup {
        tg,
        _llm: llm,
        _bot: bot,
        home,
    }
}

impl Setup {
    fn workspace(&self) -> std::path::PathBuf {
        self.home.path().join(".warden/workspace")
    }

    async fn approval_for(&self, command: &str) -> Sent {
        self.tg
            .wait_until("the approval request", WAIT, |t| {
                t.messages_to(OWNER)
                    .iter()
                    .any(|m| m.keyboard.is_some() && m.visible.contains(command))
            })
            .await;
        self.tg
            .messages_to(OWNER)
            .into_iter()
            .find(|m| m.keyboard.is_some() && m.visible.contains(command))
            .unwrap()
    }

    async fn press(&self, request: &Sent, index: usize) {
        self.tg.press(OWNER, request, 0, index);
    }

    async fn answer(&self, n: usize) -> String {
        self.tg
            .wait_until("the answer", WAIT, |t| {
                t.messages_to(OWNER)
                    .iter()
                    .filter(|m| m.visible.starts_with("result:") || m.visible == "Stopped.")
                    .count()
                    >= n
            })
            .await;
        self.tg
            .messages_to(OWNER)
            .into_iter()
            .filter(|m| m.visible.starts_with("result:") || m.visible == "Stopped.")
            .nth(n - 1)
            .unwrap()
            .visible
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rm_r_asks_and_runs_only_when_approved() {
    let s = start().await;
    s.tg.push_text(OWNER, OWNER, "run: rm -r somedir");
    let request = s.approval_for("rm -r somedir").await;
    s.press(&request, 0).await;
    s.answer(1).await;
    assert!(!s.workspace().join("somedir").exists(), "approved: removed");

    s.tg.push_text(OWNER, OWNER, "run: rm -r keepdir");
    let request = s.approval_for("rm -r keepdir").await;
    s.press(&request, 1).await;
    let answer = s.answer(2).await;
    assert!(answer.contains("denied"), "{answer}");
    assert!(
        s.workspace().join("keepdir/file.txt").exists(),
        "denied: untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_kills_a_running_sleep_promptly() {
    let s = start().await;
    s.tg.push_text(OWNER, OWNER, "run: sleep 30");
    s.tg.wait_until("the command starts", WAIT, |t| {
        t.count("sendChatAction") >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let asked = Instant::now();
    s.tg.push_text(OWNER, OWNER, "/stop");
    assert_eq!(s.answer(1).await, "Stopped.");
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "stopping took {:?}",
        asked.elapsed()
    );
}

/// The project's code asks, says where it runs, and once approved runs in the host jail: it
/// writes the workspace, and neither a file outside it nor the network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_asks_and_runs_jailed_when_approved() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: python3 is not installed on this machine");
        return;
    }
    let s = start().await;
    let outside = s.home.path().join("outside.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::fs::write(
        s.workspace().join("tool.py"),
        format!(
            "import socket\n\
             open('made.txt', 'w').write('ok')\n\
             try:\n    open({outside:?}, 'w').write('x'); print('WROTE-OUTSIDE')\n\
             except OSError:\n    print('outside-blocked')\n\
             try:\n    socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')\n\
             except OSError:\n    print('network-blocked')\n",
            outside = outside.display().to_string()
        ),
    )
    .unwrap();
    s.tg.push_text(OWNER, OWNER, "run: python3 tool.py");
    let request = s.approval_for("python3 tool.py").await;
    assert!(
        request.visible.contains("without network") && request.visible.contains("jail"),
        "{}",
        request.visible
    );
    s.press(&request, 0).await;
    let answer = s.answer(1).await;
    assert!(
        answer.contains("outside-blocked") && answer.contains("network-blocked"),
        "{answer}"
    );
    assert_eq!(
        std::fs::read_to_string(s.workspace().join("made.txt")).unwrap(),
        "ok"
    );
    assert!(!outside.exists());

    // Inline code is refused before anyone is asked.
    s.tg.push_text(OWNER, OWNER, "run: python3 -c 'print(1)'");
    let answer = s.answer(2).await;
    assert!(
        answer.contains("code written on the command line"),
        "{answer}"
    );
}
