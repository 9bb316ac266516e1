//! The scheduler: cron jobs and the heartbeat. Both feed prompts into the gateway through the
//! [`Deliver`] trait, so a scheduled run waits in the chat's queue like a user's message.
//!
//! - [`deliver`]: the trait a prompt reaches a chat through;
//! - [`job`]: what a job is and the validation every new job passes;
//! - [`schedule`]: next-run computation (`at`, `every`, cron with DST rules), durations, backoff;
//! - [`store`]: jobs in SQLite; [`runs`]: their run history (a run is recorded before it is
//!   delivered, once per slot);
//! - [`listing`]: a job as JSON (`warden cron list --json`, `GET /v1/jobs`);
//! - [`manage`]: add / list / remove / run now, shared by the cron tool and `warden cron`;
//! - [`clock`]: the real clock and a test clock;
//! - [`runner`]: the timer loop;
//! - [`heartbeat`] and [`active_hours`]: the periodic check-in;
//! - [`settings`]: the `[scheduler]` config section, checked;
//! - [`gateway_deliver`] and [`daemon`]: delivery through the gateway, and the loops `warden
//!   bot` runs beside Telegram.

pub mod active_hours;
pub mod daemon;
pub mod deliver;
pub mod gateway_deliver;
pub mod heartbeat;
pub mod job;
pub mod listing;
pub mod manage;
pub mod runner;
pub mod runs;
pub mod schedule;
pub mod settings;
pub mod store;

pub use crate::clock::{Clock, SystemClock, TestClock};
pub use deliver::{Deliver, DeliverError, Delivered, Delivery, Origin};
pub use heartbeat::{Beat, Heartbeat, HeartbeatSettings};
pub use job::{Job, JobError, JobId, JobRequest, Limits, Target};
pub use manage::JobManager;
pub use runner::{RetryPolicy, Runner};
pub use schedule::Schedule;
pub use settings::Settings;
