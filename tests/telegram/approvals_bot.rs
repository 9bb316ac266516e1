//! "Always in this chat" through the real `warden bot`, the fake Bot API and a scripted model:
//! a bash command the policy asks about is posted with Approve once / Deny and "always" for 1
//! hour / today / until revoked (these tests press "until revoked"; the expiry is in
//! `telegram_approvals.rs`, on an injected clock). An "always" skips the next ask of the same shape (the program and what it runs, in
//! the same directory) and no other: not another script, not another subcommand, not a line
//! with a command it does not cover. It never turns a policy deny into a run, nor answers an
//! ask about what a line writes (an instruction file). `warden approvals list|rm` and
//! `/approvals` (with its Revoke buttons) show and revoke the rules; revoked, it asks again.

use crate::support::command_model;
use crate::support::fake_llm::FakeLlm;
use crate::support::fake_telegram::{FakeTelegram, Sent};
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use crate::support::warden_run::{audit_rows, warden};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

struct Setup {
    tg: FakeTelegram,
    _llm: FakeLlm,
    _bot: BotProcess,
    home: tempfile::TempDir,
    /// Prompts sent so far (each gets one answer).
    sent: std::cell::Cell<usize>,
}

async fn start() -> Setup {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::anthropic_with(command_model::script).await;
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join(".warden/workspace");
    std::fs::create_dir_all(workspace.join("somedir")).unwrap();
    std::fs::write(workspace.join("somedir/file.txt"), "x").unwrap();
    std::fs::write(
        workspace.join("a.py"),
        "import sys\nprint('hello from a', sys.argv[1:])\n",
    )
    .unwrap();
    std::fs::write(workspace.join("b.py"), "print('hello from b')\n").unwrap();
    let bot = BotProcess::start(&BotEnv::new(home.path(), tg.api_url(), llm.base_url()));
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    Setup {
        tg,
        _llm: llm,
        _bot: bot,
        home,
        sent: std::cell::Cell::new(0),
    }
}

impl Setup {
    fn approvals(&self) -> usize {
        self.tg.approvals_to(OWNER).len()
    }

    /// Send `run: COMMAND`; returns the approval request it posts, if it asks.
    async fn run(&self, command: &str) -> Option<Sent> {
        let before = self.approvals();
        self.sent.set(self.sent.get() + 1);
        let n = self.sent.get();
        self.tg.push_text(OWNER, OWNER, &format!("run: {command}"));
        self.tg
            .wait_until("an approval request or the answer", WAIT, |t| {
                t.approvals_to(OWNER).len() > before || answers(t).len() >= n
            })
            .await;
        (self.approvals() > before).then(|| self.tg.approvals_to(OWNER)[before].clone())
    }

    /// The answer to the latest prompt.
    async fn answer(&self) -> String {
        let n = self.sent.get();
        self.tg
            .wait_until("the answer", WAIT, |t| answers(t).len() >= n)
            .await;
        answers(&self.tg)[n - 1].clone()
    }

    /// Send `text` and wait for the bot's message that starts with `prefix`.
    async fn reply(&self, text: &str, prefix: &str) -> Sent {
        self.tg.push_text(OWNER, OWNER, text);
        let find = |t: &FakeTelegram| {
            t.messages_to(OWNER)
                .into_iter()
                .find(|m| m.visible.starts_with(prefix))
        };
        self.tg
            .wait_until(prefix, WAIT, |t| find(t).is_some())
            .await;
        find(&self.tg).unwrap()
    }

    fn press(&self, request: &Sent, row: usize, index: usize) {
        self.tg.press(OWNER, request, row, index);
    }

    fn bash_audit(&self) -> Vec<(String, Value)> {
        audit_rows(self.home.path(), "bash")
    }

    fn list(&self) -> Value {
        let out = warden(self.home.path(), &["approvals", "list", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn answers(t: &FakeTelegram) -> Vec<String> {
    t.messages_to(OWNER)
        .into_iter()
        .filter(|m| m.visible.starts_with("result:"))
        .map(|m| m.visible)
        .collect()
}

fn buttons(request: &Sent) -> Vec<Vec<String>> {
    let keyboard = &request.keyboard.as_ref().expect("buttons")["inline_keyboard"];
    keyboard
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|b| b["text"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_skips_the_same_shape_and_asks_for_any_other() {
    let s = start().await;

    let request = s.run("python3 a.py").await.expect("python3 asks");
    assert_eq!(
        buttons(&request),
        [
            vec!["✅ Approve once", "❌ Deny"],
            vec!["⏱ 1 hour", "📅 Today", "♾ Until revoked"]
        ]
    );
    assert!(
        request
            .visible
            .contains("would approve from now on: python3 a.py"),
        "{}",
        request.visible
    );
    s.press(&request, 1, 2);
    assert!(s.answer().await.contains("hello from a []"));
    s.tg.wait_until("the request shows the stored rule", WAIT, |t| {
        t.messages_to(OWNER).iter().any(|m| {
            m.edits
                .iter()
                .any(|e| e.contains("in this chat until revoked: python3 a.py"))
        })
    })
    .await;

    // The same script with other arguments: no question.
    assert!(
        s.run("python3 a.py b.py").await.is_none(),
        "not asked again"
    );
    assert!(s.answer().await.contains("hello from a ['b.py']"));
    let audit = s.bash_audit();
    assert_eq!(audit.last().unwrap().0, "approved");

    // Another script, another program, a line with a command the rule does not cover: asked.
    for other in [
        "python3 b.py",
        "cargo test",
        "python3 a.py && rm -r somedir",
    ] {
        let request = s.run(other).await.unwrap_or_else(|| panic!("{other} asks"));
        s.press(&request, 0, 1);
        assert!(s.answer().await.contains("denied"), "{other}");
    }
    assert!(s.home.path().join(".warden/workspace/somedir").exists());

    // Another subcommand of a program approved for one: asked.
    let request = s.run("cargo test").await.expect("cargo test asks");
    s.press(&request, 1, 2);
    s.answer().await;
    let request = s.run("cargo build").await.expect("cargo build asks");
    s.press(&request, 0, 1);
    s.answer().await;
    // Every asking command of a line covered: no question.
    assert!(s.run("cargo test --quiet ; python3 a.py").await.is_none());
    assert!(s.answer().await.contains("hello from a []"));
    // In another directory it is another project: asked.
    let request = s.run("cd somedir && cargo test").await.expect("asks");
    assert!(
        request.visible.contains("cargo test (in somedir/)"),
        "{}",
        request.visible
    );
    s.press(&request, 0, 1);
    s.answer().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_stays_a_deny_and_content_asks_still_ask() {
    let s = start().await;
    let request = s.run("python3 a.py").await.expect("asks");
    s.press(&request, 1, 2);
    s.answer().await;

    // The same shape, but an argument outside the workspace: the policy denies, no question.
    assert!(s.run("python3 a.py /etc/shadow").await.is_none());
    let answer = s.answer().await;
    assert!(
        answer.contains("Denied:") && answer.contains("outside"),
        "{answer}"
    );
    let audit = s.bash_audit();
    assert_eq!(audit.last().unwrap().0, "deny");

    // Writing an instruction file asks about the content, whatever the rule says.
    let request = s
        .run("python3 a.py > AGENTS.md")
        .await
        .expect("an instruction file write asks");
    assert!(request.visible.contains("AGENTS.md"), "{}", request.visible);
    assert_eq!(
        buttons(&request),
        [vec!["✅ Approve", "❌ Deny"]],
        "no Always for a write to an instruction file"
    );
    s.press(&request, 0, 1);
    assert!(s.answer().await.contains("denied"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_are_listed_and_revoked_from_the_cli_and_the_chat() {
    let s = start().await;
    for command in ["python3 a.py", "python3 b.py"] {
        let request = s.run(command).await.expect("asks");
        s.press(&request, 1, 2);
        s.answer().await;
    }
    let listed = s.list();
    let rules = listed["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 2, "{listed}");
    assert_eq!(rules[0]["session"], format!("telegram:{OWNER}"));
    assert_eq!(rules[0]["shown"], "python3 a.py");
    assert_eq!(rules[0]["words"], json!(["python3", "a.py"]));
    assert_eq!(rules[1]["shown"], "python3 b.py");
    assert_eq!(rules[0]["expires_at"], Value::Null, "until revoked");
    let out = warden(s.home.path(), &["approvals", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("python3 a.py  until revoked")
            && text.contains("scope: `python3 a.py` run in "),
        "{text}"
    );

    // /approvals lists them with a Revoke button each; pressing one revokes it.
    let list = s.reply("/approvals", "♾ Commands approved").await;
    assert!(list.visible.contains("python3 a.py") && list.visible.contains("python3 b.py"));
    assert_eq!(
        buttons(&list)[0][0],
        format!("🗑 Revoke #{} python3 a.py", rules[0]["id"])
    );
    // A stranger's press changes nothing.
    s.tg.press(999, &list, 0, 0);
    s.press(&list, 0, 0);
    s.tg.wait_until("the list shows the revocation", WAIT, |t| {
        t.messages_to(OWNER)
            .iter()
            .any(|m| m.edits.iter().any(|e| e.starts_with("Revoked #")))
    })
    .await;
    let listed = s.list();
    assert_eq!(listed["rules"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["rules"][0]["shown"], "python3 b.py");

    // The CLI revokes the other.
    let id = listed["rules"][0]["id"].to_string();
    let out = warden(s.home.path(), &["approvals", "rm", &id]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = warden(s.home.path(), &["approvals", "rm", &id]);
    assert_eq!(out.status.code(), Some(1), "nothing left to remove");
    assert!(s.list()["rules"].as_array().unwrap().is_empty());

    // Both ask again.
    for command in ["python3 a.py", "python3 b.py"] {
        let request = s.run(command).await.expect("asks again after rm");
        s.press(&request, 0, 1);
        s.answer().await;
    }
    s.reply("/approvals", "Nothing is approved for good").await;
}
