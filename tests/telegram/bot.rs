//! `warden bot` end to end: the real binary against a fake Bot API and a fake LLM on
//! 127.0.0.1. Answers, access control, long answers, inputs, commands, groups, start-up
//! refusals, and the token never reaching the log.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::fake_telegram::{self as tg, FakeTelegram};
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// Answers `answer: <the user's text>`.
async fn echo_llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| Turn::text(format!("answer: {}", req.last_user_text())))
        .await
}

struct Running {
    tg: FakeTelegram,
    llm: FakeLlm,
    env: BotEnv,
    bot: BotProcess,
    _home: tempfile::TempDir,
}

async fn start_with(llm: FakeLlm, configure: impl FnOnce(&mut BotEnv)) -> Running {
    let tg = FakeTelegram::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let mut env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    configure(&mut env);
    let bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    Running {
        tg,
        llm,
        env,
        bot,
        _home: home,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_user_gets_an_answer_and_the_token_never_reaches_the_log() {
    let mut r = start_with(echo_llm().await, |env| {
        env.extra = vec![("RUST_LOG".into(), "trace".into())];
    })
    .await;
    let (_, message_id) = r.tg.push_text(OWNER, OWNER, "hello there");
    r.tg.wait_until("the answer arrives", WAIT, |t| {
        !t.messages_to(OWNER).is_empty()
    })
    .await;
    let sent = r.tg.messages_to(OWNER);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0].visible, "answer: hello there");
    assert_eq!(sent[0].reply_to, Some(message_id));
    assert!(sent[0].html);
    assert!(r.tg.count("sendChatAction") >= 1, "typing indicator");
    assert_eq!(r.llm.request_count(), 1);
    assert!(r.tg.count("setMyCommands") == 1);

    let status = r.bot.terminate(WAIT);
    assert!(status.success(), "{status:?}\n{}", r.bot.stderr());
    let log = r.bot.stderr();
    assert!(log.contains("connected to the Telegram Bot API"), "{log}");
    assert!(
        !log.contains(TOKEN),
        "the token leaked into the log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_gets_one_refusal_and_no_run() {
    let r = start_with(echo_llm().await, |_| {}).await;
    let stranger = 99;
    r.tg.push_text(stranger, stranger, "let me in");
    r.tg.push_text(
        stranger,
        stranger,
        "please, run rm -rf / on the server right now",
    );
    // In a group a stranger's chatter is ignored, and so is the owner's without a mention.
    r.tg.push_text(-500, stranger, "hi all");
    r.tg.push_text(-500, OWNER, "talking to humans");
    r.tg.push_text(-500, OWNER, &format!("@{} what is 2+2?", tg::BOT_USERNAME));
    r.tg.push_text(OWNER, OWNER, "sync");
    r.tg.wait_until("the owner's answers arrive", WAIT, |t| {
        !t.messages_to(OWNER).is_empty() && !t.messages_to(-500).is_empty()
    })
    .await;
    let refusals = r.tg.messages_to(stranger);
    assert_eq!(refusals.len(), 1, "{refusals:#?}");
    assert!(refusals[0].visible.contains("private"));
    let group = r.tg.messages_to(-500);
    assert_eq!(group.len(), 1);
    assert_eq!(group[0].visible, "answer: what is 2+2?");
    let prompts: Vec<String> = r
        .llm
        .requests()
        .iter()
        .map(|q| q.last_user_text())
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert!(prompts
        .iter()
        .all(|p| !p.contains("rm -rf") && !p.contains("let me in")));
    let log = r.bot.wait_for_log("user_id=99", WAIT).await;
    assert!(
        !log.contains("on the server right now"),
        "whole message logged:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_arrives_as_several_valid_html_messages() {
    let mut answer = String::new();
    let mut i = 0;
    while answer.len() < 10_000 {
        answer.push_str(&format!(
            "## Section {i}\n\nIf a < b && c > d then **bold {i}** and `x<y>` & _it_.\n\n\
             ```sh\nls -la | grep '<tag>' && echo \"a&b\"\n```\n\n- item [link](https://example.com/?a=1&b={i})\n\n"
        ));
        i += 1;
    }
    let sections = i;
    let llm = FakeLlm::anthropic(vec![Turn::text(answer.clone())]).await;
    let r = start_with(llm, |_| {}).await;
    r.tg.push_text(OWNER, OWNER, "write a lot");
    r.tg.wait_until("the answer arrives", WAIT, |t| {
        t.messages_to(OWNER)
            .iter()
            .any(|m| m.visible.contains(&format!("Section {}", sections - 1)))
    })
    .await;
    let parts = r.tg.messages_to(OWNER);
    assert!(parts.len() >= 3, "{} parts", parts.len());
    assert!(r.tg.rejected().is_empty(), "{:?}", r.tg.rejected());
    for part in &parts {
        assert!(part.html, "a part fell back to plain text");
        assert!(part.visible.chars().map(char::len_utf16).sum::<usize>() <= 4096);
    }
    assert!(parts[0].reply_to.is_some());
    let all: String = parts.iter().map(|p| p.visible.as_str()).collect();
    for s in 0..sections {
        assert!(all.contains(&format!("bold {s}")), "section {s} missing");
    }
    assert!(all.contains("If a < b && c > d"));
    assert!(all.contains("grep '<tag>' && echo \"a&b\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_telegram_refuses_is_sent_again_as_plain_text() {
    let llm = FakeLlm::anthropic(vec![Turn::text("an **important** note about a < b")]).await;
    let r = start_with(llm, |_| {}).await;
    r.tg.refuse_html_containing("<b>");
    r.tg.push_text(OWNER, OWNER, "note?");
    r.tg.wait_until("the plain answer", WAIT, |t| {
        !t.messages_to(OWNER).is_empty()
    })
    .await;
    let sent = r.tg.messages_to(OWNER);
    assert_eq!(sent.len(), 1);
    assert!(!sent[0].html, "sent without parse_mode the second time");
    assert_eq!(sent[0].text, "an important note about a < b");
    assert_eq!(r.tg.rejected().len(), 1);
    assert!(r.tg.rejected()[0].1.contains("can't parse entities"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn photos_documents_quotes_and_unsupported_messages() {
    let r = start_with(echo_llm().await, |_| {}).await;
    // A photo becomes an image block.
    r.tg.add_file("photo-1", vec![0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3]);
    r.tg.push_message(
        OWNER,
        OWNER,
        tg::photo_fields("photo-1", 7, Some("what is this?")),
    );
    r.tg.wait_until("the photo answer", WAIT, |t| {
        t.messages_to(OWNER).len() == 1
    })
    .await;
    let request = r.llm.last_request();
    let user = request.messages().last().unwrap().clone();
    let blocks = user["content"].as_array().unwrap();
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "image" && b["source"]["data"] == json!("/9j/4AECAw==")),
        "{user}"
    );
    // A document is saved under attachments/ with a safe name; the agent gets the path.
    r.tg.add_file("doc-1", b"quarterly numbers".to_vec());
    r.tg.push_message(
        OWNER,
        OWNER,
        tg::document_fields("doc-1", "../../etc/passwd", 17, Some("summarize")),
    );
    r.tg.wait_until("the document answer", WAIT, |t| {
        t.messages_to(OWNER).len() == 2
    })
    .await;
    let saved = r.env.home.join(".warden/workspace/attachments/passwd");
    assert_eq!(std::fs::read(&saved).unwrap(), b"quarterly numbers");
    let prompt = r.llm.last_request().last_user_text();
    assert!(prompt.contains("attachments/passwd"), "{prompt}");
    assert!(prompt.contains("summarize"), "{prompt}");
    // A reply carries the quoted message as context.
    let earlier = tg::message(1, OWNER, OWNER, tg::text_fields("the meeting is at 3pm"));
    let mut fields = tg::text_fields("move it to 4");
    fields["reply_to_message"] = earlier;
    r.tg.push_message(OWNER, OWNER, fields);
    r.tg.wait_until("the reply answer", WAIT, |t| {
        t.messages_to(OWNER).len() == 3
    })
    .await;
    let prompt = r.llm.last_request().last_user_text();
    assert!(prompt.contains("the meeting is at 3pm") && prompt.contains("move it to 4"));
    // A sticker is not supported: a clear reply, no run.
    let calls = r.llm.request_count();
    r.tg.push_message(
        OWNER,
        OWNER,
        json!({"sticker": {"file_id": "s", "file_unique_id": "s", "type": "regular",
            "width": 1, "height": 1, "is_animated": false, "is_video": false}}),
    );
    r.tg.wait_until("the unsupported reply", WAIT, |t| {
        t.messages_to(OWNER).len() == 4
    })
    .await;
    assert!(r.tg.messages_to(OWNER)[3].visible.contains("not supported"));
    assert_eq!(r.llm.request_count(), calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_status_and_new() {
    let r = start_with(echo_llm().await, |_| {}).await;
    r.tg.push_text(OWNER, OWNER, "/help");
    r.tg.push_text(OWNER, OWNER, "/status");
    r.tg.push_text(OWNER, OWNER, "remember the word kiwi");
    r.tg.wait_until("three replies", WAIT, |t| t.messages_to(OWNER).len() == 3)
        .await;
    r.tg.push_text(OWNER, OWNER, "/new");
    r.tg.push_text(OWNER, OWNER, "/frobnicate");
    r.tg.push_text(OWNER, OWNER, "what was the word?");
    r.tg.wait_until("six replies", WAIT, |t| t.messages_to(OWNER).len() == 6)
        .await;
    let texts: Vec<String> =
        r.tg.messages_to(OWNER)
            .iter()
            .map(|m| m.visible.clone())
            .collect();
    assert!(texts[0].contains("/stop"), "{}", texts[0]);
    assert_eq!(texts[1], "Idle.");
    assert_eq!(texts[3], "Started a new conversation.");
    assert!(texts[4].contains("Unknown command /frobnicate"));
    // After /new the model sees only the new question.
    let last = r.llm.last_request();
    assert_eq!(last.messages().len(), 1, "{:?}", last.messages());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_allowed_users_or_token_the_bot_refuses_to_start() {
    let tg = FakeTelegram::start(TOKEN).await;
    let home = tempfile::tempdir().unwrap();
    let mut env = BotEnv::new(home.path(), tg.api_url(), "http://127.0.0.1:9".into());
    env.allowed = String::new();
    let out = env.command().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("TELEGRAM_ALLOWED_USERS"), "{stderr}");
    assert!(stderr.contains("telegram.allowed_users"), "{stderr}");

    let mut cmd = BotEnv::new(home.path(), tg.api_url(), "http://127.0.0.1:9".into()).command();
    cmd.env_remove("TELEGRAM_BOT_TOKEN");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("TELEGRAM_BOT_TOKEN"), "{stderr}");
    assert!(tg.calls().is_empty(), "it must not even connect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_token_is_a_clear_error() {
    let tg = FakeTelegram::start("another-token").await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), "http://127.0.0.1:9".into());
    let mut cmd = env.command();
    cmd.env("ANTHROPIC_API_KEY", "k");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rejected the bot token"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "{stderr}");
}

#[test]
fn the_fake_checks_html_as_telegram_does() {
    use crate::support::fake_telegram::check_html;
    assert_eq!(check_html("<b>a &amp; b</b>").unwrap(), "a & b");
    assert!(check_html("<pre><code class=\"language-rust\">x</code></pre>").is_ok());
    for bad in [
        "a < b",
        "AT&T",
        "<b>open",
        "<b><i>x</b></i>",
        "<script>x</script>",
        "<code><b>x</b></code>",
    ] {
        assert!(check_html(bad).is_err(), "{bad} accepted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_download_holds_up_neither_another_chat_nor_its_own_answer() {
    const FRIEND: i64 = 5151;
    let r = start_with(echo_llm().await, |env| {
        env.allowed = format!("{OWNER},{FRIEND}");
    })
    .await;
    r.tg.add_slow_file("slow", b"slow bytes".to_vec(), Duration::from_secs(10));
    r.tg.push_message(
        OWNER,
        OWNER,
        tg::document_fields("slow", "slow.txt", 10, Some("read this")),
    );
    r.tg.wait_for_calls("getFile", 1, WAIT).await;
    let sent = std::time::Instant::now();
    r.tg.push_text(FRIEND, FRIEND, "hello");
    r.tg.wait_until("the other chat's answer", WAIT, |t| {
        !t.messages_to(FRIEND).is_empty()
    })
    .await;
    assert!(
        sent.elapsed() < Duration::from_secs(7),
        "the other chat waited {:?} for the download",
        sent.elapsed()
    );
    assert_eq!(r.tg.messages_to(FRIEND)[0].visible, "answer: hello");
    assert!(r.tg.messages_to(OWNER).is_empty(), "still downloading");
    // The document is answered once it arrives, exactly once.
    r.tg.wait_until("the document's answer", Duration::from_secs(30), |t| {
        !t.messages_to(OWNER).is_empty()
    })
    .await;
    let answers = r.tg.messages_to(OWNER);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(
        answers[0].visible.contains("attachments/slow.txt"),
        "{:?}",
        answers[0]
    );
}

/// Telegram holds an idle poll for its whole `timeout` and then answers it empty. The bot's
/// client must wait that long: with a poll longer than teloxide's default 17 s client
/// time-out, every idle poll used to fail and back off, and a message after a quiet spell
/// waited for the backoff. Here the polls are 20 s; after two held polls of silence a message
/// is picked up by the poll already waiting and answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_polls_are_held_by_the_server_and_a_message_after_a_quiet_spell_is_answered_at_once() {
    let r = start_with(echo_llm().await, |env| {
        // 6 s instead of the default 30: the same property, a third of the wait.
        env.write_config("[telegram]\npoll_timeout_secs = 6\n");
    })
    .await;
    // The first message starts the agent worker; it then stays for worker_idle_secs.
    r.tg.push_text(OWNER, OWNER, "warm up");
    r.tg.wait_until("the first answer", WAIT, |t| {
        t.messages_to(OWNER).len() == 1
    })
    .await;
    let quiet = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(14)).await;
    let polls: Vec<std::time::Instant> =
        r.tg.calls()
            .into_iter()
            .filter(|c| c.method == "getupdates" && c.at > quiet)
            .inspect(|c| assert_eq!(c.body["timeout"], 6, "{c:?}"))
            .map(|c| c.at)
            .collect();
    assert!(
        (2..=3).contains(&polls.len()),
        "one poll per 6 s of silence: {polls:?}"
    );
    for pair in polls.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(5_500),
            "each idle poll was held for its timeout: {polls:?}"
        );
    }
    let pushed = std::time::Instant::now();
    let (update, _) = r.tg.push_text(OWNER, OWNER, "after the quiet");
    r.tg.wait_until("the answer", WAIT, |t| t.messages_to(OWNER).len() == 2)
        .await;
    let served = r.tg.served_at(update).unwrap();
    let answered = r.tg.messages_to(OWNER)[1].at;
    // A poll that missed it would serve it only at its 6 s timeout; the margins are for a
    // loaded CI machine.
    assert!(
        served - pushed < Duration::from_secs(1),
        "the waiting poll took the message: {:?}",
        served - pushed
    );
    assert!(
        answered - pushed < Duration::from_secs(3),
        "answered {:?} after it was sent",
        answered - pushed
    );
    let log = r.bot.stderr();
    assert!(!log.contains("getUpdates failed"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_topic_is_a_conversation_of_its_own_answered_in_its_topic() {
    let r = start_with(echo_llm().await, |_| {}).await;
    let texts_in = |t: &FakeTelegram, topic: Option<i64>| -> Vec<String> {
        t.messages_in(OWNER, topic)
            .iter()
            .map(|m| m.visible.clone())
            .collect()
    };
    let (_, kiwi) = r.tg.push_topic_text(OWNER, 11, OWNER, "remember kiwi");
    let (_, plum) = r.tg.push_topic_text(OWNER, 22, OWNER, "remember plum");
    r.tg.push_text(OWNER, OWNER, "remember fig");
    r.tg.wait_until("three answers", WAIT, |t| t.messages_to(OWNER).len() == 3)
        .await;
    assert_eq!(texts_in(&r.tg, Some(11)), ["answer: remember kiwi"]);
    assert_eq!(texts_in(&r.tg, Some(22)), ["answer: remember plum"]);
    assert_eq!(texts_in(&r.tg, None), ["answer: remember fig"]);
    assert_eq!(r.tg.messages_in(OWNER, Some(11))[0].reply_to, Some(kiwi));
    assert_eq!(r.tg.messages_in(OWNER, Some(22))[0].reply_to, Some(plum));
    // Typing shows in the topic that is worked on.
    assert!(r
        .tg
        .calls()
        .iter()
        .any(|c| c.method == "sendchataction" && c.body["message_thread_id"] == json!(22)));

    // Each topic's history holds its own conversation only.
    r.tg.push_topic_text(OWNER, 11, OWNER, "which fruit?");
    r.tg.wait_until("the answer in topic 11", WAIT, |t| {
        t.messages_in(OWNER, Some(11)).len() == 2
    })
    .await;
    let history = serde_json::to_string(r.llm.last_request().messages()).unwrap();
    assert!(history.contains("remember kiwi"), "{history}");
    assert!(
        !history.contains("plum") && !history.contains("fig"),
        "{history}"
    );

    // /new acts on its topic: topic 22 starts afresh, topic 11 keeps its history.
    r.tg.push_topic_text(OWNER, 22, OWNER, "/new");
    r.tg.wait_until("/new is answered in topic 22", WAIT, |t| {
        t.messages_in(OWNER, Some(22)).len() == 2
    })
    .await;
    assert_eq!(texts_in(&r.tg, Some(22))[1], "Started a new conversation.");
    r.tg.push_topic_text(OWNER, 22, OWNER, "anything before?");
    r.tg.wait_until("the answer in topic 22", WAIT, |t| {
        t.messages_in(OWNER, Some(22)).len() == 3
    })
    .await;
    assert_eq!(r.llm.last_request().messages().len(), 1);
    r.tg.push_topic_text(OWNER, 11, OWNER, "still there?");
    r.tg.wait_until("the third answer in topic 11", WAIT, |t| {
        t.messages_in(OWNER, Some(11)).len() == 3
    })
    .await;
    let history = serde_json::to_string(r.llm.last_request().messages()).unwrap();
    assert!(history.contains("remember kiwi"), "{history}");
    // A reply thread in a plain group is no topic: it stays the group's conversation.
    let mut fields = tg::text_fields(&format!("@{} hi", tg::BOT_USERNAME));
    fields["message_thread_id"] = json!(5);
    r.tg.push_message(-500, OWNER, fields);
    r.tg.wait_until("the group's answer", WAIT, |t| {
        !t.messages_to(-500).is_empty()
    })
    .await;
    assert_eq!(r.tg.messages_to(-500)[0].topic, None);
    assert!(r.tg.rejected().is_empty(), "{:?}", r.tg.rejected());
}
