//! The scheduler: cron and heartbeat against a test clock, through the gateway, `warden cron` and
//! `warden bot`.

#[path = "../support/mod.rs"]
mod support;

mod bot;
mod cli;
mod gateway;
mod heartbeat;
mod runner;
