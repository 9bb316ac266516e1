//! The scheduler's runner against a test clock (no real sleeping for schedule logic) and a
//! scripted deliverer: cron slots across DST changes, missed runs after downtime, backoff,
//! one-shot jobs, a restart with the store reopened, a crash between delivering and recording,
//! and the timer loop (armed for the soonest job, re-armed on changes, idle when idle).

use crate::support::deliver::FakeDeliver;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use warden::scheduler::runs::{Next, RunStatus};
use warden::scheduler::{
    Clock, Deliver, JobManager, JobRequest, Limits, Origin, RetryPolicy, Runner, Target, TestClock,
};

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn berlin() -> chrono_tz::Tz {
    chrono_tz::Europe::Berlin
}

struct Harness {
    dir: tempfile::TempDir,
    clock: Arc<TestClock>,
    jobs: JobManager,
    deliver: Arc<FakeDeliver>,
    runner: Arc<Runner>,
}

impl Harness {
    fn new(start: DateTime<Utc>, deliver: FakeDeliver) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new(start));
        Harness::open(dir, clock, deliver)
    }

    /// (Re)open the database in `dir`: what a restart of warden does.
    fn open(dir: tempfile::TempDir, clock: Arc<TestClock>, deliver: FakeDeliver) -> Harness {
        let db = warden::schema::open(&dir.path().join("warden.db")).unwrap();
        let jobs = JobManager::new(db, clock.clone(), limits());
        let deliver = Arc::new(deliver);
        let runner = Runner::new(
            &jobs,
            deliver.clone() as Arc<dyn Deliver>,
            RetryPolicy::default(),
            berlin(),
        );
        Harness {
            dir,
            clock,
            jobs,
            deliver,
            runner,
        }
    }

    fn restart(self, deliver: FakeDeliver) -> Harness {
        let Harness { dir, clock, .. } = self;
        Harness::open(dir, clock, deliver)
    }

    fn add(&self, f: impl FnOnce(&mut JobRequest)) -> i64 {
        let mut request = JobRequest {
            prompt: "check the mail".into(),
            target: Some(Target::Session("telegram:42".into())),
            created_by: "test".into(),
            untrusted: Vec::new(),
            ..Default::default()
        };
        f(&mut request);
        self.jobs.add(request).unwrap().id
    }

    fn next_run(&self, id: i64) -> Option<DateTime<Utc>> {
        self.jobs.get(id).unwrap().next_run_at
    }
}

fn limits() -> Limits {
    Limits {
        default_tz: berlin(),
        min_interval: Duration::from_secs(60),
        max_jobs: 20,
    }
}

#[tokio::test]
async fn a_daily_job_follows_the_wall_clock_across_both_dst_changes() {
    // `30 2 * * *` in Europe/Berlin. Spring forward (2026-03-29): 02:30 does not exist and the
    // job runs once at 03:00 CEST. Fall back (2026-10-25): 02:30 happens twice and the job
    // runs once, at the first (CEST).
    for (start, expected) in [
        (
            "2026-03-27T12:00:00Z",
            [
                "2026-03-28T01:30:00Z", // 02:30 CET
                "2026-03-29T01:00:00Z", // 03:00 CEST, right after the gap
                "2026-03-30T00:30:00Z", // 02:30 CEST
            ],
        ),
        (
            "2026-10-23T12:00:00Z",
            [
                "2026-10-24T00:30:00Z", // 02:30 CEST
                "2026-10-25T00:30:00Z", // 02:30 CEST, the first of the two
                "2026-10-26T01:30:00Z", // 02:30 CET; nothing at 02:30 CET on the 25th
            ],
        ),
    ] {
        let h = Harness::new(utc(start), FakeDeliver::answering("ok"));
        let id = h.add(|r| r.cron = Some("30 2 * * *".into()));
        let mut slots = Vec::new();
        for _ in 0..3 {
            let due = h.next_run(id).unwrap();
            // One second early: nothing runs.
            h.clock.set(due - chrono::Duration::seconds(1));
            assert!(h.runner.run_due().await.is_empty());
            h.clock.set(due);
            let ran = h.runner.run_due().await;
            assert_eq!(ran.len(), 1);
            slots.push(ran[0].slot);
        }
        let expected: Vec<_> = expected.iter().map(|s| utc(s)).collect();
        assert_eq!(slots, expected, "from {start}");
        assert_eq!(h.deliver.deliveries().len(), 3);
    }
}

#[tokio::test]
async fn after_downtime_a_missed_job_runs_once_then_keeps_its_grid() {
    let start = utc("2026-11-21T08:00:00Z");
    let h = Harness::new(start, FakeDeliver::answering("done"));
    let hourly = h.add(|r| r.every = Some("1h".into()));
    let daily = h.add(|r| r.cron = Some("0 9 * * *".into()));
    // warden was down for three days: 72 hourly slots and 3 daily ones went by.
    h.clock
        .set(start + chrono::Duration::hours(72) + chrono::Duration::minutes(20));
    let ran = h.runner.run_due().await;
    assert_eq!(ran.len(), 2, "{ran:#?}");
    assert_eq!(h.deliver.deliveries().len(), 2);
    // Each ran for its first missed slot, and the prompt says how late it is.
    let hourly_run = ran.iter().find(|r| r.job == hourly).unwrap();
    assert_eq!(hourly_run.slot, start + chrono::Duration::hours(1));
    let prompt = &h.deliver.deliveries()[0].prompt;
    assert!(prompt.contains("now 2026-11-24 09:20 CET"), "{prompt}");
    // Next: the grid slot after now, not the backlog.
    assert_eq!(
        h.next_run(hourly),
        Some(start + chrono::Duration::hours(73))
    );
    assert_eq!(h.next_run(daily), Some(utc("2026-11-25T08:00:00Z")));
    assert!(h.runner.run_due().await.is_empty());
    assert_eq!(h.deliver.deliveries().len(), 2);
}

#[tokio::test]
async fn failures_back_off_exponentially_then_the_schedule_resumes() {
    let start = utc("2026-11-21T08:00:00Z");
    let failing = FakeDeliver::scripted(
        vec![
            Err("model unreachable".into()),
            Err("model unreachable".into()),
            Err("model unreachable".into()),
        ],
        Ok("done".into()),
    );
    let h = Harness::new(start, failing);
    let id = h.add(|r| r.every = Some("1h".into()));
    let mut now = start + chrono::Duration::hours(1);
    let mut waits = Vec::new();
    for _ in 0..3 {
        h.clock.set(now);
        let ran = h.runner.run_due().await;
        assert_eq!(ran[0].status, RunStatus::Error);
        let next = h.next_run(id).unwrap();
        waits.push((next - now).num_seconds());
        now = next;
    }
    assert_eq!(waits, vec![30, 60, 120]);
    let job = h.jobs.get(id).unwrap();
    assert_eq!(job.failures, 3);
    assert!(job.enabled);
    // Success: the failure count resets and the hourly grid resumes.
    h.clock.set(now);
    let ran = h.runner.run_due().await;
    assert_eq!(ran[0].status, RunStatus::Ok);
    assert_eq!(h.jobs.get(id).unwrap().failures, 0);
    assert_eq!(h.next_run(id), Some(start + chrono::Duration::hours(2)));
    // The history shows all four runs, newest first.
    let (_, runs) = h.jobs.status(id, 10).unwrap();
    let statuses: Vec<_> = runs.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![
            RunStatus::Ok,
            RunStatus::Error,
            RunStatus::Error,
            RunStatus::Error
        ]
    );
    assert_eq!(runs[1].detail.as_deref(), Some("model unreachable"));
}

#[tokio::test]
async fn backoff_is_capped() {
    let start = utc("2026-11-21T08:00:00Z");
    let h = Harness::new(start, FakeDeliver::scripted(Vec::new(), Err("down".into())));
    let id = h.add(|r| r.cron = Some("0 * * * *".into()));
    let mut now = h.next_run(id).unwrap();
    for _ in 0..10 {
        h.clock.set(now);
        h.runner.run_due().await;
        now = h.next_run(id).unwrap();
    }
    let last_wait = now - h.clock.now();
    assert_eq!(
        last_wait,
        chrono::Duration::hours(1),
        "capped at backoff_max"
    );
}

#[tokio::test]
async fn one_shot_jobs_delete_themselves_or_finish_or_give_up() {
    let start = utc("2026-11-21T08:00:00Z");
    let h = Harness::new(start, FakeDeliver::answering("Time to stretch!"));
    let deleting = h.add(|r| r.at = Some("+10m".into()));
    let keeping = h.add(|r| {
        r.at = Some("+10m".into());
        r.delete_after_run = Some(false)
    });
    h.clock.set(start + chrono::Duration::minutes(10));
    let ran = h.runner.run_due().await;
    assert_eq!(ran.len(), 2);
    assert!(matches!(
        h.jobs.get(deleting),
        Err(warden::scheduler::JobError::UnknownJob(_))
    ));
    let kept = h.jobs.get(keeping).unwrap();
    assert!(!kept.enabled);
    assert_eq!(kept.next_run_at, None);
    assert!(kept.summary(berlin()).contains("finished"));

    // A one-shot job that keeps failing is given up after three attempts and kept (not
    // deleted) so its errors can be read.
    let h = Harness::new(
        start,
        FakeDeliver::scripted(Vec::new(), Err("no chat".into())),
    );
    let id = h.add(|r| r.at = Some("+1m".into()));
    for attempt in 1..=3 {
        let due = h.next_run(id).expect("still scheduled");
        h.clock.set(due);
        let ran = h.runner.run_due().await;
        assert_eq!(ran.len(), 1, "attempt {attempt}");
    }
    let job = h.jobs.get(id).unwrap();
    assert!(!job.enabled);
    assert_eq!(job.failures, 3);
    assert_eq!(job.next_run_at, None);
    assert_eq!(h.jobs.status(id, 10).unwrap().1.len(), 3);
}

#[tokio::test]
async fn jobs_and_history_survive_a_restart() {
    let start = utc("2026-11-21T08:00:00Z");
    let h = Harness::new(start, FakeDeliver::answering("done"));
    let id = h.add(|r| {
        r.cron = Some("0 9 * * *".into());
        r.name = Some("morning brief".into());
        r.target = Some(Target::Fresh {
            reply_to: "telegram:42".into(),
        })
    });
    let before = h.jobs.get(id).unwrap();
    h.clock.set(before.next_run_at.unwrap());
    h.runner.run_due().await;
    let before = h.jobs.get(id).unwrap();

    let h = h.restart(FakeDeliver::answering("done again"));
    let after = h.jobs.get(id).unwrap();
    assert_eq!(after, before);
    assert_eq!(h.jobs.status(id, 10).unwrap().1.len(), 1);
    // And it runs at its next slot after the restart, in a fresh session.
    h.clock.set(after.next_run_at.unwrap());
    assert_eq!(h.runner.run_due().await.len(), 1);
    let delivery = &h.deliver.deliveries()[0];
    assert_eq!(delivery.chat_session, "telegram:42");
    assert!(delivery.session.starts_with(&format!("cron:{id}:")));
    assert_eq!(
        delivery.origin,
        Origin::Job {
            id,
            name: "morning brief".into()
        }
    );
    assert!(delivery.prompt.ends_with("check the mail"));
}

#[tokio::test]
async fn a_crash_between_delivering_and_recording_never_repeats_the_slot() {
    let start = utc("2026-11-21T08:00:00Z");
    let h = Harness::new(start, FakeDeliver::hanging());
    let id = h.add(|r| r.every = Some("1h".into()));
    let slot = h.next_run(id).unwrap();
    h.clock.set(slot + chrono::Duration::seconds(5));
    // The run starts (recorded as running) and is delivered, then warden "dies" before the
    // run is recorded as finished.
    let runner = h.runner.clone();
    let stuck = tokio::spawn(async move { runner.run_due().await });
    h.deliver.wait_for(1).await;
    stuck.abort();
    assert!(h.jobs.get(id).unwrap().running);

    let h = h.restart(FakeDeliver::answering("done"));
    assert_eq!(h.runner.recover().unwrap(), 1);
    // The cut-off run is recorded as interrupted; its slot does not run again.
    let (job, runs) = h.jobs.status(id, 10).unwrap();
    assert!(!job.running);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Interrupted);
    assert_eq!(runs[0].slot, slot);
    assert!(h.runner.run_due().await.is_empty());
    assert!(h.deliver.deliveries().is_empty());
    // The job moves on to its next slot.
    assert_eq!(job.next_run_at, Some(slot + chrono::Duration::hours(1)));
    // Even a store put back on the old slot refuses to run it twice.
    h.jobs
        .store()
        .reschedule(
            id,
            Next::Reschedule {
                next_run_at: Some(slot),
                failures: 0,
                enabled: true,
            },
        )
        .unwrap();
    assert!(h.runner.run_due().await.is_empty());
    assert!(h.deliver.deliveries().is_empty());
    assert_eq!(h.next_run(id), Some(slot + chrono::Duration::hours(1)));
}

#[tokio::test]
async fn a_run_cut_off_by_shutdown_is_settled_at_the_next_start_not_retried() {
    let start = utc("2026-11-21T08:00:00Z");
    let h = Harness::new(start, FakeDeliver::closing());
    let id = h.add(|r| r.every = Some("1h".into()));
    let slot = h.next_run(id).unwrap();
    h.clock.set(slot);
    // Not recorded as a failure (no backoff retry that would run the prompt a second time
    // beside the gateway's own durable copy): left running for the next start.
    assert!(h.runner.run_due().await.is_empty());
    let job = h.jobs.get(id).unwrap();
    assert!(job.running && job.failures == 0);
    let h = h.restart(FakeDeliver::answering("done"));
    h.runner.recover().unwrap();
    let (job, runs) = h.jobs.status(id, 10).unwrap();
    assert_eq!(runs[0].status, RunStatus::Interrupted);
    assert_eq!(job.next_run_at, Some(slot + chrono::Duration::hours(1)));
    assert!(h.runner.run_due().await.is_empty());
}

#[tokio::test]
async fn run_now_runs_at_once_and_the_schedule_continues() {
    let start = utc("2026-11-21T08:00:00Z");
    let h = Harness::new(start, FakeDeliver::answering("done"));
    let id = h.add(|r| r.cron = Some("0 9 * * *".into()));
    let regular = h.next_run(id).unwrap();
    h.jobs.run_now(id).unwrap();
    let ran = h.runner.run_due().await;
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0].slot, start);
    assert_eq!(h.next_run(id), Some(regular));
}

/// A clock that counts how often the runner goes to sleep: an idle runner must not spin.
struct CountingClock {
    inner: Arc<TestClock>,
    sleeps: AtomicUsize,
}

#[async_trait]
impl Clock for CountingClock {
    fn now(&self) -> DateTime<Utc> {
        self.inner.now()
    }
    async fn sleep_until(&self, deadline: DateTime<Utc>) {
        self.sleeps.fetch_add(1, Ordering::SeqCst);
        self.inner.sleep_until(deadline).await
    }
}

#[tokio::test]
async fn the_loop_arms_one_timer_for_the_soonest_job_and_rearms_on_changes() {
    let start = utc("2026-11-21T08:00:00Z");
    let test_clock = Arc::new(TestClock::new(start));
    let clock = Arc::new(CountingClock {
        inner: test_clock.clone(),
        sleeps: AtomicUsize::new(0),
    });
    let db = warden::schema::open_in_memory().unwrap();
    let jobs = JobManager::new(db, clock.clone(), limits());
    let deliver = Arc::new(FakeDeliver::answering("done"));
    let runner = Runner::new(&jobs, deliver.clone(), RetryPolicy::default(), berlin());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(runner.run(shutdown.clone()));
    let add = |at: &str| {
        jobs.add(JobRequest {
            at: Some(at.into()),
            prompt: format!("job at {at}"),
            target: Some(Target::Session("telegram:42".into())),
            created_by: "test".into(),
            untrusted: Vec::new(),
            ..Default::default()
        })
        .unwrap()
    };
    let later = add("+10m");
    // Idle: the runner sleeps once and stays asleep (no polling in real time).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sleeps = clock.sleeps.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        clock.sleeps.load(Ordering::SeqCst),
        sleeps,
        "the idle runner woke up"
    );

    test_clock.advance(chrono::Duration::minutes(5));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(deliver.deliveries().is_empty(), "nothing is due yet");
    // A sooner job re-arms the timer.
    let sooner = add("+2m");
    test_clock.advance(chrono::Duration::minutes(2));
    let seen = deliver.wait_for(1).await;
    assert!(seen[0].prompt.ends_with("job at +2m"));
    test_clock.advance(chrono::Duration::minutes(3));
    let seen = deliver.wait_for(2).await;
    assert!(seen[1].prompt.ends_with("job at +10m"));
    // Both were one-shot jobs that delete themselves.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(jobs.get(sooner.id).is_err() && jobs.get(later.id).is_err());
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the loop stops on shutdown")
        .unwrap();
}

#[tokio::test]
async fn a_job_added_by_another_process_is_picked_up_at_the_next_rescan() {
    let start = utc("2026-11-21T08:00:00Z");
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock::new(start));
    let path = dir.path().join("warden.db");
    let bot_side = JobManager::new(
        warden::schema::open(&path).unwrap(),
        clock.clone(),
        limits(),
    );
    let deliver = Arc::new(FakeDeliver::answering("done"));
    let runner = Runner::new(&bot_side, deliver.clone(), RetryPolicy::default(), berlin());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(runner.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    // `warden cron add` in another process: its own connection, no wake-up for this runner.
    let cli_side = JobManager::new(
        warden::schema::open(&path).unwrap(),
        clock.clone(),
        limits(),
    );
    cli_side
        .add(JobRequest {
            at: Some("+5s".into()),
            prompt: "from the command line".into(),
            target: Some(Target::Session("telegram:42".into())),
            created_by: "cli".into(),
            untrusted: Vec::new(),
            ..Default::default()
        })
        .unwrap();
    // The runner sleeps until its rescan; then it arms the timer for the new job.
    clock.advance(chrono::Duration::seconds(5));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        deliver.deliveries().is_empty(),
        "not seen before the rescan"
    );
    clock.advance(chrono::Duration::from_std(warden::scheduler::runner::RESCAN).unwrap());
    let seen = deliver.wait_for(1).await;
    assert!(seen[0].prompt.ends_with("from the command line"));
    shutdown.cancel();
    task.await.unwrap();
}
