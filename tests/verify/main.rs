//! The write verifier through the real binaries: a command the policy let through (here: a
//! policy file that mislabels a program's arguments, as a program can fool the real policy)
//! plants git hooks, git config, attributes or instruction files; warden undoes it, refuses
//! the command naming the file, and the user's own git, run afterwards on the host, runs
//! nothing.

#[path = "../common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

mod bot;
mod exec;
