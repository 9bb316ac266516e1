//! `cron`: the agent schedules its own future runs — reminders, daily briefs, periodic checks.
//! Actions: add, list, remove, run (now), status. A new job's answer goes to the chat the agent
//! is talking in (`ToolContext.session`); the model can choose that session or a fresh one per
//! run, never another chat (a prompt injected in one conversation must not post into another).
//! Likewise the tool only sees the jobs that answer to the conversation's own chat: with several
//! allowed users, one person's agent cannot list, read, run or remove another's jobs. A person
//! at the terminal (the machine's owner, who has `warden cron` anyway) sees them all.

use super::approval::{self, ApprovalRequest};
use super::{Tool, ToolContext, ToolOutput};
use crate::llm::ToolSpec;
use crate::memory::chat_key::ChatKey;
use crate::scheduler::{Job, JobError, JobManager, JobRequest, Target};
use async_trait::async_trait;
use chrono_tz::Tz;
use serde_json::{json, Value};
use std::sync::Arc;

/// The session prefix of Telegram chats (`telegram:<chat>[:<topic>]`).
const TELEGRAM: &str = "telegram";

/// Runs shown by `status` for one job.
const STATUS_RUNS: usize = 5;

pub struct CronTool {
    jobs: Arc<JobManager>,
    /// For the times shown to the model.
    tz: Tz,
}

impl CronTool {
    pub fn new(jobs: Arc<JobManager>, tz: Tz) -> CronTool {
        CronTool { jobs, tz }
    }

    async fn add(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let chat = match topic_session(input, &ctx.session) {
            Ok(chat) => chat,
            Err(e) => return e,
        };
        let target = match text(input, "session").unwrap_or("current") {
            "current" => Target::Session(chat),
            "new" => Target::Fresh { reply_to: chat },
            other => {
                return ToolOutput::error(format!(
                    "session must be \"current\" (this conversation) or \"new\" (a fresh one \
                     each run), not {other:?}"
                ))
            }
        };
        let delete_after_run = match input.get("delete_after_run") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return ToolOutput::error("delete_after_run must be true or false"),
        };
        let request = JobRequest {
            name: text(input, "name").map(str::to_string),
            at: text(input, "at").map(str::to_string),
            every: text(input, "every").map(str::to_string),
            cron: text(input, "cron").map(str::to_string),
            timezone: text(input, "timezone").map(str::to_string),
            prompt: text(input, "prompt").unwrap_or("").to_string(),
            target: Some(target),
            delete_after_run,
            created_by: ctx.session.clone(),
            untrusted: ctx.taint.sources(),
        };
        // A job repeats its prompt later, in runs that may not be tainted: an injection that
        // schedules itself would outlive the page it came from.
        let approved = ctx.taint.is_tainted();
        if let Some(tainted) = ctx.taint.why() {
            let schedule = match self.jobs.describe(request.clone(), self.tz) {
                Ok(schedule) => schedule,
                Err(e) => return ToolOutput::error(e.to_string()),
            };
            let ask = ApprovalRequest {
                session: ctx.session.clone(),
                tool: "cron".into(),
                command: format!("cron add {schedule}"),
                reason: format!(
                    "a cron job runs its prompt again later, and {tainted}; the prompt is below"
                ),
                always: None,
                detail: Some(request.prompt.clone()),
            };
            if let Err(refused) = approval::ask(ctx.approver.as_ref(), &ask).await {
                return refused;
            }
        }
        match self.jobs.add(request) {
            Ok(job) => ToolOutput::ok(format!(
                "Scheduled {}. When it runs, the prompt is given to you as a new message and \
                 your answer is sent to the chat.",
                job.summary(self.tz)
            ))
            .approved_if(approved),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }

    /// Which jobs a conversation may see and change.
    fn scope(&self, session: &str) -> Scope {
        if session.starts_with("terminal:") {
            return Scope::All;
        }
        // A scheduled run in a fresh session (`cron:<id>:<run>`) acts for its job's chat.
        if let Some(id) = session
            .strip_prefix("cron:")
            .and_then(|rest| rest.split(':').next())
            .and_then(|id| id.parse::<i64>().ok())
        {
            return match self.jobs.get(id) {
                Ok(job) => Scope::Chat(job.target.chat_session().to_string()),
                Err(_) => Scope::Chat(session.to_string()),
            };
        }
        Scope::Chat(session.to_string())
    }

    /// The jobs `session` may see.
    fn visible(&self, session: &str) -> Result<Vec<Job>, ToolOutput> {
        let scope = self.scope(session);
        match self.jobs.list() {
            Ok(jobs) => Ok(jobs.into_iter().filter(|j| scope.covers(j)).collect()),
            Err(e) => Err(ToolOutput::error(e.to_string())),
        }
    }

    /// Job `id` if `session` may see it; another chat's job is "no job", as a missing one.
    fn own_job(&self, input: &Value, session: &str) -> Result<i64, ToolOutput> {
        let id = job_id(input)?;
        match self.jobs.get(id) {
            Ok(job) if self.scope(session).covers(&job) => Ok(id),
            Ok(_) => Err(ToolOutput::error(JobError::UnknownJob(id).to_string())),
            Err(e) => Err(ToolOutput::error(e.to_string())),
        }
    }

    fn list(&self, session: &str) -> ToolOutput {
        match self.visible(session) {
            Ok(jobs) if jobs.is_empty() => ToolOutput::ok("No scheduled jobs."),
            Ok(jobs) => {
                let lines: Vec<String> = jobs.iter().map(|j| j.summary(self.tz)).collect();
                ToolOutput::ok(format!("{} job(s):\n{}", jobs.len(), lines.join("\n")))
            }
            Err(e) => e,
        }
    }

    fn status(&self, input: &Value, session: &str) -> ToolOutput {
        let now = self.jobs.clock().now().with_timezone(&self.tz);
        if input.get("id").is_none_or(Value::is_null) {
            let jobs = match self.visible(session) {
                Ok(jobs) => jobs,
                Err(e) => return e,
            };
            let active = jobs.iter().filter(|j| j.enabled).count();
            let next = jobs
                .iter()
                .filter(|j| j.enabled && !j.running)
                .filter_map(|j| j.next_run_at.map(|t| (t, j)))
                .min_by_key(|(t, _)| *t)
                .map(|(_, j)| format!("Next: {}", j.summary(self.tz)))
                .unwrap_or_else(|| "Nothing is scheduled.".into());
            return ToolOutput::ok(format!(
                "Now: {} ({}). {} job(s), {active} active, at most {}.\n{next}",
                now.format("%Y-%m-%d %H:%M:%S %Z"),
                self.tz,
                jobs.len(),
                self.jobs.limits().max_jobs,
            ));
        }
        let id = match self.own_job(input, session) {
            Ok(id) => id,
            Err(e) => return e,
        };
        match self.jobs.status(id, STATUS_RUNS) {
            Ok((job, runs)) => {
                let mut out = format!("{}\nPrompt: {}", job.summary(self.tz), job.prompt);
                if runs.is_empty() {
                    out.push_str("\nNo runs yet.");
                }
                for run in runs {
                    let detail: String = run.detail.unwrap_or_default().chars().take(200).collect();
                    out.push_str(&format!(
                        "\n- {} {:?}: {detail}",
                        run.slot
                            .with_timezone(&self.tz)
                            .format("%Y-%m-%d %H:%M:%S %Z"),
                        run.status,
                    ));
                }
                ToolOutput::ok(out)
            }
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

/// The jobs a conversation may see and change.
enum Scope {
    All,
    /// Those answering to this chat session.
    Chat(String),
}

impl Scope {
    fn covers(&self, job: &Job) -> bool {
        match self {
            Scope::All => true,
            Scope::Chat(chat) => job.target.chat_session() == chat,
        }
    }
}

/// The session a new job answers to: this conversation's, or with `topic` that topic of this
/// same Telegram chat (never another chat).
fn topic_session(input: &Value, session: &str) -> Result<String, ToolOutput> {
    let topic = match input.get("topic") {
        None | Some(Value::Null) => return Ok(session.to_string()),
        Some(v) => v
            .as_i64()
            .and_then(|t| i32::try_from(t).ok())
            .filter(|t| *t > 0),
    };
    let Some(topic) = topic else {
        return Err(ToolOutput::error(
            "topic must be a topic's number (its message_thread_id)",
        ));
    };
    match ChatKey::from_session_key(TELEGRAM, session) {
        Some(chat) => Ok(ChatKey::new(chat.chat_id, Some(topic)).session_key(TELEGRAM)),
        None => Err(ToolOutput::error(
            "topic works only in a Telegram chat: this conversation is not one",
        )),
    }
}

fn text<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// The `id` argument: a number, or a number in a string (`"3"`, `"#3"`).
fn job_id(input: &Value) -> Result<i64, ToolOutput> {
    let id = match input.get("id") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().trim_start_matches('#').parse().ok(),
        _ => None,
    };
    id.ok_or_else(|| ToolOutput::error("give the job's id (a number; `list` shows them)"))
}

#[async_trait]
impl Tool for CronTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "cron".into(),
            description: format!(
                "Schedule your own future runs: reminders, daily briefs, periodic checks. \
                 action=add needs a prompt (an instruction to yourself for when it runs, e.g. \
                 \"Remind the user to call the dentist.\") and exactly one of: at (a time: \
                 2026-11-21T09:30:00+01:00, or local 2026-11-21 09:30, or a delay like +20m), \
                 every (30m, 2h, 1d), cron (5 fields `min hour day month weekday`, or 6 with \
                 seconds first). Times and cron use the time zone {} unless you give timezone. \
                 The answer goes to this chat; session=\"new\" runs each time without this \
                 conversation's history; topic (a number) delivers into that topic of this \
                 Telegram chat instead. One-shot jobs delete themselves after running unless \
                 delete_after_run=false. Other actions: list, remove (id), run (id, now), \
                 status (id optional).",
                self.tz
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["add", "list", "remove", "run", "status"]},
                    "id": {"type": "integer", "description": "Job id (remove, run, status)"},
                    "prompt": {"type": "string", "description": "What to do when the job runs"},
                    "name": {"type": "string", "description": "Short name (default: the prompt's first words)"},
                    "at": {"type": "string"},
                    "every": {"type": "string"},
                    "cron": {"type": "string"},
                    "timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Berlin"},
                    "session": {"type": "string", "enum": ["current", "new"]},
                    "topic": {"type": "integer", "description": "A topic of this Telegram chat to deliver into (message_thread_id)"},
                    "delete_after_run": {"type": "boolean"}
                },
                "required": ["action"]
            }),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        match text(input, "action").unwrap_or("") {
            "add" => self.add(input, ctx).await,
            "list" => self.list(&ctx.session),
            "status" => self.status(input, &ctx.session),
            "remove" => match self
                .own_job(input, &ctx.session)
                .map(|id| self.jobs.remove(id))
            {
                Ok(Ok(job)) => ToolOutput::ok(format!("Removed job #{} {:?}.", job.id, job.name)),
                Ok(Err(e)) => ToolOutput::error(e.to_string()),
                Err(e) => e,
            },
            "run" => match self
                .own_job(input, &ctx.session)
                .map(|id| self.jobs.run_now(id))
            {
                // Not awaited: the run queues behind this one in the same chat.
                Ok(Ok(job)) => ToolOutput::ok(format!(
                    "Job #{} {:?} is due now; it runs after this conversation turn and its \
                     answer is sent to {}.",
                    job.id,
                    job.name,
                    job.target.chat_session()
                )),
                Ok(Err(e)) => ToolOutput::error(e.to_string()),
                Err(e) => e,
            },
            other => ToolOutput::error(format!(
                "unknown action {other:?}: use add, list, remove, run or status"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::scheduler::{Limits, TestClock};

    fn tool() -> CronTool {
        let clock = Arc::new(TestClock::new(
            chrono::DateTime::parse_from_rfc3339("2026-11-21T08:00:00Z")
                .unwrap()
                .with_timezone(&chrono::Utc),
        ));
        let limits = Limits {
            default_tz: chrono_tz::Europe::Berlin,
            min_interval: std::time::Duration::from_secs(60),
            max_jobs: 2,
        };
        let jobs = JobManager::new(crate::schema::open_in_memory().unwrap(), clock, limits);
        CronTool::new(Arc::new(jobs), chrono_tz::Europe::Berlin)
    }

    fn ctx() -> ToolContext {
        ToolContext::detached("telegram:42")
    }

    #[tokio::test]
    async fn add_list_status_run_remove() {
        let tool = tool();
        let out = tool
            .run(
                &json!({"action": "add", "at": "+20m", "prompt": "Remind me to stretch."}),
                &ctx(),
            )
            .await;
        assert!(!out.is_error, "{}", out.content);
        assert!(
            out.content
                .contains("#1 \"Remind me to stretch.\" at 2026-11-21 09:20:00 CET → telegram:42"),
            "{}",
            out.content
        );
        let out = tool
            .run(&json!({"action": "add", "cron": "0 9 * * 1-5", "prompt": "brief", "session": "new", "name": "brief"}), &ctx())
            .await;
        assert!(
            out.content.contains("new session, answer to telegram:42"),
            "{}",
            out.content
        );
        let out = tool.run(&json!({"action": "list"}), &ctx()).await;
        assert!(out.content.starts_with("2 job(s):"), "{}", out.content);
        let out = tool.run(&json!({"action": "status"}), &ctx()).await;
        assert!(
            out.content.contains(
                "Now: 2026-11-21 09:00:00 CET (Europe/Berlin). 2 job(s), 2 active, at most 2."
            ),
            "{}",
            out.content
        );
        assert!(out.content.contains("Next: #1"), "{}", out.content);
        let out = tool
            .run(&json!({"action": "status", "id": "#2"}), &ctx())
            .await;
        assert!(
            out.content.contains("Prompt: brief\nNo runs yet."),
            "{}",
            out.content
        );
        let out = tool.run(&json!({"action": "run", "id": 2}), &ctx()).await;
        assert!(out.content.contains("is due now"), "{}", out.content);
        let out = tool
            .run(&json!({"action": "remove", "id": 1}), &ctx())
            .await;
        assert_eq!(out.content, "Removed job #1 \"Remind me to stretch.\".");
    }

    #[tokio::test]
    async fn topic_delivers_into_a_topic_of_this_chat_only() {
        let tool = tool();
        let add =
            |topic: Value| json!({"action": "add", "at": "+20m", "prompt": "p", "topic": topic});
        let out = tool.run(&add(json!(9)), &ctx_in("telegram:-100:3")).await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("→ telegram:-100:9"), "{}", out.content);
        for (topic, session, why) in [
            (json!(0), "telegram:42", "topic must be"),
            (json!("9"), "telegram:42", "topic must be"),
            (json!(9), "terminal:default", "only in a Telegram chat"),
            (json!(9), "cron:1:2", "only in a Telegram chat"),
        ] {
            let out = tool.run(&add(topic), &ctx_in(session)).await;
            assert!(out.is_error, "{session}: {}", out.content);
            assert!(out.content.contains(why), "{session}: {}", out.content);
        }
    }

    fn ctx_in(session: &str) -> ToolContext {
        ToolContext {
            session: session.into(),
            ..ctx()
        }
    }

    #[tokio::test]
    async fn a_chat_sees_and_changes_only_its_own_jobs() {
        let tool = tool();
        let (alice, bob) = (ctx_in("telegram:1"), ctx_in("telegram:2"));
        let add = json!({"action": "add", "every": "1h", "prompt": "alice's secret plan"});
        assert!(!tool.run(&add, &alice).await.is_error);
        let add = json!({"action": "add", "every": "1h", "prompt": "bob's", "session": "new"});
        assert!(!tool.run(&add, &bob).await.is_error);

        let out = tool.run(&json!({"action": "list"}), &bob).await;
        assert!(out.content.starts_with("1 job(s):"), "{}", out.content);
        assert!(!out.content.contains("alice"), "{}", out.content);
        let out = tool.run(&json!({"action": "status"}), &bob).await;
        assert!(out.content.contains("1 job(s)"), "{}", out.content);
        // Alice's job #1 does not exist for Bob, whatever he asks.
        for action in ["status", "run", "remove"] {
            let out = tool.run(&json!({"action": action, "id": 1}), &bob).await;
            assert!(out.is_error, "{action}: {}", out.content);
            assert!(
                out.content.contains("no job #1"),
                "{action}: {}",
                out.content
            );
            assert!(!out.content.contains("secret plan"), "{}", out.content);
        }
        // Bob's fresh-session job acts for Bob's chat when it runs.
        let out = tool
            .run(&json!({"action": "list"}), &ctx_in("cron:2:1"))
            .await;
        assert!(out.content.contains("bob's"), "{}", out.content);
        assert!(!out.content.contains("alice"), "{}", out.content);
        // The machine's owner at the terminal sees both; Alice's job is intact.
        let out = tool
            .run(&json!({"action": "list"}), &ctx_in("terminal:default"))
            .await;
        assert!(out.content.starts_with("2 job(s):"), "{}", out.content);
        let out = tool
            .run(&json!({"action": "remove", "id": 1}), &alice)
            .await;
        assert!(!out.is_error, "{}", out.content);
    }

    #[tokio::test]
    async fn errors_are_clear() {
        let tool = tool();
        let cases = [
            (
                json!({"action": "add", "cron": "0 9 * *", "prompt": "x"}),
                "has 4",
            ),
            (
                json!({"action": "add", "at": "2020-01-01T00:00:00Z", "prompt": "x"}),
                "is not in the future (now is 2026-11-21 09:00:00 CET)",
            ),
            (
                json!({"action": "add", "every": "5m", "prompt": "x", "session": "telegram:7"}),
                "session must be",
            ),
            (
                json!({"action": "add", "every": "5m"}),
                "the prompt is empty",
            ),
            (json!({"action": "remove", "id": 99}), "no job #99"),
            (json!({"action": "run"}), "give the job's id"),
            (json!({"action": "status", "id": 5}), "no job #5"),
            (json!({"action": "frobnicate"}), "unknown action"),
        ];
        for (input, expected) in cases {
            let out = tool.run(&input, &ctx()).await;
            assert!(
                out.is_error && out.content.contains(expected),
                "{input}: {}",
                out.content
            );
        }
        for _ in 0..2 {
            let out = tool
                .run(
                    &json!({"action": "add", "every": "1h", "prompt": "x"}),
                    &ctx(),
                )
                .await;
            assert!(!out.is_error, "{}", out.content);
        }
        let out = tool
            .run(
                &json!({"action": "add", "every": "1h", "prompt": "x"}),
                &ctx(),
            )
            .await;
        assert!(
            out.content.contains("already 2 jobs (the maximum)"),
            "{}",
            out.content
        );
    }
}
