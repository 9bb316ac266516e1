//! Background commands through the real binaries: `warden bot` with the fake Bot API and a
//! scripted model, and `warden chat`. `bash` with `background: true` returns at once; when the
//! command ends, its exit status and the end of its output come back as a new message in the
//! chat's queue, which the agent answers. The `process` tool lists, polls and kills; the limit
//! refuses the next command with its reason; the worker is not retired while one runs, and a
//! worker that dies under one leaves the chat a notice; SIGTERM to the bot kills every one of
//! them (checked from outside, through /proc).

use crate::support::command_model::{self, NOTICE};
use crate::support::fake_llm::FakeLlm;
use crate::support::fake_telegram::FakeTelegram;
use crate::support::procs::{cmdline, descendants, gone, worker_of};
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use crate::support::warden_run::{audit_rows, warden_chat};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

struct Bot {
    tg: FakeTelegram,
    _llm: FakeLlm,
    bot: BotProcess,
    home: tempfile::TempDir,
}

async fn start(config: &str) -> Bot {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::anthropic_with(command_model::script).await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    env.write_config(config);
    let bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    Bot {
        tg,
        _llm: llm,
        bot,
        home,
    }
}

impl Bot {
    /// Every `result:` message in the owner's chat.
    fn results(&self) -> Vec<String> {
        self.tg
            .messages_to(OWNER)
            .into_iter()
            .filter(|m| m.visible.starts_with("result:"))
            .map(|m| m.visible)
            .collect()
    }

    /// Send `text` and wait for the next result.
    async fn ask(&self, text: &str) -> String {
        let before = self.results().len();
        self.tg.push_text(OWNER, OWNER, text);
        self.next_result(before).await
    }

    /// The result after the first `before`.
    async fn next_result(&self, before: usize) -> String {
        self.tg
            .wait_until("a result", WAIT, |t| {
                t.messages_to(OWNER)
                    .iter()
                    .filter(|m| m.visible.starts_with("result:"))
                    .count()
                    > before
            })
            .await;
        self.results()[before].clone()
    }

    /// The jailed processes below the bot running `cmd`.
    fn running(&self, cmd: &str) -> Vec<u32> {
        descendants(self.bot.pid())
            .into_iter()
            .filter(|(_, c)| c == cmd)
            .map(|(pid, _)| pid)
            .collect()
    }
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_command_reaches_the_chat_and_the_agent_answers_it() {
    // A worker idle for a second would be retired long before the command ends, if it could.
    let b = start("[telegram]\nworker_idle_secs = 1\n").await;
    let started = b
        .ask("bg: sleep 3 && echo done-marker && cat missing-file")
        .await;
    assert!(
        started.contains("Started background command #1"),
        "{started}"
    );
    let worker = worker_of(b.bot.pid()).expect("a worker runs the command");
    let before = b.results().len();

    // The notice is a new prompt in the chat; the agent's answer to it is the next result.
    let answer = b.next_result(before).await;
    assert!(answer.contains("background command #1 ended"), "{answer}");
    assert!(
        answer.contains("sleep 3; echo done-marker; cat missing-file exited with status 1"),
        "{answer}"
    );
    assert!(answer.contains("done-marker"), "{answer}");
    assert!(
        answer.contains("missing-file"),
        "stderr is in the tail: {answer}"
    );
    assert_eq!(
        worker_of(b.bot.pid()),
        Some(worker),
        "the worker was kept while the command ran"
    );
    // With nothing left to run, the worker retires.
    wait_for("the idle worker to stop", || {
        worker_of(b.bot.pid()).is_none()
    })
    .await;

    let audit = audit_rows(b.home.path(), "bash");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].0, "allow");
    assert_eq!(audit[0].1["background"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_lists_polls_and_kills() {
    let b = start("").await;
    b.ask("bg: echo poll-marker ; sleep 301").await;
    wait_for("the jailed sleep", || b.running("sleep 301").len() == 1).await;
    let pid = b.running("sleep 301")[0];

    let list = b.ask("process: list").await;
    assert!(
        list.contains("#1 running for") && list.contains("echo poll-marker; sleep 301"),
        "{list}"
    );
    let poll = b.ask("process: poll 1").await;
    assert!(poll.contains("poll-marker"), "{poll}");
    let other = b.ask("process: poll 7").await;
    assert!(other.contains("no background command #7"), "{other}");

    let killed = b.ask("process: kill 1").await;
    assert!(killed.contains("Killed #1"), "{killed}");
    assert!(gone(pid, "sleep 301"), "killed before the answer");
    let list = b.ask("process: list").await;
    assert!(list.contains("#1 was killed"), "{list}");
    // A command the agent killed itself sends no notice.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !b.results().iter().any(|r| r.contains(NOTICE)),
        "{:?}",
        b.results()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_refuses_the_next_and_sigterm_kills_them_all() {
    let mut b = start("[sandbox.background]\nmax_running = 2\n").await;
    for n in [1, 2] {
        let started = b.ask(&format!("bg: sleep 30{n}")).await;
        assert!(started.contains("Started"), "{started}");
    }
    let refused = b.ask("bg: sleep 309").await;
    assert!(
        refused.contains(
            "2 background commands are running already, the limit \
             (sandbox.background.max_running = 2)"
        ),
        "{refused}"
    );
    // The foreground still works.
    let ran = b.ask("run: echo foreground").await;
    assert!(ran.contains("foreground"), "{ran}");
    let audit = audit_rows(b.home.path(), "bash");
    assert_eq!(audit[2].0, "deny", "{audit:?}");

    wait_for("both jailed sleeps", || {
        b.running("sleep 301").len() + b.running("sleep 302").len() == 2
    })
    .await;
    let jailed: Vec<(u32, String)> = descendants(b.bot.pid())
        .into_iter()
        .filter(|(_, cmd)| cmd.starts_with("sleep 30"))
        .collect();
    assert_eq!(jailed.len(), 2, "{jailed:?}");
    let status = b.bot.terminate(WAIT);
    assert!(status.success(), "{status:?}\n{}", b.bot.stderr());
    for (pid, cmd) in &jailed {
        assert!(
            gone(*pid, cmd),
            "{cmd} ({pid}) outlived the bot: {}",
            cmdline(*pid)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_dies_under_a_command_leaves_a_notice_not_silence() {
    let b = start("").await;
    b.ask("bg: sleep 303").await;
    wait_for("the jailed sleep", || b.running("sleep 303").len() == 1).await;
    let sleeping = b.running("sleep 303")[0];
    let worker = worker_of(b.bot.pid()).expect("a worker");
    let before = b.results().len();
    unsafe {
        libc::kill(worker as i32, libc::SIGKILL);
    }
    let notice = b.next_result(before).await;
    assert!(
        notice.contains("background command #1 lost") && notice.contains("SIGKILL"),
        "{notice}"
    );
    // SIGKILL gives the worker no chance to kill what it ran (see SECURITY.md): clean up.
    unsafe {
        libc::kill(-(sleeping as i32), libc::SIGKILL);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warden_chat_prints_the_notice() {
    let llm = FakeLlm::anthropic_with(command_model::script).await;
    let home = tempfile::tempdir().unwrap();
    let mut chat = warden_chat(home.path(), &llm)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    stdin
        .write_all(b"bg: sleep 1 ; echo chat-marker\n")
        .unwrap();
    let stderr = BufReader::new(chat.stderr.take().unwrap());
    let seen = tokio::task::spawn_blocking(move || {
        let mut seen = String::new();
        for line in stderr.lines() {
            let line = line.unwrap();
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("chat-marker") && seen.contains(NOTICE) {
                break;
            }
        }
        seen
    });
    let seen = tokio::time::timeout(WAIT, seen)
        .await
        .expect("the notice within the wait")
        .unwrap();
    assert!(
        seen.contains("background command #1 ended") && seen.contains("exited with status 0"),
        "{seen}"
    );
    stdin.write_all(b"/exit\n").unwrap();
    drop(stdin);
    let status = chat.wait().unwrap();
    assert!(status.success());
}
