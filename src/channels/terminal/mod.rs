//! The terminal channel: `warden run 'PROMPT'` (one shot; the answer on stdout, progress on
//! stderr, or one JSON event per line with `--json`) and `warden chat` (a REPL on a line
//! editor that renders the model's Markdown, shows each tool call with its decision — and a
//! refusal's reason, as the model got it — asks y/N for `ask` commands, answers slash commands
//! itself, and aborts a run on Ctrl-C).
//!
//! `warden run` exits 0 when answered, 1 when the model could not answer (one line says which
//! setting to change), 3 at the iteration limit, 130 when interrupted.

mod approve;
pub mod input;
pub mod render;
mod slash;

use crate::agent::{persisted_summary, AgentError, AgentEvent, EventFn, RunControl, RunEnd};
use crate::agent::{RunOutcome, RunRequest};
use crate::app::App;
use crate::audit::AuditDecision;
use crate::llm::ContentBlock;
use crate::scheduler::SystemClock;
use crate::tools::approval::{Approver, NoApprover};
use crate::tools::approval_rules::ApprovalRules;
use crate::tools::background::{BackgroundEvent, BackgroundFn};
use crate::tools::outbox::Nowhere;
use input::Read;
use render::{Spinner, TextOut};
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// `warden run`'s exit code when the model could not answer.
pub const EXIT_NO_ANSWER: i32 = 1;
/// `warden run`'s exit code at the iteration limit.
pub const EXIT_ITERATION_LIMIT: i32 = 3;
/// Exit code of a run stopped with Ctrl-C.
pub const EXIT_INTERRUPTED: i32 = 130;

/// The session `warden chat` continues unless told otherwise.
pub const DEFAULT_SESSION: &str = "terminal:default";

/// What a tool call's end says to a person: `ran`, `DENIED`…
fn verdict(decision: AuditDecision) -> &'static str {
    match decision {
        AuditDecision::Allow => "ran",
        AuditDecision::Approved => "approved and ran",
        AuditDecision::Deny => "DENIED",
        AuditDecision::Rejected => "not approved",
        AuditDecision::Error => "failed",
    }
}

/// Longest refusal shown at the terminal, in lines (the model gets all of it).
const DETAIL_LINES: usize = 12;

/// A refusal's text for a person: control characters shown escaped (a model-chosen path must
/// not move the cursor or retitle the terminal), indented, shortened.
pub fn shown_detail(detail: &str) -> String {
    let mut lines: Vec<String> = detail
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(DETAIL_LINES)
        .map(|l| format!("    {}", escape_controls(l)))
        .collect();
    if detail.lines().filter(|l| !l.trim().is_empty()).count() > DETAIL_LINES {
        lines.push("    …".into());
    }
    lines.join("\n")
}

/// `text` with control characters (escape sequences included) written as `\u{…}`.
pub fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Progress lines on stderr (with refusals' reasons); text to `text` when given.
fn printer(text: Option<Arc<Mutex<TextOut>>>, spinner: Arc<Spinner>) -> EventFn {
    let finish_text = {
        let text = text.clone();
        move || {
            if let Some(text) = &text {
                text.lock().unwrap_or_else(|p| p.into_inner()).finish();
            }
        }
    };
    Arc::new(move |event| {
        if matches!(event, AgentEvent::Measured(_)) {
            return;
        }
        spinner.stop();
        match event {
            AgentEvent::TextDelta(delta) => {
                if let Some(text) = &text {
                    text.lock().unwrap_or_else(|p| p.into_inner()).push(&delta);
                }
            }
            AgentEvent::ToolStart { name, summary, .. } => {
                finish_text();
                eprintln!("\n[{name}] {}", escape_controls(&summary));
            }
            AgentEvent::ToolEnd {
                name,
                decision,
                duration,
                detail,
                ..
            } => {
                eprintln!(
                    "[{name}] {} ({:.2}s)",
                    verdict(decision),
                    duration.as_secs_f64()
                );
                if let Some(detail) = detail.filter(|d| !d.trim().is_empty()) {
                    eprintln!("{}", shown_detail(&detail));
                }
                spinner.start("waiting for the model…");
            }
            AgentEvent::Steered(text) => eprintln!("[steer] {text}"),
            AgentEvent::Progress(text) => eprintln!("[..] {}", escape_controls(&text)),
            AgentEvent::Measured(_) => {}
        }
    })
}

/// `warden run --json`: one object per line on stdout.
fn json_printer() -> EventFn {
    Arc::new(|event| {
        let line = match event {
            AgentEvent::TextDelta(text) => json!({"event": "text", "text": text}),
            AgentEvent::ToolStart { id, name, summary } => {
                json!({"event": "tool_start", "id": id, "tool": name, "summary": summary})
            }
            AgentEvent::ToolEnd {
                id,
                name,
                decision,
                is_error,
                duration,
                detail,
            } => json!({
                "event": "tool_end", "id": id, "tool": name, "decision": decision.as_str(),
                "is_error": is_error, "duration_ms": duration.as_millis() as u64,
                "detail": detail,
            }),
            AgentEvent::Steered(text) => json!({"event": "steered", "text": text}),
            AgentEvent::Progress(text) => json!({"event": "progress", "text": text}),
            // For /metrics, not for the reader.
            AgentEvent::Measured(_) => return,
        };
        println!("{line}");
    })
}

/// A background command's end, printed on stderr when it comes (`warden run` kills what is
/// still running when it exits).
fn background_printer() -> BackgroundFn {
    Arc::new(|event| {
        if let BackgroundEvent::Ended {
            notice: Some(notice),
            persisted,
            ..
        } = event
        {
            eprintln!("\n{notice}");
            if let Some(summary) = crate::agent::persisted_summary(&persisted) {
                eprintln!("{summary}");
            }
        }
    })
}

/// Abort the run on Ctrl-C; abort the returned task to stop watching.
fn abort_on_ctrl_c(control: &RunControl) -> tokio::task::JoinHandle<()> {
    let control = control.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            control.abort();
        }
    })
}

/// The one line a failed run leaves: what failed and the setting that changes it.
pub fn error_line(app: &App, error: &AgentError) -> String {
    match error {
        AgentError::Llm(e) => format!(
            "the model could not answer: {}",
            crate::llm::advice(e, &crate::llm::chosen(&app.config.llm))
        ),
        other => other.to_string(),
    }
}

fn exit_code(end: RunEnd) -> i32 {
    match end {
        RunEnd::Answered => 0,
        RunEnd::IterationLimit => EXIT_ITERATION_LIMIT,
        RunEnd::Aborted => EXIT_INTERRUPTED,
    }
}

/// `warden run`: one prompt, a fresh session, no one to approve `ask` commands.
pub async fn run_once(app: &App, prompt: &str, json: bool) -> anyhow::Result<i32> {
    let session = format!("run:{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%.6f"));
    let control = RunControl::new();
    let ctrl_c = abort_on_ctrl_c(&control);
    let spinner = Arc::new(Spinner::new());
    let events = if json {
        json_printer()
    } else {
        spinner.start("thinking…");
        printer(None, spinner.clone())
    };
    let outcome = app
        .agent
        .run(RunRequest {
            session,
            input: vec![ContentBlock::text(prompt)],
            approver: Arc::new(NoApprover),
            outbox: Arc::new(Nowhere::TERMINAL),
            events,
            control,
            background: background_printer(),
            patience: None,
        })
        .await;
    spinner.stop();
    ctrl_c.abort();
    let running = app.background.running();
    if running > 0 {
        eprintln!("[background] {running} command(s) still running are killed: warden run ends");
    }
    app.shutdown().await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            let line = error_line(app, &e);
            if json {
                println!("{}", json!({"event": "error", "message": line}));
            }
            eprintln!("warden: {line}");
            return Ok(EXIT_NO_ANSWER);
        }
    };
    if json {
        println!("{}", answer_json(&outcome));
        return Ok(exit_code(outcome.end));
    }
    println!("{}", outcome.text);
    // The answer stays alone on stdout (scripts read it); the summary is for the person.
    if let Some(summary) = persisted_summary(&outcome.persisted) {
        eprintln!("{summary}");
    }
    Ok(exit_code(outcome.end))
}

fn answer_json(outcome: &RunOutcome) -> serde_json::Value {
    let end = match outcome.end {
        RunEnd::Answered => "answered",
        RunEnd::IterationLimit => "iteration_limit",
        RunEnd::Aborted => "aborted",
    };
    json!({
        "event": "answer", "text": outcome.text, "end": end,
        "persisted": outcome.persisted,
    })
}

/// How `warden chat` starts.
pub struct ChatOptions {
    /// The line editor's history file (in the data directory).
    pub history: PathBuf,
    /// Start with an empty conversation instead of continuing the last one.
    pub fresh: bool,
}

/// `warden chat`: the REPL, until `/exit`, Ctrl-D or Ctrl-C twice at an empty prompt.
pub async fn chat(app: App, options: ChatOptions) -> anyhow::Result<i32> {
    let input = input::open(options.history, slash::NAMES);
    let mut state = slash::State {
        app,
        session: DEFAULT_SESSION.to_string(),
    };
    eprintln!("{}", state.banner(options.fresh)?);
    let rules = ApprovalRules::new(state.app.db.clone())
        .with_clock(Arc::new(SystemClock), state.app.scheduler.tz);
    let approver: Arc<dyn Approver> =
        Arc::new(approve::TerminalApprover::new(input.clone()).with_rules(rules));
    let mut interrupted = false;
    loop {
        let line = match input.read("\n> ").await {
            Read::Line(line) => line,
            Read::Interrupted if interrupted => break,
            Read::Interrupted => {
                interrupted = true;
                eprintln!("(line cleared; Ctrl-C again or Ctrl-D quits)");
                continue;
            }
            Read::Eof => break,
        };
        interrupted = false;
        let line = input::joined(line.trim());
        if line.is_empty() {
            continue;
        }
        input.remember(&line);
        if line.starts_with('/') {
            match slash::handle(&mut state, &line).await? {
                slash::Next::Continue => continue,
                slash::Next::Quit => break,
            }
        }
        run_turn(&state, &line, approver.clone()).await;
    }
    state.app.shutdown().await;
    Ok(0)
}

/// One prompt of the chat, printed as it streams.
async fn run_turn(state: &slash::State, line: &str, approver: Arc<dyn Approver>) {
    let app = &state.app;
    let control = RunControl::new();
    let ctrl_c = abort_on_ctrl_c(&control);
    let text = Arc::new(Mutex::new(TextOut::for_stdout()));
    let spinner = Arc::new(Spinner::new());
    spinner.start("thinking…");
    let result = app
        .agent
        .run(RunRequest {
            session: state.session.clone(),
            input: vec![ContentBlock::text(line)],
            approver,
            outbox: Arc::new(Nowhere::TERMINAL),
            events: printer(Some(text.clone()), spinner.clone()),
            control,
            background: background_printer(),
            patience: None,
        })
        .await;
    spinner.stop();
    ctrl_c.abort();
    text.lock().unwrap_or_else(|p| p.into_inner()).finish();
    match result {
        Ok(outcome) => {
            match outcome.end {
                RunEnd::Answered => println!(),
                RunEnd::Aborted => println!("\n(stopped)"),
                RunEnd::IterationLimit => println!("\n{}", outcome.text),
            }
            if let Some(summary) = persisted_summary(&outcome.persisted) {
                eprintln!("{summary}");
            }
        }
        Err(e) => eprintln!("\nwarden: {}", error_line(app, &e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_shown_escaped_and_short() {
        let detail = format!(
            "Denied: \u{1b}]0;owned\u{7} is outside\n{}",
            "x\n".repeat(30)
        );
        let shown = shown_detail(&detail);
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(shown.contains("\\u{1b}]0;owned"), "{shown}");
        assert_eq!(shown.lines().count(), DETAIL_LINES + 1);
        assert!(shown.ends_with('…'));
    }
}
