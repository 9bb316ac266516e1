//! `warden daemon`: cron jobs without Telegram. The scheduler's runner starts due jobs (the
//! same store, claims and backoff as in `warden bot`), the agent answers each in-process with
//! nobody to approve an `ask`, and the answer is printed on stdout and logged; every tool
//! call is in the audit log (`warden audit --session …`). Stops on SIGTERM or Ctrl-C.

use crate::agent::{RunControl, RunRequest};
use crate::app::App;
use crate::llm::ContentBlock;
use crate::scheduler::{Deliver, DeliverError, Delivered, Delivery, Origin, Runner};
use crate::tools::approval::NoApprover;
use crate::tools::outbox::Nowhere;
use async_trait::async_trait;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Runs a delivery with the agent of this process and prints its answer.
struct PrintDeliver {
    app: Arc<App>,
}

#[async_trait]
impl Deliver for PrintDeliver {
    async fn deliver(&self, delivery: Delivery) -> Result<Delivered, DeliverError> {
        let outcome = self
            .app
            .agent
            .run(RunRequest {
                session: delivery.session.clone(),
                input: vec![ContentBlock::text(&delivery.prompt)],
                approver: Arc::new(NoApprover),
                outbox: Arc::new(Nowhere::TERMINAL),
                events: Arc::new(|_| {}),
                control: RunControl::new(),
                background: Arc::new(|_| {}),
                // Nobody waits at a terminal for a scheduled job: it waits out a busy model.
                patience: Some(std::time::Duration::from_secs(
                    self.app.config.llm.scheduled_retry_budget_secs,
                )),
            })
            .await
            .map_err(|e| DeliverError::Failed(e.to_string()))?;
        let sent = delivery.send_if.as_ref().is_none_or(|f| f(&outcome.text));
        let from = match &delivery.origin {
            Origin::Job { id, name } => format!("job #{id} {name:?}"),
            Origin::Heartbeat => "heartbeat".to_string(),
        };
        if sent {
            println!(
                "[{} {from} → {}]\n{}\n",
                chrono::Local::now().format("%Y-%m-%d %H:%M:%S"),
                delivery.chat_session,
                outcome.text
            );
        }
        tracing::info!(%from, session = %delivery.session, "scheduled run answered");
        Ok(Delivered {
            answer: outcome.text,
            sent,
        })
    }
}

pub fn run(config_path: Option<&Path>) -> anyhow::Result<i32> {
    let config = super::load_config(config_path)?;
    let app = Arc::new(App::build(config)?);
    if !app.scheduler.enabled {
        anyhow::bail!("the scheduler is off (scheduler.enabled = false): nothing to run");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let shutdown = CancellationToken::new();
        let deliver = Arc::new(PrintDeliver { app: app.clone() });
        let runner = Runner::new(&app.jobs, deliver, app.scheduler.retry, app.scheduler.tz);
        let task = tokio::spawn(runner.run(shutdown.clone()));
        eprintln!(
            "warden daemon: running scheduled jobs ({} now; Ctrl-C or SIGTERM stops)",
            app.jobs.list().map(|l| l.len()).unwrap_or(0)
        );
        wait_for_signal().await;
        shutdown.cancel();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(30), task).await;
        app.shutdown().await;
        Ok(0)
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
