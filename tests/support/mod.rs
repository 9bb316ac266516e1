//! Shared helpers for integration tests: fake servers on 127.0.0.1 that speak real wire formats,
//! so warden's real clients run unchanged and no test needs the internet.
//!
//! Use from a test file with `mod support;`. Not every test binary uses every helper.
#![allow(dead_code)]

pub mod app_config;
pub mod archives;
pub mod capture;
pub mod command_model;
pub mod deliver;
pub mod fake_embeddings;
pub mod fake_llm;
pub mod fake_oauth;
pub mod fake_slack;
pub mod fake_telegram;
pub mod fake_transcribe;
pub mod fake_web;
pub mod file_server;
pub mod marked_repo;
pub mod procs;
pub mod pty;
pub mod refused;
pub mod resources;
pub mod skills;
pub mod test_threads;
pub mod tls_server;
pub mod tmpfs;
pub mod warden_bot;
pub mod warden_run;
pub mod warden_serve;
pub mod web_bot;
