//! Agent overhead per turn, excluding the model: an in-process provider answers instantly, so
//! what is measured is warden's own work per turn — the system prompt, the session load and
//! appends in SQLite, tool dispatch and the audit row. Target ≤ 5 ms per turn.
//! Run: `cargo bench --bench agent`.

use async_trait::async_trait;
use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use warden::agent::{Agent, RunControl, RunRequest, SystemPrompt};
use warden::config::TrustConfig;
use warden::llm::{
    ChatRequest, ChatResponse, ContentBlock, EventSink, LlmError, Provider, StopReason, Usage,
};
use warden::memory::sessions::SessionStore;
use warden::persistence::PromptFiles;
use warden::policy::PathPolicy;
use warden::tools::approval::NoApprover;
use warden::tools::{files, ToolSet};

/// Odd calls ask for `list_dir`, even calls answer: one run = two turns (tool turn + answer).
struct Instant(AtomicUsize);

#[async_trait]
impl Provider for Instant {
    fn name(&self) -> &str {
        "instant"
    }
    fn supports_images(&self) -> bool {
        false
    }
    async fn chat(
        &self,
        _req: &ChatRequest,
        _events: &dyn EventSink,
        _cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        let content = if n % 2 == 0 {
            vec![ContentBlock::ToolUse {
                id: format!("t{n}"),
                name: "list_dir".into(),
                input: serde_json::json!({}),
            }]
        } else {
            vec![ContentBlock::text("done")]
        };
        Ok(ChatResponse {
            stop_reason: if n % 2 == 0 {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            },
            content,
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
            },
            model: "instant".into(),
            provider: "instant".into(),
        })
    }
}

fn bench_agent(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    for i in 0..20 {
        std::fs::write(ws.join(format!("file{i}.txt")), "x").unwrap();
    }
    let db = warden::schema::open(&dir.path().join("warden.db")).unwrap();
    let paths = Arc::new(PathPolicy::new(&ws, &[], &[], std::path::Path::new("/root")).unwrap());
    let mut tools = ToolSet::new(db.clone(), ws.join(".warden/outputs"));
    let prompt_files =
        Arc::new(PromptFiles::new(paths.workspace(), &TrustConfig::default()).unwrap());
    for tool in files::tools(paths.clone(), prompt_files, None) {
        tools.add(tool);
    }
    let prompt = SystemPrompt::new(paths.workspace(), tools.names());
    let agent = Agent::new(
        Arc::new(Instant(AtomicUsize::new(0))),
        Arc::new(tools),
        SessionStore::new(db),
        prompt,
        25,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut session = 0u64;
    // One iteration = one run of two turns (a tool call, then the answer) in a fresh session.
    c.bench_function("agent_run_two_turns", |b| {
        b.iter(|| {
            session += 1;
            runtime.block_on(async {
                agent
                    .run(RunRequest {
                        session: format!("bench:{session}"),
                        input: vec![ContentBlock::text("list my files")],
                        approver: Arc::new(NoApprover),
                        outbox: Arc::new(warden::tools::outbox::Nowhere::TERMINAL),
                        events: Arc::new(|_| {}),
                        control: RunControl::new(),
                        background: warden::tools::background::ignore_background(),
                        patience: None,
                    })
                    .await
                    .unwrap()
            })
        })
    });
}

criterion_group!(benches, bench_agent);
criterion_main!(benches);
