//! The model clients against fake servers on 127.0.0.1: Anthropic, OpenAI, OAuth sign-in, failover,
//! retries, time limits.

#[path = "../support/mod.rs"]
mod support;

support::test_threads::waiting_suite!(6);

mod anthropic;
mod failover;
mod fake;
mod oauth;
mod openai;
mod retry;
mod timeouts;
