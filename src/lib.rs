//! warden: a sandbox-first personal agent.
//!
//! The data path, top to bottom: channels and the scheduler feed the gateway, the agent asks
//! an LLM, every tool call passes the command [`policy`] and runs in a [`sandbox`].

// Outside tests a failure is a `?` with a reason, or a pattern that cannot fail: a panic in
// warden is a dead bot or a lost run. Tests may unwrap (clippy.toml); the few places that may
// otherwise carry `#[expect(clippy::..., reason = "...")]`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod agent;
pub mod app;
pub mod audit;
pub mod beneath;
pub mod bot;
pub mod channels;
pub mod cli;
pub mod clock;
pub mod config;
pub mod db;
pub mod doctor;
pub mod durations;
pub mod egress;
pub mod exec;
pub mod fuzzing;
pub mod gateway;
pub mod lasting;
pub mod llm;
pub mod locks;
pub mod mcp;
pub mod memory;
pub mod oauth;
pub mod outgoing;
pub mod persistence;
pub mod policy;
pub mod prompt_section;
pub mod redact;
pub mod sandbox;
pub mod scheduler;
pub mod schema;
pub mod secret;
pub mod serve;
pub mod sizes;
pub mod skills;
pub mod taint;
pub mod tools;
pub mod verify;
pub mod voice;
