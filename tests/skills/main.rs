//! Skills: the CLI, the agent's skill tool, malicious skills, and the egress proxy that is their
//! only way out.

#[path = "../support/mod.rs"]
mod support;

mod agent;
mod attacks;
mod cli;
mod egress;
