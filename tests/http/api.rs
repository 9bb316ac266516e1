//! The HTTP control API through the real `warden serve` (no Telegram), against the fake LLM:
//! a message asks for `rm -r`, the approval waits in `/v1/approvals`, approving it over HTTP
//! runs the command and the run succeeds with the model's answer; idempotency keys; cancel;
//! the token (401, rate limits, audit) and the listener's refusals; `kill -9` mid-run.

use crate::support::warden_serve::{parse_metrics, Client, ServeEnv, API_TOKEN};
use crate::{llm, start, WAIT};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_answered_over_http_lets_the_run_finish_with_the_answer() {
    let s = start("").await;
    let id = s.api.message("home", "run: rm -r somedir").await;
    let approval = s.api.wait_approval(&id, WAIT).await;
    assert_eq!(approval["tool"], "bash");
    assert!(
        approval["command"]
            .as_str()
            .unwrap()
            .contains("rm -r somedir"),
        "{approval}"
    );
    assert!(!approval["reason"].as_str().unwrap().is_empty());
    let run = s.api.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "waiting_approval", "{run}");
    assert_eq!(run["thread"], "home");
    assert!(s.workspace().join("somedir").exists(), "nothing ran yet");

    let path = format!("/v1/approvals/{}", approval["id"].as_str().unwrap());
    let answer = s.api.post(&path, json!({"decision": "approve"})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let again = s.api.post(&path, json!({"decision": "deny"})).await;
    assert_eq!(again.status, 404, "the first answer wins: {}", again.body);

    let run = s.api.wait_status(&id, "succeeded", WAIT).await;
    assert!(
        run["output"].as_str().unwrap().starts_with("result:"),
        "the model's answer: {run}"
    );
    assert!(run["finished_at"].is_string() && run["created_at"].is_string());
    assert!(!s.workspace().join("somedir").exists(), "approved: removed");

    // Denied: the run still succeeds (the model is told), and nothing is removed.
    let id2 = s.api.message("home", "run: rm -r keepdir").await;
    let approval = s.api.wait_approval(&id2, WAIT).await;
    let path = format!("/v1/approvals/{}", approval["id"].as_str().unwrap());
    assert_eq!(
        s.api.post(&path, json!({"decision": "deny"})).await.status,
        200
    );
    let run = s.api.wait_status(&id2, "succeeded", WAIT).await;
    assert!(run["output"].as_str().unwrap().contains("denied"), "{run}");
    assert!(s.workspace().join("keepdir/file.txt").exists());

    // Listed by thread and status, newest first.
    let listed = s
        .api
        .get("/v1/runs?thread=home&status=succeeded")
        .await
        .body;
    let ids: Vec<&str> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id2.as_str(), id.as_str()]);
    // The same, counted for Prometheus.
    let metrics = s.api.get_text("/metrics").await;
    let samples = parse_metrics(&metrics);
    for (series, value) in [
        ("warden_runs{status=\"succeeded\"}", 2.0),
        ("warden_runs{status=\"queued\"}", 0.0),
        (
            "warden_tool_calls_total{tool=\"bash\",decision=\"approved\"}",
            1.0,
        ),
        (
            "warden_tool_calls_total{tool=\"bash\",decision=\"rejected\"}",
            1.0,
        ),
        ("warden_approvals_pending", 0.0),
        ("warden_approval_answers_total{outcome=\"approved\"}", 1.0),
        ("warden_approval_answers_total{outcome=\"denied\"}", 1.0),
        ("warden_approval_wait_seconds_count", 2.0),
    ] {
        assert_eq!(samples.get(series), Some(&value), "{series} in\n{metrics}");
    }
    // Measured in the agent worker, carried back on its event messages: one latency per
    // model call the fake answered, their tokens, and the jail's start of `rm`.
    let model_calls = s.llm.requests().len() as f64;
    assert_eq!(
        samples.get("warden_llm_latency_seconds_count"),
        Some(&model_calls),
        "{metrics}"
    );
    assert!(samples["warden_llm_latency_seconds_sum"] > 0.0, "{metrics}");
    for kind in ["input", "output"] {
        let tokens = samples[&format!("warden_llm_tokens_total{{kind=\"{kind}\"}}")];
        assert!(tokens >= model_calls, "{kind} tokens: {metrics}");
    }
    let starts = samples["warden_sandbox_start_seconds_count{backend=\"host\"}"];
    assert!(
        starts >= 1.0,
        "the approved rm started in the host jail: {metrics}"
    );
    assert!(samples["warden_sandbox_start_seconds_sum{backend=\"host\"}"] > 0.0);
    assert_eq!(s.api.with_token(None).get("/metrics").await.status, 401);

    // And in the audit log, each call with its decision.
    let audit = s.api.get("/v1/audit?since=1h").await;
    assert_eq!(audit.status, 200, "{}", audit.body);
    let bash: Vec<(&str, &str)> = audit.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tool"] == "bash")
        .map(|e| {
            (
                e["decision"].as_str().unwrap(),
                e["input"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(bash.len(), 2, "{bash:?}");
    assert!(
        bash[0].0 == "approved" && bash[0].1.contains("rm -r somedir"),
        "{bash:?}"
    );
    assert!(
        bash[1].0 == "rejected" && bash[1].1.contains("rm -r keepdir"),
        "{bash:?}"
    );
    assert_eq!(s.api.get("/v1/audit?since=yesterday-ish").await.status, 400);

    let none = s.api.get("/v1/runs?thread=elsewhere").await.body;
    assert_eq!(none["runs"], json!([]));
    let bad = s.api.get("/v1/runs?status=done").await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert_eq!(
        s.api
            .post("/v1/approvals/ap_nope", json!({"decision": "maybe"}))
            .await
            .status,
        400
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_events_stream_from_its_status_to_its_end() {
    let s = start("").await;
    let id = s.api.message("live", "run: rm -r somedir").await;
    let reader = {
        let api = s.env.client();
        let id = id.clone();
        tokio::spawn(async move { api.events(&id).await })
    };
    let approval = s.api.wait_approval(&id, WAIT).await;
    let path = format!("/v1/approvals/{}", approval["id"].as_str().unwrap());
    s.api.post(&path, json!({"decision": "approve"})).await;
    let events = tokio::time::timeout(WAIT, reader).await.unwrap().unwrap();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"status"), "{names:?}");
    assert_eq!(names.last(), Some(&"status"), "{names:?}");
    let of = |name: &'static str| {
        events
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, d)| d)
    };
    let asked = of("approval")
        .next()
        .expect("the approval request is an event");
    assert_eq!(asked["id"], approval["id"]);
    assert!(asked["command"].as_str().unwrap().contains("rm -r somedir"));
    assert!(
        of("tool_end").any(|e| e["tool"] == "bash" && e["decision"] == "approved"),
        "{events:?}"
    );
    let streamed: String = of("text").map(|e| e["text"].as_str().unwrap()).collect();
    assert!(
        streamed.contains("result:"),
        "the answer streams: {events:?}"
    );
    let last = &events.last().unwrap().1;
    assert_eq!(last["status"], "succeeded");
    assert_eq!(last["id"], id.as_str());

    // A finished run's stream is its status alone; an unknown run is 404.
    let again = s.api.events(&id).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].1["status"], "succeeded");
    assert_eq!(s.api.get("/v1/runs/424242/events").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_idempotency_key_returns_the_same_run() {
    let s = start("").await;
    let post = |key: &str| {
        s.api.post(
            "/v1/messages",
            json!({"thread": "ci", "text": "hello there", "idempotency_key": key}),
        )
    };
    let first = post("build-41").await;
    assert_eq!(first.status, 202);
    assert_eq!(first.body["status"], "queued");
    let id = first.body["run_id"].as_str().unwrap().to_string();
    let again = post("build-41").await;
    assert_eq!(again.status, 202);
    assert_eq!(again.body["run_id"], id.as_str());
    let run = s.api.wait_status(&id, "succeeded", WAIT).await;
    assert_eq!(run["output"], "answer: hello there");
    // After it ended, too: the same run, not run again.
    let late = post("build-41").await;
    assert_eq!(late.body["run_id"], id.as_str());
    assert_eq!(late.body["status"], "succeeded");
    let other = post("build-42").await;
    assert_ne!(other.body["run_id"], id.as_str());
    s.api
        .wait_status(other.body["run_id"].as_str().unwrap(), "succeeded", WAIT)
        .await;
    assert_eq!(s.runs_of("hello there"), 2, "one run per key");

    for bad in [
        json!({"thread": "a b", "text": "x"}),
        json!({"thread": "ci", "text": "  "}),
        json!({"thread": "ci"}),
        json!({"thread": "ci", "text": "x", "extra": 1}),
    ] {
        let reply = s.api.post("/v1/messages", bad.clone()).await;
        assert_eq!(reply.status, 400, "{bad} → {}", reply.body);
        assert!(reply.body["error"].is_string(), "{}", reply.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_drops_a_queued_run_and_stops_a_running_one() {
    let s = start("").await;
    let running = s.api.message("work", "slow report").await;
    let queued = s.api.message("work", "after the report").await;
    s.api.wait_status(&running, "running", WAIT).await;
    assert_eq!(
        s.api.get(&format!("/v1/runs/{queued}")).await.body["status"],
        "queued"
    );

    let dropped = s
        .api
        .post(&format!("/v1/runs/{queued}/cancel"), json!({}))
        .await;
    assert_eq!(dropped.status, 200, "{}", dropped.body);
    assert_eq!(dropped.body["status"], "cancelled");

    let stopping = s
        .api
        .post(&format!("/v1/runs/{running}/cancel"), json!({}))
        .await;
    assert_eq!(stopping.status, 202, "{}", stopping.body);
    let run = s
        .api
        .wait_status(&running, "cancelled", Duration::from_secs(5))
        .await;
    assert!(run["finished_at"].is_string(), "{run}");

    let twice = s
        .api
        .post(&format!("/v1/runs/{running}/cancel"), json!({}))
        .await;
    assert_eq!(twice.status, 409, "{}", twice.body);
    assert_eq!(
        s.api.post("/v1/runs/999999/cancel", json!({})).await.status,
        404
    );
    // The thread goes on: a new message runs, and the cancelled one never did.
    let next = s.api.message("work", "next one").await;
    s.api.wait_status(&next, "succeeded", WAIT).await;
    assert_eq!(s.runs_of("after the report"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_but_healthz_needs_the_token() {
    let s = start("[http]\nmax_failed_auth_per_minute = 4\nmax_body_bytes = 2048\n").await;
    let anonymous = s.api.with_token(None);
    let health = anonymous.get("/healthz").await;
    assert_eq!((health.status, &health.body), (200, &json!({"ok": true})));

    let missing = anonymous.get("/v1/runs").await;
    assert_eq!(missing.status, 401, "{}", missing.body);
    assert!(missing.body["error"].as_str().unwrap().contains("Bearer"));
    assert_eq!(missing.headers.get("www-authenticate").unwrap(), "Bearer");
    let wrong = s.api.with_token(Some("not-the-token-at-all"));
    for path in ["/v1/runs", "/v1/approvals", "/v1/openapi.json"] {
        assert_eq!(wrong.get(path).await.status, 401, "{path}");
    }
    // Four failures in a minute: the next request is refused before its token is looked at.
    let limited = s.api.get("/v1/runs").await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert_eq!(limited.headers.get("retry-after").unwrap(), "60");

    // Each refusal is in the audit log, with the address and the endpoint.
    let db = warden::schema::open_in(&s.home.path().join(".warden")).unwrap();
    let refused: Vec<_> = warden::audit::recent(&db, 50)
        .unwrap()
        .into_iter()
        .filter(|r| r.tool == "http_auth")
        .collect();
    assert_eq!(refused.len(), 5, "{refused:?}");
    assert!(refused
        .iter()
        .any(|r| r.input == "GET /v1/approvals from 127.0.0.1"));
    assert!(refused.iter().any(|r| r.reason.contains("too many")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_capped_no_cors_and_the_openapi_document_lists_every_route() {
    let s = start("[http]\nmax_body_bytes = 2048\n").await;
    let big = s
        .api
        .post(
            "/v1/messages",
            json!({"thread": "t", "text": "x".repeat(4096)}),
        )
        .await;
    assert_eq!(big.status, 413, "{}", big.body);
    let preflight = s
        .api
        .send(
            s.api
                .http
                .get(format!("{}/v1/runs", s.api.base))
                .header("Origin", "https://evil.example"),
        )
        .await;
    assert_eq!(preflight.status, 200);
    assert!(
        preflight
            .headers
            .keys()
            .all(|h| !h.as_str().starts_with("access-control-")),
        "{:?}",
        preflight.headers
    );
    assert_eq!(preflight.headers.get("cache-control").unwrap(), "no-store");

    let doc = s.api.get("/v1/openapi.json").await;
    assert_eq!(doc.status, 200);
    assert_eq!(doc.body["openapi"], "3.1.0");
    for path in [
        "/healthz",
        "/v1/messages",
        "/v1/runs",
        "/v1/runs/{id}",
        "/v1/runs/{id}/cancel",
        "/v1/runs/{id}/events",
        "/v1/approvals",
        "/v1/approvals/{id}",
        "/v1/openapi.json",
        "/metrics",
        "/v1/hooks/{name}",
        "/v1/audit",
        "/v1/jobs",
        "/v1/jobs/{id}",
        "/v1/skills",
        "/v1/mcp",
    ] {
        assert!(doc.body["paths"][path].is_object(), "{path} is documented");
    }
    let unknown = s.api.get("/v1/nothing").await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.body["error"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_then_restart_loses_nothing_and_repeats_nothing() {
    let mut s = start("").await;
    let cut = s.api.message("jobs", "slow nightly").await;
    let behind = s.api.message("jobs", "queued behind").await;
    let elsewhere = s.api.message("other", "slow elsewhere").await;
    // Both runs are with the model when the process dies.
    let deadline = std::time::Instant::now() + WAIT;
    while s.llm.request_count() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the model got no requests"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.api.wait_status(&cut, "running", WAIT).await;
    s.serve.kill9();

    let _serve = s.env.start();
    s.api.wait_healthy(WAIT).await;
    for id in [&cut, &elsewhere] {
        let run = s.api.wait_status(id, "failed", WAIT).await;
        assert!(
            run["error"].as_str().unwrap().contains("restarted"),
            "told why: {run}"
        );
    }
    let run = s.api.wait_status(&behind, "succeeded", WAIT).await;
    assert_eq!(run["output"], "answer: queued behind");
    assert_eq!(s.runs_of("slow nightly"), 1, "not run again");
    assert_eq!(s.runs_of("slow elsewhere"), 1, "not run again");
    assert_eq!(s.runs_of("queued behind"), 1, "run once, after the restart");
    let all = s.api.get("/v1/runs").await.body;
    assert_eq!(all["runs"].as_array().unwrap().len(), 3, "none lost: {all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_refuses_to_start_without_a_token_or_exposed_without_tls() {
    let home = tempfile::tempdir().unwrap();
    let mut env = ServeEnv::new(home.path(), "http://127.0.0.1:9".into());
    env.extra.retain(|(k, _)| k != "WARDEN_HTTP_TOKEN");
    let out = env.command().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("WARDEN_HTTP_TOKEN"), "{stderr}");

    let env = ServeEnv::new(home.path(), "http://127.0.0.1:9".into());
    let out = env.command_on("0.0.0.0:0").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tls_cert") && stderr.contains("allow_plain_http"),
        "{stderr}"
    );
    assert!(!stderr.contains(API_TOKEN), "the token is never shown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_certificate_it_speaks_https_only() {
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let (cert, key) = (home.path().join("cert.pem"), home.path().join("key.pem"));
    // A test CA and a certificate for 127.0.0.1 it signed (a self-signed certificate used
    // directly is refused by the client as a CA posing as a server).
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(home.path())
            .output()
            .expect("openssl makes the test certificates");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-days", "1", "-subj", "/CN=warden test CA"],
            &["-keyout", "ca.key", "-out", "ca.pem"],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-subj",
                "/CN=localhost",
                "-keyout",
                "key.pem",
                "-out",
                "leaf.csr",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        home.path().join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "leaf.ext",
        "-out",
        "cert.pem",
    ]);
    let env = ServeEnv::new(home.path(), llm.base_url());
    env.write_config(&format!(
        "[http]\ntls_cert = {:?}\ntls_key = {:?}\n",
        cert.display().to_string(),
        key.display().to_string()
    ));
    let _serve = env.start();
    let pem = std::fs::read(home.path().join("ca.pem")).unwrap();
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let api = Client {
        http: https,
        base: format!("https://127.0.0.1:{}", env.port),
        token: Some(API_TOKEN.into()),
    };
    api.wait_healthy(WAIT).await;
    let id = api.message("tls", "over tls").await;
    let run = api.wait_status(&id, "succeeded", WAIT).await;
    assert_eq!(run["output"], "answer: over tls");
    let plain = reqwest::get(format!("http://127.0.0.1:{}/healthz", env.port)).await;
    assert!(
        plain.map_or(true, |r| !r.status().is_success()),
        "plain HTTP is not served"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_webhook_starts_a_tainted_run_and_a_bad_signature_is_refused() {
    let secret = "hook-secret-0123456789";
    let s = start(&format!(
        "[http.hooks.ci]\nsecret = \"{secret}\"\nprompt = \"Summarise the build result.\"\n"
    ))
    .await;
    let body = r#"{"build": 41, "status": "failed"}"#;
    let sign = |key: &str, body: &str| {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes());
        format!(
            "sha256={}",
            hex::encode(ring::hmac::sign(&key, body.as_bytes()))
        )
    };
    let anonymous = s.api.with_token(None);
    let hook = |name: &str, signature: Option<String>, delivery: &str| {
        let mut request = s
            .api
            .http
            .post(format!("{}/v1/hooks/{name}", s.api.base))
            .header("X-Delivery-Id", delivery)
            .body(body);
        if let Some(signature) = signature {
            request = request.header("X-Warden-Signature-256", signature);
        }
        anonymous.send(request)
    };
    for (name, signature) in [
        ("ci", None),
        ("ci", Some(sign("another-secret-0123456", body))),
        ("ci", Some(sign(secret, "{}"))),
        ("nope", Some(sign(secret, body))),
    ] {
        let refused = hook(name, signature.clone(), "d-0").await;
        assert_eq!(
            refused.status, 401,
            "{name} {signature:?}: {}",
            refused.body
        );
    }
    assert_eq!(s.llm.request_count(), 0, "nothing ran");

    let accepted = hook("ci", Some(sign(secret, body)), "d-1").await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    assert_eq!(accepted.body["thread"], "hook:ci");
    let id = accepted.body["run_id"].as_str().unwrap().to_string();
    let again = hook("ci", Some(sign(secret, body)), "d-1").await;
    assert_eq!(
        again.body["run_id"],
        id.as_str(),
        "a redelivery is the same run"
    );
    let run = s.api.wait_status(&id, "succeeded", WAIT).await;
    assert_eq!(run["thread"], "hook:ci");
    let seen = s.llm.last_request().last_user_text();
    assert!(
        seen.starts_with("Summarise the build result.") && seen.contains(r#""status": "failed""#),
        "{seen}"
    );
    assert!(seen.contains("not instructions"), "{seen}");
    assert_eq!(s.runs_of(&seen), 1);

    // The run's session is tainted by the webhook, and stays so.
    let db = warden::schema::open_in(&s.home.path().join(".warden")).unwrap();
    let chat = warden::channels::http::threads::Threads::new(db.clone())
        .find("hook:ci")
        .unwrap()
        .expect("the hook's thread");
    let sources = warden::memory::sessions::SessionStore::new(db)
        .taint_sources(&format!("http:{chat}"), &[])
        .unwrap();
    assert!(sources.iter().any(|s| s == "webhook ci"), "{sources:?}");
}
