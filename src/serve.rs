//! `warden serve`: the gateway with the HTTP control API and the scheduler (jobs and the
//! heartbeat), no Telegram needed. It is built like `warden bot` (see [`crate::bot`]): this
//! process holds the durable queues, the approvals and the API's token; agents run in a
//! `warden-full agent-worker` it starts, which never sees the token.

use crate::bot::{cancel_on_signal, BotApp};
use crate::channels::http::channel::SESSION_PREFIX;
use crate::channels::http::config::plan;
use crate::channels::http::listener::Bound;
use crate::channels::http::threads::{Threads, SCHEDULED};
use crate::channels::http::{router, HttpParts};
use crate::gateway::{Gateway, GatewaySettings};
use crate::scheduler::daemon::{Daemon, Owner};
use anyhow::Context;
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `warden serve [--listen ADDR]`, start to finish: refuse a missing token or an exposed plain
/// listener, bind, check the setup through a worker, serve until SIGTERM or SIGINT.
pub fn run(config_path: Option<&Path>, listen: Option<&str>) -> anyhow::Result<i32> {
    let config = crate::cli::load_config(config_path)?;
    let plan = plan(&config.http, listen).map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // A port in use or a bad certificate fails before any worker starts.
        let bound = Bound::bind(&plan).await.map_err(anyhow::Error::msg)?;
        let app = BotApp::build(config, config_path).await?;
        serve(app, bound).await
    })
}

async fn serve(app: BotApp, bound: Bound) -> anyhow::Result<i32> {
    let shutdown = CancellationToken::new();
    let signals = tokio::spawn(cancel_on_signal(shutdown.clone()));
    let http = app.config.http.clone();
    let parts = HttpParts::new(&http);
    let gateway = Gateway::new(
        app.agent.clone(),
        app.db.clone(),
        parts.channel(),
        GatewaySettings {
            queue_depth: http.queue_depth,
            session_prefix: SESSION_PREFIX.into(),
            untrusted_folders: app.config.trust.untrusted_paths.clone(),
            min_free_bytes: app.config.telegram.min_free_mb.saturating_mul(1024 * 1024),
            scheduled_patience: Some(Duration::from_secs(
                app.config.llm.scheduled_retry_budget_secs,
            )),
            ..GatewaySettings::default()
        },
    );
    gateway
        .recover()
        .await
        .context("recovering unfinished runs")?;
    let api = parts.api(
        gateway.clone(),
        app.db.clone(),
        app.jobs.clone(),
        app.listed_grants()?,
        &http,
    );
    // Scheduled jobs and the heartbeat run here too, through the same gateway; without a
    // Telegram chat to answer, they answer on an API thread.
    let scheduled = Threads::new(app.db.clone())
        .chat_of(SCHEDULED)
        .context("creating the scheduled thread")?;
    let mut setup = app.scheduler();
    setup.owner = Some(Owner {
        chat: scheduled,
        session: gateway.session_key(scheduled),
    });
    let scheduler = Daemon::start(setup, gateway.clone(), shutdown.clone());
    let addr = bound
        .local_addr()
        .context("reading the listener's address")?;
    let scheme = if bound.is_tls() { "https" } else { "http" };
    eprintln!("warden serve: listening on {scheme}://{addr} (Ctrl-C or SIGTERM stops)");
    bound
        .serve(router(api, http.max_body_bytes), shutdown.clone())
        .await;
    tracing::info!("stopping: waiting for running agents");
    parts.inbox.close();
    gateway
        .shutdown(Duration::from_secs(http.shutdown_grace_secs))
        .await;
    scheduler.stopped(Duration::from_secs(5)).await;
    signals.abort();
    if let Some(worker) = &app.worker {
        worker.shutdown(Duration::from_secs(30)).await;
    }
    Ok(0)
}
