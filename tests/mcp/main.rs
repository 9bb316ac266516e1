//! MCP both ways: warden as a client (stdio and streamable HTTP) and `warden mcp serve`.

#[path = "../support/mod.rs"]
mod support;

mod client;
mod http;
mod serve;
