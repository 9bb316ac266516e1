//! What the chat channels' approvals share (Telegram's and Slack's): the requests waiting for
//! a button press, what a press means, how the wait ends, where an "always" answer is stored,
//! and the whole request as plain text for the file a long one is sent as. How a request looks
//! (HTML or mrkdwn) and its buttons (inline keyboard or Block Kit) stay in each channel.

use crate::egress::Grants;
use crate::lasting::Lasting;
use crate::locks::lock;
use crate::tools::approval::{Always, Approval, ApprovalRequest};
use crate::tools::approval_mirror::FirstAnswer;
use crate::tools::approval_rules::ApprovalRules;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Every approval button's data starts so: `ap:<id>:y|n|h|d|a`.
pub const PREFIX: &str = "ap:";

/// A button's meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Approve,
    Deny,
    Always(Lasting),
}

/// `ap:<id>:y` / `ap:<id>:n` / `ap:<id>:h|d|a` (always: an hour, today, until revoked;
/// Telegram's callback data is limited to 64 bytes).
pub fn parse_answer(data: &str) -> Option<(u64, Answer)> {
    let (id, verdict) = data.strip_prefix(PREFIX)?.split_once(':')?;
    let answer = match verdict {
        "y" => Answer::Approve,
        "n" => Answer::Deny,
        other => Answer::Always(Lasting::from_code(other)?),
    };
    Some((id.parse().ok()?, answer))
}

/// What a press decided, and who pressed.
pub enum Decision {
    Approved {
        by: String,
    },
    /// Approved, and the same approved from now on in this conversation, for as long as chosen.
    Always {
        by: String,
        lasting: Lasting,
    },
    Denied {
        by: String,
    },
}

impl Decision {
    fn new(answer: Answer, by: String) -> Decision {
        match answer {
            Answer::Approve => Decision::Approved { by },
            Answer::Always(lasting) => Decision::Always { by, lasting },
            Answer::Deny => Decision::Denied { by },
        }
    }
}

/// Why a press answered nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// The request was posted somewhere else (another chat, topic or conversation).
    Elsewhere,
    /// No such request waits (any more).
    Gone,
    /// Another place answered first (the HTTP API's inbox): who.
    Decided(String),
}

struct Waiting<K> {
    /// Where the request was posted: a press elsewhere does not answer it.
    at: K,
    answer: oneshot::Sender<Decision>,
    /// Claimed by the first answer, here or where the request is mirrored.
    first: FirstAnswer,
}

/// The requests waiting for a button press, shared by a channel's approvers and the handler
/// that receives the presses; `K` says where a request was posted.
pub struct Pending<K> {
    waiting: Mutex<HashMap<u64, Waiting<K>>>,
    timeout: Duration,
    closing: CancellationToken,
}

/// How a channel words the end of a wait.
pub struct Voice {
    /// The channel's name, for the reason a denial gives ("denied by Ann in Slack").
    pub channel: &'static str,
    /// Escapes a name for the channel's markup.
    pub escape: fn(&str) -> String,
    /// Text as inline code, escaped.
    pub code: fn(&str) -> String,
    /// The note for "approve", after "✅ Approved by NAME".
    pub approved: &'static str,
    /// Where a lasting approval holds: "this chat".
    pub here: &'static str,
    /// How stored command shapes are listed and revoked.
    pub revoke_rules: &'static str,
}

impl Voice {
    /// The shapes as a list of inline code items.
    pub fn shapes(&self, shapes: &[(crate::policy::shape::CommandShape, String)]) -> String {
        shapes
            .iter()
            .map(|(_, shown)| (self.code)(shown))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl<K: PartialEq> Pending<K> {
    pub fn new(timeout: Duration) -> Pending<K> {
        Pending {
            waiting: Mutex::new(HashMap::new()),
            timeout,
            closing: CancellationToken::new(),
        }
    }

    /// Shutdown: every waiting request is denied now, and new ones at once.
    pub fn close(&self) {
        self.closing.cancel();
    }

    pub fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    /// A new request posted `at`: its id, and where its decision will come. `first` is
    /// shared with wherever else the request is shown; the first answer claims it.
    pub fn register(&self, at: K, first: FirstAnswer) -> (u64, oneshot::Receiver<Decision>) {
        let (tx, rx) = oneshot::channel();
        let mut waiting = lock(&self.waiting);
        let mut id: u64 = rand::random();
        while waiting.contains_key(&id) {
            id = rand::random();
        }
        waiting.insert(
            id,
            Waiting {
                at,
                answer: tx,
                first,
            },
        );
        (id, rx)
    }

    pub fn forget(&self, id: u64) {
        lock(&self.waiting).remove(&id);
    }

    /// `by` pressed `answer` for request `id`, `at` this place, in `channel`: it counts only
    /// where the request was posted, and only if nothing answered it first.
    pub fn answer(
        &self,
        id: u64,
        at: Option<&K>,
        answer: Answer,
        by: String,
        channel: &str,
    ) -> Result<(), Unanswered> {
        let mut waiting = lock(&self.waiting);
        match waiting.get(&id) {
            Some(w) if Some(&w.at) == at => {
                if let Err(who) = w.first.claim(&format!("answered by {by} in {channel}")) {
                    // Its waiter takes the other answer and edits the message.
                    return Err(Unanswered::Decided(who));
                }
            }
            Some(_) => return Err(Unanswered::Elsewhere),
            None => return Err(Unanswered::Gone),
        }
        if let Some(w) = waiting.remove(&id) {
            let _ = w.answer.send(Decision::new(answer, by));
        }
        Ok(())
    }

    /// Wait for request `id`'s decision — no answer within the timeout, a stopped run
    /// (`cancel`) or a shutdown mean deny — then forget it. Returns the approval and the note
    /// for the request message; an "always" answer is stored with `store` when it was
    /// `offered`, and approves nothing when it was not. `elsewhere` is the answer given where
    /// the request is mirrored (never, without a mirror); whatever ends the wait claims
    /// `first`, so a late answer there is told the request was decided.
    #[allow(clippy::too_many_arguments)]
    pub async fn settle(
        &self,
        id: u64,
        answer: oneshot::Receiver<Decision>,
        cancel: &CancellationToken,
        offered: Option<&Always>,
        voice: &Voice,
        store: impl FnOnce(&Always, Lasting, &str) -> String,
        elsewhere: impl Future<Output = (Approval, String)>,
        first: &FirstAnswer,
    ) -> (Approval, String) {
        let timeout = self.timeout;
        let escape = voice.escape;
        let settled = tokio::select! {
            settled = elsewhere => settled,
            decision = answer => match decision {
                Ok(Decision::Approved { by }) => {
                    (Approval::Approved, format!("✅ Approved by {}{}", escape(&by), voice.approved))
                }
                Ok(Decision::Always { by, lasting }) => match offered {
                    Some(always) => (Approval::Approved, store(always, lasting, &by)),
                    // Not offered for this request: a forged press approves nothing.
                    None => (
                        Approval::Denied("an answer that was not offered".into()),
                        "❌ Not approved.".into(),
                    ),
                },
                Ok(Decision::Denied { by }) => (
                    Approval::Denied(format!("denied by {by} in {}", voice.channel)),
                    format!("❌ Denied by {}.", escape(&by)),
                ),
                Err(_) => (Approval::Denied("the request was dropped".into()), "❌ Dropped.".into()),
            },
            _ = tokio::time::sleep(timeout) => (
                Approval::Denied(format!("no answer within {} s", timeout.as_secs())),
                format!("⌛ No answer within {} s: denied.", timeout.as_secs()),
            ),
            _ = cancel.cancelled() => (
                Approval::Denied("the run was stopped".into()),
                "⏹ The run was stopped: denied.".into(),
            ),
            _ = self.closing.cancelled() => (
                Approval::Denied("warden is shutting down".into()),
                "⏹ warden is shutting down: denied.".into(),
            ),
        };
        let _ = first.claim(&settled.1);
        self.forget(id);
        settled
    }
}

/// Where "always" answers are stored: hosts in `grants` (`warden egress list|rm`), command
/// shapes in `rules` (`warden approvals list|rm`); `None`: that answer is not offered.
#[derive(Default)]
pub struct Standing {
    pub grants: Option<Grants>,
    pub rules: Option<ApprovalRules>,
}

impl Standing {
    /// Whether this standing approval can be stored (so its button is offered).
    pub fn can_store(&self, always: &Always) -> bool {
        match always {
            Always::Host(_) => self.grants.is_some(),
            Always::Commands(shapes) => self.rules.is_some() && !shapes.is_empty(),
        }
    }

    /// Store `always` for `session`, approved by `by`; the note for the request message says
    /// what was stored or that it could not be.
    pub fn store(
        &self,
        session: &str,
        always: &Always,
        lasting: Lasting,
        by: &str,
        voice: &Voice,
    ) -> String {
        let what = || match always {
            Always::Host(host) => format!(
                "{} is allowed in {} {} ({} revokes it)",
                (voice.escape)(host),
                voice.here,
                lasting.label(),
                (voice.code)(&format!("warden egress rm {host}"))
            ),
            Always::Commands(shapes) => format!(
                "in {} {}: {} ({})",
                voice.here,
                lasting.label(),
                voice.shapes(shapes),
                voice.revoke_rules
            ),
        };
        let granted_by = format!("{by} in {}", voice.channel);
        let stored = match (always, &self.grants, &self.rules) {
            (Always::Host(host), Some(grants), _) => {
                grants.allow(session, host, lasting, &granted_by)
            }
            (Always::Commands(shapes), _, Some(rules)) => {
                rules.grant(session, shapes, lasting, &granted_by)
            }
            _ => return format!("✅ Approved by {} this once.", (voice.escape)(by)),
        };
        match stored {
            Ok(()) => format!("✅ Approved by {}; {}.", (voice.escape)(by), what()),
            Err(e) => {
                tracing::error!("storing an approval rule: {e}");
                format!(
                    "✅ Approved by {} this once; the rule could not be stored.",
                    (voice.escape)(by)
                )
            }
        }
    }
}

/// The whole request as plain text, for the file a long request is sent as; `always` names
/// the "always" answer, as its button does.
pub fn request_text(request: &ApprovalRequest, offered: Option<&Always>, always: &str) -> String {
    let mut text = format!(
        "Approval needed ({})\n\nWhat would run:\n{}\n\nWhy it asks: {}\n",
        request.tool, request.command, request.reason
    );
    if let Some(Always::Commands(shapes)) = offered {
        let shown: Vec<&str> = shapes.iter().map(|(_, s)| s.as_str()).collect();
        text.push_str(&format!(
            "\n{always} would approve from now on: {}\n",
            shown.join(", ")
        ));
    }
    if let Some(detail) = &request.detail {
        text.push_str(&format!("\n{detail}\n"));
    }
    text
}

/// The first 12 hex digits of the text's SHA-256, to tie the message to the file.
pub fn sha256_prefix(text: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(text.as_bytes())[..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_press_counts_only_where_the_request_waits_and_only_once() {
        let pending: Pending<&str> = Pending::new(Duration::from_secs(5));
        let (id, decision) = pending.register("C1", FirstAnswer::default());
        let press = |at| pending.answer(id, Some(&at), Answer::Deny, "ann".into(), "Slack");
        assert_eq!(press("C2"), Err(Unanswered::Elsewhere));
        assert_eq!(
            pending.answer(id, None, Answer::Deny, "ann".into(), "Slack"),
            Err(Unanswered::Elsewhere)
        );
        assert_eq!(press("C1"), Ok(()));
        assert_eq!(press("C1"), Err(Unanswered::Gone));
        assert!(matches!(decision.await, Ok(Decision::Denied { by }) if by == "ann"));
    }

    #[tokio::test]
    async fn an_answer_given_where_the_request_is_mirrored_first_decides() {
        let pending: Pending<&str> = Pending::new(Duration::from_secs(5));
        let first = FirstAnswer::default();
        let (id, decision) = pending.register("C1", first.clone());
        first.claim("answered over HTTP").unwrap();
        assert_eq!(
            pending.answer(id, Some(&"C1"), Answer::Approve, "ann".into(), "Slack"),
            Err(Unanswered::Decided("answered over HTTP".into()))
        );
        let voice = Voice {
            channel: "Slack",
            escape: |t| t.to_string(),
            code: |t| t.to_string(),
            approved: ".",
            here: "this conversation",
            revoke_rules: "",
        };
        let over_http = async { (Approval::Approved, "✅ Approved over HTTP.".to_string()) };
        let (approval, note) = pending
            .settle(
                id,
                decision,
                &CancellationToken::new(),
                None,
                &voice,
                |_, _, _| String::new(),
                over_http,
                &first,
            )
            .await;
        assert!(matches!(approval, Approval::Approved));
        assert_eq!(note, "✅ Approved over HTTP.");
    }
}
