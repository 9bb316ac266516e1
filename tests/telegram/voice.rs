//! Voice messages through the real `warden bot`: the gateway downloads the voice message into
//! `attachments/`, the agent worker sends it to a fake OpenAI-compatible speech-to-text
//! endpoint (a multipart `file` and `model`, the key from `WARDEN_VOICE_API_KEY`), and the
//! model is asked with the transcript, marked as the user's voice message. An audio file's
//! transcript is marked as a file's content. Without an endpoint, over the caps, or when the
//! endpoint fails, the user is told why and no run starts.

use crate::support::fake_llm::{FakeLlm, Request, Turn};
use crate::support::fake_telegram::{audio_fields, voice_fields, FakeTelegram};
use crate::support::fake_transcribe::FakeTranscriber;
use crate::support::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
/// Not real Ogg: the fake endpoint takes any bytes, and warden must pass them on unchanged.
const OGG: &[u8] = b"OggS\0fake opus voice data";

struct Setup {
    tg: FakeTelegram,
    llm: FakeLlm,
    stt: FakeTranscriber,
    _bot: BotProcess,
    home: tempfile::TempDir,
}

/// The bot with `voice` as its `[voice]` section (`{url}` becomes the fake endpoint's URL).
async fn start(voice: Option<&str>) -> Setup {
    let tg = FakeTelegram::start(TOKEN).await;
    let llm = FakeLlm::anthropic_with(|req: &Request| {
        Turn::text(format!("heard: {}", req.last_user_text()))
    })
    .await;
    let stt = FakeTranscriber::start("what is on my calendar today").await;
    let home = tempfile::tempdir().unwrap();
    let mut env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
    env.extra
        .push(("WARDEN_VOICE_API_KEY".into(), "voice-key".into()));
    if let Some(voice) = voice {
        env.write_config(&format!(
            "[voice]\n{}\n",
            voice.replace("{url}", &stt.base_url())
        ));
    }
    let bot = BotProcess::start(&env);
    tg.wait_for_calls("getUpdates", 1, WAIT).await;
    Setup {
        tg,
        llm,
        stt,
        _bot: bot,
        home,
    }
}

impl Setup {
    /// The `n`-th message to the owner (from 1), once it exists.
    async fn message(&self, n: usize) -> String {
        self.tg
            .wait_until("a message", WAIT, |t| t.messages_to(OWNER).len() >= n)
            .await;
        self.tg.messages_to(OWNER)[n - 1].shown().to_string()
    }

    fn attachment(&self, name: &str) -> Option<Vec<u8>> {
        std::fs::read(
            self.home
                .path()
                .join(".warden/workspace/attachments")
                .join(name),
        )
        .ok()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_message_is_answered_from_its_transcript() {
    let s = start(Some("base_url = \"{url}\"\nmodel = \"whisper-large-v3\"")).await;
    s.tg.add_file("voice-1", OGG.to_vec());
    let (_, id) =
        s.tg.push_message(OWNER, OWNER, voice_fields("voice-1", 4, OGG.len()));
    let answer = s.message(1).await;
    assert_eq!(
        answer,
        "heard: [Voice message, transcribed]: what is on my calendar today"
    );
    let heard = s.stt.heard();
    assert_eq!(heard.len(), 1);
    let request = &heard[0];
    assert_eq!(request.model.as_deref(), Some("whisper-large-v3"));
    assert_eq!(
        request.file_name.as_deref(),
        Some(format!("voice-{id}.ogg").as_str())
    );
    assert_eq!(request.content_type.as_deref(), Some("audio/ogg"));
    assert_eq!(request.bytes, OGG);
    assert_eq!(request.response_format.as_deref(), Some("json"));
    assert_eq!(request.authorization.as_deref(), Some("Bearer voice-key"));
    assert_eq!(
        s.attachment(&format!("voice-{id}.ogg")).as_deref(),
        Some(OGG)
    );

    // An audio file: transcribed too, but marked as a recording's content, not the user's
    // words (it taints the run like any file sent in the chat).
    s.tg.add_file("audio-1", b"ID3 fake mp3".to_vec());
    s.tg.push_message(
        OWNER,
        OWNER,
        audio_fields("audio-1", "interview.mp3", 30, 12),
    );
    let answer = s.message(2).await;
    assert!(
        answer.starts_with(
            "heard: [The user sent a file, an audio file saved in the workspace as \
             attachments/interview.mp3"
        ),
        "{answer}"
    );
    assert!(answer.contains("not the user's instructions"), "{answer}");
    assert!(answer.ends_with("what is on my calendar today"), "{answer}");
    let heard = s.stt.heard();
    assert_eq!(heard[1].file_name.as_deref(), Some("interview.mp3"));
    assert_eq!(heard[1].content_type.as_deref(), Some("audio/mpeg"));
    assert!(s.tg.rejected().is_empty(), "{:?}", s.tg.rejected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_the_user_is_told_and_nothing_runs() {
    let s = start(None).await;
    s.tg.add_file("voice-1", OGG.to_vec());
    s.tg.push_message(OWNER, OWNER, voice_fields("voice-1", 4, OGG.len()));
    let reply = s.message(1).await;
    assert!(
        reply.starts_with("I cannot listen to this voice message: no speech-to-text endpoint"),
        "{reply}"
    );
    assert!(reply.contains("[voice] base_url"), "{reply}");
    s.tg.add_file("audio-1", b"ID3".to_vec());
    s.tg.push_message(OWNER, OWNER, audio_fields("audio-1", "song.mp3", 30, 3));
    let reply = s.message(2).await;
    assert!(reply.contains("send the recording as a file"), "{reply}");
    assert_eq!(s.llm.request_count(), 0, "no run started");
    assert_eq!(s.tg.count("getFile"), 0, "nothing was downloaded");
    assert!(s.stt.heard().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_and_a_failing_endpoint_are_told_and_start_no_run() {
    let s = start(Some(
        "base_url = \"{url}\"\nmax_seconds = 60\nmax_bytes = 1000",
    ))
    .await;
    s.tg.add_file("long", OGG.to_vec());
    s.tg.push_message(OWNER, OWNER, voice_fields("long", 120, OGG.len()));
    assert_eq!(
        s.message(1).await,
        "That voice message is 120 s long; the limit is 60 s ([voice] max_seconds)."
    );
    s.tg.add_file("big", vec![7; 5000]);
    s.tg.push_message(OWNER, OWNER, voice_fields("big", 5, 5000));
    assert_eq!(
        s.message(2).await,
        "That voice message is 4.9 KB; the limit is 1000 bytes ([voice] max_bytes)."
    );
    assert_eq!(
        s.tg.count("getFile"),
        0,
        "nothing over the caps was downloaded"
    );

    s.stt.fail_with(500);
    s.tg.add_file("ok", OGG.to_vec());
    s.tg.push_message(OWNER, OWNER, voice_fields("ok", 5, OGG.len()));
    let reply = s.message(3).await;
    assert!(
        reply.starts_with(
            "I could not transcribe that voice message: the speech-to-text endpoint answered \
             500"
        ),
        "{reply}"
    );
    assert!(!reply.contains("voice-key"), "{reply}");
    assert_eq!(s.llm.request_count(), 0, "no run started");
}
