//! `warden bot` as two processes: this one, the gateway (Telegram polling, the durable
//! queues, approvals, the scheduler's clock), and an agent worker it starts for runs (see
//! [`crate::gateway::worker`]). The gateway's share of the app is built here without the
//! agent: no model client, policy engine, memory index or sandbox lives in the process that
//! waits for messages.

use crate::app::{prepare_workspace, App};
use crate::channels::http::config::plan;
use crate::channels::http::listener::Bound;
use crate::channels::http::{router, HttpParts};
use crate::channels::slack::{self, SlackBot, SlackSetup};
use crate::channels::telegram::{self, Beside, TelegramBot, TelegramSetup, VoiceLimits};
use crate::config::Config;
use crate::db::Database;
use crate::egress::Grants;
use crate::gateway::worker::{WorkerAgent, WorkerCommand};
use crate::gateway::AgentRunner;
use crate::mcp::servers::McpServers;
use crate::policy::paths::PathPolicy;
use crate::scheduler::daemon::{Daemon, DaemonSetup, Owner};
use crate::scheduler::{JobManager, Settings, SystemClock};
use crate::skills::settings::SkillSettings;
use crate::tools::approval_rules::ApprovalRules;
use crate::voice::Transcribe;
use anyhow::Context;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the gateway needs.
pub struct BotApp {
    pub config: Config,
    pub db: Arc<Database>,
    /// The workspace only: the gateway saves attachments and reads HEARTBEAT.md there.
    pub paths: Arc<PathPolicy>,
    pub scheduler: Settings,
    pub jobs: Arc<JobManager>,
    /// Who runs the agents: a [`WorkerAgent`], or an agent in this process.
    pub agent: Arc<dyn AgentRunner>,
    /// The worker to stop at the end, when the agents run in one.
    pub worker: Option<WorkerAgent>,
    /// Whether the configured model takes images (the worker says so when it starts).
    pub supports_images: bool,
    /// Who transcribes voice messages: the worker, when `[voice]` has an endpoint.
    pub voice: Option<Arc<dyn Transcribe>>,
}

impl BotApp {
    /// Start a worker once to check the whole setup (config, policy, keys, sandbox), then
    /// build the gateway's part. `config_path` is passed on to the worker.
    pub async fn build(mut config: Config, config_path: Option<&Path>) -> anyhow::Result<BotApp> {
        // The worker calls the model, the embeddings, speech-to-text and search endpoints and
        // the skills' upstreams: the gateway keeps only the bot token (logs still redact every
        // secret: that list was taken when the config was loaded).
        forget_the_workers_secrets(&mut config);
        let workspace = prepare_workspace(&config.workspace)?;
        let db = crate::schema::open_in(&config.data_dir)
            .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
        let paths = Arc::new(
            PathPolicy::new(&workspace, &[], &[], &workspace)
                .context("setting up the path validator")?,
        );
        let scheduler = Settings::from_config(&config.scheduler).map_err(anyhow::Error::msg)?;
        let jobs = Arc::new(JobManager::new(
            db.clone(),
            Arc::new(SystemClock),
            scheduler.limits.clone(),
        ));
        // Agents run in `warden-full agent-worker`, beside this binary; the cron jobs their
        // runs change wake this process's scheduler.
        let program = crate::cli::front::full_binary().context("locating warden itself")?;
        let mut args: Vec<OsString> = Vec::new();
        if let Some(path) = config_path {
            args.push("--config".into());
            args.push(path.into());
        }
        args.push("agent-worker".into());
        let worker = WorkerAgent::new(
            WorkerCommand { program, args },
            Duration::from_secs(config.telegram.worker_idle_secs),
            jobs.wake().clone(),
        );
        let supports_images = worker.check().await.map_err(anyhow::Error::msg)?;
        let voice = config
            .voice
            .endpoint()
            .map(|_| Arc::new(worker.clone()) as Arc<dyn Transcribe>);

        Ok(BotApp {
            config,
            db,
            paths,
            scheduler,
            jobs,
            agent: Arc::new(worker.clone()),
            worker: Some(worker),
            supports_images,
            voice,
        })
    }

    /// The configured MCP servers and the skill settings, for the HTTP API's read-only
    /// listings: prepared once here (this writes the bundled skills' copies), never per
    /// request. Nothing is started.
    pub fn listed_grants(&self) -> anyhow::Result<Arc<McpServers>> {
        let workspace = prepare_workspace(&self.config.workspace)?;
        let settings = Arc::new(SkillSettings::prepare(&self.config, &workspace)?);
        Ok(McpServers::new(&self.config.mcp, settings, self.db.clone()))
    }

    /// What the Telegram channel needs.
    pub fn telegram(&self) -> TelegramSetup<'_> {
        TelegramSetup {
            config: &self.config.telegram,
            db: &self.db,
            agent: self.agent.clone(),
            paths: &self.paths,
            supports_images: self.supports_images,
            voice: self.voice.clone(),
            voice_limits: VoiceLimits::from(&self.config.voice),
            untrusted_folders: self.config.trust.untrusted_paths.clone(),
            scheduled_patience: Duration::from_secs(self.config.llm.scheduled_retry_budget_secs),
            approval_rules: ApprovalRules::new(self.db.clone())
                .with_clock(Arc::new(SystemClock), self.scheduler.tz),
            host_grants: Grants::new(self.db.clone())
                .with_clock(Arc::new(SystemClock), self.scheduler.tz),
            beside: None,
        }
    }

    /// What the Slack channel needs.
    pub fn slack(&self) -> SlackSetup<'_> {
        SlackSetup {
            config: &self.config.slack,
            db: &self.db,
            paths: &self.paths,
            agent: self.agent.clone(),
            untrusted_folders: self.config.trust.untrusted_paths.clone(),
            approval_rules: ApprovalRules::new(self.db.clone())
                .with_clock(Arc::new(SystemClock), self.scheduler.tz),
            host_grants: Grants::new(self.db.clone())
                .with_clock(Arc::new(SystemClock), self.scheduler.tz),
        }
    }

    /// What the scheduler's loops need.
    pub fn scheduler(&self) -> DaemonSetup<'_> {
        DaemonSetup {
            settings: &self.scheduler,
            owner: Owner::telegram(&self.config.telegram.allowed_users),
            jobs: &self.jobs,
            paths: &self.paths,
            db: &self.db,
        }
    }

    /// The bot with `app`'s agent in this process (tests that give the agent their own tools).
    pub fn in_process(app: &App) -> BotApp {
        BotApp {
            config: app.config.clone(),
            db: app.db.clone(),
            paths: app.paths.clone(),
            scheduler: app.scheduler.clone(),
            jobs: app.jobs.clone(),
            agent: app.agent.clone(),
            worker: None,
            supports_images: app.agent.provider().supports_images(),
            voice: app.voice.clone(),
        }
    }
}

/// `warden bot`, start to finish: load the config, check the setup through a worker, poll
/// until SIGTERM or SIGINT. Returns the exit code.
/// Blank every secret but the Telegram token; OAuth sign-ins are off (their tokens are the
/// worker's to read, never the gateway's).
fn forget_the_workers_secrets(config: &mut Config) {
    config.llm.token_dir = None;
    for key in [
        &mut config.llm.anthropic.api_key,
        &mut config.llm.openai.api_key,
        &mut config.memory.embeddings.api_key,
        &mut config.voice.api_key,
        &mut config.search.api_key,
    ] {
        *key = Default::default();
    }
    config.skills.secrets.clear();
}

pub fn run(config_path: Option<&Path>) -> anyhow::Result<i32> {
    let config = crate::cli::load_config(config_path)?;
    // Refuse before starting anything: no token, or nobody allowed.
    channels_to_run(&config).map_err(anyhow::Error::msg)?;
    // Two threads whatever the machine: the gateway mostly waits, and each thread costs memory
    // (a stack, a malloc arena) for as long as the bot runs.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // `[http] listen`: the HTTP API too, checked like `warden serve` checks it.
    let listen = match config.http.listen {
        Some(_) => Some(plan(&config.http, None).map_err(anyhow::Error::msg)?),
        None => None,
    };
    runtime.block_on(async {
        // A port in use or a bad certificate fails before any worker starts.
        let bound = match &listen {
            Some(plan) => Some(Bound::bind(plan).await.map_err(anyhow::Error::msg)?),
            None => None,
        };
        let app = BotApp::build(config, config_path).await?;
        serve(app, bound).await
    })
}

/// Which channels `warden bot` runs: (Telegram, Slack) — each one whose token is set, and
/// that one completely set up; refused when neither is.
pub fn channels_to_run(config: &Config) -> Result<(bool, bool), String> {
    let telegram_on = !config.telegram.token.is_empty();
    let slack_on = config.slack.is_configured();
    if !telegram_on && !slack_on {
        let telegram = telegram::check_config(&config.telegram)
            .err()
            .unwrap_or_default();
        return Err(format!(
            "{telegram}. Or run warden in Slack: set SLACK_APP_TOKEN, SLACK_BOT_TOKEN and \
             SLACK_ALLOWED_USERS (see the README's Slack section)"
        ));
    }
    if telegram_on {
        telegram::check_config(&config.telegram)?;
    }
    if slack_on {
        slack::config::check_ready(&config.slack)?;
    }
    Ok((telegram_on, slack_on))
}

/// `warden bot`: run until SIGTERM or SIGINT; with `bound`, serve the HTTP API there too,
/// on Telegram's gateway (an API thread and a Telegram chat are two chats of one queue, one
/// store, one agent).
async fn serve(app: BotApp, bound: Option<Bound>) -> anyhow::Result<i32> {
    // Watch signals first: recovery may start runs, and those deserve a graceful stop too.
    let shutdown = CancellationToken::new();
    let signals = tokio::spawn(cancel_on_signal(shutdown.clone()));
    let (telegram_on, slack_on) = channels_to_run(&app.config).map_err(anyhow::Error::msg)?;
    if bound.is_some() && !telegram_on {
        anyhow::bail!(
            "[http] listen: warden bot serves the HTTP API on the Telegram channel's gateway, \
             and Telegram is not set up; run `warden serve` beside the Slack bot for the API"
        );
    }
    let http = bound.as_ref().map(|_| HttpParts::new(&app.config.http));
    let telegram = match telegram_on {
        true => {
            let mut setup = app.telegram();
            if let Some(parts) = &http {
                setup.beside = Some(Beside {
                    channel: parts.channel(),
                    approvals: parts.inbox.clone(),
                });
            }
            Some(TelegramBot::connect(setup).await?)
        }
        false => None,
    };
    let slack = match slack_on {
        true => Some(SlackBot::connect(app.slack()).await?),
        false => None,
    };
    let listener = match (bound, &http, &telegram) {
        (Some(bound), Some(parts), Some(bot)) => {
            let config = &app.config.http;
            let api = parts.api(
                bot.gateway(),
                app.db.clone(),
                app.jobs.clone(),
                app.listed_grants()?,
                config,
            );
            let addr = bound
                .local_addr()
                .context("reading the listener's address")?;
            let scheme = if bound.is_tls() { "https" } else { "http" };
            eprintln!("warden bot: HTTP API on {scheme}://{addr}");
            let (inbox, stop) = (parts.inbox.clone(), shutdown.clone());
            let routes = router(api, config.max_body_bytes);
            Some(tokio::spawn(async move {
                bound.serve(routes, stop).await;
                // API threads' runs waiting for an answer are denied as the gateway stops.
                inbox.close();
            }))
        }
        _ => None,
    };
    // Scheduled jobs and the heartbeat go through the same gateway as the chats (Telegram's:
    // the jobs answer its owner).
    let scheduler = telegram
        .as_ref()
        .map(|bot| Daemon::start(app.scheduler(), bot.gateway(), shutdown.clone()));
    let names: Vec<&str> = [(telegram_on, "Telegram"), (slack_on, "Slack")]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
    eprintln!(
        "warden bot: serving {} (Ctrl-C or SIGTERM stops)",
        names.join(" and ")
    );
    // When one channel stops for good, the other stops too.
    let stop_all = |result: anyhow::Result<()>| {
        shutdown.cancel();
        result
    };
    let telegram_run = async {
        match telegram {
            Some(bot) => stop_all(bot.run(shutdown.clone()).await),
            None => Ok(()),
        }
    };
    let slack_run = async {
        match slack {
            Some(bot) => stop_all(bot.run(shutdown.clone()).await),
            None => Ok(()),
        }
    };
    let (telegram_result, slack_result) = tokio::join!(telegram_run, slack_run);
    let result = telegram_result.and(slack_result);
    if let Some(listener) = listener {
        let _ = listener.await;
    }
    if let Some(scheduler) = scheduler {
        scheduler.stopped(Duration::from_secs(5)).await;
    }
    signals.abort();
    // The worker aborts what is left and releases its sandboxes (Docker containers).
    if let Some(worker) = &app.worker {
        worker.shutdown(Duration::from_secs(30)).await;
    }
    result.map(|_| 0)
}

pub(crate) async fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot watch SIGTERM: {e}");
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    shutdown.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    #[test]
    fn the_gateway_keeps_only_the_bot_token() {
        let mut config = Config::default();
        config.llm.anthropic.api_key = Secret::new("sk-ant");
        config.llm.openai.api_key = Secret::new("sk-oai");
        config.memory.embeddings.api_key = Secret::new("sk-emb");
        config.voice.api_key = Secret::new("sk-voice");
        config.search.api_key = Secret::new("brave");
        config
            .skills
            .secrets
            .insert("GITHUB_TOKEN".into(), Secret::new("ghp"));
        config.telegram.token = Secret::new("123:abc");
        config.slack.bot_token = Secret::new("xoxb-1");
        config.llm.token_dir = Some("/data/oauth".into());
        assert_eq!(config.secrets().len(), 8);
        forget_the_workers_secrets(&mut config);
        let left: Vec<&str> = config.secrets().iter().map(|s| s.expose()).collect();
        assert_eq!(left, ["123:abc", "xoxb-1"]);
        assert_eq!(
            config.llm.token_dir, None,
            "no sign-in is read by the gateway"
        );
    }
}
