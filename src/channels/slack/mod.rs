//! The Slack channel of `warden bot`: Socket Mode in (no public address needed), the Web API
//! out, on the same gateway seam as Telegram — durable runs, one actor per session, streamed
//! answers, recovery after a crash.
//!
//! A direct message is one session; in a channel, each thread is one (a mention starts it,
//! replies in the thread continue it). Only `allowed_users` start runs, and in channels only
//! in `allowed_channels`.
//!
//! ```ignore
//! let slack = SlackBot::connect(setup).await?;  // checks config, auth.test, recovery
//! slack.run(shutdown_token).await;              // until SIGTERM/SIGINT
//! ```

pub mod api;
mod approvals;
pub mod config;
mod envelope;
mod files;
pub mod format;
mod handler;
mod slash;
mod socket;
pub mod store;
mod view;

use crate::db::Database;
use crate::egress::Grants;
use crate::gateway::{AgentRunner, Gateway, GatewaySettings};
use crate::policy::PathPolicy;
use crate::tools::approval_rules::ApprovalRules;
use anyhow::Context;
use api::SlackApi;
use approvals::SlackApprovals;
use config::SlackConfig;
use handler::Handler;
use std::sync::Arc;
use std::time::Duration;
use store::SlackStore;
use tokio_util::sync::CancellationToken;
use view::SlackChannel;

/// What the channel needs from the bot's process.
pub struct SlackSetup<'a> {
    pub config: &'a SlackConfig,
    pub db: &'a Arc<Database>,
    /// The workspace: shared files are saved there, `send_file` uploads from there.
    pub paths: &'a Arc<PathPolicy>,
    /// Who runs the agents (a worker process, or an agent in this process).
    pub agent: Arc<dyn AgentRunner>,
    /// `[trust] untrusted_paths`.
    pub untrusted_folders: Vec<String>,
    /// Where "Always in this channel" is stored, on whose clock it expires.
    pub approval_rules: ApprovalRules,
    /// Where "Always for this host" is stored, on whose clock it expires.
    pub host_grants: Grants,
}

/// A connected Slack app, ready to receive.
pub struct SlackBot {
    api: SlackApi,
    gateway: Gateway,
    handler: Arc<Handler>,
    approvals: Arc<SlackApprovals>,
    config: SlackConfig,
}

impl SlackBot {
    /// Check the config, learn who the bot is (`auth.test`), recover runs a previous process
    /// left unfinished and handle envelopes it recorded but never handled.
    pub async fn connect(setup: SlackSetup<'_>) -> anyhow::Result<SlackBot> {
        let config = setup.config.clone();
        config::check_ready(&config).map_err(anyhow::Error::msg)?;
        let api = SlackApi::new(
            &config.api_url(),
            config.app_token.clone(),
            config.bot_token.clone(),
            Duration::from_secs(config.request_timeout_secs.max(1)),
        )
        .map_err(anyhow::Error::msg)?;
        let me = identity(&api).await?;
        tracing::info!(user = %me.user_id, team = %me.team, "connected to the Slack Web API");
        let store = SlackStore::new(setup.db.clone());
        if let Err(e) = store.prune() {
            tracing::warn!("pruning old Slack envelopes: {e}");
        }
        let approvals = Arc::new(SlackApprovals::new(
            Duration::from_secs(config.approval_timeout_secs.max(1)),
            setup.host_grants.clone(),
            setup.approval_rules.clone(),
        ));
        let gateway = Gateway::new(
            setup.agent,
            setup.db.clone(),
            Arc::new(SlackChannel {
                api: api.clone(),
                store: store.clone(),
                approvals: approvals.clone(),
                paths: setup.paths.clone(),
                max_send_bytes: config.max_send_bytes,
            }),
            GatewaySettings {
                queue_depth: config.queue_depth,
                session_prefix: "slack".into(),
                untrusted_folders: setup.untrusted_folders,
                ..GatewaySettings::default()
            },
        );
        gateway
            .recover()
            .await
            .context("recovering unfinished Slack runs")?;
        let handler = Arc::new(Handler {
            api: api.clone(),
            store,
            gateway: gateway.clone(),
            me: me.user_id,
            allowed_users: config.allowed_users.iter().cloned().collect(),
            allowed_channels: config.allowed_channels.iter().cloned().collect(),
            approvals: approvals.clone(),
            files: files::Inbound {
                api: api.clone(),
                paths: setup.paths.clone(),
                max_bytes: config.max_file_bytes,
            },
            rules: setup.approval_rules,
            grants: setup.host_grants,
        });
        handler.handle_pending().await;
        Ok(SlackBot {
            api,
            gateway,
            handler,
            approvals,
            config,
        })
    }

    pub fn gateway(&self) -> Gateway {
        self.gateway.clone()
    }

    /// Receive until `shutdown`, then stop: running agents get `shutdown_grace_secs` to
    /// finish and are then recorded as interrupted.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        socket::run(&self.api, self.handler.clone(), &shutdown).await;
        tracing::info!("slack: stopping, waiting for running agents");
        self.approvals.close();
        self.gateway
            .shutdown(Duration::from_secs(self.config.shutdown_grace_secs))
            .await;
        Ok(())
    }
}

/// `auth.test`, retrying network errors for a while; a rejected token fails at once.
async fn identity(api: &SlackApi) -> anyhow::Result<api::Identity> {
    let mut wait = Duration::from_secs(1);
    for attempt in 1.. {
        match api.identity().await {
            Ok(me) => return Ok(me),
            Err(api::ApiError::Refused { error, .. }) => {
                anyhow::bail!("Slack rejected the bot token (SLACK_BOT_TOKEN): {error}")
            }
            Err(e) if attempt >= 6 => anyhow::bail!("cannot reach the Slack Web API: {e}"),
            Err(e) => {
                tracing::warn!("auth.test failed: {e} (retrying in {wait:?})");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
    unreachable!("the loop returns")
}
