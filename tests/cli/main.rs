//! The command line itself: the front binary, `warden run`, the README's commands and config, and
//! secrets kept in warden's own process.

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/mod.rs"]
mod support;

mod front;
mod readme;
mod run;
mod secrets;
