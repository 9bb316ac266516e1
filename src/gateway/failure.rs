//! Why a run could not finish, in two registers: the chat is told in plain words what
//! happened and what to do (tap /retry), from the failure's [`FailureKind`]; the details —
//! provider errors, exit signals, database messages — go to the log and the audit log, never
//! into the chat.

use crate::agent::AgentError;
use crate::llm::LlmError;
use serde::{Deserialize, Serialize};

/// What kind of trouble ended a run (it decides what the chat is told).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The model stayed busy or rate-limited for the whole retry budget.
    ModelBusy,
    /// The model could not be reached, or its answer broke off.
    ModelUnreachable,
    /// warden's database refused a write (a full disk, mostly).
    Storage,
    /// The run was cut off (the agent worker stopped).
    Interrupted,
    /// Anything else (a refused request, a setup problem).
    #[serde(other)]
    Other,
}

/// A run that could not finish.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{detail}")]
pub struct RunFailure {
    pub kind: FailureKind,
    /// For the log and the audit: what exactly went wrong.
    pub detail: String,
}

impl RunFailure {
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> RunFailure {
        RunFailure {
            kind,
            detail: detail.into(),
        }
    }

    /// What the chat is told about the run that asked `preview`; a scheduled job's run is
    /// tried again by the scheduler, anything else with one tap on /retry.
    pub fn tell(&self, preview: &str, scheduled: bool) -> String {
        let told = self.what_happened(preview);
        match scheduled {
            false => told,
            true => {
                let end = told.find(" Tap /retry").unwrap_or(told.len());
                format!("{} The job will try again later.", &told[..end])
            }
        }
    }

    fn what_happened(&self, preview: &str) -> String {
        match self.kind {
            FailureKind::ModelBusy => format!(
                "The model stayed overloaded while I kept trying, so I could not answer \
                 “{preview}”. Tap /retry to try again."
            ),
            FailureKind::ModelUnreachable => format!(
                "I could not reach the model, so I could not answer “{preview}”. Tap /retry \
                 to try again."
            ),
            FailureKind::Storage => format!(
                "warden could not write to its disk while working on “{preview}”, so I could \
                 not finish it. Tap /retry once there is room."
            ),
            FailureKind::Interrupted => format!(
                "I was interrupted and could not finish “{preview}”. Tap /retry to try again."
            ),
            FailureKind::Other => format!(
                "Something went wrong and I could not finish “{preview}” (warden's log has the \
                 details). Tap /retry to try again."
            ),
        }
    }
}

impl From<&LlmError> for FailureKind {
    fn from(error: &LlmError) -> FailureKind {
        match error {
            LlmError::Http {
                status: 429 | 503 | 529,
                ..
            } => FailureKind::ModelBusy,
            LlmError::Http { status, .. } if *status >= 500 => FailureKind::ModelUnreachable,
            LlmError::Connect { .. } | LlmError::Timeout { .. } | LlmError::Stream { .. } => {
                FailureKind::ModelUnreachable
            }
            // Several providers: the most hopeful reading (busy beats unreachable beats other).
            LlmError::AllFailed(errors) => errors
                .iter()
                .map(FailureKind::from)
                .min_by_key(|kind| match kind {
                    FailureKind::ModelBusy => 0,
                    FailureKind::ModelUnreachable => 1,
                    _ => 2,
                })
                .unwrap_or(FailureKind::Other),
            _ => FailureKind::Other,
        }
    }
}

impl From<AgentError> for RunFailure {
    fn from(error: AgentError) -> RunFailure {
        let kind = match &error {
            AgentError::Llm(e) => FailureKind::from(e),
            AgentError::Store(_) => FailureKind::Storage,
        };
        RunFailure::new(kind, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> LlmError {
        LlmError::Http {
            provider: "anthropic".into(),
            status,
            attempts: 3,
            message: "overloaded_error: Overloaded".into(),
        }
    }

    #[test]
    fn model_errors_are_told_by_kind() {
        assert_eq!(FailureKind::from(&http(529)), FailureKind::ModelBusy);
        assert_eq!(FailureKind::from(&http(429)), FailureKind::ModelBusy);
        assert_eq!(FailureKind::from(&http(502)), FailureKind::ModelUnreachable);
        assert_eq!(FailureKind::from(&http(401)), FailureKind::Other);
        let connect = LlmError::Connect {
            provider: "openai".into(),
            attempts: 1,
            message: "refused".into(),
        };
        assert_eq!(
            FailureKind::from(&LlmError::AllFailed(vec![connect, http(529)])),
            FailureKind::ModelBusy
        );
    }

    #[test]
    fn the_chat_gets_plain_words_and_no_details() {
        let failure = RunFailure::new(
            FailureKind::Interrupted,
            "the agent worker stopped (signal: 9 (SIGKILL))",
        );
        let told = failure.tell("back up the photos", false);
        assert_eq!(
            told,
            "I was interrupted and could not finish “back up the photos”. Tap /retry to try \
             again."
        );
        assert_eq!(
            failure.tell("back up the photos", true),
            "I was interrupted and could not finish “back up the photos”. The job will try \
             again later."
        );
        for kind in [
            FailureKind::ModelBusy,
            FailureKind::ModelUnreachable,
            FailureKind::Storage,
            FailureKind::Other,
        ] {
            let told = RunFailure::new(kind, "HTTP 529 SIGKILL").tell("x", false);
            assert!(told.contains("/retry") && !told.contains("529"), "{told}");
        }
        // A kind a later version added reads as `other`.
        let read: RunFailure =
            serde_json::from_str(r#"{"kind":"quota_exhausted","detail":"d"}"#).unwrap();
        assert_eq!(read.kind, FailureKind::Other);
    }
}
