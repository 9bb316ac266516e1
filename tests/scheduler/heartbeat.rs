//! The heartbeat against a test clock and a scripted deliverer: active hours (including a
//! window across midnight), the empty-checklist skip, `HEARTBEAT_OK` suppression, the 24-hour
//! repeat rule, the prompt's date and time, a planted symlink, and the rhythm across restarts.

use crate::support::deliver::FakeDeliver;
use chrono::{DateTime, TimeZone, Utc};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use warden::policy::PathPolicy;
use warden::scheduler::active_hours::ActiveHours;
use warden::scheduler::{Beat, Clock, Deliver, Heartbeat, HeartbeatSettings, Origin, TestClock};

fn berlin() -> chrono_tz::Tz {
    chrono_tz::Europe::Berlin
}

/// A Berlin wall-clock time (CET in November).
fn local(s: &str) -> DateTime<Utc> {
    let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap();
    berlin()
        .from_local_datetime(&naive)
        .unwrap()
        .with_timezone(&Utc)
}

struct Harness {
    dir: tempfile::TempDir,
    clock: Arc<TestClock>,
    deliver: Arc<FakeDeliver>,
    heartbeat: Arc<Heartbeat>,
}

impl Harness {
    fn new(start: DateTime<Utc>, windows: &[&str], deliver: FakeDeliver) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        let clock = Arc::new(TestClock::new(start));
        Harness::open(dir, clock, windows, deliver)
    }

    fn open(
        dir: tempfile::TempDir,
        clock: Arc<TestClock>,
        windows: &[&str],
        deliver: FakeDeliver,
    ) -> Harness {
        let paths = Arc::new(
            PathPolicy::new(
                &dir.path().join("ws"),
                &[],
                &[],
                std::path::Path::new("/root"),
            )
            .unwrap(),
        );
        let db = warden::schema::open(&dir.path().join("warden.db")).unwrap();
        let deliver = Arc::new(deliver);
        let settings = HeartbeatSettings {
            every: Duration::from_secs(30 * 60),
            active: ActiveHours::parse(windows).unwrap(),
            tz: berlin(),
            chat_session: "telegram:42".into(),
        };
        let heartbeat = Heartbeat::new(
            settings,
            paths,
            db,
            clock.clone(),
            deliver.clone() as Arc<dyn Deliver>,
        );
        Harness {
            dir,
            clock,
            deliver,
            heartbeat,
        }
    }

    fn checklist(&self, text: &str) {
        std::fs::write(self.dir.path().join("ws/HEARTBEAT.md"), text).unwrap();
    }
}

const CHECKLIST: &str = "# Heartbeat\n\n- Is the rent due within two days?\n";

#[tokio::test]
async fn beats_only_inside_active_hours_including_a_window_across_midnight() {
    let h = Harness::new(
        local("2026-11-21 12:00"),
        &["22:00-06:00"],
        FakeDeliver::answering("HEARTBEAT_OK"),
    );
    h.checklist(CHECKLIST);
    assert_eq!(h.heartbeat.beat().await, Beat::Inactive);
    h.clock.set(local("2026-11-21 21:59"));
    assert_eq!(h.heartbeat.beat().await, Beat::Inactive);
    assert!(
        h.deliver.deliveries().is_empty(),
        "no model call outside active hours"
    );
    for inside in [
        "2026-11-21 22:00",
        "2026-11-21 23:45",
        "2026-11-22 00:10",
        "2026-11-22 05:59",
    ] {
        h.clock.set(local(inside));
        assert_eq!(h.heartbeat.beat().await, Beat::AllClear, "{inside}");
    }
    h.clock.set(local("2026-11-22 06:00"));
    assert_eq!(h.heartbeat.beat().await, Beat::Inactive);
    assert_eq!(h.deliver.deliveries().len(), 4);
}

#[tokio::test]
async fn the_next_beat_is_an_interval_later_moved_into_active_hours() {
    let h = Harness::new(
        local("2026-11-21 21:00"),
        &["08:00-22:00"],
        FakeDeliver::answering("HEARTBEAT_OK"),
    );
    h.checklist(CHECKLIST);
    // First start: the rhythm begins now; no beat at once.
    assert_eq!(h.heartbeat.next_beat().unwrap(), local("2026-11-21 21:30"));
    h.clock.set(local("2026-11-21 21:30"));
    h.heartbeat.beat().await;
    // 22:00 is outside: the next beat is when the window opens.
    assert_eq!(h.heartbeat.next_beat().unwrap(), local("2026-11-22 08:00"));
}

#[tokio::test]
async fn after_downtime_at_night_the_next_beat_waits_for_the_morning() {
    let h = Harness::new(
        local("2026-11-21 21:00"),
        &["08:00-22:00"],
        FakeDeliver::answering("HEARTBEAT_OK"),
    );
    h.checklist(CHECKLIST);
    h.heartbeat.next_beat().unwrap();
    // warden was off from 21:00 until 23:00: the missed 21:30 beat is not made up at night.
    h.clock.set(local("2026-11-21 23:00"));
    assert_eq!(h.heartbeat.next_beat().unwrap(), local("2026-11-22 08:00"));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(h.heartbeat.clone().run(shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(h.deliver.deliveries().is_empty());
    h.clock.set(local("2026-11-22 08:00"));
    h.deliver.wait_for(1).await;
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_missing_or_headings_only_checklist_asks_nothing() {
    let h = Harness::new(
        local("2026-11-21 10:00"),
        &["08:00-22:00"],
        FakeDeliver::answering("alert"),
    );
    assert_eq!(h.heartbeat.beat().await, Beat::NothingToCheck);
    h.checklist("# Heartbeat\n\n## Things to check\n\n   \n");
    assert_eq!(h.heartbeat.beat().await, Beat::NothingToCheck);
    assert!(h.deliver.deliveries().is_empty());
    h.checklist(CHECKLIST);
    assert_eq!(h.heartbeat.beat().await, Beat::Sent("alert".into()));
}

#[tokio::test]
async fn a_symlink_planted_as_the_checklist_is_not_followed() {
    let h = Harness::new(
        local("2026-11-21 10:00"),
        &["08:00-22:00"],
        FakeDeliver::answering("alert"),
    );
    let secret = h.dir.path().join("config.toml");
    std::fs::write(&secret, "token = \"fake-secret\"\n").unwrap();
    std::os::unix::fs::symlink(&secret, h.dir.path().join("ws/HEARTBEAT.md")).unwrap();
    let Beat::Failed(reason) = h.heartbeat.beat().await else {
        panic!("a symlinked checklist was read");
    };
    assert!(reason.contains("HEARTBEAT.md"), "{reason}");
    assert!(h.deliver.deliveries().is_empty());
}

#[tokio::test]
async fn the_prompt_has_the_date_time_and_checklist_and_goes_to_the_owner() {
    let h = Harness::new(
        local("2026-11-21 09:30"),
        &[],
        FakeDeliver::answering("HEARTBEAT_OK"),
    );
    h.checklist(CHECKLIST);
    h.heartbeat.beat().await;
    let delivery = &h.deliver.deliveries()[0];
    assert!(
        delivery
            .prompt
            .contains("2026-11-21 09:30 CET (Saturday), Europe/Berlin"),
        "{}",
        delivery.prompt
    );
    assert!(delivery
        .prompt
        .contains("- Is the rent due within two days?"));
    assert!(delivery.prompt.contains("answer exactly HEARTBEAT_OK"));
    assert_eq!(delivery.origin, Origin::Heartbeat);
    assert_eq!(delivery.chat_session, "telegram:42");
    assert!(
        delivery.session.starts_with("heartbeat:"),
        "a fresh session each beat"
    );
}

#[tokio::test]
async fn heartbeat_ok_is_not_sent() {
    let h = Harness::new(
        local("2026-11-21 10:00"),
        &[],
        FakeDeliver::scripted(
            vec![Ok("  HEARTBEAT_OK\n".into()), Ok("**HEARTBEAT_OK**".into())],
            Ok("HEARTBEAT_OK, but the backup failed".into()),
        ),
    );
    h.checklist(CHECKLIST);
    assert_eq!(h.heartbeat.beat().await, Beat::AllClear);
    assert_eq!(h.heartbeat.beat().await, Beat::AllClear);
    assert!(h.deliver.sent().is_empty());
    // The token inside a longer answer is an alert.
    assert!(matches!(h.heartbeat.beat().await, Beat::Sent(_)));
    assert_eq!(h.deliver.sent().len(), 1);
}

#[tokio::test]
async fn an_identical_alert_is_not_repeated_within_24_hours() {
    let start = local("2026-11-21 10:00");
    let h = Harness::new(start, &[], FakeDeliver::answering("Rent is due tomorrow."));
    h.checklist(CHECKLIST);
    assert_eq!(
        h.heartbeat.beat().await,
        Beat::Sent("Rent is due tomorrow.".into())
    );
    h.clock.set(start + chrono::Duration::minutes(30));
    assert_eq!(h.heartbeat.beat().await, Beat::Repeated);
    h.clock
        .set(start + chrono::Duration::hours(23) + chrono::Duration::minutes(59));
    assert_eq!(h.heartbeat.beat().await, Beat::Repeated);
    assert_eq!(h.deliver.sent().len(), 1);
    h.clock
        .set(start + chrono::Duration::hours(24) + chrono::Duration::minutes(1));
    assert!(matches!(h.heartbeat.beat().await, Beat::Sent(_)));
    assert_eq!(h.deliver.sent().len(), 2);

    // The rule survives a restart (the hash is stored), and a different alert goes out.
    let Harness { dir, clock, .. } = h;
    let h = Harness::open(
        dir,
        clock.clone(),
        &[],
        FakeDeliver::scripted(
            vec![Ok("Rent is due tomorrow.".into())],
            Ok("The backup failed.".into()),
        ),
    );
    clock.advance(chrono::Duration::minutes(30));
    assert_eq!(h.heartbeat.beat().await, Beat::Repeated);
    assert_eq!(
        h.heartbeat.beat().await,
        Beat::Sent("The backup failed.".into())
    );
}

#[tokio::test]
async fn the_loop_keeps_its_rhythm_across_restarts_and_beats_once_after_downtime() {
    let start = local("2026-11-21 10:00");
    let h = Harness::new(start, &[], FakeDeliver::answering("HEARTBEAT_OK"));
    h.checklist(CHECKLIST);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(h.heartbeat.clone().run(shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(h.deliver.deliveries().is_empty(), "no beat at first start");
    h.clock.advance(chrono::Duration::minutes(30));
    h.deliver.wait_for(1).await;
    h.clock.advance(chrono::Duration::minutes(30));
    h.deliver.wait_for(2).await;
    shutdown.cancel();
    task.await.unwrap();

    // Down for five hours: one beat on restart, then every 30 minutes from there.
    let Harness { dir, clock, .. } = h;
    clock.advance(chrono::Duration::hours(5));
    let h = Harness::open(
        dir,
        clock.clone(),
        &[],
        FakeDeliver::answering("HEARTBEAT_OK"),
    );
    // Due since 11:30 (the last beat was at 11:00): due now.
    assert_eq!(h.heartbeat.next_beat().unwrap(), clock.now());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(h.heartbeat.clone().run(shutdown.clone()));
    h.deliver.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        h.deliver.deliveries().len(),
        1,
        "one beat for the whole downtime"
    );
    assert_eq!(
        h.heartbeat.next_beat().unwrap(),
        clock.now() + chrono::Duration::minutes(30)
    );
    shutdown.cancel();
    task.await.unwrap();
}
