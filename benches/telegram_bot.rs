//! `warden bot` costs, measured on the real binary against the fake Bot API and an instantly
//! answering fake LLM (both on 127.0.0.1):
//!
//! - resident memory (VmRSS, and the peak VmHWM) of the idle bot after start-up (the gateway
//!   process alone: no agent worker runs while nothing is asked), again after it has handled
//!   the messages below (gateway and worker), and once the worker has stopped;
//! - the overhead per message excluding the model: from the moment the fake hands the update
//!   to the bot (getUpdates returns) until the answer's sendMessage arrives — one message at a
//!   time, so nothing waits in a queue;
//! - the idle bot with the default 30 s long poll, which the fake holds for its whole timeout
//!   as Telegram does: `getUpdates` calls per minute, and the CPU time the gateway used
//!   (utime + stime from /proc) over that minute.
//!
//! `cargo bench --bench telegram_bot` (release build). `WARDEN_BENCH_MESSAGES` sets the count,
//! `WARDEN_BENCH_WORKER_IDLE` the worker's idle seconds (default 3), `WARDEN_BENCH_IDLE_SECS`
//! how long the idle bot is watched (default 60). `WARDEN_BENCH_BIN` measures another warden
//! binary (another build profile, an older commit) with the same harness.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};
use support::fake_llm::{FakeLlm, Request, Turn};
use support::fake_telegram::FakeTelegram;
use support::procs::worker_of;
use support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};

fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time the process used so far (user + system), from /proc/<pid>/stat.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // pid (comm) state … ; utime and stime are the 14th and 15th fields, in clock ticks.
    let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let fields: Vec<u64> = after
        .split(' ')
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(fields.iter().sum::<u64>() * 1000 / ticks)
}

fn threads(pid: u32) -> u64 {
    status_kb(pid, "Threads:")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing special. Either way
    // this runs once.
    let messages: usize = std::env::var("WARDEN_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(messages));
}

async fn run(messages: usize) {
    let idle_secs: u64 = std::env::var("WARDEN_BENCH_WORKER_IDLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::anthropic_with(|req: &Request| {
        Turn::text(format!("answer: {}", req.last_user_text()))
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    let mut env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    env.extra = vec![("RUST_LOG".into(), "warn".into())];
    if let Some(binary) = std::env::var_os("WARDEN_BENCH_BIN") {
        env.binary = binary.into();
    }
    env.write_config(&format!("[telegram]\nworker_idle_secs = {idle_secs}\n"));
    let started = Instant::now();
    let bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, Duration::from_secs(30))
        .await;
    let ready = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = bot.pid();
    assert_eq!(worker_of(pid), None, "no worker while idle");
    let idle_rss = status_kb(pid, "VmRSS:");
    let idle_hwm = status_kb(pid, "VmHWM:");
    let idle_threads = threads(pid);
    let idle_anon = status_kb(pid, "RssAnon:");
    let idle_file = status_kb(pid, "RssFile:");

    let mut overheads = Vec::with_capacity(messages);
    for i in 0..=messages {
        let (update, _) = tg.push_text(OWNER, OWNER, &format!("message {i}"));
        let expected = format!("answer: message {i}");
        tg.wait_until("the answer", Duration::from_secs(30), |t| {
            t.messages_to(OWNER)
                .last()
                .is_some_and(|m| m.visible == expected)
        })
        .await;
        let sent = tg.messages_to(OWNER).last().unwrap().at;
        let served = tg.served_at(update).expect("the update was served");
        overheads.push(sent.duration_since(served));
    }
    // Message 0 started the worker.
    let cold = overheads.remove(0);
    let worker = worker_of(pid).expect("a worker served the messages");
    let busy_rss = status_kb(pid, "VmRSS:");
    let busy_hwm = status_kb(pid, "VmHWM:");
    let worker_rss = status_kb(worker, "VmRSS:");
    let last_answer = Instant::now();
    while worker_of(pid).is_some() {
        assert!(
            last_answer.elapsed() < Duration::from_secs(idle_secs + 30),
            "the worker did not stop"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let retired_after = last_answer.elapsed();
    let rested_rss = status_kb(pid, "VmRSS:");

    let watch_secs: u64 = std::env::var("WARDEN_BENCH_IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let polls_before = tg.count("getUpdates");
    let cpu_before = cpu_time(pid);
    let watched = Instant::now();
    tokio::time::sleep(Duration::from_secs(watch_secs)).await;
    let watched = watched.elapsed();
    let idle_cpu = cpu_time(pid).saturating_sub(cpu_before);
    let idle_polls = tg.count("getUpdates") - polls_before;
    let per_minute = idle_polls as f64 * 60.0 / watched.as_secs_f64();
    overheads.sort();
    let mean = overheads.iter().sum::<Duration>() / overheads.len() as u32;

    println!("warden bot (release), fake Bot API + instant fake LLM on 127.0.0.1");
    println!("  start-up to first getUpdates: {ready:.1?} (includes the worker's start-up check)");
    println!("  idle (gateway only, no worker): VmRSS {idle_rss} kB, VmHWM {idle_hwm} kB, {idle_threads} threads");
    println!("         of which RssAnon {idle_anon} kB (heap, stacks), RssFile {idle_file} kB (mapped code and data of the binary and libc)");
    println!("  first message, starting the worker: {cold:.2?}");
    println!("  after {messages} more: gateway VmRSS {busy_rss} kB (VmHWM {busy_hwm} kB), worker VmRSS {worker_rss} kB");
    println!("  worker stopped {retired_after:.1?} after the last answer (worker_idle_secs = {idle_secs}); gateway VmRSS then {rested_rss} kB");
    println!(
        "  per message with the worker up, update served → sendMessage received: median {:.2?}, p90 {:.2?}, p99 {:.2?}, mean {mean:.2?}",
        percentile(&overheads, 0.5),
        percentile(&overheads, 0.9),
        percentile(&overheads, 0.99),
    );
    println!("  (includes the fake LLM's HTTP round trip; both fakes answer with TCP_NODELAY)");
    // /proc counts CPU time in clock ticks (10 ms at 100 Hz): less than one shows as zero.
    let tick =
        Duration::from_millis(1000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64);
    let idle_cpu = idle_cpu.max(tick);
    println!(
        "  idle for {watched:.0?} (30 s long polls held by the fake): {idle_polls} getUpdates = {per_minute:.1} per minute; \
         gateway CPU at most {idle_cpu:?} (/proc counts in {tick:?} ticks) = at most {:.3} % of one core",
        idle_cpu.as_secs_f64() * 100.0 / watched.as_secs_f64()
    );
    let log = bot.stderr();
    println!(
        "  failed polls logged while idle: {}",
        log.matches("getUpdates failed").count()
    );
    drop(bot);
}
