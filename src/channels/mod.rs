//! Where messages come from and answers go: the terminal, Telegram and the HTTP API.

pub mod http;
pub mod telegram;
pub mod terminal;
