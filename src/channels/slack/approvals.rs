//! Approvals in Slack: an `ask` command is posted verbatim (escaped, in a code block) with
//! Block Kit buttons — Approve once, Always in this conversation (for 1 hour, today, until
//! revoked; for a host: always, 1 hour, today) and Deny — and the run waits for a press.
//!
//! A press arrives over Socket Mode as an `interactive` envelope. It counts only from an
//! allowed user (checked on the payload's user id; anyone else is told, only they see it)
//! and only in the conversation the request was posted in. No answer within the timeout, a
//! stopped run, a shutdown or a request that could not be posted all mean deny. A request too
//! long for one message — or one a code block could not show as it is — goes first as a file,
//! whole, and the message with the buttons points at it: nothing is approved unseen.

use super::api::SlackApi;
use super::format::escape;
use super::store::Conversation;
use crate::channels::pending_approvals::{
    parse_answer, request_text, sha256_prefix, Pending, Standing, Unanswered, Voice, PREFIX,
};
use crate::egress::Grants;
use crate::lasting::Lasting;
use crate::tools::approval::{Always, Approval, ApprovalRequest, Approver};
use crate::tools::approval_mirror::FirstAnswer;
use crate::tools::approval_rules::ApprovalRules;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A section's text holds 3,000 characters; a longer request goes as a file.
const MAX_SHOWN: usize = 2800;
/// How much of a long command the message with the buttons shows.
const HEAD_SHOWN: usize = 1000;
/// How the request message words its end.
const VOICE: Voice = Voice {
    channel: "Slack",
    escape,
    code: |text| format!("`{}`", escape(text)),
    approved: " this once.",
    here: "this conversation",
    revoke_rules: "`warden approvals list` and `rm` revoke it",
};
/// "Always in this conversation", as the file of a long request names it.
const ALWAYS_HERE: &str = "“Always in this conversation”";

pub struct SlackApprovals {
    /// Each request waits in the conversation (channel id) it was posted in.
    pending: Pending<String>,
    standing: Standing,
}

/// What a press came to, for the presser.
#[derive(Debug, PartialEq, Eq)]
pub enum Pressed {
    /// It answered a request.
    Answered,
    /// Not an approval button of warden's.
    NotMine,
    /// Refused: tell the presser this (only they see it).
    Refused(String),
}

impl SlackApprovals {
    pub fn new(timeout: Duration, grants: Grants, rules: ApprovalRules) -> SlackApprovals {
        SlackApprovals {
            pending: Pending::new(timeout),
            standing: Standing {
                grants: Some(grants),
                rules: Some(rules),
            },
        }
    }

    /// Shutdown: every waiting request is denied now, and new ones at once.
    pub fn close(&self) {
        self.pending.close();
    }

    /// A `block_actions` payload: a button press.
    pub fn on_press(&self, payload: &Value, allowed: &HashSet<String>) -> Pressed {
        let Some((id, answer)) = payload["actions"]
            .as_array()
            .and_then(|actions| actions.first())
            .and_then(|action| action["value"].as_str())
            .and_then(parse_answer)
        else {
            return Pressed::NotMine;
        };
        let user = payload["user"]["id"].as_str().unwrap_or_default();
        if !allowed.contains(user) {
            tracing::warn!(
                user,
                "slack: an approval button pressed by a user who is not allowed"
            );
            return Pressed::Refused(format!(
                "You ({user}) are not allowed to approve commands here; the request still \
                 waits for someone who is."
            ));
        }
        let channel = payload["channel"]["id"]
            .as_str()
            .or_else(|| payload["container"]["channel_id"].as_str())
            .unwrap_or_default();
        let by = payload["user"]["name"]
            .as_str()
            .or_else(|| payload["user"]["username"].as_str())
            .unwrap_or(user)
            .to_string();
        match self
            .pending
            .answer(id, Some(&channel.to_string()), answer, by, VOICE.channel)
        {
            Ok(()) => Pressed::Answered,
            Err(Unanswered::Elsewhere) => {
                Pressed::Refused("This request belongs to another conversation.".into())
            }
            Err(Unanswered::Gone) => Pressed::Refused("This request is no longer waiting.".into()),
            Err(Unanswered::Decided(who)) => {
                Pressed::Refused(format!("This request was decided already ({who})."))
            }
        }
    }
}

/// The request as posted, whole, in mrkdwn.
fn request_mrkdwn(request: &ApprovalRequest, offered: Option<&Always>) -> String {
    let mut text = format!(
        ":warning: *Approval needed* ({})\n```{}```\n{}",
        escape(&request.tool),
        escape(&request.command),
        escape(&request.reason),
    );
    if let Some(Always::Commands(shapes)) = offered {
        text.push_str(&format!(
            "\n“Always in this conversation” would approve from now on: {}",
            VOICE.shapes(shapes)
        ));
    }
    if let Some(detail) = &request.detail {
        text.push_str(&format!("\n```{}```", escape(detail)));
    }
    text
}

/// Whether a code block shows the request exactly: not when it is too long, or when a
/// backtick fence inside would end the block early.
fn fits(request: &ApprovalRequest, mrkdwn: &str) -> bool {
    mrkdwn.chars().count() <= MAX_SHOWN
        && !request.command.contains("```")
        && !request.detail.as_deref().unwrap_or("").contains("```")
}

/// The message with the buttons for a request sent whole as a file.
fn pointer_mrkdwn(request: &ApprovalRequest, text: &str, digest: &str) -> String {
    let head: String = request
        .command
        .replace("```", "'''")
        .chars()
        .take(HEAD_SHOWN)
        .collect();
    format!(
        ":warning: *Approval needed* ({tool})\n```{head}\n…```\n{reason}\n\n:paperclip: The \
         whole request ({lines} lines, sha256 {digest}) is in the file above: it cannot be \
         shown here exactly, and approving approves exactly that. Read it to the end.",
        tool = escape(&request.tool),
        head = escape(&head),
        reason = escape(&request.reason),
        lines = text.lines().count(),
    )
}

fn button(text: &str, value: String, style: Option<&str>) -> Value {
    let mut button = json!({
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "value": value,
        "action_id": format!("warden_{}", value.rsplit(':').next().unwrap_or("x")),
    });
    if let Some(style) = style {
        button["style"] = json!(style);
    }
    button
}

/// The buttons for request `id`.
fn buttons(id: u64, always: Option<&Always>) -> Vec<Value> {
    let mut row = vec![button(
        "Approve once",
        format!("{PREFIX}{id}:y"),
        Some("primary"),
    )];
    let label = |lasting: Lasting| match (always, lasting) {
        (Some(Always::Host(_)), Lasting::UntilRevoked) => "Always for this host",
        (Some(Always::Host(_)), Lasting::Hour) => "This host for 1 hour",
        (Some(Always::Host(_)), Lasting::Today) => "This host today",
        (_, Lasting::Hour) => "Always in this conversation for 1 hour",
        (_, Lasting::Today) => "Always in this conversation today",
        (_, Lasting::UntilRevoked) => "Always in this conversation",
    };
    if always.is_some() {
        for lasting in Lasting::ALL {
            row.push(button(
                label(lasting),
                format!("{PREFIX}{id}:{}", lasting.code()),
                None,
            ));
        }
    }
    row.push(button("Deny", format!("{PREFIX}{id}:n"), Some("danger")));
    row
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})
}

/// The approver for one run in one conversation.
pub struct SlackApprover {
    pub approvals: Arc<SlackApprovals>,
    pub api: SlackApi,
    pub conversation: Conversation,
    /// The run's abort signal: a stopped run stops waiting.
    pub cancel: CancellationToken,
}

#[async_trait]
impl Approver for SlackApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        let approvals = &self.approvals;
        if approvals.pending.is_closing() {
            return Approval::Denied("warden is shutting down".into());
        }
        let (channel, thread) = (
            self.conversation.channel.as_str(),
            self.conversation.thread_ts.as_deref(),
        );
        let always = request
            .always
            .as_ref()
            .filter(|a| approvals.standing.can_store(a));
        let mut text = request_mrkdwn(request, always);
        if !fits(request, &text) {
            let whole = request_text(request, always, ALWAYS_HERE);
            let digest = sha256_prefix(&whole);
            let comment = format!(
                ":warning: The whole request to approve (sha256 {digest}); the buttons follow."
            );
            if let Err(e) = self
                .api
                .upload(
                    channel,
                    thread,
                    "approval-request.txt",
                    whole.clone().into_bytes(),
                    Some(&comment),
                )
                .await
            {
                return Approval::Denied(format!(
                    "the request cannot be shown whole in one message and could not be sent \
                     as a file ({e}); nothing is approved unseen"
                ));
            }
            text = pointer_mrkdwn(request, &whole, &digest);
        }
        // Slack's requests are not mirrored: only this conversation can answer.
        let first = FirstAnswer::default();
        let (id, answer) = approvals
            .pending
            .register(channel.to_string(), first.clone());
        let blocks = json!([section(&text), {"type": "actions", "elements": buttons(id, always)}]);
        let ts = match self
            .api
            .post_blocks(channel, thread, "Approval needed", &blocks)
            .await
        {
            Ok(ts) => ts,
            Err(e) => {
                approvals.pending.forget(id);
                return Approval::Denied(format!("the approval request could not be sent ({e})"));
            }
        };
        let (approval, note) = approvals
            .pending
            .settle(
                id,
                answer,
                &self.cancel,
                always,
                &VOICE,
                |always, lasting, by| {
                    approvals
                        .standing
                        .store(&request.session, always, lasting, by, &VOICE)
                },
                std::future::pending(),
                &first,
            )
            .await;
        let outcome = format!("{text}\n\n{note}");
        let blocks = json!([section(&outcome)]);
        if let Err(e) = self.api.update_blocks(channel, &ts, &note, &blocks).await {
            tracing::debug!("slack: editing an approval message: {e}");
        }
        approval
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::pending_approvals::Answer;

    fn request(command: &str) -> ApprovalRequest {
        ApprovalRequest {
            session: "slack:1".into(),
            tool: "bash".into(),
            command: command.into(),
            reason: "rm -r deletes a tree".into(),
            always: None,
            detail: None,
        }
    }

    #[test]
    fn values_round_trip_and_garbage_is_not_mine() {
        assert_eq!(parse_answer("ap:7:y"), Some((7, Answer::Approve)));
        assert_eq!(parse_answer("ap:7:n"), Some((7, Answer::Deny)));
        assert_eq!(
            parse_answer("ap:7:h"),
            Some((7, Answer::Always(Lasting::Hour)))
        );
        assert_eq!(parse_answer("ap:7:maybe"), None);
        assert_eq!(parse_answer("rv:7"), None);
    }

    #[test]
    fn the_request_is_shown_exactly_or_sent_whole() {
        let short = request("rm -r 'a <b>' && echo <!channel>");
        let text = request_mrkdwn(&short, None);
        assert!(text.contains("```rm -r 'a &lt;b&gt;' &amp;&amp; echo &lt;!channel&gt;```"));
        assert!(fits(&short, &text));
        let fenced = request("echo '```' ; rm -rf x");
        assert!(!fits(&fenced, &request_mrkdwn(&fenced, None)));
        let long = request(&"x".repeat(5000));
        let text = request_mrkdwn(&long, None);
        assert!(!fits(&long, &text));
        let whole = request_text(&long, None, ALWAYS_HERE);
        assert!(whole.contains(&"x".repeat(5000)), "the file is whole");
        let pointer = pointer_mrkdwn(&long, &whole, &sha256_prefix(&whole));
        assert!(pointer.chars().count() <= MAX_SHOWN);
    }

    #[test]
    fn buttons_offer_always_only_when_it_can_be_stored() {
        let plain = buttons(9, None);
        let values: Vec<&str> = plain.iter().map(|b| b["value"].as_str().unwrap()).collect();
        assert_eq!(values, ["ap:9:y", "ap:9:n"]);
        let always = Always::Host("example.com".into());
        assert_eq!(buttons(9, Some(&always)).len(), 5);
        for b in buttons(9, Some(&always)) {
            assert!(b["text"]["text"].as_str().unwrap().chars().count() <= 75);
        }
    }
}
