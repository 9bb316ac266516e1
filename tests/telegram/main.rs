//! `warden bot` over Telegram: the real binary against the fake Bot API and the fake model —
//! approvals, bash, control, durability, files, streaming, voice, the worker.

#[path = "../support/mod.rs"]
mod support;

support::test_threads::waiting_suite!(6);

mod approvals;
mod approvals_bot;
mod bash;
mod bot;
mod control;
mod durability;
mod send_file;
mod stream;
mod voice;
mod worker;
