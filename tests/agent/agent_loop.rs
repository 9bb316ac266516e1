//! The agent loop through the library, against the fake LLM (real Anthropic/OpenAI clients on
//! 127.0.0.1): denials reach the model with their reason, the iteration cap, steer, abort,
//! file tools refusing planted symlinks, web_fetch refusing local and metadata addresses,
//! the audit log, the session transcript, and a sub-agent refused a tool (bash) its parent
//! does not have.

use crate::support;

use crate::support::fake_llm::{FakeLlm, Turn};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use warden::agent::{Agent, AgentEvent, Delegate, RunControl, RunEnd, RunRequest, SystemPrompt};
use warden::audit;
use warden::config::TrustConfig;
use warden::db::Database;
use warden::egress::HostRules;
use warden::llm::{ContentBlock, Provider};
use warden::memory::sessions::SessionStore;
use warden::persistence::PromptFiles;
use warden::policy::PathPolicy;
use warden::tools::approval::NoApprover;
use warden::tools::web_fetch::{Names, WebFetch};
use warden::tools::{files, Tool, ToolContext, ToolOutput, ToolSet};

struct Harness {
    dir: tempfile::TempDir,
    db: Arc<Database>,
    agent: Agent,
    events: Arc<Mutex<Vec<AgentEvent>>>,
}

impl Harness {
    fn workspace(&self) -> std::path::PathBuf {
        self.dir.path().join("ws").canonicalize().unwrap()
    }

    fn request(&self, text: &str, control: RunControl) -> RunRequest {
        let events = self.events.clone();
        RunRequest {
            session: "test:1".into(),
            input: vec![ContentBlock::text(text)],
            approver: Arc::new(NoApprover),
            outbox: Arc::new(warden::tools::outbox::Nowhere::TERMINAL),
            events: Arc::new(move |e| events.lock().unwrap().push(e)),
            control,
            background: warden::tools::background::ignore_background(),
            patience: None,
        }
    }
}

fn harness(llm: &FakeLlm, extra: Vec<Arc<dyn Tool>>, max_iterations: u32) -> Harness {
    harness_with(llm, extra, max_iterations, false)
}

/// [`harness`], with `delegate` over the tools above when `sub_agents`.
fn harness_with(
    llm: &FakeLlm,
    extra: Vec<Arc<dyn Tool>>,
    max_iterations: u32,
    sub_agents: bool,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    std::fs::write(dir.path().join("outside.txt"), "precious\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside.txt"), ws.join("planted")).unwrap();
    let db = warden::schema::open_in_memory().unwrap();
    let paths = Arc::new(PathPolicy::new(&ws, &[], &[], std::path::Path::new("/root")).unwrap());
    let mut tools = ToolSet::new(db.clone(), ws.join(".warden/outputs"));
    let prompt_files =
        Arc::new(PromptFiles::new(paths.workspace(), &TrustConfig::default()).unwrap());
    for tool in files::tools(paths.clone(), prompt_files, None) {
        tools.add(tool);
    }
    let gate = warden::tools::gate::Gate::new(HostRules::default(), db.clone());
    tools.add(Arc::new(
        WebFetch::new(Arc::new(gate), Names::system()).unwrap(),
    ));
    for tool in extra {
        tools.add(tool);
    }
    let mut prompt = SystemPrompt::new(paths.workspace(), tools.names());
    let provider: Arc<dyn Provider> = Arc::from(llm.provider());
    if sub_agents {
        let delegate = Delegate::new(
            provider.clone(),
            tools.clone(),
            SessionStore::new(db.clone()),
            prompt.clone(),
            max_iterations,
        );
        tools.add(Arc::new(delegate));
        prompt.set_tool_names(tools.names());
    }
    let agent = Agent::new(
        provider,
        Arc::new(tools),
        SessionStore::new(db.clone()),
        prompt,
        max_iterations,
    );
    Harness {
        dir,
        db,
        agent,
        events: Arc::new(Mutex::new(Vec::new())),
    }
}

/// The newest tool result a request carries (the conversation holds all earlier ones too).
fn last_result(request: &support::fake_llm::Request) -> support::fake_llm::SeenToolResult {
    request.tool_results().pop().expect("a tool result")
}

#[tokio::test]
async fn a_denied_read_reaches_the_model_with_its_reason() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("read", json!({"path": "/etc/shadow"})),
        Turn::tool_use("read", json!({"path": "notes.txt"})),
        Turn::text("The note says hello."),
    ])
    .await;
    let h = harness(&llm, vec![], 25);
    let outcome = h
        .agent
        .run(h.request("what is in my notes?", RunControl::new()))
        .await
        .unwrap();
    assert_eq!(outcome.end, RunEnd::Answered);
    assert_eq!(outcome.text, "The note says hello.");
    let requests = llm.requests();
    let denial = &requests[1].tool_results()[0];
    assert!(denial.is_error);
    assert!(
        denial
            .content
            .contains("/etc/shadow is outside the workspace"),
        "{}",
        denial.content
    );
    let read = last_result(&requests[2]);
    assert!(read.content.contains("hello"), "{}", read.content);
    // The system prompt carries the workspace and the date.
    assert!(requests[0]
        .system()
        .unwrap_or_default()
        .contains(&h.workspace().display().to_string()));
    // Audit rows: one deny, one allow.
    let rows = audit::recent(&h.db, 10).unwrap();
    let decisions: Vec<&str> = rows.iter().map(|r| r.decision.as_str()).collect();
    assert_eq!(decisions, ["deny", "allow"]);
    assert!(rows[0].reason.contains("outside the workspace"));
    // The transcript holds user, assistant/tool pairs, and the answer.
    let history = h.agent.sessions().load("test:1").unwrap();
    assert_eq!(history.len(), 6);
}

#[tokio::test]
async fn writes_through_a_planted_symlink_are_refused() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("write", json!({"path": "planted", "content": "pwned"})),
        Turn::tool_use(
            "edit",
            json!({"path": "planted", "old_string": "precious", "new_string": "x"}),
        ),
        Turn::text("ok"),
    ])
    .await;
    let h = harness(&llm, vec![], 25);
    h.agent
        .run(h.request("write it", RunControl::new()))
        .await
        .unwrap();
    let outside = std::fs::read_to_string(h.dir.path().join("outside.txt")).unwrap();
    assert_eq!(
        outside, "precious\n",
        "the file outside the workspace must be untouched"
    );
    for (i, request) in llm.requests()[1..3].iter().enumerate() {
        let result = last_result(request);
        assert!(result.is_error, "call {i}: {}", result.content);
        assert!(
            result.content.contains("resolves to"),
            "call {i}: {}",
            result.content
        );
    }
}

#[tokio::test]
async fn web_fetch_refuses_loopback_and_metadata_addresses() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use(
            "web_fetch",
            json!({"url": format!("{}/secret", "http://127.0.0.1:1")}),
        ),
        Turn::tool_use(
            "web_fetch",
            json!({"url": "http://169.254.169.254/latest/meta-data/"}),
        ),
        Turn::tool_use("web_fetch", json!({"url": "http://localhost:9/"})),
        Turn::tool_use("web_fetch", json!({"url": "http://[::ffff:127.0.0.1]/"})),
        Turn::text("done"),
    ])
    .await;
    let h = harness(&llm, vec![], 25);
    h.agent
        .run(h.request("fetch", RunControl::new()))
        .await
        .unwrap();
    let requests = llm.requests();
    for (i, expected) in ["loopback", "link-local", "loopback", "loopback"]
        .iter()
        .enumerate()
    {
        let result = last_result(&requests[i + 1]);
        assert!(result.is_error);
        assert!(
            result.content.contains(expected),
            "call {i}: {}",
            result.content
        );
        assert!(
            result.content.contains("refus"),
            "call {i}: {}",
            result.content
        );
    }
    // Nothing was fetched from the fake LLM's own loopback server by web_fetch either.
    assert!(requests.iter().all(|r| r.path.contains("messages")));
}

#[tokio::test]
async fn the_iteration_cap_stops_a_runaway_loop() {
    let llm = FakeLlm::anthropic_with(|_| Turn::tool_use("list_dir", json!({}))).await;
    let h = harness(&llm, vec![], 25);
    let outcome = h
        .agent
        .run(h.request("loop forever", RunControl::new()))
        .await
        .unwrap();
    assert_eq!(outcome.end, RunEnd::IterationLimit);
    assert_eq!(outcome.iterations, 25);
    assert_eq!(llm.request_count(), 25);
    assert!(outcome.text.contains("25 model calls"), "{}", outcome.text);
}

/// A tool that waits until released, to steer or abort while it runs.
struct Gate {
    started: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl Tool for Gate {
    fn spec(&self) -> warden::llm::ToolSpec {
        warden::llm::ToolSpec {
            name: "gate".into(),
            description: "waits".into(),
            input_schema: json!({"type": "object"}),
        }
    }
    async fn run(&self, _input: &serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        self.started.notify_one();
        tokio::select! {
            _ = self.release.notified() => ToolOutput::ok("gate passed"),
            _ = ctx.cancel.cancelled() => ToolOutput::error("cancelled"),
        }
    }
}

#[tokio::test]
async fn steering_skips_the_rest_of_the_batch_and_reaches_the_model() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_uses(vec![("gate", json!({})), ("list_dir", json!({}))]),
        Turn::text("switched to the new task"),
    ])
    .await;
    let gate = Arc::new(Gate {
        started: tokio::sync::Notify::new(),
        release: tokio::sync::Notify::new(),
    });
    let h = harness(&llm, vec![gate.clone()], 25);
    let control = RunControl::new();
    let steerer = {
        let control = control.clone();
        let gate = gate.clone();
        tokio::spawn(async move {
            gate.started.notified().await;
            control.steer("actually, list nothing");
            gate.release.notify_one();
        })
    };
    let outcome = h.agent.run(h.request("go", control)).await.unwrap();
    steerer.await.unwrap();
    assert_eq!(outcome.text, "switched to the new task");
    let second = &llm.requests()[1];
    let results = second.tool_results();
    assert_eq!(results[0].content, "gate passed");
    assert!(
        results[1].content.contains("new instruction"),
        "{}",
        results[1].content
    );
    assert!(second.last_user_text().contains("actually, list nothing"));
    assert!(h
        .events
        .lock()
        .unwrap()
        .contains(&AgentEvent::Steered("actually, list nothing".into())));
}

#[tokio::test]
async fn abort_mid_stream_returns_promptly() {
    let llm = FakeLlm::anthropic(vec![Turn::text("a long answer that never ends")
        .chunked(2)
        .stall_after(3)])
    .await;
    let h = harness(&llm, vec![], 25);
    let control = RunControl::new();
    let aborter = {
        let control = control.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            control.abort();
        })
    };
    let started = std::time::Instant::now();
    let outcome = h.agent.run(h.request("talk", control)).await.unwrap();
    aborter.await.unwrap();
    assert_eq!(outcome.end, RunEnd::Aborted);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        llm.wait_for_disconnects(1, Duration::from_secs(2)).await,
        "the stream was not dropped"
    );
    // The transcript stays well-formed for the next run: user, then an assistant note.
    let history = h.agent.sessions().load("test:1").unwrap();
    assert_eq!(history.len(), 2);
    assert!(history[1].text().contains("stopped"));
}

#[tokio::test]
async fn abort_during_a_tool_call_cancels_it() {
    let llm = FakeLlm::anthropic(vec![Turn::tool_use("gate", json!({}))]).await;
    let gate = Arc::new(Gate {
        started: tokio::sync::Notify::new(),
        release: tokio::sync::Notify::new(),
    });
    let h = harness(&llm, vec![gate.clone()], 25);
    let control = RunControl::new();
    let aborter = {
        let control = control.clone();
        let gate = gate.clone();
        tokio::spawn(async move {
            gate.started.notified().await;
            control.abort();
        })
    };
    let outcome = h.agent.run(h.request("go", control)).await.unwrap();
    aborter.await.unwrap();
    assert_eq!(outcome.end, RunEnd::Aborted);
    assert_eq!(llm.request_count(), 1, "no model call after the abort");
}

#[tokio::test]
async fn the_openai_wire_drives_the_same_loop() {
    let llm = FakeLlm::openai(vec![
        Turn::tool_use("read", json!({"path": "../outside.txt"})),
        Turn::text("denied, as expected"),
    ])
    .await;
    let h = harness(&llm, vec![], 25);
    let outcome = h
        .agent
        .run(h.request("read outside", RunControl::new()))
        .await
        .unwrap();
    assert_eq!(outcome.text, "denied, as expected");
    let result = last_result(&llm.requests()[1]);
    assert!(
        result.content.contains("outside the workspace"),
        "{}",
        result.content
    );
}

/// An agent whose tools include the real bash tool over the host jail.
fn bash_harness(llm: &FakeLlm) -> Harness {
    use warden::policy::{Checker, Policy};
    use warden::sandbox::pool::SandboxPool;
    use warden::sandbox::{Backend, JailSpec};
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let db = warden::schema::open_in_memory().unwrap();
    let policy = Arc::new(Policy::embedded_default());
    let paths = PathPolicy::new(&ws, &[], &[], std::path::Path::new("/root")).unwrap();
    let config = warden::config::SandboxConfig::default();
    let pool = Arc::new(SandboxPool::new(
        Backend::Host,
        &config,
        JailSpec::for_paths(&paths, &config),
        false,
    ));
    let mut tools = ToolSet::new(db.clone(), ws.join(".warden/outputs"));
    tools.add(Arc::new(warden::tools::bash::BashTool::new(
        policy.clone(),
        Checker::new(policy, paths.clone()),
        pool,
        Duration::from_secs(60),
        ws.join(".warden/outputs"),
        Arc::new(PromptFiles::new(paths.workspace(), &TrustConfig::default()).unwrap()),
    )));
    let prompt = SystemPrompt::new(paths.workspace(), tools.names());
    let agent = Agent::new(
        Arc::from(llm.provider()),
        Arc::new(tools),
        SessionStore::new(db.clone()),
        prompt,
        25,
    );
    Harness {
        dir,
        db,
        agent,
        events: Arc::new(Mutex::new(Vec::new())),
    }
}

fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(marker) {
                found.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

#[tokio::test]
async fn abort_during_a_command_leaves_no_process() {
    let llm = FakeLlm::anthropic(vec![Turn::tool_use(
        "bash",
        json!({"command": "sleep 31.4159"}),
    )])
    .await;
    let h = bash_harness(&llm);
    let control = RunControl::new();
    let events = h.events.clone();
    let aborter = {
        let control = control.clone();
        tokio::spawn(async move {
            // Abort once the command is running in the jail.
            for _ in 0..200 {
                let started = events
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|e| matches!(e, AgentEvent::ToolStart { .. }));
                if started && !processes_with("31.4159").is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            control.abort();
        })
    };
    let started = std::time::Instant::now();
    let outcome = h.agent.run(h.request("sleep", control)).await.unwrap();
    aborter.await.unwrap();
    assert_eq!(outcome.end, RunEnd::Aborted);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        processes_with("31.4159").is_empty(),
        "left behind: {:?}",
        processes_with("31.4159")
    );
    let rows = audit::recent(&h.db, 5).unwrap();
    assert_eq!(rows.last().unwrap().exit_code, Some(130), "{rows:?}");
}

#[tokio::test]
async fn an_ask_command_without_an_approver_is_not_run() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("bash", json!({"command": "rm -r keep"})),
        Turn::text("ok"),
    ])
    .await;
    let h = bash_harness(&llm);
    std::fs::create_dir_all(h.dir.path().join("ws/keep")).unwrap();
    h.agent
        .run(h.request("clean", RunControl::new()))
        .await
        .unwrap();
    assert!(
        h.dir.path().join("ws/keep").is_dir(),
        "the directory must still exist"
    );
    let result = llm.requests()[1].tool_results().pop().unwrap();
    assert!(result.content.contains("Not run"), "{}", result.content);
    assert!(
        result.content.contains("recursive delete"),
        "{}",
        result.content
    );
    let rows = audit::recent(&h.db, 5).unwrap();
    assert_eq!(rows.last().unwrap().decision, "rejected");
}

#[tokio::test]
async fn a_sub_agent_asked_to_use_bash_when_its_parent_has_none_is_refused() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use(
            "delegate",
            json!({"task": "Run ls.", "tools": ["read", "bash"]}),
        ),
        Turn::text("No bash here."),
    ])
    .await;
    let h = harness_with(&llm, vec![], 25, true);
    let outcome = h
        .agent
        .run(h.request("list my files with bash", RunControl::new()))
        .await
        .unwrap();
    assert_eq!(outcome.text, "No bash here.");
    let requests = llm.requests();
    assert!(!requests[0].tool_names().contains(&"bash".to_string()));
    assert!(requests[0].tool_names().contains(&"delegate".to_string()));
    let refused = last_result(&requests[1]);
    assert!(refused.is_error);
    assert!(
        refused.content.contains(
            "a sub-agent gets only tools its parent has: there is no tool named \"bash\""
        ),
        "{}",
        refused.content
    );
    assert_eq!(requests.len(), 2, "the sub-agent never started");
    let rows = audit::recent(&h.db, 10).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].tool.as_str(), rows[0].decision.as_str()),
        ("delegate", "deny")
    );
}
