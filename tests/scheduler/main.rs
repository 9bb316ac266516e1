//! The scheduler: cron and heartbeat against a test clock, through the gateway, `warden cron` and
//! `warden bot`.

#[path = "../support/mod.rs"]
mod support;

support::test_threads::waiting_suite!(6);

mod bot;
mod cli;
mod gateway;
mod heartbeat;
mod runner;
