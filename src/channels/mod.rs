//! Where messages come from and answers go: the terminal (and, later, Telegram).

pub mod terminal;
