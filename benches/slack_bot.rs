//! `warden bot` with Slack only: resident memory (VmRSS, and the peak VmHWM) and threads of
//! the idle gateway after start-up — connected over Socket Mode to a fake Slack on 127.0.0.1,
//! no agent worker running — and again after it has answered `WARDEN_BENCH_MESSAGES` direct
//! messages (default 50) from an instantly answering fake model, with the time from an
//! envelope sent to its answer posted.
//!
//! `cargo bench --bench slack_bot` (release build); `cargo test --bench slack_bot` runs it
//! once on the debug build.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};
use support::fake_llm::{FakeLlm, Request, Turn};
use support::fake_slack::{bot_env, dm, FakeSlack, DM, OWNER};
use support::procs::worker_of;
use support::warden_bot::BotProcess;

fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let messages: usize = std::env::var("WARDEN_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(messages));
}

async fn run(messages: usize) {
    let slack = FakeSlack::start().await;
    let llm = FakeLlm::anthropic_with(|req: &Request| {
        Turn::text(format!("answer: {}", req.last_user_text()))
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    let mut env = bot_env(&slack, home.path(), llm.base_url(), &[]);
    env.extra.retain(|(k, _)| k != "RUST_LOG");
    env.extra.push(("RUST_LOG".into(), "warn".into()));
    let started = Instant::now();
    let bot = BotProcess::start(&env);
    slack
        .wait_until("connected", Duration::from_secs(60), |f| {
            f.connections() > 0
        })
        .await;
    let ready = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = bot.pid();
    assert_eq!(worker_of(pid), None, "no worker while idle");
    let idle = (
        status_kb(pid, "VmRSS:"),
        status_kb(pid, "VmHWM:"),
        status_kb(pid, "Threads:"),
    );
    let mut latencies = Vec::new();
    for n in 0..messages {
        let sent = Instant::now();
        slack.send_event(dm(OWNER, &format!("m{n}"), &format!("1.{n:06}")));
        slack
            .wait_until("the answer", Duration::from_secs(60), |f| {
                f.messages_in(DM).len() > n
            })
            .await;
        latencies.push(sent.elapsed());
    }
    latencies.sort();
    let busy_rss = status_kb(pid, "VmRSS:");
    println!("warden bot, Slack only ({messages} messages):");
    println!("  connected {ready:.1?} after start");
    println!(
        "  idle (gateway only, no worker): VmRSS {} kB, VmHWM {} kB, {} threads",
        idle.0, idle.1, idle.2
    );
    println!(
        "  envelope → answer posted: median {:?}, p90 {:?} (model instant)",
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 9 / 10]
    );
    println!("  after the messages: gateway VmRSS {busy_rss} kB");
}
