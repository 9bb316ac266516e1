//! Queue logic against an in-process model and a recording channel: ordering, concurrency,
//! backpressure, stop, steer, dedup, idle actors, shutdown and recovery.

use super::store::{Inserted, NewRun, RunState, RunStore};
use super::*;
use crate::agent::{Agent, EventFn, RunControl, SystemPrompt};
use crate::llm::{ChatRequest, ChatResponse, EventSink, LlmError, Provider, StopReason, Usage};
use crate::memory::sessions::SessionStore;
use crate::tools::approval::{Approver, NoApprover};
use crate::tools::ToolSet;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio_util::sync::CancellationToken;

/// Answers `echo: <prompt>`. A prompt starting with `slow` takes 150 ms; `block` waits until
/// cancelled. Tracks how many calls with the same first word overlap.
#[derive(Default)]
struct Model {
    calls: Mutex<Vec<String>>,
    active: Mutex<HashMap<String, usize>>,
    max_overlap: Mutex<HashMap<String, usize>>,
    total_active: AtomicUsize,
    max_total: AtomicUsize,
    /// Answer every call with 529 (overloaded).
    overloaded: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl Provider for Model {
    fn name(&self) -> &str {
        "model"
    }
    fn supports_images(&self) -> bool {
        false
    }
    async fn chat(
        &self,
        req: &ChatRequest,
        _events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let prompt = req.messages.last().map(|m| m.text()).unwrap_or_default();
        if self.overloaded.load(Ordering::SeqCst) {
            lock(&self.calls).push(prompt);
            return Err(LlmError::Http {
                provider: "model".into(),
                status: 529,
                attempts: 5,
                message: "overloaded_error: Overloaded".into(),
            });
        }
        let group = prompt.split_whitespace().nth(1).unwrap_or("").to_string();
        lock(&self.calls).push(prompt.clone());
        {
            let mut active = lock(&self.active);
            let n = active.entry(group.clone()).or_default();
            *n += 1;
            let mut max = lock(&self.max_overlap);
            let m = max.entry(group.clone()).or_default();
            *m = (*m).max(*n);
        }
        let total = self.total_active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_total.fetch_max(total, Ordering::SeqCst);
        let wait = if prompt.starts_with("slow") {
            Duration::from_millis(150)
        } else if prompt.starts_with("block") {
            Duration::from_secs(3600)
        } else {
            Duration::ZERO
        };
        let cancelled = tokio::select! {
            _ = tokio::time::sleep(wait) => false,
            _ = cancel.cancelled() => true,
        };
        *lock(&self.active).entry(group).or_default() -= 1;
        self.total_active.fetch_sub(1, Ordering::SeqCst);
        if cancelled {
            return Err(LlmError::Cancelled);
        }
        Ok(ChatResponse {
            content: vec![ContentBlock::text(format!("echo: {prompt}"))],
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            model: "m".into(),
            provider: "model".into(),
        })
    }
}

#[derive(Default)]
struct Recorder {
    /// (run id, chat, text as sent, parts sent before)
    delivered: Mutex<Vec<(i64, i64, String, usize)>>,
    /// The draft each delivery was asked to replace, in order.
    drafts: Mutex<Vec<Option<i64>>>,
    opened: AtomicUsize,
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
    fn open_run(&self, run: &RunInfo, _control: &RunControl, draft: DraftFn) -> Box<dyn RunView> {
        self.opened.fetch_add(1, Ordering::SeqCst);
        // A run whose answer goes to the chat "streams" into message 500 + run id.
        if run.deliver {
            draft(500 + run.run_id);
        }
        Box::new(View)
    }
    /// Paragraphs are parts.
    fn parts(&self, text: &str) -> Vec<String> {
        text.split("\n\n").map(str::to_string).collect()
    }
    async fn send_part(
        &self,
        run: &RunInfo,
        index: usize,
        part: &str,
        again: bool,
    ) -> Result<(), SendError> {
        if index == 0 || lock(&self.delivered).last().map(|d| d.0) != Some(run.run_id) {
            lock(&self.delivered).push((run.run_id, run.chat_id, String::new(), index));
            lock(&self.drafts).push(run.draft);
        }
        let mut delivered = lock(&self.delivered);
        let text = &mut delivered.last_mut().unwrap().2;
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        if again {
            text.push_str("(again) ");
        }
        text.push_str(part);
        Ok(())
    }
}

struct Setup {
    gateway: Gateway,
    model: Arc<Model>,
    channel: Arc<Recorder>,
    db: Arc<Database>,
    _dir: tempfile::TempDir,
}

fn setup_with(db: Arc<Database>, settings: GatewaySettings) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(Model::default());
    let channel = Arc::new(Recorder::default());
    let agent = Agent::new(
        model.clone(),
        Arc::new(ToolSet::new(db.clone(), dir.path().join("out"))),
        SessionStore::new(db.clone()),
        SystemPrompt::new(dir.path(), vec![]),
        5,
    );
    let gateway = Gateway::new(Arc::new(agent), db.clone(), channel.clone(), settings);
    Setup {
        gateway,
        model,
        channel,
        db,
        _dir: dir,
    }
}

fn setup() -> Setup {
    setup_with(
        crate::schema::open_in_memory().unwrap(),
        GatewaySettings::default(),
    )
}

fn user(chat: i64, text: &str) -> Submission {
    Submission::text(chat, Origin::User { user_id: 1 }, text)
}

async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..400 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn one_chat_runs_in_order_never_overlapping_while_chats_run_concurrently() {
    let s = setup();
    let mut handles = Vec::new();
    for text in ["slow one a", "slow one b", "slow one c"] {
        handles.push(s.gateway.submit(user(1, text)).unwrap());
    }
    let other = s.gateway.submit(user(2, "slow two x")).unwrap();
    let mut texts = Vec::new();
    for h in handles {
        let result = h.wait().await.unwrap();
        assert_eq!(result.status, RunStatus::Answered);
        texts.push(result.text);
    }
    assert_eq!(
        texts,
        ["echo: slow one a", "echo: slow one b", "echo: slow one c"]
    );
    assert_eq!(other.wait().await.unwrap().text, "echo: slow two x");
    assert_eq!(
        lock(&s.model.max_overlap)["one"],
        1,
        "one chat's runs overlapped"
    );
    assert_eq!(
        s.model.max_total.load(Ordering::SeqCst),
        2,
        "chats did not overlap"
    );
    let delivered = lock(&s.channel.delivered);
    assert_eq!(delivered.len(), 4);
    assert!(delivered.iter().all(|d| d.3 == 0));
    // Each answer replaces the draft its run streamed into, and the store knows it.
    let drafts = lock(&s.channel.drafts);
    for (d, draft) in delivered.iter().zip(drafts.iter()) {
        assert_eq!(*draft, Some(500 + d.0));
        let row = store::RunStore::new(s.db.clone())
            .get(d.0)
            .unwrap()
            .unwrap();
        assert_eq!(row.draft, Some(500 + d.0));
    }
}

#[tokio::test]
async fn a_full_queue_answers_busy_and_stop_aborts_and_drops_it() {
    let s = setup_with(
        crate::schema::open_in_memory().unwrap(),
        GatewaySettings {
            queue_depth: 2,
            ..GatewaySettings::default()
        },
    );
    let running = s.gateway.submit(user(1, "block a")).unwrap();
    wait_until("the model is called", || lock(&s.model.calls).len() == 1).await;
    let q1 = s.gateway.submit(user(1, "second")).unwrap();
    let q2 = s.gateway.submit(user(1, "third")).unwrap();
    match s.gateway.submit(user(1, "fourth")) {
        Err(SubmitError::Busy { queued }) => assert_eq!(queued, 2),
        other => panic!("expected busy, got {other:?}"),
    }
    // Another chat is not affected by this one's queue.
    let elsewhere = s.gateway.submit(user(2, "hello")).unwrap();
    assert_eq!(elsewhere.wait().await.unwrap().text, "echo: hello");

    let status = s.gateway.status(1);
    assert_eq!(status.running.as_ref().unwrap().0, "block a");
    assert_eq!(status.queued, ["second", "third"]);
    assert!(!s.gateway.new_session(1).unwrap(), "/new while running");

    let report = s.gateway.stop(1);
    assert_eq!(
        report,
        StopReport {
            aborted: true,
            dropped: 2
        }
    );
    let stopped = tokio::time::timeout(Duration::from_secs(2), running.wait())
        .await
        .expect("stop is prompt")
        .unwrap();
    assert_eq!(stopped.status, RunStatus::Stopped);
    assert_eq!(stopped.text, "Stopped.");
    assert_eq!(q1.wait().await.unwrap().status, RunStatus::Cancelled);
    assert_eq!(q2.wait().await.unwrap().status, RunStatus::Cancelled);
    assert_eq!(lock(&s.model.calls).len(), 2, "dropped prompts never ran");
    assert!(s.gateway.new_session(1).unwrap());
}

#[tokio::test]
async fn a_dedup_key_runs_once() {
    let s = setup();
    let first = s
        .gateway
        .submit(user(1, "slow job").dedup_key("cron:1:08:00"))
        .unwrap();
    let again = s
        .gateway
        .submit(user(1, "slow job").dedup_key("cron:1:08:00"))
        .unwrap();
    assert_eq!(first.run_id, again.run_id);
    assert_eq!(first.wait().await.unwrap().text, "echo: slow job");
    assert_eq!(again.wait().await.unwrap().text, "echo: slow job");
    let later = s
        .gateway
        .submit(user(1, "slow job").dedup_key("cron:1:08:00"))
        .unwrap();
    assert_eq!(later.wait().await.unwrap().status, RunStatus::Answered);
    assert_eq!(lock(&s.model.calls).len(), 1);
    assert_eq!(lock(&s.channel.delivered).len(), 1);
}

#[tokio::test]
async fn a_silent_submission_is_not_delivered_but_its_handle_gets_the_answer() {
    let s = setup();
    let origin = Origin::Scheduled {
        job_id: "hb".into(),
    };
    let h = s
        .gateway
        .submit(Submission::text(5, origin, "heartbeat").silent())
        .unwrap();
    assert_eq!(h.wait().await.unwrap().text, "echo: heartbeat");
    assert!(lock(&s.channel.delivered).is_empty());
}

#[tokio::test]
async fn steering_after_the_last_step_runs_next() {
    let s = setup();
    let h = s.gateway.submit(user(1, "slow start")).unwrap();
    wait_until("the model is called", || lock(&s.model.calls).len() == 1).await;
    assert!(s.gateway.steer(1, "also this"));
    assert!(!s.gateway.steer(2, "nothing runs here"));
    assert_eq!(h.wait().await.unwrap().text, "echo: slow start");
    wait_until("the steer message ran", || {
        lock(&s.channel.delivered).len() == 2
    })
    .await;
    assert!(lock(&s.channel.delivered)[1].2.ends_with("also this"));
}

#[tokio::test]
async fn an_idle_actor_retires_and_comes_back_on_demand() {
    let s = setup_with(
        crate::schema::open_in_memory().unwrap(),
        GatewaySettings {
            idle: Duration::from_millis(30),
            ..GatewaySettings::default()
        },
    );
    s.gateway
        .submit(user(1, "hi"))
        .unwrap()
        .wait()
        .await
        .unwrap();
    wait_until("the actor retired", || {
        lock(&s.gateway.inner.chats).is_empty()
    })
    .await;
    let again = s.gateway.submit(user(1, "again")).unwrap();
    assert_eq!(again.wait().await.unwrap().text, "echo: again");
}

#[tokio::test]
async fn shutdown_interrupts_a_long_run_and_the_next_start_tells_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::schema::open(&dir.path().join("w.db")).unwrap();
    let s = setup_with(db.clone(), GatewaySettings::default());
    let long = s.gateway.submit(user(1, "block forever")).unwrap();
    wait_until("the model is called", || lock(&s.model.calls).len() == 1).await;
    let waiting = s.gateway.submit(user(1, "next")).unwrap();
    s.gateway.shutdown(Duration::from_millis(50)).await;
    assert_eq!(long.wait().await.unwrap().status, RunStatus::Interrupted);
    assert!(waiting.wait().await.is_err(), "a queued run stays queued");
    assert!(matches!(
        s.gateway.submit(user(1, "late")),
        Err(SubmitError::ShuttingDown)
    ));
    assert!(lock(&s.channel.delivered).is_empty());

    let restarted = setup_with(db, GatewaySettings::default());
    let report = restarted.gateway.recover().await.unwrap();
    assert_eq!(
        report,
        Recovery {
            interrupted: 1,
            requeued: 1
        }
    );
    wait_until("the queued prompt ran", || {
        lock(&restarted.channel.delivered).len() == 2
    })
    .await;
    let delivered = lock(&restarted.channel.delivered).clone();
    assert!(
        delivered[0]
            .2
            .starts_with("I was restarted while working on: “block forever”"),
        "{}",
        delivered[0].2
    );
    assert_eq!(delivered[1].2, "echo: next");
    // The interrupted prompt was not run again; a second start has nothing left to do.
    assert_eq!(lock(&restarted.model.calls).as_slice(), ["next"]);
    let third = setup_with(restarted.db.clone(), GatewaySettings::default());
    assert_eq!(third.gateway.recover().await.unwrap(), Recovery::default());
}

#[tokio::test]
async fn recovery_after_a_crash_resumes_delivery_where_it_stopped() {
    let s = setup();
    let store = RunStore::new(s.db.clone());
    let origin = Origin::User { user_id: 1 };
    let input = vec![ContentBlock::text("q")];
    let insert = |preview: &str| match store
        .insert(&NewRun {
            chat_id: 9,
            topic: None,
            origin: &origin,
            dedup_key: None,
            input: &input,
            preview,
            reply_to: Some(4),
            deliver: true,
            session: None,
        })
        .unwrap()
    {
        Inserted::New(id) => id,
        Inserted::Existing(_) => unreachable!(),
    };
    let crashed_mid_run = insert("was running");
    store.set_running(crashed_mid_run).unwrap();
    store.set_draft(crashed_mid_run, 70).unwrap();
    let crashed_mid_reply = insert("was replying");
    store
        .set_replying(crashed_mid_reply, "answered", "part one\n\npart two")
        .unwrap();
    store.set_draft(crashed_mid_reply, 71).unwrap();
    store.set_sending(crashed_mid_reply, 1).unwrap();
    store.set_parts_sent(crashed_mid_reply, 1).unwrap();
    // Killed after sending part 2 began, before the channel answered: it may have arrived.
    let crashed_mid_send = insert("was sending");
    store
        .set_replying(crashed_mid_send, "answered", "one\n\ntwo\n\nthree")
        .unwrap();
    store.set_parts_sent(crashed_mid_send, 1).unwrap();
    store.set_sending(crashed_mid_send, 2).unwrap();

    let report = s.gateway.recover().await.unwrap();
    assert_eq!(
        report,
        Recovery {
            interrupted: 1,
            requeued: 2
        }
    );
    wait_until("all handled", || lock(&s.channel.delivered).len() == 3).await;
    let delivered = lock(&s.channel.delivered).clone();
    assert!(delivered[0].2.contains("“was running”"));
    assert_eq!((delivered[1].2.as_str(), delivered[1].3), ("part two", 1));
    // Part 2 goes once more, marked; part 3 was never begun.
    assert_eq!(
        (delivered[2].2.as_str(), delivered[2].3),
        ("(again) two\n\nthree", 1)
    );
    // The notice replaces what the cut-off run had streamed; the answer its own draft.
    assert_eq!(*lock(&s.channel.drafts), [Some(70), Some(71), None]);
    wait_until("marked answered", || {
        [crashed_mid_run, crashed_mid_reply, crashed_mid_send]
            .iter()
            .all(|id| store.get(*id).unwrap().unwrap().state == RunState::Answered)
    })
    .await;
    let told = store.get(crashed_mid_run).unwrap().unwrap();
    assert_eq!(told.outcome.as_deref(), Some("interrupted"));
    assert_eq!(told.parts_sent, 1);
    assert!(lock(&s.model.calls).is_empty(), "nothing was run again");
    // Everything is done: another start sends nothing.
    assert_eq!(s.gateway.recover().await.unwrap(), Recovery::default());
}

#[tokio::test]
async fn an_answer_waits_for_a_database_that_refuses_writes_and_the_chat_is_told_once() {
    let s = setup();
    let handle = s.gateway.submit(user(3, "slow writes")).unwrap();
    wait_until("the model is called", || lock(&s.model.calls).len() == 1).await;
    // The answer arrives while the database takes no writes.
    s.db.conn().pragma_update(None, "query_only", true).unwrap();
    wait_until("the chat is told", || {
        !lock(&s.channel.delivered).is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1800)).await;
    {
        let delivered = lock(&s.channel.delivered);
        assert_eq!(
            delivered.len(),
            1,
            "told once, nothing else sent: {delivered:?}"
        );
        assert_eq!((delivered[0].0, delivered[0].1), (0, 3));
        assert_eq!(delivered[0].2, Trouble::Database.notice(true));
    }
    s.db.conn()
        .pragma_update(None, "query_only", false)
        .unwrap();
    // The agent could not keep the model's answer in the transcript either: the run failed,
    // and says so once there is room to record that.
    let result = handle.wait().await.unwrap();
    assert_eq!(result.status, RunStatus::Failed);
    let delivered = lock(&s.channel.delivered).clone();
    assert_eq!(delivered.len(), 2);
    assert_eq!(delivered[1].2, result.text);
    let row = RunStore::new(s.db.clone())
        .get(delivered[1].0)
        .unwrap()
        .unwrap();
    assert_eq!((row.state, row.parts_sent), (RunState::Answered, 1));
}

#[tokio::test]
async fn failed_runs_tell_the_chat_in_plain_words_and_retry_runs_them_again_once() {
    let s = setup();
    s.gateway
        .submit(user(4, "fine"))
        .unwrap()
        .wait()
        .await
        .unwrap();
    s.model.overloaded.store(true, Ordering::SeqCst);
    let first = s.gateway.submit(user(4, "one")).unwrap();
    let second = s.gateway.submit(user(4, "two")).unwrap();
    for (handle, preview) in [(first, "one"), (second, "two")] {
        let result = handle.wait().await.unwrap();
        assert_eq!(result.status, RunStatus::Failed);
        assert_eq!(
            result.text,
            format!(
                "The model stayed overloaded while I kept trying, so I could not answer \
                 “{preview}”. Tap /retry to try again."
            )
        );
    }
    // The details are in the audit log, not in the chat.
    let audit = crate::audit::recent(&s.db, 10).unwrap();
    let failed: Vec<_> = audit.iter().filter(|r| r.tool == "run").collect();
    assert_eq!(failed.len(), 2);
    assert!(
        failed.iter().all(|r| r.reason.contains("HTTP 529")),
        "{failed:?}"
    );

    s.model.overloaded.store(false, Ordering::SeqCst);
    assert_eq!(s.gateway.retry(4, 1).unwrap(), 2);
    // A second tap while they wait or after they ran queues nothing more.
    assert_eq!(s.gateway.retry(4, 1).unwrap(), 0);
    wait_until("both answered", || {
        lock(&s.channel.delivered)
            .iter()
            .filter(|d| d.2.starts_with("echo: "))
            .count()
            == 3
    })
    .await;
    let answers: Vec<String> = lock(&s.channel.delivered)
        .iter()
        .map(|d| d.2.clone())
        .filter(|t| t.starts_with("echo: "))
        .collect();
    assert_eq!(answers, ["echo: fine", "echo: one", "echo: two"]);
    assert_eq!(s.gateway.retry(4, 1).unwrap(), 0);
}

#[test]
fn previews_are_one_short_line() {
    assert_eq!(preview("hello"), "hello");
    assert_eq!(preview("first\nsecond"), "first…");
    assert_eq!(preview(&"x".repeat(100)).chars().count(), 81);
}
