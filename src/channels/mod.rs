//! Where messages come from and answers go: the terminal and Telegram.

pub mod telegram;
pub mod terminal;
