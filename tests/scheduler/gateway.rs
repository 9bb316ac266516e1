//! The scheduler delivering through the real gateway (library level, fake LLM on 127.0.0.1, a
//! recording channel): a scheduled run waits for the user's run in the same chat and does not
//! wait for other chats; fresh-session jobs and the heartbeat stay out of the chat's history;
//! `HEARTBEAT_OK` never reaches the chat.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warden::agent::{Agent, EventFn, RunControl, SystemPrompt};
use warden::db::Database;
use warden::gateway::{
    Channel, DraftFn, Gateway, GatewaySettings, Origin, RunInfo, RunView, SendError, Submission,
};
use warden::memory::sessions::SessionStore;
use warden::policy::PathPolicy;
use warden::scheduler::active_hours::ActiveHours;
use warden::scheduler::gateway_deliver::GatewayDeliver;
use warden::scheduler::{
    Beat, Clock, Heartbeat, HeartbeatSettings, JobManager, JobRequest, Limits, RetryPolicy, Runner,
    SystemClock, Target,
};
use warden::tools::approval::{Approver, NoApprover};
use warden::tools::ToolSet;

/// What the chat shows: (chat, text, when).
#[derive(Default)]
struct Recorder {
    sent: Mutex<Vec<(i64, String, Instant)>>,
}

impl Recorder {
    fn sent_to(&self, chat: i64) -> Vec<String> {
        let sent = self.sent.lock().unwrap();
        sent.iter()
            .filter(|(c, _, _)| *c == chat)
            .map(|(_, t, _)| t.clone())
            .collect()
    }

    fn when(&self, text: &str) -> Instant {
        let sent = self.sent.lock().unwrap();
        sent.iter().find(|(_, t, _)| t == text).expect(text).2
    }
}

struct View;

#[async_trait]
impl RunView for View {
    fn approver(&self) -> Arc<dyn Approver> {
        Arc::new(NoApprover)
    }
    fn events(&self) -> EventFn {
        Arc::new(|_| {})
    }
    async fn finish(self: Box<Self>) {}
}

#[async_trait]
impl Channel for Recorder {
    fn open_run(&self, _run: &RunInfo, _control: &RunControl, _draft: DraftFn) -> Box<dyn RunView> {
        Box::new(View)
    }
    /// Every answer is one part.
    fn parts(&self, text: &str) -> Vec<String> {
        vec![text.to_string()]
    }
    async fn send_part(
        &self,
        run: &RunInfo,
        _index: usize,
        part: &str,
        _again: bool,
    ) -> Result<(), SendError> {
        self.sent
            .lock()
            .unwrap()
            .push((run.chat_id, part.to_string(), Instant::now()));
        Ok(())
    }
}

struct Harness {
    dir: tempfile::TempDir,
    db: Arc<Database>,
    gateway: Gateway,
    channel: Arc<Recorder>,
    jobs: JobManager,
    runner: Arc<Runner>,
    deliver: Arc<GatewayDeliver>,
}

const OWNER: i64 = 42;

fn harness(llm: &FakeLlm) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let db = warden::schema::open(&dir.path().join("warden.db")).unwrap();
    let agent = Agent::new(
        Arc::from(llm.provider()),
        Arc::new(ToolSet::new(db.clone(), dir.path().join("out"))),
        SessionStore::new(db.clone()),
        SystemPrompt::new(dir.path(), vec![]),
        5,
    );
    let channel = Arc::new(Recorder::default());
    let gateway = Gateway::new(
        Arc::new(agent),
        db.clone(),
        channel.clone(),
        GatewaySettings::default(),
    );
    let limits = Limits {
        default_tz: chrono_tz::UTC,
        min_interval: Duration::from_secs(60),
        max_jobs: 10,
    };
    let jobs = JobManager::new(db.clone(), Arc::new(SystemClock), limits);
    let deliver = Arc::new(GatewayDeliver::new(gateway.clone(), OWNER));
    let runner = Runner::new(
        &jobs,
        deliver.clone(),
        RetryPolicy::default(),
        chrono_tz::UTC,
    );
    Harness {
        dir,
        db,
        gateway,
        channel,
        jobs,
        runner,
        deliver,
    }
}

impl Harness {
    fn add(&self, prompt: &str, target: Target) -> i64 {
        self.jobs
            .add(JobRequest {
                at: Some("+1h".into()),
                prompt: prompt.into(),
                target: Some(target),
                created_by: "test".into(),
                untrusted: Vec::new(),
                ..Default::default()
            })
            .unwrap()
            .id
    }

    fn history(&self, session: &str) -> String {
        SessionStore::new(self.db.clone())
            .load(session)
            .unwrap()
            .iter()
            .map(|m| m.text())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The user's question takes 800 ms; everything else answers at once.
async fn llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| {
        let prompt = req.last_user_text();
        if prompt.starts_with("user:") {
            Turn::text("user answer").delay(Duration::from_millis(800))
        } else if prompt.contains("HEARTBEAT.md") {
            Turn::text("HEARTBEAT_OK")
        } else {
            let last_line = prompt.lines().last().unwrap_or("").to_string();
            Turn::text(format!("done: {last_line}"))
        }
    })
    .await
}

#[tokio::test]
async fn a_scheduled_run_waits_for_the_users_run_in_its_chat_but_not_for_other_chats() {
    let llm = llm().await;
    let h = harness(&llm);
    let mine = h.add(
        "remind about the call",
        Target::Session("telegram:42".into()),
    );
    let other = h.add("ping the other chat", Target::Session("telegram:7".into()));
    // The user asks something slow; while it runs, both jobs come due.
    let user = h
        .gateway
        .submit(Submission::text(
            OWNER,
            Origin::User { user_id: OWNER },
            "user: a long question",
        ))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while llm.request_count() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    for id in [mine, other] {
        h.jobs.run_now(id).unwrap();
    }
    let ran = h.runner.run_due().await;
    assert_eq!(ran.len(), 2);
    assert!(user.wait().await.is_ok());

    // In chat 42: the user's answer first, then the job's — never overlapping.
    assert_eq!(
        h.channel.sent_to(OWNER),
        vec!["user answer", "done: remind about the call"]
    );
    let requests = llm.requests();
    let job_request = requests
        .iter()
        .find(|r| r.last_user_text().ends_with("remind about the call"))
        .unwrap();
    assert!(
        job_request.at >= h.channel.when("user answer"),
        "the job's model call started before the user's answer was sent"
    );
    // Chat 7 did not wait for chat 42.
    assert!(h.channel.when("done: ping the other chat") < h.channel.when("user answer"));
    // The run is in the chat's session, so the chat's context knows about it.
    assert!(h.history("telegram:42").contains("remind about the call"));
}

#[tokio::test]
async fn a_fresh_session_job_answers_in_the_chat_without_touching_its_history() {
    let llm = llm().await;
    let h = harness(&llm);
    let id = h.add(
        "summarize the news",
        Target::Fresh {
            reply_to: "telegram:42".into(),
        },
    );
    h.jobs.run_now(id).unwrap();
    let ran = h.runner.run_due().await;
    assert_eq!(ran.len(), 1);
    assert_eq!(h.channel.sent_to(OWNER), vec!["done: summarize the news"]);
    assert!(h.history("telegram:42").is_empty());
    assert!(h
        .history(&format!("cron:{id}:{}", ran[0].run))
        .contains("summarize the news"));
}

#[tokio::test]
async fn a_job_for_a_session_without_a_chat_answers_in_the_owners_chat() {
    let llm = llm().await;
    let h = harness(&llm);
    let id = h.add(
        "from the terminal",
        Target::Session("terminal:default".into()),
    );
    h.jobs.run_now(id).unwrap();
    h.runner.run_due().await;
    assert_eq!(h.channel.sent_to(OWNER), vec!["done: from the terminal"]);
    assert!(h.history("terminal:default").contains("from the terminal"));
}

#[tokio::test]
async fn the_heartbeat_runs_silently_and_only_real_alerts_reach_the_chat() {
    let llm = FakeLlm::anthropic(vec![
        Turn::text("HEARTBEAT_OK"),
        Turn::text("The backup failed last night."),
        Turn::text("The backup failed last night."),
    ])
    .await;
    let h = harness(&llm);
    std::fs::write(
        h.dir.path().join("ws/HEARTBEAT.md"),
        "# Checks\n- Did the backup run?\n",
    )
    .unwrap();
    let paths = Arc::new(
        PathPolicy::new(
            &h.dir.path().join("ws"),
            &[],
            &[],
            std::path::Path::new("/root"),
        )
        .unwrap(),
    );
    let heartbeat = Heartbeat::new(
        HeartbeatSettings {
            every: Duration::from_secs(1800),
            active: ActiveHours::always(),
            tz: chrono_tz::UTC,
            chat_session: "telegram:42".into(),
        },
        paths,
        h.db.clone(),
        Arc::new(SystemClock),
        h.deliver.clone(),
    );
    assert_eq!(heartbeat.beat().await, Beat::AllClear);
    assert!(h.channel.sent_to(OWNER).is_empty(), "HEARTBEAT_OK was sent");
    assert_eq!(
        heartbeat.beat().await,
        Beat::Sent("The backup failed last night.".into())
    );
    assert_eq!(heartbeat.beat().await, Beat::Repeated);
    assert_eq!(
        h.channel.sent_to(OWNER),
        vec!["The backup failed last night."]
    );
    // Each beat ran in its own session, not in the chat's.
    assert!(h.history("telegram:42").is_empty());
    let now: DateTime<Utc> = SystemClock.now();
    assert!(llm.requests()[0]
        .last_user_text()
        .contains(&now.format("%Y-%m-%d").to_string()));
}

#[tokio::test]
async fn a_queued_run_keeps_its_session_across_a_restart() {
    use warden::gateway::store::{Inserted, NewRun, RunStore};
    let llm = llm().await;
    let h = harness(&llm);
    // A previous process queued a fresh-session run and stopped before it started.
    let origin = Origin::Scheduled { job_id: "3".into() };
    let input = vec![warden::llm::ContentBlock::text("check the feeds")];
    let inserted = RunStore::new(h.db.clone())
        .insert(&NewRun {
            chat_id: OWNER,
            topic: None,
            origin: &origin,
            dedup_key: Some("cron:3:x"),
            input: &input,
            preview: "check the feeds",
            reply_to: None,
            deliver: true,
            session: Some("cron:3:17"),
        })
        .unwrap();
    assert!(matches!(inserted, Inserted::New(_)));
    let recovery = h.gateway.recover().await.unwrap();
    assert_eq!(recovery.requeued, 1);
    tokio::time::timeout(Duration::from_secs(10), async {
        while h.channel.sent_to(OWNER).is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(h.channel.sent_to(OWNER), vec!["done: check the feeds"]);
    assert!(h.history("cron:3:17").contains("check the feeds"));
    assert!(h.history("telegram:42").is_empty());
}

#[tokio::test]
async fn a_fresh_session_run_cut_off_by_a_crash_is_closed_in_its_own_session() {
    use warden::gateway::store::{Inserted, NewRun, RunStore};
    let llm = llm().await;
    let h = harness(&llm);
    let origin = Origin::Scheduled { job_id: "4".into() };
    let input = vec![warden::llm::ContentBlock::text("water the plants")];
    let store = RunStore::new(h.db.clone());
    let Inserted::New(id) = store
        .insert(&NewRun {
            chat_id: OWNER,
            topic: None,
            origin: &origin,
            dedup_key: None,
            input: &input,
            preview: "water the plants",
            reply_to: None,
            deliver: true,
            session: Some("cron:4:9"),
        })
        .unwrap()
    else {
        panic!("inserted");
    };
    // The previous process was running it: its prompt is in the job's session, no answer.
    store.set_running(id).unwrap();
    let sessions = SessionStore::new(h.db.clone());
    sessions
        .append("cron:4:9", &warden::llm::Message::user("water the plants"))
        .unwrap();
    let recovery = h.gateway.recover().await.unwrap();
    assert_eq!(recovery.interrupted, 1);
    assert!(h.history("cron:4:9").contains("interrupted by a restart"));
    assert!(
        h.history("telegram:42").is_empty(),
        "the chat's transcript was touched"
    );
}
