//! What `warden bot` and `warden serve` run beside their channels: the job runner and the
//! heartbeat, both delivering through the gateway, both stopping with it.

use super::gateway_deliver::GatewayDeliver;
use super::{Heartbeat, JobManager, Runner, Settings};
use crate::db::Database;
use crate::gateway::Gateway;
use crate::policy::PathPolicy;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The chat whom the heartbeat and jobs without a chat of this gateway answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub chat: i64,
    /// The chat's session key (the heartbeat runs there).
    pub session: String,
}

impl Owner {
    /// Telegram's owner: the first allowed user (in a private chat the chat id is the user
    /// id, and its session is `telegram:<chat>`).
    pub fn telegram(allowed_users: &[i64]) -> Option<Owner> {
        let chat = *allowed_users.first()?;
        Some(Owner {
            chat,
            session: super::settings::owner_chat_session(allowed_users)?,
        })
    }
}

/// What the loops need from the bot.
pub struct DaemonSetup<'a> {
    pub settings: &'a Settings,
    /// Whom jobs and the heartbeat answer; without one the loops do not run.
    pub owner: Option<Owner>,
    pub jobs: &'a Arc<JobManager>,
    /// The workspace (the heartbeat reads HEARTBEAT.md there).
    pub paths: &'a Arc<PathPolicy>,
    pub db: &'a Arc<Database>,
}

/// The scheduler's loops in the bot.
pub struct Daemon {
    tasks: Vec<JoinHandle<()>>,
}

impl Daemon {
    /// Start the runner and (when configured) the heartbeat; they run until `shutdown`. Does
    /// nothing when `scheduler.enabled` is false or there is no owner to answer.
    pub fn start(app: DaemonSetup<'_>, gateway: Gateway, shutdown: CancellationToken) -> Daemon {
        let settings = app.settings;
        let Some(owner) = app.owner else {
            return Daemon { tasks: Vec::new() };
        };
        if !settings.enabled {
            tracing::info!("scheduler disabled (scheduler.enabled = false)");
            return Daemon { tasks: Vec::new() };
        }
        let deliver = Arc::new(GatewayDeliver::new(gateway, owner.chat));
        let runner = Runner::new(app.jobs, deliver.clone(), settings.retry, settings.tz);
        let mut tasks = vec![tokio::spawn(runner.run(shutdown.clone()))];
        match settings.heartbeat(&owner.session) {
            Some(heartbeat) => {
                tracing::info!(every = ?heartbeat.every, tz = %heartbeat.tz, "heartbeat on");
                let heartbeat = Heartbeat::new(
                    heartbeat,
                    app.paths.clone(),
                    app.db.clone(),
                    app.jobs.clock().clone(),
                    deliver,
                );
                tasks.push(tokio::spawn(heartbeat.run(shutdown)));
            }
            None => tracing::info!("heartbeat off (scheduler.heartbeat_minutes = 0)"),
        }
        tracing::info!(tz = %settings.tz, "scheduler started");
        Daemon { tasks }
    }

    /// Wait for the loops to stop after `shutdown` (a beat waiting on the gateway ends when
    /// the gateway shuts down); give up after `grace`.
    pub async fn stopped(self, grace: Duration) {
        let all = futures::future::join_all(self.tasks);
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!("the scheduler did not stop within {grace:?}");
        }
    }
}
