//! The agent through the real binaries and the library: the loop, background commands, sub-agents,
//! and what a hostile model tries against persistence.

#[path = "../support/mod.rs"]
mod support;

mod agent_loop;
mod background;
mod delegate_bot;
mod delegate_run;
mod persistence_bot;
mod persistence_run;
