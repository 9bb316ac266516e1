//! Where messages come from and answers go: the terminal, Telegram, Slack and the HTTP API.

pub mod attachments;
pub mod http;
#[cfg(test)]
pub mod outbox_checks;
pub mod pace;
pub mod pending_approvals;
pub mod slack;
pub mod telegram;
pub mod terminal;
