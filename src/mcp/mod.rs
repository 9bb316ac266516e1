//! MCP both ways.
//!
//! **warden as a client** — the servers in `[mcp.servers]`, top to bottom:
//! - [`config`]: the section, checked;
//! - [`definition`]: a server as it is now (command, manifest, files, or URL) and the hash a
//!   grant pins;
//! - [`grants`]: the user's grants, pinned to that hash and to the tools the user saw;
//! - [`stdio`]: a stdio server started in its jail like a skill (private copy of its files,
//!   the manifest's policy, no inherited environment, network only through the egress proxy),
//!   and stopped with everything it started;
//! - [`http`]: streamable HTTP on warden's own HTTP client;
//! - [`client`]: the MCP session (rmcp) with no capabilities offered to the server, every
//!   message from it within `caps.mcp_message_bytes`;
//! - [`listing`]: its tool list within caps, and tool names a model accepts, each once;
//! - [`servers`]: start on first use, restart with backoff, stop when idle, at shutdown, or
//!   when a call hangs — every step audited as `mcp:NAME`.
//!
//! The model sees the tools as `SERVER__tool` ([`crate::tools::mcp`]).
//!
//! **warden as a server** — [`serve`]: `warden mcp serve` gives another agent warden's own
//! `bash`, `read`, `write`, `edit` and `list_dir`, with the same policy, approvals (MCP
//! elicitation), sandbox and audit.

pub mod client;
pub mod config;
pub mod definition;
pub mod grants;
pub mod http;
pub mod listing;
pub mod overview;
pub mod serve;
pub mod servers;
pub mod stdio;
