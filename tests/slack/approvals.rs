//! Approvals as Block Kit buttons through the real binary: the command policy asks about
//! `rm -r`; a stranger's press is refused (and they are told), the owner's approves; "Always
//! in this conversation" stores a rule so the same command runs unasked; a request too long for
//! one message goes whole as a file before the buttons.

use crate::support::fake_slack::{dm, FakeSlack, Posted, DM, OWNER};
use crate::{start, WAIT};
use serde_json::Value;

/// The approval messages (those with buttons) in the DM.
fn requests(slack: &FakeSlack) -> Vec<Posted> {
    slack
        .messages_in(DM)
        .into_iter()
        .filter(|m| m.body["blocks"].is_array())
        .collect()
}

/// The value of the button labelled `label` on `request`.
fn button(request: &Posted, label: &str) -> String {
    let buttons = request.body["blocks"][1]["elements"].as_array().unwrap();
    let found = buttons
        .iter()
        .find(|b| b["text"]["text"] == label)
        .unwrap_or_else(|| panic!("no {label:?} button in {buttons:#?}"));
    found["value"].as_str().unwrap().to_string()
}

fn results(slack: &FakeSlack) -> Vec<String> {
    slack
        .messages_in(DM)
        .iter()
        .map(|m| m.shown().to_string())
        .filter(|t| t.starts_with("result:"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_is_approved_by_the_owners_button_not_a_strangers() {
    let s = start(&[]).await;
    let workspace = s.env.home.join(".warden/workspace");
    s.slack.send_event(dm(
        OWNER,
        "run: mkdir -p scratch && rm -r scratch",
        "1.000001",
    ));
    s.slack
        .wait_until("the approval request", WAIT, |f| !requests(f).is_empty())
        .await;
    let request = requests(&s.slack).remove(0);
    let section = request.body["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(
        section.contains("```mkdir -p scratch\nrm -r scratch```"),
        "{section}"
    );
    let labels: Vec<&str> = request.body["blocks"][1]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "Approve once",
            "Always in this conversation for 1 hour",
            "Always in this conversation today",
            "Always in this conversation",
            "Deny"
        ]
    );

    // A stranger presses Approve: refused and told; the request still waits.
    let stranger = s
        .slack
        .press("USTRANGER", &request, &button(&request, "Approve once"));
    s.slack
        .wait_until("the stranger is told", WAIT, |f| {
            f.acks().contains(&stranger) && !f.ephemeral().is_empty()
        })
        .await;
    let told = s.slack.ephemeral().remove(0);
    assert_eq!(told["user"], "USTRANGER");
    assert!(
        told["text"].as_str().unwrap().contains("not allowed"),
        "{told}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        results(&s.slack).is_empty(),
        "a stranger's press approves nothing"
    );

    // The owner approves once: it runs, and the request shows who approved.
    s.slack
        .press(OWNER, &request, &button(&request, "Approve once"));
    s.slack
        .wait_until("the result", WAIT, |f| !results(f).is_empty())
        .await;
    let result = results(&s.slack).remove(0);
    assert!(result.contains("[exit code 0]"), "{result}");
    assert!(!workspace.join("scratch").exists());
    s.slack
        .wait_until("the request shows the outcome", WAIT, |f| {
            requests(f)[0]
                .edits
                .iter()
                .any(|e| e.contains("Approved by uowner1"))
        })
        .await;
    let update = s
        .slack
        .calls_of("chat.update")
        .into_iter()
        .find(|c| c.body["ts"] == request.ts.as_str())
        .unwrap();
    let blocks: &Value = &update.body["blocks"];
    assert_eq!(blocks.as_array().unwrap().len(), 1, "the buttons are gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_in_this_channel_stores_a_rule_and_deny_refuses() {
    let s = start(&[]).await;
    let line = "mkdir -p scratch && rm -r scratch";
    s.slack
        .send_event(dm(OWNER, &format!("run: {line}"), "1.000001"));
    s.slack
        .wait_until("the approval request", WAIT, |f| !requests(f).is_empty())
        .await;
    let request = requests(&s.slack).remove(0);
    s.slack.press(
        OWNER,
        &request,
        &button(&request, "Always in this conversation"),
    );
    s.slack
        .wait_until("the result", WAIT, |f| results(f).len() == 1)
        .await;
    // The same command again: no question.
    s.slack
        .send_event(dm(OWNER, &format!("run: {line}"), "1.000002"));
    s.slack
        .wait_until("the second result", WAIT, |f| results(f).len() == 2)
        .await;
    assert_eq!(requests(&s.slack).len(), 1, "not asked again");
    // Another shape is asked about; Deny refuses it.
    s.slack
        .send_event(dm(OWNER, "run: mkdir -p other && rm -r other", "1.000003"));
    s.slack
        .wait_until("the second request", WAIT, |f| requests(f).len() == 2)
        .await;
    let request = requests(&s.slack).remove(1);
    s.slack.press(OWNER, &request, &button(&request, "Deny"));
    s.slack
        .wait_until("the third result", WAIT, |f| results(f).len() == 3)
        .await;
    assert!(
        results(&s.slack)[2].contains("denied"),
        "{:?}",
        results(&s.slack)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_request_goes_whole_as_a_file_before_the_buttons() {
    let s = start(&[]).await;
    let names: Vec<String> = (0..400).map(|i| format!("dir_{i:04}")).collect();
    let line = format!(
        "mkdir -p {0} && rm -r {0} last_dir_matters",
        names.join(" ")
    );
    s.slack
        .send_event(dm(OWNER, &format!("run: {line}"), "1.000001"));
    s.slack
        .wait_until("the approval request", WAIT, |f| !requests(f).is_empty())
        .await;
    let uploads = s.slack.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    let whole = String::from_utf8(uploads[0].data.clone()).unwrap();
    assert!(whole.contains("last_dir_matters"), "never cut");
    let shared = uploads[0].completed.as_ref().expect("shared in the DM");
    assert_eq!(shared["channel_id"], DM);
    // The file came before the buttons.
    let calls = s.slack.calls();
    let completed = calls
        .iter()
        .position(|c| c.method == "files.completeUploadExternal")
        .unwrap();
    let posted = calls
        .iter()
        .position(|c| c.method == "chat.postMessage" && c.body["blocks"].is_array())
        .unwrap();
    assert!(completed < posted);
    let request = requests(&s.slack).remove(0);
    let section = request.body["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(section.contains("file above") && section.chars().count() <= 3000);
    // The upload address got the bytes and no token.
    let upload = calls.iter().find(|c| c.method == "upload").unwrap();
    assert!(upload.token.is_empty());
    s.slack.press(OWNER, &request, &button(&request, "Deny"));
    s.slack
        .wait_until("the result", WAIT, |f| !results(f).is_empty())
        .await;
}
