//! The messages between the bot and its agent worker: one JSON object per line.

use crate::agent::{AgentEvent, RunOutcome};
use crate::gateway::RunFailure;
use crate::llm::ContentBlock;
use crate::tools::approval::{Approval, ApprovalRequest};
use crate::tools::background::BackgroundEvent;
use crate::tools::outbox::OutgoingFile;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Bot → worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Start a run; `run` names it in every later message.
    Run {
        run: u64,
        session: String,
        input: Vec<ContentBlock>,
        /// Seconds each model call retries a busy model (none: the configured budget).
        #[serde(default)]
        patience_secs: Option<u64>,
    },
    /// `/stop`: abort the run; `interrupted`: warden is stopping, not the user.
    Abort {
        run: u64,
        #[serde(default)]
        interrupted: bool,
    },
    /// `/steer TEXT` for the run.
    Steer { run: u64, text: String },
    /// The user's answer to an approval the worker asked for.
    Answer {
        run: u64,
        ask: u64,
        approval: Approval,
    },
    /// How a [`FromWorker::SendFile`] went: how it was sent, or why not.
    FileSent {
        run: u64,
        ask: u64,
        result: Result<String, String>,
    },
    /// Transcribe the audio file at `path` (relative to the workspace; the gateway saved it
    /// there). Answered by [`FromWorker::Transcribed`] with the same `id`.
    Transcribe { id: u64, path: String },
}

/// Worker → bot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// Sent once, after the worker built its agent (config, policy, keys, sandbox checked).
    Ready {
        supports_images: bool,
    },
    Event {
        run: u64,
        event: AgentEvent,
    },
    /// A policy `ask`: the bot shows it and sends back an [`ToWorker::Answer`].
    Ask {
        run: u64,
        ask: u64,
        request: ApprovalRequest,
    },
    /// The run's `send_file`: the bot sends the file to the chat (it holds the token) and
    /// answers with a [`ToWorker::FileSent`].
    SendFile {
        run: u64,
        ask: u64,
        file: OutgoingFile,
    },
    /// The words in a [`ToWorker::Transcribe`]'s file, or why there are none.
    Transcribed {
        id: u64,
        result: Result<String, String>,
    },
    /// The run ended; the error is the reason it could not finish.
    Done {
        run: u64,
        result: Result<RunOutcome, RunFailure>,
    },
    /// The worker's cron jobs changed (a run's `cron` tool added, changed or removed one):
    /// the bot's scheduler, which shares the database, looks again now instead of at its
    /// next rescan.
    JobsChanged,
    /// A background command `run` started began or ended (maybe long after the run): the
    /// bot keeps the worker while any runs, and queues the notice in the run's chat.
    Background {
        run: u64,
        event: BackgroundEvent,
    },
}

/// One message as a line (JSON escapes every newline inside strings). A message that cannot
/// be written as JSON is an error for the writer, which then ends like a broken pipe.
pub fn encode<T: Serialize>(message: &T) -> Result<String, serde_json::Error> {
    let mut line = serde_json::to_string(message)?;
    line.push('\n');
    Ok(line)
}

pub fn decode<T: DeserializeOwned>(line: &str) -> Result<T, String> {
    serde_json::from_str(line.trim_end()).map_err(|e| format!("unreadable message ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::RunEnd;
    use crate::audit::AuditDecision;
    use std::time::Duration;

    #[test]
    fn every_message_is_one_line_and_reads_back_the_same() {
        let to = vec![
            ToWorker::Run {
                run: 1,
                session: "telegram:7".into(),
                input: vec![ContentBlock::text("two\nlines")],
                patience_secs: Some(600),
            },
            ToWorker::Abort {
                run: 1,
                interrupted: true,
            },
            ToWorker::Steer {
                run: 1,
                text: "also\nthis".into(),
            },
            ToWorker::Answer {
                run: 1,
                ask: 3,
                approval: Approval::Denied("no answer within 120 s".into()),
            },
            ToWorker::FileSent {
                run: 1,
                ask: 4,
                result: Err("too\nlarge".into()),
            },
            ToWorker::Transcribe {
                id: 9,
                path: "attachments/voice-1.ogg".into(),
            },
        ];
        for message in to {
            let line = encode(&message).unwrap();
            assert_eq!(line.matches('\n').count(), 1, "{line}");
            assert_eq!(decode::<ToWorker>(&line).unwrap(), message);
        }
        let from = vec![
            FromWorker::Ready {
                supports_images: true,
            },
            FromWorker::JobsChanged,
            FromWorker::Event {
                run: 1,
                event: AgentEvent::ToolEnd {
                    id: "t1".into(),
                    name: "bash".into(),
                    decision: AuditDecision::Approved,
                    is_error: false,
                    duration: Duration::from_millis(1500),
                    detail: None,
                },
            },
            FromWorker::Ask {
                run: 1,
                ask: 3,
                request: ApprovalRequest {
                    session: "telegram:7".into(),
                    tool: "bash".into(),
                    command: "rm -r old\nrm x".into(),
                    reason: "deletes files".into(),
                    always: None,
                    detail: None,
                },
            },
            FromWorker::Done {
                run: 1,
                result: Ok(RunOutcome {
                    text: "done".into(),
                    end: RunEnd::Answered,
                    iterations: 2,
                    unconsumed_steer: vec!["late".into()],
                    last_input_tokens: 10,
                    persisted: vec!["AGENTS.md: +1 −0".into()],
                }),
            },
            FromWorker::Done {
                run: 2,
                result: Err(crate::gateway::RunFailure::new(
                    crate::gateway::FailureKind::ModelBusy,
                    "anthropic: HTTP 529",
                )),
            },
            FromWorker::Background {
                run: 2,
                event: BackgroundEvent::Started { job: 4 },
            },
            FromWorker::Background {
                run: 2,
                event: BackgroundEvent::Ended {
                    job: 4,
                    notice: Some("`sleep 1` exited\nwith status 0".into()),
                    untrusted: vec!["the output of background command #4".into()],
                    persisted: vec!["MEMORY.md: +1 −0".into()],
                },
            },
            FromWorker::SendFile {
                run: 1,
                ask: 4,
                file: OutgoingFile {
                    path: "out/chart.png".into(),
                    photo: true,
                    caption: Some("two\nlines".into()),
                },
            },
            FromWorker::Transcribed {
                id: 9,
                result: Ok("hello there".into()),
            },
        ];
        for message in from {
            let line = encode(&message).unwrap();
            assert_eq!(line.matches('\n').count(), 1, "{line}");
            let back: FromWorker = decode(&line).unwrap();
            assert_eq!(encode(&back).unwrap(), line);
        }
    }

    #[test]
    fn a_garbled_line_is_an_error_not_a_guess() {
        assert!(decode::<ToWorker>("{\"type\":\"run\"}").is_err());
        assert!(decode::<ToWorker>("{\"type\":\"format_disk\",\"run\":1}").is_err());
        assert!(decode::<FromWorker>("not json").is_err());
    }
}
