//! The agent loop: build the system prompt, call the provider, run the tool calls it asks for
//! in order, feed the results back, stop at the end of the turn. At most `max_iterations`
//! model calls per run; steer (a message injected between tool calls, skipping the rest of that
//! batch) and abort (cancels the stream and kills the running sandbox process). Every message
//! is appended to the session as soon as it exists, so a crash keeps what was said. Before
//! each model call an optional [`Compactor`] may flush memory and compact the history. A
//! sub-agent ([`delegate`]) runs the same loop in a transcript of its own.

pub mod control;
pub mod delegate;
pub mod measure;
pub mod prompt;

pub use crate::prompt_section::PromptSection;
pub use control::RunControl;
pub use delegate::Delegate;
pub use prompt::SystemPrompt;

use crate::audit::AuditDecision;
use crate::egress::Provenance;
use crate::llm::{ChatRequest, ContentBlock, LlmError, Message, Provider, Role, StreamEvent};
use crate::memory::call_site::{CallResult, CallSite, RunTools};
use crate::memory::compaction::Compactor;
use crate::memory::sessions::SessionStore;
use crate::persistence::{JobState, PromptFiles, Snapshot};
use crate::taint::Taint;
use crate::tools::approval::Approver;
use crate::tools::background::BackgroundFn;
use crate::tools::outbox::Outbox;
use crate::tools::{ToolContext, ToolSet};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a channel sees while a run goes on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AgentEvent {
    /// Model text as it streams.
    TextDelta(String),
    /// A tool call is about to run. `summary` is a short human description of the input.
    ToolStart {
        id: String,
        name: String,
        summary: String,
    },
    /// A tool call finished.
    ToolEnd {
        id: String,
        name: String,
        decision: AuditDecision,
        is_error: bool,
        duration: Duration,
        /// For a refusal or a failure: what the model was told (the reason and how to get the
        /// command allowed), so the person sees it too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// A steering message was delivered to the model.
    Steered(String),
    /// Progress reported by a tool ("Running `ls -la`…").
    Progress(String),
    /// A number for `/metrics` (model latency and tokens, sandbox start time); not shown.
    Measured(measure::Measure),
}

pub type EventFn = Arc<dyn Fn(AgentEvent) + Send + Sync>;

/// What a person waiting is told when the model must be waited for.
fn model_waits(status: Option<u16>, budget_secs: u64) -> String {
    let why = match status {
        Some(429) => "The model is rate-limited".to_string(),
        Some(status) => format!("The model is busy (HTTP {status})"),
        None => "The model cannot be reached".to_string(),
    };
    let how_long = match budget_secs {
        0..=90 => format!("{budget_secs} s"),
        secs => format!("{} min", secs.div_ceil(60)),
    };
    format!("{why}; warden keeps trying for up to {how_long}…")
}

/// How a transcript ends when warden stopped mid-run, so the model knows the last prompt was
/// not finished.
pub const INTERRUPTED_NOTE: &str = "[this run was interrupted by a restart of warden]";

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunEnd {
    /// The model finished its turn.
    Answered,
    /// The iteration cap was reached.
    IterationLimit,
    /// `/stop` or Ctrl-C.
    Aborted,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The final text for the user.
    pub text: String,
    pub end: RunEnd,
    /// Model calls made.
    pub iterations: u32,
    /// Steering messages that arrived after the last tool call (the caller may run them next).
    pub unconsumed_steer: Vec<String>,
    /// Token usage of the last model call (for compaction decisions).
    pub last_input_tokens: u64,
    /// What the run changed that later runs will see (prompt-feeding files, cron jobs), one
    /// line each, for the summary the user gets at the end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persisted: Vec<String>,
}

impl RunOutcome {
    /// The answer followed by the summary of what the run made persist, if anything.
    pub fn text_with_summary(&self) -> String {
        match persisted_summary(&self.persisted) {
            Some(summary) => format!("{}\n\n{summary}", self.text),
            None => self.text.clone(),
        }
    }
}

/// The one short summary of what a run changed for later runs, or `None` when it changed
/// nothing.
pub fn persisted_summary(lines: &[String]) -> Option<String> {
    (!lines.is_empty()).then(|| {
        format!(
            "📝 This run changed what later runs see:\n{}",
            lines
                .iter()
                .map(|l| format!("• {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

/// The cron jobs as the summary compares them.
pub type JobsFn = Arc<dyn Fn() -> Vec<JobState> + Send + Sync>;

/// What the agent watches for the end-of-run summary, and how it tells untrusted input.
#[derive(Clone)]
pub struct Persistence {
    pub files: Arc<PromptFiles>,
    pub jobs: JobsFn,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    Llm(#[from] LlmError),
    #[error("session store: {0}")]
    Store(#[from] crate::db::DbError),
}

pub struct Agent {
    provider: Arc<dyn Provider>,
    tools: Arc<ToolSet>,
    sessions: SessionStore,
    prompt: SystemPrompt,
    max_iterations: u32,
    compactor: Option<Arc<Compactor>>,
    /// The zone the prompt's date and time are shown in (the scheduler's, so "at 9" means the
    /// same to the model and to the cron tool); `None`: the system's local zone.
    timezone: Option<chrono_tz::Tz>,
    persistence: Option<Persistence>,
}

/// One run's inputs.
pub struct RunRequest {
    pub session: String,
    /// The user's message (text, images).
    pub input: Vec<ContentBlock>,
    pub approver: Arc<dyn Approver>,
    /// Where the run's `send_file` calls go (the chat it answers, or nowhere).
    pub outbox: Arc<dyn Outbox>,
    pub events: EventFn,
    pub control: RunControl,
    /// Where background commands started in this run report, also after it ended: the
    /// chat's queue (the gateway), the terminal.
    pub background: BackgroundFn,
    /// How long each model call of the run retries a busy or unreachable model (`None`: the
    /// provider's `retry_budget_secs`).
    pub patience: Option<Duration>,
}

impl Agent {
    pub fn new(
        provider: Arc<dyn Provider>,
        tools: Arc<ToolSet>,
        sessions: SessionStore,
        prompt: SystemPrompt,
        max_iterations: u32,
    ) -> Agent {
        Agent {
            provider,
            tools,
            sessions,
            prompt,
            max_iterations: max_iterations.max(1),
            compactor: None,
            timezone: None,
            persistence: None,
        }
    }

    /// Summarize, at the end of each run, what it changed of `persistence`'s files and jobs;
    /// the files' untrusted folders taint a run whose history read them.
    pub fn with_persistence(mut self, persistence: Persistence) -> Agent {
        self.persistence = Some(persistence);
        self
    }

    pub fn with_timezone(mut self, timezone: chrono_tz::Tz) -> Agent {
        self.timezone = Some(timezone);
        self
    }

    fn now(&self) -> chrono::DateTime<chrono::FixedOffset> {
        match self.timezone {
            Some(tz) => chrono::Utc::now().with_timezone(&tz).fixed_offset(),
            None => chrono::Local::now().fixed_offset(),
        }
    }

    /// Keep sessions inside the context window (memory flush, compaction) before model calls.
    pub fn with_compactor(mut self, compactor: Arc<Compactor>) -> Agent {
        self.compactor = Some(compactor);
        self
    }

    pub fn sessions(&self) -> &SessionStore {
        &self.sessions
    }

    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// Run one user message to the end of the model's turn.
    pub async fn run(&self, request: RunRequest) -> Result<RunOutcome, AgentError> {
        let watch = self.persistence.as_ref();
        let before = watch.map(|p| Snapshot::take(&p.files, (p.jobs)()));
        let session = request.session.clone();
        let result = self.run_turn(request).await;
        let (Some(watch), Some(before)) = (watch, before) else {
            return result;
        };
        let changes = before.changes(&Snapshot::take(&watch.files, (watch.jobs)()));
        if !changes.is_empty() {
            tracing::info!(%session, "the run changed: {}", changes.join("; "));
        }
        result.map(|outcome| RunOutcome {
            persisted: changes,
            ..outcome
        })
    }

    async fn run_turn(&self, request: RunRequest) -> Result<RunOutcome, AgentError> {
        let RunRequest {
            session,
            input,
            approver,
            outbox,
            events,
            control,
            background,
            patience,
        } = request;
        let untrusted = self.untrusted_folders();
        let start = self.sessions.run_start(&session, &untrusted)?;
        let mut history = start.history;
        let user = Message {
            role: Role::User,
            content: input,
        };
        // What the message itself carries (a photo, a forwarded text, a notice's output).
        let taint = start
            .taint
            .with(&Taint::from_history(std::slice::from_ref(&user), &untrusted).sources());
        self.sessions.append(&session, &user)?;
        self.sessions.record_taint(&session, &taint.sources())?;
        history.push(user);

        let progress_events = events.clone();
        let ctx = ToolContext {
            session: session.clone(),
            sub_agent: None,
            cancel: control.cancel_token(),
            approver,
            outbox,
            progress: Arc::new(move |text| progress_events(AgentEvent::Progress(text))),
            // What the model sees (the history and this message) decides both: URLs the user
            // wrote may be fetched without asking; untrusted content already there — or
            // recorded for the session before a compaction — taints.
            taint,
            provenance: Provenance::from_history(&history),
            background,
        };
        self.converse(&session, history, &ctx, &events, &control, patience)
            .await
    }

    /// Run `task` as a sub-agent ([`delegate`]): in the fresh transcript `key` (its session),
    /// with the tool context its parent gave it.
    pub async fn run_sub_agent(
        &self,
        key: &str,
        task: &str,
        ctx: &ToolContext,
        events: &EventFn,
        control: &RunControl,
    ) -> Result<RunOutcome, AgentError> {
        let task = Message::user(task);
        self.sessions.append(key, &task)?;
        self.converse(key, vec![task], ctx, events, control, None)
            .await
    }

    /// Model calls and tool calls until the model answers, the iteration cap, or an abort;
    /// every message goes to the transcript `session` as soon as it exists.
    async fn converse(
        &self,
        session: &str,
        mut history: Vec<Message>,
        ctx: &ToolContext,
        events: &EventFn,
        control: &RunControl,
        patience: Option<Duration>,
    ) -> Result<RunOutcome, AgentError> {
        let stream_events = events.clone();
        let sink = move |event: StreamEvent| match event {
            StreamEvent::TextDelta { text } => stream_events(AgentEvent::TextDelta(text)),
            StreamEvent::Retrying {
                status,
                budget_secs,
                ..
            } => stream_events(AgentEvent::Progress(model_waits(status, budget_secs))),
            _ => {}
        };
        let tool_specs = self.tools.specs();
        let mut iterations = 0;
        let mut last_input_tokens = 0;
        while iterations < self.max_iterations {
            if control.is_aborted() {
                return self.aborted(session, control, iterations, last_input_tokens);
            }
            iterations += 1;
            let system = self.prompt.render(self.now());
            if let Some(compactor) = &self.compactor {
                let tools = ToolsInRun {
                    tools: &self.tools,
                    ctx,
                };
                let site = CallSite {
                    session,
                    system: &system,
                    tools: &tools,
                    provider: self.provider.as_ref(),
                    cancel: &ctx.cancel,
                    progress: ctx.progress.as_ref(),
                };
                if let Some(compacted) = compactor.before_call(&site).await {
                    history = compacted;
                }
            }
            let request = ChatRequest {
                system,
                messages: history.clone(),
                tools: tool_specs.clone(),
                max_tokens: None,
                model: None,
                patience,
            };
            let asked = Instant::now();
            let response = match self.provider.chat(&request, &sink, &ctx.cancel).await {
                Ok(r) => r,
                Err(e) if e.is_cancelled() => {
                    return self.aborted(session, control, iterations, last_input_tokens)
                }
                Err(e) => {
                    // Keep the transcript well-formed (user/assistant alternate) and say why.
                    let note = Message::assistant(format!("[the model could not be reached: {e}]"));
                    self.sessions.append(session, &note)?;
                    return Err(e.into());
                }
            };
            events(AgentEvent::Measured(measure::Measure::ModelCall {
                latency: asked.elapsed(),
                input_tokens: response.usage.input_tokens,
                output_tokens: response.usage.output_tokens,
            }));
            last_input_tokens = response.usage.input_tokens;
            let assistant = response.to_message();
            self.sessions
                .append_answer(session, &assistant, response.usage)?;
            history.push(assistant);
            let calls: Vec<(String, String, serde_json::Value)> = response
                .tool_uses()
                .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
                .collect();
            if calls.is_empty() {
                return Ok(RunOutcome {
                    text: response.text(),
                    end: RunEnd::Answered,
                    iterations,
                    unconsumed_steer: control.take_steer(),
                    last_input_tokens,
                    persisted: Vec::new(),
                });
            }

            let mut results = Vec::with_capacity(calls.len());
            let mut steered: Vec<String> = Vec::new();
            for (id, name, input) in &calls {
                if control.is_aborted() {
                    results.push(ContentBlock::tool_result(
                        id,
                        "not run: the user stopped the run",
                        true,
                    ));
                    continue;
                }
                if steered.is_empty() {
                    steered = control.take_steer();
                }
                if !steered.is_empty() {
                    results.push(ContentBlock::tool_result(
                        id,
                        "not run: the user sent a new instruction (below) before this call",
                        true,
                    ));
                    continue;
                }
                events(AgentEvent::ToolStart {
                    id: id.clone(),
                    name: name.clone(),
                    summary: summarize(name, input),
                });
                let started = Instant::now();
                let tainted_before = ctx.taint.sources().len();
                let output = self.tools.call(name, input, ctx).await;
                // What tainted the run is kept with its session at once: compaction may
                // replace this result by a summary, and the worker may die before the end.
                if ctx.taint.sources().len() != tainted_before {
                    self.sessions
                        .record_taint(&ctx.session, &ctx.taint.sources())?;
                }
                let refused = matches!(
                    output.decision,
                    AuditDecision::Deny | AuditDecision::Rejected | AuditDecision::Error
                );
                events(AgentEvent::ToolEnd {
                    id: id.clone(),
                    name: name.clone(),
                    decision: output.decision,
                    is_error: output.is_error,
                    duration: started.elapsed(),
                    detail: refused.then(|| output.content.clone()),
                });
                for (backend, took) in crate::sandbox::starts::STARTS.take() {
                    events(AgentEvent::Measured(measure::Measure::SandboxStart {
                        backend,
                        took,
                    }));
                }
                results.push(ContentBlock::tool_result(
                    id,
                    output.content,
                    output.is_error,
                ));
            }
            for text in &steered {
                events(AgentEvent::Steered(text.clone()));
                results.push(ContentBlock::text(format!(
                    "[The user interjected]: {text}"
                )));
            }
            let message = Message::tool_results(results);
            self.sessions.append(session, &message)?;
            history.push(message);
            if control.is_aborted() {
                return self.aborted(session, control, iterations, last_input_tokens);
            }
        }
        let text = format!(
            "I stopped after {} model calls without finishing (the per-run limit). Tell me to \
             continue if you want me to go on.",
            self.max_iterations
        );
        self.sessions
            .append(session, &Message::assistant(text.clone()))?;
        Ok(RunOutcome {
            text,
            end: RunEnd::IterationLimit,
            iterations,
            unconsumed_steer: control.take_steer(),
            last_input_tokens,
            persisted: Vec::new(),
        })
    }

    fn untrusted_folders(&self) -> Vec<String> {
        match &self.persistence {
            Some(p) => p.files.untrusted_folders(),
            None => crate::config::TrustConfig::default().untrusted_paths,
        }
    }

    fn aborted(
        &self,
        session: &str,
        control: &RunControl,
        iterations: u32,
        last_input_tokens: u64,
    ) -> Result<RunOutcome, AgentError> {
        let text = "Stopped.".to_string();
        // Keep the transcript alternating so the next run starts from a valid history.
        if control.is_interrupted() {
            // A new warden's recovery may have closed the transcript already (the bot was
            // killed and restarted while this worker was stopping its run).
            let closed = self
                .sessions
                .load(session)?
                .last()
                .is_some_and(|m| m.role == Role::Assistant && m.text() == INTERRUPTED_NOTE);
            if !closed {
                self.sessions
                    .append(session, &Message::assistant(INTERRUPTED_NOTE))?;
            }
        } else {
            self.sessions
                .append(session, &Message::assistant("[the user stopped this run]"))?;
        }
        Ok(RunOutcome {
            text,
            end: RunEnd::Aborted,
            iterations,
            unconsumed_steer: Vec::new(),
            last_input_tokens,
            persisted: Vec::new(),
        })
    }
}

/// A one-line description of a tool call for progress displays.
pub fn summarize(name: &str, input: &serde_json::Value) -> String {
    let field = |k: &str| input.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let text = match name {
        "bash" => field("command").to_string(),
        "web_fetch" => field("url").to_string(),
        "web_search" => field("query").to_string(),
        "delegate" => field("task").to_string(),
        "read" | "write" | "edit" | "list_dir" => field("path").to_string(),
        _ => input.to_string(),
    };
    let short: String = text.chars().take(120).collect();
    if short.len() < text.len() {
        format!("{short}…")
    } else {
        short
    }
}

/// The run's tools in the run's context, as compaction's flush turn calls them.
struct ToolsInRun<'a> {
    tools: &'a ToolSet,
    ctx: &'a ToolContext,
}

#[async_trait::async_trait]
impl RunTools for ToolsInRun<'_> {
    fn specs(&self) -> Vec<crate::llm::ToolSpec> {
        self.tools.specs()
    }

    async fn call(&self, name: &str, input: &serde_json::Value) -> CallResult {
        let output = self.tools.call(name, input, self.ctx).await;
        CallResult {
            content: output.content,
            is_error: output.is_error,
        }
    }
}
