//! `warden cron list|add|rm|run|status`: the same store and the same checks as the agent's
//! `cron` tool, without needing an LLM key. Jobs run in `warden bot` (answers to Telegram) or
//! `warden daemon` (answers printed), which notice changes made here within their rescan
//! interval.

use crate::config::Config;
use crate::gateway::ChatKey;
use crate::scheduler::listing::job_json;
use crate::scheduler::runner::RESCAN;
use crate::scheduler::settings::owner_chat_session;
use crate::scheduler::{JobError, JobManager, JobRequest, Settings, SystemClock, Target};
use anyhow::Context;
use std::sync::Arc;

/// The session of jobs added without Telegram: `warden daemon` prints their answers.
pub const TERMINAL_SESSION: &str = "terminal:cron";

/// The session prefix of Telegram chats.
const TELEGRAM: &str = "telegram";

/// Exit code when a job request is refused (bad schedule, unknown id, too many jobs).
pub const EXIT_REFUSED: i32 = 1;

pub enum Action {
    List { json: bool },
    Add(AddArgs),
    Remove { id: i64 },
    Run { id: i64 },
    Status { id: i64 },
}

#[derive(Default)]
pub struct AddArgs {
    pub at: Option<String>,
    pub every: Option<String>,
    pub cron: Option<String>,
    pub timezone: Option<String>,
    pub name: Option<String>,
    /// Default: the owner's Telegram chat (the first allowed user).
    pub session: Option<String>,
    /// A fresh session for every run; the answer still goes to `session`'s chat.
    pub new_session: bool,
    /// A topic of the session's Telegram chat to run in and deliver to.
    pub topic: Option<i32>,
    /// Keep a one-shot job after it ran.
    pub keep: bool,
    pub prompt: String,
}

pub fn run(config: &Config, action: Action) -> anyhow::Result<i32> {
    let settings = Settings::from_config(&config.scheduler).map_err(anyhow::Error::msg)?;
    let db = crate::schema::open_in(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let jobs = JobManager::new(db, Arc::new(SystemClock), settings.limits.clone());
    let tz = settings.tz;
    let result = match action {
        Action::List { json } => jobs.list().map(|list| {
            if json {
                let items: Vec<_> = list.iter().map(job_json).collect();
                println!("{}", serde_json::Value::Array(items));
            } else if list.is_empty() {
                println!("No scheduled jobs.");
            } else {
                for job in &list {
                    println!("{}", job.summary(tz));
                }
            }
        }),
        Action::Add(args) => {
            // Without Telegram the answers go to `warden daemon`'s output.
            let session = args
                .session
                .or_else(|| owner_chat_session(&config.telegram.allowed_users))
                .unwrap_or_else(|| TERMINAL_SESSION.to_string());
            let session = match args.topic {
                None => session,
                Some(topic) => match in_topic(&session, topic) {
                    Ok(session) => session,
                    Err(e) => {
                        eprintln!("warden: {e}");
                        return Ok(EXIT_REFUSED);
                    }
                },
            };
            let target = if args.new_session {
                Target::Fresh { reply_to: session }
            } else {
                Target::Session(session)
            };
            jobs.add(JobRequest {
                name: args.name,
                at: args.at,
                every: args.every,
                cron: args.cron,
                timezone: args.timezone,
                prompt: args.prompt,
                target: Some(target),
                delete_after_run: args.keep.then_some(false),
                created_by: "cli".into(),
                untrusted: Vec::new(),
            })
            .map(|job| println!("Scheduled {}", job.summary(tz)))
        }
        Action::Remove { id } => jobs
            .remove(id)
            .map(|job| println!("Removed job #{} {:?}.", job.id, job.name)),
        Action::Run { id } => jobs.run_now(id).map(|job| {
            println!(
                "Job #{} is due now; a running `warden bot` or `warden daemon` starts it within \
                 {} seconds.",
                job.id,
                RESCAN.as_secs()
            )
        }),
        Action::Status { id } => jobs.status(id, 10).map(|(job, runs)| {
            println!("{}\nPrompt: {}", job.summary(tz), job.prompt);
            for run in runs {
                println!(
                    "- {} {:?}: {}",
                    run.slot.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S %Z"),
                    run.status,
                    run.detail.unwrap_or_default().lines().next().unwrap_or("")
                );
            }
        }),
    };
    match result {
        Ok(()) => Ok(0),
        Err(JobError::Store(e)) => Err(anyhow::anyhow!(e)),
        Err(e) => {
            eprintln!("warden: {e}");
            Ok(EXIT_REFUSED)
        }
    }
}

/// The session of `topic` in the Telegram chat whose session is `session`.
fn in_topic(session: &str, topic: i32) -> Result<String, String> {
    match ChatKey::from_session_key(TELEGRAM, session) {
        Some(chat) if chat.topic.is_none() && topic > 0 => {
            Ok(ChatKey::new(chat.chat_id, Some(topic)).session_key(TELEGRAM))
        }
        Some(_) if topic <= 0 => Err(format!("--topic {topic}: a topic is a positive number")),
        Some(_) => Err(format!(
            "--topic: {session} is a topic already; give the chat (telegram:<chat id>)"
        )),
        None => Err(format!(
            "--topic needs a Telegram chat to deliver to, not {session} (set              telegram.allowed_users or give --session telegram:<chat id>)"
        )),
    }
}
