//! The dashboard through the real `warden serve`: its headers and sign-in over plain HTTP
//! (the session cookie, CSRF refusals, sign-out), then a real browser — Debian's headless
//! Chromium driven over the DevTools Protocol — signs in, sees a pending approval with its
//! full command, approves it and sees the run finish; a screenshot goes to
//! target/dashboard.png.

use crate::cdp::{chromium, Browser};
use crate::grants::install_skill;
use crate::start;
use crate::support::skills::SkillEnv;
use crate::support::warden_serve::API_TOKEN;
use crate::WAIT;
use serde_json::json;
use std::time::Duration;

/// A client that keeps cookies to itself (it sends what the test says) and never follows
/// redirects, so the sign-in's answer can be read.
fn browser_like() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The session cookie a sign-in set (`warden_session=ID`), and the whole header.
async fn sign_in(base: &str, token: &str) -> (u16, Option<String>, String) {
    let response = browser_like()
        .post(format!("{base}/login"))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let set = response
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let cookie = set
        .split(';')
        .next()
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    (status, cookie, set)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_cookie_holds_no_token_and_writes_need_its_csrf_token() {
    let s = start("").await;
    let base = s.api.base.clone();
    let http = browser_like();

    // Signed out: the sign-in form, under a strict CSP, with no inline code.
    let page = http.get(format!("{base}/")).send().await.unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    for part in [
        "default-src 'self'",
        "script-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let html = page.text().await.unwrap();
    assert!(html.contains("action=\"/login\""), "{html}");
    assert!(html.contains("name=\"viewport\""), "usable on a phone");
    assert!(
        !html.contains(" style=") && !html.contains("<script>"),
        "{html}"
    );

    // A wrong token: refused, no cookie.
    let (status, cookie, _) = sign_in(&base, "not-the-token-at-all").await;
    assert_eq!((status, cookie), (401, None));

    // The right one: a random session id, HttpOnly and SameSite=Strict; not the token.
    let (status, cookie, set) = sign_in(&base, API_TOKEN).await;
    assert_eq!(status, 303, "{set}");
    let cookie = cookie.expect("a session cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    assert!(!set.contains("Secure"), "plain HTTP on loopback: {set}");
    assert!(
        !set.contains(API_TOKEN),
        "the cookie is not the token: {set}"
    );

    // Reads work with the cookie; the page carries the session's CSRF token.
    let runs = http
        .get(format!("{base}/v1/runs"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(runs.status(), 200);
    let page = http
        .get(format!("{base}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page's CSRF token")
        .to_string();
    assert_eq!(csrf.len(), 64);

    // Writes need the CSRF token: without it, or with another, 403 — SameSite alone is not
    // trusted.
    let id = s.api.message("home", "run: rm -r somedir").await;
    let approval = s.api.wait_approval(&id, WAIT).await;
    let path = format!("{base}/v1/approvals/{}", approval["id"].as_str().unwrap());
    for given in [None, Some("0".repeat(64))] {
        let mut request = http
            .post(&path)
            .header("cookie", &cookie)
            .json(&json!({"decision": "approve"}));
        if let Some(given) = &given {
            request = request.header("x-csrf-token", given);
        }
        let refused = request.send().await.unwrap();
        assert_eq!(refused.status(), 403, "CSRF token {given:?}");
    }
    assert!(
        s.workspace().join("somedir").exists(),
        "nothing was approved"
    );
    let answered = http
        .post(&path)
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .json(&json!({"decision": "deny"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    s.api.wait_status(&id, "succeeded", WAIT).await;
    assert!(s.workspace().join("somedir").exists(), "denied");

    // Signing out needs the token too, and ends the session.
    let out = http
        .post(format!("{base}/logout"))
        .header("cookie", &cookie)
        .form(&[("csrf", "wrong")])
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 403);
    let out = http
        .post(format!("{base}/logout"))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    assert!(out.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    let after = http
        .get(format!("{base}/v1/runs"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 401, "signed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_real_browser_sign_in_approve_and_see_the_run_finish() {
    if chromium().is_none() {
        eprintln!(
            "SKIPPED: no chromium on PATH (CI installs Debian's `chromium`; \
             `apt-get install -y chromium` to run this here)"
        );
        return;
    }
    let s = start("").await;
    let base = s.api.base.clone();
    // A granted skill, to see among the grants.
    let fixtures = SkillEnv::new("");
    install_skill(s.home.path(), &fixtures, "weather");
    let id = s.api.message("home", "run: rm -r somedir").await;
    s.api.wait_approval(&id, WAIT).await;

    let mut browser = Browser::launch().await.expect("chromium");
    browser.navigate(&format!("{base}/")).await;
    browser
        .wait_for("document.getElementById('token')", WAIT)
        .await;
    browser
        .eval(&format!(
            "document.getElementById('token').value = '{API_TOKEN}'; \
             document.getElementById('signin').requestSubmit(); true"
        ))
        .await;
    // Signed in: the approval with its whole command.
    let shown = browser
        .wait_for(
            "(() => { const c = document.querySelector('.approval'); \
             return c && c.innerText.includes('rm -r somedir') ? c.innerText : ''; })()",
            WAIT,
        )
        .await;
    assert!(shown.as_str().unwrap().contains("Approve"), "{shown}");
    assert_eq!(
        browser.eval("document.cookie").await,
        json!(""),
        "the session cookie is HttpOnly: scripts cannot read it"
    );
    browser
        .eval("document.querySelector('.approval button.approve').click(); true")
        .await;
    let row = format!(
        "[...document.querySelectorAll('#runs tbody tr')].some(r => \
         r.children[0].textContent === '{id}' && r.children[2].textContent === 'succeeded')"
    );
    browser.wait_for(&row, WAIT).await;
    browser
        .wait_for(
            "document.getElementById('approvals-empty').hidden === false",
            WAIT,
        )
        .await;
    // The skills, read-only: the granted one by name, its grant and what it may do, as text.
    let skill = browser
        .wait_for(
            "(() => { const r = [...document.querySelectorAll('#skills tbody tr')] \
             .find(r => r.children[0].textContent === 'weather'); \
             return r ? r.innerText : ''; })()",
            WAIT,
        )
        .await;
    let skill = skill.as_str().unwrap();
    assert!(
        skill.contains("granted") && skill.contains("api.example.test"),
        "{skill}"
    );
    assert_eq!(
        browser
            .eval("document.querySelectorAll('#skills td *, #mcp td *').length")
            .await,
        json!(0),
        "only text in the cells"
    );
    let run = s.api.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert!(
        !s.workspace().join("somedir").exists(),
        "approved in the browser: removed"
    );
    let screenshot = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/dashboard.png");
    browser.screenshot(&screenshot).await;

    // On a phone: one column, the tables' rows stacked.
    browser.viewport(390, 844, true).await;
    let header = browser
        .eval("getComputedStyle(document.querySelector('#runs thead')).display")
        .await;
    assert_eq!(header, json!("none"), "tables stack below 600 px");
}
