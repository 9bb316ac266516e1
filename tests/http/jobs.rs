//! `/v1/jobs` through the real `warden serve`: a job added over HTTP is listed (by the API and
//! by `warden cron list`, one store), fires on its thread against the fake model because
//! `warden serve` runs the scheduler, and is removed; bad requests are refused with the
//! scheduler's own reasons.

use crate::support::warden_serve::Client;
use crate::{start, WAIT};
use serde_json::{json, Value};

/// `warden cron list --json` with serve's HOME: the jobs the CLI sees.
fn cron_list(home: &std::path::Path) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(["cron", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn job_ids(api: &Client) -> Vec<i64> {
    let list = api.get("/v1/jobs").await;
    assert_eq!(list.status, 200, "{}", list.body);
    list.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_added_over_http_is_listed_fires_on_its_thread_and_is_removed() {
    let s = start("").await;
    let added = s
        .api
        .post(
            "/v1/jobs",
            json!({"thread": "nightly", "name": "report", "at": "+2s",
                   "prompt": "summarise the day", "keep": true}),
        )
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let id = added.body["id"].as_i64().unwrap();
    assert_eq!(added.body["kind"], "at");
    assert_eq!(added.body["name"], "report");
    assert!(
        added.body["session"].as_str().unwrap().starts_with("http:"),
        "it runs on an API thread: {}",
        added.body
    );
    assert_eq!(job_ids(&s.api).await, [id]);
    let one = s.api.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(one.body["prompt"], "summarise the day");
    let cli = cron_list(s.home.path());
    assert_eq!(cli[0]["id"], id, "warden cron sees the same store: {cli}");

    // warden serve runs the scheduler: the job fires on its thread, answered by the model.
    let run = s
        .api
        .wait_thread_run("nightly", WAIT, |r| r["status"] == "succeeded")
        .await;
    let output = run["output"].as_str().unwrap();
    assert!(output.contains("summarise the day"), "{run}");
    assert!(
        output.contains("Scheduled job #"),
        "the model was told the scheduler sent it: {output}"
    );

    // A kept one-shot job stays, finished; removing it answers the job as it was.
    let finished = s.api.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(finished.body["enabled"], false, "{}", finished.body);
    let removed = s.api.delete(&format!("/v1/jobs/{id}")).await;
    assert_eq!(removed.status, 200, "{}", removed.body);
    assert_eq!(removed.body["id"], id);
    assert!(job_ids(&s.api).await.is_empty());
    assert_eq!(s.api.get(&format!("/v1/jobs/{id}")).await.status, 404);
    assert_eq!(s.api.delete(&format!("/v1/jobs/{id}")).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_with_the_id_in_the_query_removes_the_job_too() {
    let s = start("").await;
    let mut ids = Vec::new();
    for name in ["one", "two"] {
        let added = s
            .api
            .post(
                "/v1/jobs",
                json!({"thread": "t", "name": name, "every": "1h", "prompt": "p"}),
            )
            .await;
        assert_eq!(added.status, 201, "{}", added.body);
        ids.push(added.body["id"].as_i64().unwrap());
    }
    let removed = s.api.delete(&format!("/v1/jobs?id={}", ids[0])).await;
    assert_eq!(removed.status, 200, "{}", removed.body);
    assert_eq!(removed.body["id"], ids[0]);
    assert_eq!(removed.body["name"], "one");
    assert_eq!(job_ids(&s.api).await, [ids[1]]);
    // The same refusals as the path form.
    let again = s.api.delete(&format!("/v1/jobs?id={}", ids[0])).await;
    assert_eq!(again.status, 404, "{}", again.body);
    let none = s.api.delete("/v1/jobs").await;
    assert_eq!(none.status, 400, "{}", none.body);
    assert!(none.body["error"].as_str().unwrap().contains("id"));
    assert_eq!(s.api.delete("/v1/jobs?id=abc").await.status, 404);
    let anonymous = s.api.with_token(None);
    let refused = anonymous.delete(&format!("/v1/jobs?id={}", ids[1])).await;
    assert_eq!(refused.status, 401);
    assert_eq!(job_ids(&s.api).await, [ids[1]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_jobs_are_refused_with_the_schedulers_reasons() {
    let s = start("[scheduler]\nmin_interval_secs = 300\n").await;
    let cases = [
        (
            json!({"thread": "t", "prompt": "p"}),
            "give exactly one schedule",
        ),
        (
            json!({"thread": "t", "prompt": "p", "every": "1m"}),
            "minimum interval",
        ),
        (
            json!({"thread": "t", "prompt": "p", "at": "+1m", "cron": "* * * * *"}),
            "only one schedule",
        ),
        (
            json!({"thread": "t", "prompt": " ", "every": "1h"}),
            "prompt is empty",
        ),
        (
            json!({"thread": "bad name", "prompt": "p", "every": "1h"}),
            "thread name",
        ),
        (
            json!({"thread": "t", "prompt": "p", "every": "1h", "session": "telegram:1"}),
            "unknown field",
        ),
    ];
    for (body, why) in cases {
        let reply = s.api.post("/v1/jobs", body.clone()).await;
        assert_eq!(reply.status, 400, "{body} → {}", reply.body);
        let error = reply.body["error"].as_str().unwrap();
        assert!(error.contains(why), "{body}: {error:?} should say {why:?}");
    }
    assert!(job_ids(&s.api).await.is_empty());
    let anonymous = s.api.with_token(None);
    assert_eq!(anonymous.get("/v1/jobs").await.status, 401);
    let refused = anonymous
        .post(
            "/v1/jobs",
            json!({"thread": "t", "prompt": "p", "every": "1h"}),
        )
        .await;
    assert_eq!(refused.status, 401);
    assert!(job_ids(&s.api).await.is_empty());
}
