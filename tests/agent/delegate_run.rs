//! Sub-agents through the real `warden run` and a scripted model that answers the parent and
//! the sub-agent (told apart by the sub-agent's system prompt). Only the sub-agent's final
//! answer reaches the parent; its tool calls are audited under its own session, which begins
//! with the parent's; it gets only tools the parent has (never `delegate`), and one it was not
//! given fails; it stops at its own budget, which never exceeds the configured ones.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::warden_run::{audit_all, warden_run, workspace, write_config};
use serde_json::{json, Value};
use warden::llm::ContentBlock;

const INNER: &str = "canary-inner-6b02f1";

fn is_sub_agent(req: &Request) -> bool {
    req.system()
        .unwrap_or_default()
        .contains("## You are a sub-agent")
}

fn delegate(task: &str, tools: &[&str], max: Option<u64>) -> Turn {
    let mut input = json!({ "task": task, "tools": tools });
    if let Some(max) = max {
        input["max_iterations"] = json!(max);
    }
    Turn::tool_use("delegate", input)
}

/// Which requests came from a sub-agent, in order.
fn roles(requests: &[Request]) -> Vec<bool> {
    requests.iter().map(is_sub_agent).collect()
}

/// `warden run go` with `config`, which must succeed; the requests the model got.
async fn run_go(llm: &FakeLlm, config: &str) -> (tempfile::TempDir, Vec<Request>) {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), config);
    let out = warden_run(home.path(), llm, "go").await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    (home, llm.requests())
}

/// The last tool result the model was sent, as text.
fn last_result(req: &Request) -> String {
    req.tool_results()
        .pop()
        .map(|r| r.content)
        .unwrap_or_default()
}

#[tokio::test]
async fn only_the_final_answer_returns_and_the_sub_agents_calls_are_audited_under_it() {
    let llm = FakeLlm::anthropic_with(|req: &Request| {
        let (_, step) = req.prompt_and_step();
        match (is_sub_agent(req), step) {
            (false, 0) => delegate("Read notes.txt and tell me the code word.", &["read"], None),
            (false, _) => Turn::text(format!("Parent heard: {}", last_result(req))),
            (true, 0) => Turn::tool_use("read", json!({"path": "notes.txt"})),
            (true, _) => Turn::text("The code word is PELICAN."),
        }
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "");
    std::fs::create_dir_all(workspace(home.path())).unwrap();
    std::fs::write(
        workspace(home.path()).join("notes.txt"),
        format!("code word: PELICAN\nfiller {INNER}\n"),
    )
    .unwrap();
    let out = warden_run(home.path(), &llm, "What is the code word in my notes?").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "Parent heard: The code word is PELICAN.");

    let requests = llm.requests();
    assert_eq!(roles(&requests), [false, true, true, false]);
    assert!(requests[0].tool_names().contains(&"delegate".to_string()));
    // The sub-agent sees only its tools and its task.
    assert_eq!(requests[1].tool_names(), ["read"]);
    assert!(requests[1].system().unwrap().contains("Tools: read."));
    assert_eq!(
        requests[1].last_user_text(),
        "Read notes.txt and tell me the code word."
    );
    assert!(requests[2].tool_results()[0].content.contains(INNER));
    // The parent gets the answer alone: nothing of the file, no read call.
    let parent = requests[3].body["messages"].to_string();
    assert!(!parent.contains(INNER), "{parent}");
    assert!(!parent.contains("\"name\":\"read\""), "{parent}");
    assert_eq!(
        requests[3].tool_results()[0].content,
        "The code word is PELICAN."
    );
    assert!(stderr.contains("sub-agent → read: notes.txt"), "{stderr}");

    // The audit log: the read under the sub-agent's session, the delegate under the run's.
    let rows = audit_all(home.path());
    let tools: Vec<&str> = rows.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(tools, ["read", "delegate"]);
    let parent_session = &rows[1].session;
    assert!(parent_session.starts_with("run:"), "{parent_session}");
    let child = &rows[0].session;
    assert!(
        child.starts_with(&format!("{parent_session}/delegate-")),
        "{child}"
    );
    assert_eq!(rows[0].decision, "allow");
    assert!(
        rows[1].reason.contains(child.as_str()),
        "{}",
        rows[1].reason
    );

    // Each has its own transcript.
    let db = warden::schema::open(&home.path().join(".warden/warden.db")).unwrap();
    let sessions = warden::memory::sessions::SessionStore::new(db);
    let child_transcript = sessions.load(child).unwrap();
    let read_calls = child_transcript
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| matches!(b, ContentBlock::ToolUse { name, .. } if name == "read"))
        .count();
    assert_eq!(read_calls, 1);
    let parent_transcript = serde_json::to_string(&sessions.load(parent_session).unwrap()).unwrap();
    assert!(!parent_transcript.contains(INNER));
}

#[tokio::test]
async fn a_sub_agent_gets_only_tools_its_parent_has() {
    let llm = FakeLlm::anthropic_with(|req: &Request| {
        let (_, step) = req.prompt_and_step();
        match (is_sub_agent(req), step) {
            // No [search] configured: the parent has no web_search.
            (false, 0) => delegate("Search the web.", &["read", "web_search"], None),
            (false, 1) => delegate("Start another one.", &["delegate"], None),
            (false, 2) => delegate("Make a file.", &["read"], None),
            (false, _) => Turn::text("done"),
            // Given read only, it tries bash.
            (true, 0) => Turn::tool_use("bash", json!({"command": "touch made-by-child"})),
            (true, _) => Turn::text(format!("bash said: {}", last_result(req))),
        }
    })
    .await;
    let (home, requests) = run_go(&llm, "").await;
    assert_eq!(
        roles(&requests),
        [false, false, false, true, true, false],
        "refused sub-agents never called the model"
    );
    let results = requests[5].tool_results();
    assert!(results[0].is_error);
    assert!(
        results[0]
            .content
            .contains("a sub-agent gets only tools its parent has")
            && results[0]
                .content
                .contains("there is no tool named \"web_search\"")
            && results[0].content.contains("bash, process, read, write"),
        "{}",
        results[0].content
    );
    assert!(results[1].is_error);
    assert!(
        results[1]
            .content
            .contains("sub-agents do not start sub-agents"),
        "{}",
        results[1].content
    );
    assert_eq!(requests[3].tool_names(), ["read"]);
    let bash = &requests[4].tool_results()[0];
    assert!(bash.is_error);
    assert!(
        bash.content
            .contains("unknown tool \"bash\"; available: read"),
        "{}",
        bash.content
    );
    assert!(!workspace(home.path()).join("made-by-child").exists());

    let rows = audit_all(home.path());
    let seen: Vec<(&str, &str, bool)> = rows
        .iter()
        .map(|r| {
            (
                r.tool.as_str(),
                r.decision.as_str(),
                r.session.contains("/delegate-"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("delegate", "deny", false),
            ("delegate", "deny", false),
            ("bash", "error", true),
            ("delegate", "allow", false),
        ]
    );
}

#[tokio::test]
async fn a_sub_agent_stops_at_its_own_budget() {
    let llm = FakeLlm::anthropic_with(|req: &Request| {
        let (_, step) = req.prompt_and_step();
        match (is_sub_agent(req), step) {
            (false, 0) => delegate("List forever.", &["list_dir"], Some(50)),
            (false, 1) => delegate("List a little.", &["list_dir"], Some(2)),
            (false, _) => Turn::text("done"),
            (true, _) => Turn::tool_use("list_dir", json!({"path": "."})),
        }
    })
    .await;
    // The parent's own limit (4) is lower than [delegate]'s default (10): it wins.
    let (_home, requests) = run_go(&llm, "[llm]\nmax_iterations = 4\n").await;
    assert_eq!(
        roles(&requests),
        [false, true, true, true, true, false, true, true, false],
        "4 calls for the first (asked 50), 2 for the second"
    );
    let spec: Value = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "delegate")
        .cloned()
        .unwrap();
    assert!(
        spec["description"]
            .as_str()
            .unwrap()
            .contains("at most 4 model calls"),
        "{spec}"
    );
    assert!(requests[1]
        .system()
        .unwrap()
        .contains("You have at most 4 model calls."));
    let results = requests[8].tool_results();
    for (result, budget) in results.iter().zip([4, 2]) {
        assert!(result.is_error);
        assert!(
            result
                .content
                .contains(&format!("stopped at its limit of {budget} model calls")),
            "{}",
            result.content
        );
    }
}
