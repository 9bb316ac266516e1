//! What leaves the machine: egress approvals and rules through `warden bot` and `warden run`,
//! web_fetch and web_search against the fake web.

#[path = "../support/mod.rs"]
mod support;

mod bot;
mod run;
mod web_fetch;
mod web_search;
