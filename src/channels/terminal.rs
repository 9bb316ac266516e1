//! The terminal channel: `warden run 'PROMPT'` (one shot; the answer on stdout, progress on
//! stderr) and `warden chat` (a REPL that streams text, shows each tool call with its decision,
//! asks y/n for `ask` commands, and aborts a run on Ctrl-C).

use crate::agent::{persisted_summary, AgentEvent, EventFn, RunControl, RunEnd, RunRequest};
use crate::app::App;
use crate::audit::AuditDecision;
use crate::llm::ContentBlock;
use crate::tools::approval::{Approval, ApprovalRequest, Approver, NoApprover};
use crate::tools::background::{BackgroundEvent, BackgroundFn};
use crate::tools::outbox::Nowhere;
use async_trait::async_trait;
use std::io::Write;
use std::sync::Arc;
use tokio::sync::{mpsc, Mutex};

/// Progress lines on stderr; text deltas on stdout only when `stream_text`.
fn printer(stream_text: bool) -> EventFn {
    Arc::new(move |event| match event {
        AgentEvent::TextDelta(text) if stream_text => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        AgentEvent::TextDelta(_) => {}
        AgentEvent::ToolStart { name, summary, .. } => eprintln!("\n[{name}] {summary}"),
        AgentEvent::ToolEnd {
            name,
            decision,
            duration,
            ..
        } => {
            let verdict = match decision {
                AuditDecision::Allow => "ran",
                AuditDecision::Approved => "approved and ran",
                AuditDecision::Deny => "DENIED",
                AuditDecision::Rejected => "not approved",
                AuditDecision::Error => "failed",
            };
            eprintln!("[{name}] {verdict} ({:.2}s)", duration.as_secs_f64());
        }
        AgentEvent::Steered(text) => eprintln!("[steer] {text}"),
        AgentEvent::Progress(text) => eprintln!("[..] {text}"),
    })
}

/// A background command's end, printed on stderr when it comes (`warden run` kills what is
/// still running when it exits).
fn background_printer() -> BackgroundFn {
    Arc::new(|event| {
        if let BackgroundEvent::Ended {
            notice: Some(notice),
            ..
        } = event
        {
            eprintln!("\n{notice}");
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

/// `warden run`: one prompt, a fresh session, no one to approve `ask` commands.
pub async fn run_once(app: &App, prompt: &str) -> anyhow::Result<i32> {
    let session = format!("run:{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%.6f"));
    let control = RunControl::new();
    let ctrl_c = abort_on_ctrl_c(&control);
    let outcome = app
        .agent
        .run(RunRequest {
            session,
            input: vec![ContentBlock::text(prompt)],
            approver: Arc::new(NoApprover),
            outbox: Arc::new(Nowhere::TERMINAL),
            events: printer(false),
            control,
            background: background_printer(),
            patience: None,
        })
        .await;
    ctrl_c.abort();
    let running = app.background.running();
    if running > 0 {
        eprintln!("[background] {running} command(s) still running are killed: warden run ends");
    }
    app.shutdown().await;
    let outcome = outcome?;
    println!("{}", outcome.text);
    // The answer stays alone on stdout (scripts read it); the summary is for the person.
    if let Some(summary) = persisted_summary(&outcome.persisted) {
        eprintln!("{summary}");
    }
    Ok(match outcome.end {
        RunEnd::Answered => 0,
        RunEnd::IterationLimit => 3,
        RunEnd::Aborted => 130,
    })
}

/// Lines from stdin, read by one task so the REPL and the approver never race for input.
type Lines = Arc<Mutex<mpsc::Receiver<String>>>;

fn stdin_lines() -> Lines {
    let (tx, rx) = mpsc::channel(16);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        loop {
            line.clear();
            match stdin.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx
                        .blocking_send(line.trim_end_matches(['\n', '\r']).to_string())
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    Arc::new(Mutex::new(rx))
}

/// Asks on the terminal; anything but y/yes is a no.
struct TerminalApprover {
    lines: Lines,
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        // The tool says who asks (`bash`, or `bash (by the sub-agent delegate-…)`).
        eprintln!("\n[approval needed: {}] {}", request.tool, request.reason);
        for line in request.command.lines() {
            eprintln!("    {line}");
        }
        if let Some(detail) = &request.detail {
            eprintln!("{detail}");
        }
        eprint!("Run it? [y/N] ");
        let answer = self.lines.lock().await.recv().await.unwrap_or_default();
        if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
            Approval::Approved
        } else {
            Approval::Denied("denied at the terminal".into())
        }
    }
}

/// `warden chat`: the session `terminal:default`; `/new` starts over, `/exit` or EOF quits.
pub async fn chat(app: &App) -> anyhow::Result<i32> {
    let session = "terminal:default".to_string();
    let lines = stdin_lines();
    let approver: Arc<dyn Approver> = Arc::new(TerminalApprover {
        lines: lines.clone(),
    });
    eprintln!(
        "warden chat — workspace {} — /new for a fresh session, /exit to quit, Ctrl-C stops a run",
        app.paths.workspace().display()
    );
    loop {
        eprint!("\n> ");
        let Some(line) = lines.lock().await.recv().await else {
            app.shutdown().await;
            return Ok(0);
        };
        let line = line.trim().to_string();
        match line.as_str() {
            "" => continue,
            "/exit" | "/quit" => {
                app.shutdown().await;
                return Ok(0);
            }
            "/new" => {
                app.agent.sessions().reset(&session)?;
                eprintln!("(new session)");
                continue;
            }
            _ => {}
        }
        let control = RunControl::new();
        let ctrl_c = abort_on_ctrl_c(&control);
        let result = app
            .agent
            .run(RunRequest {
                session: session.clone(),
                input: vec![ContentBlock::text(line)],
                approver: approver.clone(),
                outbox: Arc::new(Nowhere::TERMINAL),
                events: printer(true),
                control,
                background: background_printer(),
                patience: None,
            })
            .await;
        ctrl_c.abort();
        match result {
            Ok(outcome) => {
                if outcome.end == RunEnd::Answered {
                    println!();
                } else {
                    println!("\n{}", outcome.text);
                }
                if let Some(summary) = persisted_summary(&outcome.persisted) {
                    eprintln!("{summary}");
                }
            }
            Err(e) => eprintln!("\nerror: {e}"),
        }
    }
}
