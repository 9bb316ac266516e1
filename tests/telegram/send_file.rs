//! The `send_file` tool through the real `warden bot`: the agent worker checks the path, the
//! gateway (which alone holds the bot token) checks it again and uploads — a document as
//! `sendDocument`, an image as `sendPhoto`, the caption HTML-escaped. A path outside the
//! workspace, a symlink out of it and a file over `telegram.max_send_bytes` are refused with
//! the reason, nothing is uploaded, and every call is in the audit log. In the terminal there
//! is no chat, and the tool says so.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::fake_telegram::FakeTelegram;
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use crate::support::warden_run::{audit_rows, warden_run, workspace};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nfake image data";

/// `send PATH [as KIND] [caption TEXT]` calls send_file; its result comes back as `result: …`.
async fn llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| {
        let (text, step) = req.prompt_and_step();
        if step > 0 {
            let result = req.tool_results().pop().unwrap();
            return Turn::text(format!("result: {}", result.content));
        }
        let rest = text.strip_prefix("send ").unwrap_or(&text);
        let (rest, caption) = match rest.split_once(" caption ") {
            Some((rest, caption)) => (rest, Some(caption)),
            None => (rest, None),
        };
        let mut input = match rest.split_once(" as ") {
            Some((path, kind)) => json!({"path": path, "as": kind}),
            None => json!({ "path": rest }),
        };
        if let Some(caption) = caption {
            input["caption"] = json!(caption);
        }
        Turn::tool_use("send_file", input)
    })
    .await
}

fn prepare(home: &std::path::Path) {
    let ws = workspace(home);
    std::fs::create_dir_all(ws.join("out")).unwrap();
    std::fs::write(ws.join("out/report.txt"), "quarterly numbers\n").unwrap();
    std::fs::write(ws.join("chart.png"), PNG).unwrap();
    std::fs::write(ws.join("big.bin"), vec![1u8; 2000]).unwrap();
    std::fs::write(home.join("secret.txt"), "the user's secret").unwrap();
    std::fs::create_dir_all(home.join("shared")).unwrap();
    std::fs::write(home.join("shared/notes.txt"), "readable, not sendable").unwrap();
    std::os::unix::fs::symlink(home.join("secret.txt"), ws.join("escape.txt")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_files_arrive_as_documents_and_photos_and_the_rest_is_refused() {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    prepare(home.path());
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    // A readable root outside the workspace: the agent may read it, not send it.
    env.write_config(&format!(
        "[telegram]\nmax_send_bytes = 1500\n[sandbox]\nread = [\"{}\"]\n",
        home.path().join("shared").display()
    ));
    let _bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    let answer = |n: usize| {
        let tg = &tg;
        async move {
            tg.wait_until("an answer", WAIT, |t| {
                t.messages_to(OWNER)
                    .iter()
                    .filter(|m| m.shown().starts_with("result:"))
                    .count()
                    >= n
            })
            .await;
            tg.messages_to(OWNER)
                .into_iter()
                .filter(|m| m.shown().starts_with("result:"))
                .nth(n - 1)
                .unwrap()
                .shown()
                .to_string()
        }
    };

    tg.push_text(OWNER, OWNER, "send out/report.txt caption <b>Q3</b> & more");
    let result = answer(1).await;
    assert_eq!(
        result,
        "result: Sent out/report.txt (18 bytes) to the chat as a document. It arrived in the \
         chat."
    );
    tg.push_text(OWNER, OWNER, "send chart.png");
    assert!(answer(2).await.contains("as a photo"));
    let uploads = tg.uploads();
    assert_eq!(uploads.len(), 2);
    let (document, photo) = (&uploads[0], &uploads[1]);
    assert_eq!(document.method, "senddocument");
    assert_eq!(document.chat_id, OWNER);
    assert_eq!(document.file_name, "report.txt");
    assert_eq!(document.bytes, b"quarterly numbers\n");
    assert_eq!(
        document.caption.as_deref(),
        Some("&lt;b&gt;Q3&lt;/b&gt; &amp; more")
    );
    assert_eq!(document.parse_mode.as_deref(), Some("HTML"));
    assert_eq!(photo.method, "sendphoto");
    assert_eq!(photo.file_name, "chart.png");
    assert_eq!(photo.bytes, PNG);
    assert_eq!(photo.caption, None);

    for (n, prompt, why) in [
        (3, "send /etc/passwd", "outside the workspace"),
        (4, "send SHARED", "only files in the workspace may leave it"),
        (5, "send escape.txt", "outside the workspace"),
        (
            6,
            "send big.bin",
            "big.bin is 2.0 KB, more than the 1.5 KB limit",
        ),
        (7, "send chart.png as document caption x", ""),
    ] {
        let shared = home.path().join("shared/notes.txt");
        let prompt = prompt.replace("SHARED", &shared.display().to_string());
        tg.push_text(OWNER, OWNER, &prompt);
        let result = answer(n).await;
        if why.is_empty() {
            assert!(result.contains("as a document"), "{result}");
        } else {
            assert!(result.starts_with("result: Denied: "), "{prompt}: {result}");
            assert!(result.contains(why), "{prompt}: {result}");
        }
    }
    let uploads = tg.uploads();
    assert_eq!(uploads.len(), 3, "nothing refused was uploaded");
    assert_eq!(uploads[2].method, "senddocument");
    assert!(uploads.iter().all(|u| u.bytes != b"the user's secret"));
    assert!(uploads.iter().all(|u| u.bytes != b"readable, not sendable"));

    // Every call is audited, with its decision.
    let audited: Vec<(String, String)> = audit_rows(home.path(), "send_file")
        .into_iter()
        .map(|(decision, input)| {
            let path = input["path"].as_str().unwrap();
            (decision, path.rsplit('/').next().unwrap().to_string())
        })
        .collect();
    let expected = [
        ("allow", "report.txt"),
        ("allow", "chart.png"),
        ("deny", "passwd"),
        ("deny", "notes.txt"),
        ("deny", "escape.txt"),
        ("deny", "big.bin"),
        ("allow", "chart.png"),
    ];
    assert_eq!(
        audited,
        expected.map(|(d, p)| (d.to_string(), p.to_string()))
    );
    assert!(tg.rejected().is_empty(), "{:?}", tg.rejected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_terminal_there_is_no_chat_and_send_file_says_so() {
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    prepare(home.path());
    let output = warden_run(home.path(), &llm, "send out/report.txt").await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with(
            "result: Error: out/report.txt was not sent: this run has no chat to send files \
             to (the terminal)"
        ),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let audited = audit_rows(home.path(), "send_file");
    assert_eq!(audited.len(), 1);
    assert_eq!(audited[0].0, "error");
}
