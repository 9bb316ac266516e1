//! MCP both ways: warden as a client (stdio and streamable HTTP) and `warden mcp serve`.

#[path = "../support/mod.rs"]
mod support;

support::test_threads::waiting_suite!(6);

mod client;
mod http;
mod serve;
