//! Network for jailed commands: `[network]` host rules, enforced by warden's egress proxy, the
//! jail's only way out. Every server is the test's own on 127.0.0.1, reached under a name that
//! `[network.resolve]` maps; every listener that must see nothing is checked from outside.

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/mod.rs"]
mod support;

mod agent;
mod exec;
mod intercept;
mod jail;
mod supervisor;
