//! Streamed answers through the real `warden bot`, the fake Bot API and a model that streams
//! slowly: the answer appears in one message, replying to the prompt, edited in place at most
//! once a second, its HTML well-formed at every edit; the last edit is the answer's first
//! part, later parts follow as messages. Flood control on an edit is waited out. After a
//! `kill -9` — mid-stream, or while the answer replaces its draft — the restarted bot turns
//! the streamed message into the notice or the answer, never a second copy.

use crate::support::fake_llm::{Block, FakeLlm, Request, Turn};
use crate::support::fake_telegram::{check_html, FakeTelegram, Sent};
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;
use warden::channels::telegram::format::markdown_to_html;
use warden::channels::telegram::split::{split_html, MESSAGE_LIMIT};

const WAIT: Duration = Duration::from_secs(60);

/// The `short` answer: one message, streamed in small chunks.
fn short_answer() -> String {
    "Counting: ".to_string() + &"one two three ".repeat(40)
}

/// A long answer with formatting that is unbalanced at most cuts of the stream: bold, code,
/// a fenced block, links that must stay without preview.
fn long_answer() -> String {
    let mut text = String::from("# Report\n\nHere is **what I found** in `data/`:\n\n");
    for i in 0..60 {
        text.push_str(&format!(
            "{i}. Row *{i}* holds `value_{i}` & <more> — see https://example.com/r/{i} for the \
             details of this row.\n"
        ));
    }
    text.push_str("\n```rust\nfn main() {\n    println!(\"<done>\");\n}\n```\n\nThat is all.");
    text
}

/// `long`: the long answer, streamed over several seconds; `short`: a short one, slower;
/// `tool`: a step that streams and then runs a tool (the run stops at its iteration limit);
/// `endless`: a stream that takes a minute.
async fn llm() -> FakeLlm {
    FakeLlm::anthropic_with(|req: &Request| {
        let prompt = req.last_user_text();
        match prompt.as_str() {
            "long" => Turn::text(long_answer())
                .chunked(60)
                .gap(Duration::from_millis(80)),
            "short" => Turn::text(short_answer())
                .chunked(8)
                .gap(Duration::from_millis(80)),
            "tool" => Turn::blocks(vec![
                Block::text("Let me look at the workspace first; this may take a moment."),
                Block::tool_use("bash", json!({"command": "ls"})),
            ])
            .chunked(2)
            .gap(Duration::from_millis(100)),
            _ => Turn::text("a very slow answer ".repeat(200))
                .chunked(5)
                .gap(Duration::from_millis(100)),
        }
    })
    .await
}

struct Setup {
    tg: FakeTelegram,
    _llm: FakeLlm,
    env: BotEnv,
    bot: BotProcess,
    _home: tempfile::TempDir,
}

async fn start(config: &str) -> Setup {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = llm().await;
    let home = tempfile::tempdir().unwrap();
    let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    env.write_config(config);
    let bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    Setup {
        tg,
        _llm: llm,
        env,
        bot,
        _home: home,
    }
}

/// The messages replying to `prompt` (the answer's first part is one of them).
fn replies(tg: &FakeTelegram, prompt: i64) -> Vec<Sent> {
    tg.messages_to(OWNER)
        .into_iter()
        .filter(|m| m.reply_to == Some(prompt))
        .collect()
}

/// Wait until the reply to `prompt` was edited at least once.
async fn first_edit(tg: &FakeTelegram, prompt: i64, what: &str) {
    tg.wait_until(what, WAIT, |t| {
        replies(t, prompt)
            .first()
            .is_some_and(|m| !m.edits.is_empty())
    })
    .await;
}

/// The visible text of each part the answer `markdown` is delivered in.
fn expected_parts(markdown: &str) -> Vec<String> {
    split_html(&markdown_to_html(markdown), MESSAGE_LIMIT)
        .iter()
        .map(|part| check_html(part).unwrap())
        .collect()
}

/// The bodies of the bot's editMessageText calls for `message_id`, with their times.
fn edits_of(tg: &FakeTelegram, message_id: i64) -> Vec<(std::time::Instant, Value)> {
    tg.calls()
        .into_iter()
        .filter(|c| c.method == "editmessagetext" && c.body["message_id"] == message_id)
        .map(|c| (c.at, c.body))
        .collect()
}

fn previews_were_off(tg: &FakeTelegram) {
    for call in tg.calls() {
        if call.method == "sendmessage" || call.method == "editmessagetext" {
            assert_eq!(
                call.body["link_preview_options"]["is_disabled"], true,
                "a message with a link preview: {}",
                call.body
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_edited_in_place_and_ends_complete_split_at_4096() {
    let s = start("").await;
    let (_, prompt) = s.tg.push_text(OWNER, OWNER, "long");
    let parts = expected_parts(&long_answer());
    assert_eq!(parts.len(), 2, "the answer needs two messages");
    s.tg.wait_until("the second part", WAIT, |t| {
        t.messages_to(OWNER).iter().any(|m| m.visible == parts[1])
    })
    .await;

    // One message replies to the prompt: the streamed one, now the answer's first part.
    let answer = replies(&s.tg, prompt);
    assert_eq!(answer.len(), 1, "{answer:#?}");
    let draft = &answer[0];
    assert_eq!(draft.shown(), parts[0]);
    assert_ne!(
        draft.visible, parts[0],
        "it was sent before the answer was complete"
    );
    let edits = edits_of(&s.tg, draft.message_id);
    assert!(edits.len() >= 3, "several edits: {}", edits.len());
    // Every edit was well-formed HTML within the limit (the fake refuses anything else) and
    // came at least a second after the previous call on this message.
    assert!(s.tg.rejected().is_empty(), "{:?}", s.tg.rejected());
    let sent_at = draft.at;
    let mut last = sent_at;
    for (at, body) in &edits {
        let html = body["text"].as_str().unwrap();
        assert_eq!(body["parse_mode"], "HTML");
        let visible = check_html(html).unwrap();
        assert!(visible.encode_utf16().count() <= MESSAGE_LIMIT);
        assert!(
            at.duration_since(last) >= Duration::from_millis(950),
            "edits {:?} apart",
            at.duration_since(last)
        );
        last = *at;
    }
    // No edit repeated the text before it.
    let texts: Vec<&str> = edits
        .iter()
        .map(|(_, b)| b["text"].as_str().unwrap())
        .collect();
    assert!(texts.windows(2).all(|w| w[0] != w[1]), "{texts:?}");
    // The rest came as a new message after it, not as a reply.
    let rest: Vec<Sent> =
        s.tg.messages_to(OWNER)
            .into_iter()
            .filter(|m| m.visible == parts[1])
            .collect();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].reply_to, None);
    assert!(rest[0].message_id > draft.message_id);
    previews_were_off(&s.tg);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_control_on_an_edit_is_waited_out() {
    let s = start("").await;
    let (_, prompt) = s.tg.push_text(OWNER, OWNER, "short");
    first_edit(&s.tg, prompt, "the first edit").await;
    s.tg.throttle_next_edit(3);
    let full = expected_parts(&short_answer());
    s.tg.wait_until("the complete answer", WAIT, |t| {
        replies(t, prompt)
            .first()
            .is_some_and(|m| m.shown() == full[0])
    })
    .await;
    let throttled = s.tg.throttled();
    assert!(!throttled.is_empty(), "the bot met flood control");
    let first_429 = throttled[0].1;
    let draft = replies(&s.tg, prompt)[0].message_id;
    let later: Vec<_> = edits_of(&s.tg, draft)
        .into_iter()
        .filter(|(at, _)| *at > first_429)
        .collect();
    assert!(!later.is_empty());
    for (at, _) in later {
        assert!(
            at.duration_since(first_429) >= Duration::from_secs(3),
            "an edit {:?} after a 3 s retry_after",
            at.duration_since(first_429)
        );
    }
    assert_eq!(throttled.len(), 1, "the bot did not hammer: {throttled:?}");
    assert_eq!(replies(&s.tg, prompt).len(), 1);
    previews_were_off(&s.tg);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_the_user_deleted_gives_way_to_a_new_message() {
    let s = start("").await;
    let (_, prompt) = s.tg.push_text(OWNER, OWNER, "short");
    first_edit(&s.tg, prompt, "the first edit").await;
    let draft = replies(&s.tg, prompt)[0].message_id;
    s.tg.user_deletes(draft);
    let full = expected_parts(&short_answer());
    s.tg.wait_until("the answer in a new message", WAIT, |t| {
        replies(t, prompt)
            .iter()
            .any(|m| !m.deleted && m.visible == full[0])
    })
    .await;
    let answer: Vec<Sent> = replies(&s.tg, prompt)
        .into_iter()
        .filter(|m| !m.deleted)
        .collect();
    assert_eq!(answer.len(), 1, "{answer:#?}");
    assert!(answer[0].message_id > draft);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_the_answer_replaces_its_draft_neither_loses_nor_repeats_it() {
    // One model call: the step streams, runs `ls`, and the run stops at the limit; the
    // answer ("I stopped after 1 model calls…") is text the stream never showed.
    let mut s = start("[llm]\nmax_iterations = 1\n").await;
    s.tg.stall_edits_containing(Some("I stopped after"));
    let (_, prompt) = s.tg.push_text(OWNER, OWNER, "tool");
    s.tg.wait_until("the step streams", WAIT, |t| {
        replies(t, prompt)
            .first()
            .is_some_and(|m| m.shown().starts_with("Let me look"))
    })
    .await;
    s.tg.wait_until("the answer's edit is under way", WAIT, |t| {
        t.calls().iter().any(|c| {
            c.method == "editmessagetext"
                && c.body["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("I stopped after"))
        })
    })
    .await;
    s.bot.kill9();
    s.tg.stall_edits_containing(None);

    let bot = BotProcess::start(&s.env);
    s.tg.wait_until("the draft became the answer", WAIT, |t| {
        replies(t, prompt)
            .first()
            .is_some_and(|m| m.shown().starts_with("I stopped after 1 model calls"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let answer = replies(&s.tg, prompt);
    assert_eq!(answer.len(), 1, "{answer:#?}\n{}", bot.stderr());
    assert!(!answer[0].deleted);
    let copies =
        s.tg.messages_to(OWNER)
            .iter()
            .filter(|m| m.shown().contains("I stopped after"))
            .count();
    assert_eq!(copies, 1, "the answer is shown once");
    assert!(s.tg.rejected().is_empty(), "{:?}", s.tg.rejected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_stream_turns_the_draft_into_the_restart_notice() {
    let mut s = start("").await;
    let (_, prompt) = s.tg.push_text(OWNER, OWNER, "endless");
    // An edit comes after the draft's id was stored (a kill between Telegram accepting a
    // message and the bot storing its id is the one window no bot can close).
    first_edit(&s.tg, prompt, "the draft was edited").await;
    s.bot.kill9();
    let _bot = BotProcess::start(&s.env);
    s.tg.wait_until("the restart notice", WAIT, |t| {
        replies(t, prompt)
            .first()
            .is_some_and(|m| m.shown().starts_with("I was restarted while working on"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        replies(&s.tg, prompt).len(),
        1,
        "the notice took the draft's place"
    );
}
