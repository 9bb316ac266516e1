//! The Telegram channel: `warden bot`.
//!
//! Long polling (teloxide's client against the Bot API, or a local fake in tests) feeds a
//! durable update log; each update passes access control and becomes a command, an approval
//! button press, or a prompt for the chat's actor in the [`crate::gateway`]. Answers come back
//! as Telegram HTML split into ≤ 4096-character parts. The token is only ever sent in request
//! URLs and is redacted from every log line.
//!
//! ```ignore
//! let bot = TelegramBot::connect(setup).await?;  // checks config, getMe, recovery
//! let gateway = bot.gateway();                   // for the scheduler: gateway.submit(…)
//! bot.run(shutdown_token).await?;                // until SIGTERM/SIGINT
//! ```
//!
//! `warden bot` (`bot.rs`) runs it with the scheduler's runner and heartbeat beside the polling loop.

mod access;
pub mod api;
mod approvals;
mod commands;
pub mod format;
mod handler;
mod inputs;
mod lanes;
mod live;
mod poll;
pub mod split;
mod standing;
pub mod store;
mod upload;
mod view;

pub use inputs::safe_file_name;

use crate::config::TelegramConfig;
use crate::db::Database;
use crate::egress::Grants;
use crate::gateway::channels::Channels;
use crate::gateway::{AgentRunner, Channel, Gateway, GatewaySettings};
use crate::policy::PathPolicy;
use crate::tools::approval_mirror::ApprovalMirror;
use crate::tools::approval_rules::ApprovalRules;
use crate::voice::Transcribe;
use access::Access;
use anyhow::Context;
use api::{describe, Telegram, Timeouts};
use approvals::Approvals;
use handler::Handler;
use inputs::Inputs;
pub use inputs::VoiceLimits;
use std::sync::Arc;
use std::time::Duration;
use store::UpdateLog;
use teloxide::prelude::Requester;
use teloxide::types::BotCommand;
use teloxide::{ApiError, RequestError};
use tokio_util::sync::CancellationToken;
use view::TelegramChannel;

/// Why `warden bot` will not start with this config (a message naming what to set).
pub fn check_config(config: &TelegramConfig) -> Result<(), String> {
    if config.token.is_empty() {
        return Err(
            "no Telegram bot token: set TELEGRAM_BOT_TOKEN (or telegram.token in \
                    ~/.warden/config.toml) to the token BotFather gave you"
                .into(),
        );
    }
    if config.allowed_users.is_empty() {
        return Err(
            "no allowed Telegram users: warden bot refuses to answer everyone. Set \
                    TELEGRAM_ALLOWED_USERS (comma-separated numeric user IDs) or \
                    telegram.allowed_users in ~/.warden/config.toml"
                .into(),
        );
    }
    Ok(())
}

/// What the channel needs from the bot's process.
pub struct TelegramSetup<'a> {
    pub config: &'a TelegramConfig,
    pub db: &'a Arc<Database>,
    /// Who runs the agents (a worker process, or an agent in this process).
    pub agent: Arc<dyn AgentRunner>,
    /// The workspace: attachments are saved there, `send_file` uploads from there.
    pub paths: &'a Arc<PathPolicy>,
    /// Whether the model takes images.
    pub supports_images: bool,
    /// Who transcribes voice messages (the worker); `None`: no `[voice]` endpoint.
    pub voice: Option<Arc<dyn Transcribe>>,
    /// `[voice] max_bytes` and `max_seconds`.
    pub voice_limits: VoiceLimits,
    /// `[trust] untrusted_paths`.
    pub untrusted_folders: Vec<String>,
    /// `llm.scheduled_retry_budget_secs`: how long a scheduled job waits out a busy model.
    pub scheduled_patience: Duration,
    /// Where "Always in this chat" is stored, on whose clock it expires.
    pub approval_rules: ApprovalRules,
    /// Where "Always for this host" is stored, on whose clock it expires.
    pub host_grants: Grants,
    /// Another channel on the same gateway (the HTTP API's threads, `[http] listen`): its
    /// chats are its own, every other chat is Telegram's.
    pub beside: Option<Beside>,
}

/// A channel that shares the bot's gateway, and where it shows Telegram's approval requests.
pub struct Beside {
    pub channel: Arc<dyn Channel>,
    pub approvals: Arc<dyn ApprovalMirror>,
}

/// A connected bot, ready to poll.
pub struct TelegramBot {
    tg: Telegram,
    gateway: Gateway,
    handler: Arc<Handler>,
    approvals: Arc<Approvals>,
    config: TelegramConfig,
}

impl TelegramBot {
    /// Check the config, reach the Bot API (`getMe`), make sure no webhook blocks polling,
    /// register the command menu, and recover runs a previous process left unfinished.
    pub async fn connect(app: TelegramSetup<'_>) -> anyhow::Result<TelegramBot> {
        let config = app.config.clone();
        check_config(&config).map_err(anyhow::Error::msg)?;
        let tg = Telegram::new(
            config.token.expose(),
            config.api_url.as_deref(),
            Timeouts::of(&config),
        )
        .map_err(anyhow::Error::msg)?;
        let me = get_me(&tg).await?;
        let username = me.user.username.clone().unwrap_or_default();
        tracing::info!(bot = %username, "connected to the Telegram Bot API");
        clear_webhook(&tg).await;
        let menu: Vec<BotCommand> = commands::MENU
            .iter()
            .map(|(name, about)| BotCommand::new(*name, *about))
            .collect();
        if let Err(e) = tg.bot().set_my_commands(menu).await {
            tracing::warn!("setMyCommands: {}", describe(&e));
        }

        let log = UpdateLog::new(app.db.clone());
        if let Err(e) = log.prune() {
            tracing::warn!("pruning old updates: {e}");
        }
        let mut approvals =
            Approvals::new(Duration::from_secs(config.approval_timeout_secs.max(1)))
                .with_grants(app.host_grants.clone(), app.approval_rules.clone());
        if let Some(beside) = &app.beside {
            approvals = approvals.with_mirror(beside.approvals.clone());
        }
        let approvals = Arc::new(approvals);
        let telegram: Arc<dyn Channel> = Arc::new(TelegramChannel::new(
            tg.clone(),
            approvals.clone(),
            app.paths.clone(),
            config.max_send_bytes,
        ));
        let channel: Arc<dyn Channel> = match &app.beside {
            // The other channel's chats first: Telegram serves every chat.
            Some(beside) => Arc::new(Channels::new(vec![beside.channel.clone(), telegram])),
            None => telegram,
        };
        let gateway = Gateway::new(
            app.agent,
            app.db.clone(),
            channel,
            GatewaySettings {
                queue_depth: config.queue_depth,
                untrusted_folders: app.untrusted_folders.clone(),
                min_free_bytes: config.min_free_mb.saturating_mul(1024 * 1024),
                scheduled_patience: Some(app.scheduled_patience),
                ..GatewaySettings::default()
            },
        );
        if !gateway.has_room() {
            tracing::warn!(
                "less than telegram.min_free_mb ({} MB) is free on the disk of {}: messages \
                 wait until there is room",
                config.min_free_mb,
                app.db
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
        }
        gateway
            .recover()
            .await
            .context("recovering unfinished runs")?;
        let handler = Arc::new(Handler {
            tg: tg.clone(),
            gateway: gateway.clone(),
            access: Access::new(&config.allowed_users, me.user.id.0 as i64, &username),
            log,
            approvals: approvals.clone(),
            standing: standing::Standing {
                rules: app.approval_rules.clone(),
                grants: app.host_grants.clone(),
            },
            inputs: Inputs {
                tg: tg.clone(),
                paths: app.paths.clone(),
                supports_images: app.supports_images,
                max_bytes: config.max_file_bytes,
                voice: app.voice.clone(),
                voice_limits: app.voice_limits,
            },
        });
        Ok(TelegramBot {
            tg,
            gateway,
            handler,
            approvals,
            config,
        })
    }

    /// The gateway, for other sources of prompts (the scheduler).
    pub fn gateway(&self) -> Gateway {
        self.gateway.clone()
    }

    /// Poll until `shutdown`, then stop: pending approvals are denied, running agents get
    /// `shutdown_grace_secs` to finish and are then recorded as interrupted.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let polled = poll::run(&self.tg, self.handler.clone(), &shutdown).await;
        tracing::info!("stopping: waiting for running agents");
        self.approvals.close();
        self.gateway
            .shutdown(Duration::from_secs(self.config.shutdown_grace_secs))
            .await;
        polled.map_err(anyhow::Error::msg)
    }
}

/// `getMe`, retrying network errors for a while; a rejected token fails at once.
async fn get_me(tg: &Telegram) -> anyhow::Result<teloxide::types::Me> {
    let mut wait = Duration::from_secs(1);
    for attempt in 1.. {
        match tg.bot().get_me().await {
            Ok(me) => return Ok(me),
            Err(RequestError::Api(ApiError::InvalidToken)) => {
                anyhow::bail!("Telegram rejected the bot token (TELEGRAM_BOT_TOKEN)")
            }
            Err(e) if attempt >= 6 => {
                anyhow::bail!("cannot reach the Telegram Bot API: {}", describe(&e))
            }
            Err(e) => {
                tracing::warn!("getMe failed: {} (retrying in {wait:?})", describe(&e));
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
    unreachable!("the loop returns")
}

/// Long polling does not work while a webhook is set: remove one if present.
async fn clear_webhook(tg: &Telegram) {
    match tg.bot().get_webhook_info().await {
        Ok(info) if info.url.is_some() => {
            tracing::warn!("a webhook was set; removing it to use long polling");
            if let Err(e) = tg.bot().delete_webhook().await {
                tracing::warn!("deleteWebhook: {}", describe(&e));
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("getWebhookInfo: {}", describe(&e)),
    }
}
