//! Approvals over Telegram: an `ask` command is posted verbatim with Approve / Deny buttons;
//! the agent waits for a press by an allowed user. No answer within the timeout, a stopped
//! run, a shutdown or a failure to post the request all mean deny. Afterwards the request
//! message is edited to show what was decided (and the buttons disappear). An egress approval
//! for a host without a rule also offers "Always for HOST", which approves and stores a rule
//! for the chat (`warden egress list|rm`); a bash approval the policy asked for offers
//! "Always in this chat" for 1 hour, for today or until revoked, which stores the commands'
//! shapes with that expiry (`warden approvals list|rm`, `/approvals`).
//!
//! With a mirror (`warden bot` serving the HTTP API) each request also waits in the API's
//! inbox; the first answer from either place decides, and the message says where it came
//! from.

use super::access::Access;
use super::api::{chat_key, describe, Telegram, Upload};
use super::format::escape;
use crate::channels::pending_approvals::{
    parse_answer, request_text, sha256_prefix, Answer, Pending, Standing, Unanswered, Voice,
};
use crate::egress::Grants;
use crate::gateway::ChatKey;
use crate::lasting::Lasting;
use crate::tools::approval::{Always, Approval, ApprovalRequest, Approver};
use crate::tools::approval_mirror::{ApprovalMirror, FirstAnswer};
use crate::tools::approval_rules::ApprovalRules;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use teloxide::payloads::AnswerCallbackQuerySetters;
use teloxide::prelude::Requester;
use teloxide::types::{CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup};
use tokio_util::sync::CancellationToken;

/// A request longer than this is never cut: its whole text goes to the chat as a file first,
/// and the message with the buttons says so (the hidden tail could be what matters).
const MAX_SHOWN: usize = 3500;
/// How much of a long command the message with the buttons shows before pointing at the file.
const HEAD_SHOWN: usize = 1200;

/// The requests waiting for a button press, shared by the chats' approvers and the update
/// handler that receives the presses.
pub struct Approvals {
    /// Each request waits in the chat and topic it was posted in.
    pending: Pending<ChatKey>,
    /// Where "Always for this host" and "Always in this chat" are stored; without it the
    /// buttons are not offered.
    standing: Standing,
    /// Where each request is shown too (the HTTP API's inbox).
    mirror: Option<Arc<dyn ApprovalMirror>>,
}

/// How the request message words its end.
const VOICE: Voice = Voice {
    channel: "Telegram",
    escape,
    code: |text| format!("<code>{}</code>", escape(text)),
    approved: ".",
    here: "this chat",
    revoke_rules: "/approvals lists and revokes",
};

/// "Always in this chat", as the file of a long request names it.
const ALWAYS_HERE: &str = "“Always in this chat” (for 1 hour, today or until revoked)";

impl Approvals {
    pub fn new(timeout: Duration) -> Approvals {
        Approvals {
            pending: Pending::new(timeout),
            standing: Standing::default(),
            mirror: None,
        }
    }

    /// Show every request in `mirror` too; the first answer from either place decides.
    pub fn with_mirror(mut self, mirror: Arc<dyn ApprovalMirror>) -> Approvals {
        self.mirror = Some(mirror);
        self
    }

    /// Offer "Always for this host" on egress approvals, storing the answers in `grants`,
    /// and "Always in this chat" on bash approvals, storing them in `rules`.
    pub fn with_grants(mut self, grants: Grants, rules: ApprovalRules) -> Approvals {
        self.standing = Standing {
            grants: Some(grants),
            rules: Some(rules),
        };
        self
    }

    /// Shutdown: every waiting request is denied now, and new ones at once.
    pub fn close(&self) {
        self.pending.close();
    }

    /// A button press. Counts only from an allowed user, in the chat the request was posted
    /// in; anyone else gets a short "not allowed" and the request keeps waiting.
    pub async fn on_callback(&self, tg: &Telegram, access: &Access, query: CallbackQuery) {
        let user_id = query.from.id.0 as i64;
        let parsed = query.data.as_deref().and_then(parse_answer);
        let decided: String;
        let reply = match parsed {
            None => "This button is not mine.",
            Some(_) if !access.is_allowed(user_id) => {
                tracing::warn!(
                    user_id,
                    "approval button pressed by a user who is not allowed"
                );
                "You are not allowed to approve commands here."
            }
            Some((id, answer)) => {
                // The chat and the topic the request was posted in.
                let chat = query.message.as_ref().map(|m| match m.regular_message() {
                    Some(msg) => chat_key(msg),
                    None => ChatKey::from(m.chat().id.0),
                });
                let by = query.from.first_name.clone();
                match self
                    .pending
                    .answer(id, chat.as_ref(), answer, by, VOICE.channel)
                {
                    Ok(()) => match answer {
                        Answer::Approve => "Approved.",
                        Answer::Always(Lasting::Hour) => "Approved for 1 hour.",
                        Answer::Always(Lasting::Today) => "Approved for today.",
                        Answer::Always(Lasting::UntilRevoked) => "Approved, always.",
                        Answer::Deny => "Denied.",
                    },
                    Err(Unanswered::Elsewhere) => "This request belongs to another chat or topic.",
                    Err(Unanswered::Gone) => "This request is no longer waiting.",
                    Err(Unanswered::Decided(who)) => {
                        decided = format!("This request was decided already ({who}).");
                        decided.as_str()
                    }
                }
            }
        };
        let answer = tg.bot().answer_callback_query(query.id.clone()).text(reply);
        if let Err(e) = answer.await {
            tracing::debug!("answerCallbackQuery: {}", describe(&e));
        }
    }
}

/// The approver for one run in one chat.
pub struct ChatApprover {
    pub approvals: Arc<Approvals>,
    /// The run asking (the mirror shows it).
    pub run_id: i64,
    pub tg: Telegram,
    pub chat_id: i64,
    /// The run's topic: its requests are posted there.
    pub topic: Option<i32>,
    pub reply_to: Option<i32>,
    /// The run's abort signal: a stopped run stops waiting.
    pub cancel: CancellationToken,
}

impl ChatApprover {
    fn chat_key(&self) -> ChatKey {
        ChatKey::new(self.chat_id, self.topic)
    }
}

/// The request as posted, whole; `offered` is the "always" answer its buttons offer.
fn request_html(request: &ApprovalRequest, offered: Option<&Always>) -> String {
    let mut html = format!(
        "{mark} <b>Approval needed</b> ({tool})\n<pre>{command}</pre>\n{reason}",
        mark = super::format::APPROVAL_MARK,
        tool = escape(&request.tool),
        command = escape(&request.command),
        reason = escape(&request.reason),
    );
    if let Some(Always::Commands(shapes)) = offered {
        html.push_str(&format!(
            "\n“Always in this chat” (for 1 hour, today or until revoked) would approve from \
             now on: {}",
            VOICE.shapes(shapes)
        ));
    }
    if let Some(detail) = &request.detail {
        html.push_str(&format!("\n<pre>{}</pre>", escape(detail)));
    }
    html
}

/// The message with the buttons for a request sent whole as a file: the start of it, and
/// which file holds all of it.
fn pointer_html(request: &ApprovalRequest, text: &str, digest: &str) -> String {
    let head: String = request.command.chars().take(HEAD_SHOWN).collect();
    let more = request.command.chars().count() > HEAD_SHOWN || request.detail.is_some();
    format!(
        "{mark} <b>Approval needed</b> ({tool})\n<pre>{head}{ellipsis}</pre>\n{reason}\n\n\
         📎 The whole request ({lines} lines, sha256 {digest}) is in the file above: it is too \
         long for one message, and approving approves exactly that. Read it to the end.",
        mark = super::format::APPROVAL_MARK,
        tool = escape(&request.tool),
        head = escape(&head),
        ellipsis = if more { "\n…" } else { "" },
        reason = escape(&request.reason),
        lines = text.lines().count(),
    )
}

impl ChatApprover {
    /// Send a long request's whole text as a document.
    async fn send_whole(&self, text: &str, digest: &str) -> Result<(), String> {
        use std::io::Write;
        let mut file = tempfile::tempfile().map_err(|e| e.to_string())?;
        file.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
        let upload = Upload {
            file: &file,
            name: "approval-request.txt",
            max: text.len() as u64,
            photo: false,
        };
        let caption = format!(
            "{} The whole request to approve (sha256 {digest}); the buttons follow.",
            super::format::APPROVAL_MARK
        );
        self.tg
            .send_file(self.chat_key(), &upload, Some(&caption))
            .await
            .map(drop)
    }
}

#[async_trait]
impl Approver for ChatApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        if self.approvals.pending.is_closing() {
            return Approval::Denied("warden is shutting down".into());
        }
        let always = request
            .always
            .as_ref()
            .filter(|a| self.approvals.standing.can_store(a));
        let mut html = request_html(request, always);
        if html.chars().count() > MAX_SHOWN {
            // Never cut: the whole request goes first, as a file; the buttons come only once
            // it arrived.
            let text = request_text(request, always, ALWAYS_HERE);
            let digest = sha256_prefix(&text);
            if let Err(e) = self.send_whole(&text, &digest).await {
                return Approval::Denied(format!(
                    "the request is too long for one message and could not be sent whole as a \
                     file ({e}); nothing is approved unseen"
                ));
            }
            html = pointer_html(request, &text, &digest);
        }
        let first = FirstAnswer::default();
        let (id, answer) = self
            .approvals
            .pending
            .register(self.chat_key(), first.clone());
        let approve = match always {
            Some(Always::Commands(_)) => "✅ Approve once",
            _ => "✅ Approve",
        };
        let mut rows = vec![vec![
            InlineKeyboardButton::callback(approve, format!("ap:{id}:y")),
            InlineKeyboardButton::callback("❌ Deny", format!("ap:{id}:n")),
        ]];
        match always {
            Some(Always::Host(host)) => {
                // The exact host, never a wider one: the grant is for what was asked about.
                rows.push(vec![InlineKeyboardButton::callback(
                    format!("♾ Always for {host}"),
                    format!("ap:{id}:a"),
                )]);
                rows.push(
                    [Lasting::Hour, Lasting::Today]
                        .into_iter()
                        .map(|lasting| {
                            InlineKeyboardButton::callback(
                                match lasting {
                                    Lasting::Hour => format!("⏱ {host} for 1 hour"),
                                    _ => format!("📅 {host} today"),
                                },
                                format!("ap:{id}:{}", lasting.code()),
                            )
                        })
                        .collect(),
                );
            }
            Some(Always::Commands(_)) => rows.push(
                Lasting::ALL
                    .into_iter()
                    .map(|lasting| {
                        let text = match lasting {
                            Lasting::Hour => "⏱ 1 hour",
                            Lasting::Today => "📅 Today",
                            Lasting::UntilRevoked => "♾ Until revoked",
                        };
                        InlineKeyboardButton::callback(text, format!("ap:{id}:{}", lasting.code()))
                    })
                    .collect(),
            ),
            None => {}
        }
        let keyboard = InlineKeyboardMarkup::new(rows);
        let sent = self
            .tg
            .send_html(self.chat_key(), self.reply_to, &html, Some(keyboard))
            .await;
        let message = match sent {
            Ok(message) => message,
            Err(e) => {
                self.approvals.pending.forget(id);
                return Approval::Denied(format!("the approval request could not be sent ({e})"));
            }
        };
        let mirrored = self
            .approvals
            .mirror
            .as_ref()
            .map(|mirror| mirror.show(self.run_id, request, first.clone()));
        let (mirror_id, mirror_answer) = match mirrored {
            Some((id, answer)) => (Some(id), Some(answer)),
            None => (None, None),
        };
        let over_http = async move {
            let approve = match mirror_answer {
                Some(answer) => match answer.await {
                    Ok(approve) => approve,
                    // Never answered there: only this chat can answer.
                    Err(_) => std::future::pending().await,
                },
                None => std::future::pending().await,
            };
            if approve {
                (
                    Approval::Approved,
                    "✅ Approved over HTTP (the API's inbox).".to_string(),
                )
            } else {
                (
                    Approval::Denied("denied over the HTTP API".into()),
                    "❌ Denied over HTTP (the API's inbox).".to_string(),
                )
            }
        };
        let (approval, note) = self
            .approvals
            .pending
            .settle(
                id,
                answer,
                &self.cancel,
                always,
                &VOICE,
                |always, lasting, by| {
                    self.approvals
                        .standing
                        .store(&request.session, always, lasting, by, &VOICE)
                },
                over_http,
                &first,
            )
            .await;
        if let (Some(mirror), Some(id)) = (&self.approvals.mirror, &mirror_id) {
            mirror.withdraw(id);
        }
        let outcome = format!("{html}\n\n{note}");
        if let Err(e) = self
            .tg
            .edit_html(self.chat_id, message.id.0, &outcome)
            .await
        {
            tracing::debug!(chat = self.chat_id, "editing an approval message: {e}");
        }
        approval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_request_is_never_cut_and_the_buttons_point_at_the_whole_file() {
        let detail: String = (0..2000).map(|i| format!("+line {i} <&>\n")).collect();
        let request = ApprovalRequest {
            session: "telegram:1".into(),
            tool: "write".into(),
            command: "write AGENTS.md".into(),
            reason: "AGENTS.md tells the agent how to behave".into(),
            always: None,
            detail: Some(detail + "+the last line matters\n"),
        };
        let html = request_html(&request, None);
        assert!(html.chars().count() > MAX_SHOWN);
        assert!(html.contains("+the last line matters"), "never cut");
        let text = request_text(&request, None, ALWAYS_HERE);
        assert!(
            text.ends_with("+the last line matters\n\n"),
            "{}",
            &text[text.len() - 60..]
        );
        let digest = sha256_prefix(&text);
        let pointer = pointer_html(&request, &text, &digest);
        assert!(pointer.chars().count() <= MAX_SHOWN);
        assert!(
            pointer.contains(&digest) && pointer.contains("file above"),
            "{pointer}"
        );
        assert!(pointer.contains(&format!("{} lines", text.lines().count())));
        let short = request_html(
            &ApprovalRequest {
                detail: Some("-a\n+b\n".into()),
                ..request
            },
            None,
        );
        assert!(short.ends_with("<pre>-a\n+b\n</pre>"), "{short}");
    }

    #[test]
    fn what_always_would_approve_is_shown_only_when_offered() {
        let shape = crate::policy::shape::CommandShape {
            cwd: "/ws".into(),
            words: vec!["cargo".into(), "test".into()],
            reasons: vec!["runs code".into()],
        };
        let always = Always::Commands(vec![(shape, "cargo test <x>".into())]);
        let request = ApprovalRequest {
            session: "telegram:1".into(),
            tool: "bash".into(),
            command: "cargo test".into(),
            reason: "runs code".into(),
            always: Some(always.clone()),
            detail: None,
        };
        assert!(request_html(&request, Some(&always))
            .ends_with("now on: <code>cargo test &lt;x&gt;</code>"));
        assert!(!request_html(&request, None).contains("would approve"));
    }

    #[test]
    fn callback_data_round_trips_and_rejects_garbage() {
        assert_eq!(
            parse_answer("ap:18446744073709551615:y"),
            Some((u64::MAX, Answer::Approve))
        );
        assert_eq!(parse_answer("ap:7:n"), Some((7, Answer::Deny)));
        assert_eq!(
            parse_answer("ap:7:a"),
            Some((7, Answer::Always(Lasting::UntilRevoked)))
        );
        assert_eq!(
            parse_answer("ap:7:h"),
            Some((7, Answer::Always(Lasting::Hour)))
        );
        assert_eq!(
            parse_answer("ap:7:d"),
            Some((7, Answer::Always(Lasting::Today)))
        );
        assert_eq!(parse_answer("ap:7:maybe"), None);
        assert_eq!(parse_answer("xx:7:y"), None);
        assert!(format!("ap:{}:y", u64::MAX).len() <= 64);
    }

    #[test]
    fn the_request_shows_the_exact_command_escaped() {
        let html = request_html(
            &ApprovalRequest {
                session: "telegram:1".into(),
                tool: "bash".into(),
                command: "rm -r 'a <b>' && echo &".into(),
                reason: "rm -r deletes a directory tree".into(),
                always: None,
                detail: None,
            },
            None,
        );
        assert!(html.contains("<pre>rm -r 'a &lt;b&gt;' &amp;&amp; echo &amp;</pre>"));
    }
}
