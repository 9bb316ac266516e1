//! warden's own executor through `warden exec`: the red team's chains and the compound syntax it
//! runs.

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/docker.rs"]
mod docker;
#[path = "../support/mod.rs"]
mod support;

mod redteam;
mod syntax;
