//! The command policy: table cases, the CLI, fuzzing, properties, red-team classes, syntax,
//! tooling, usefulness on real examples, unzip.

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/mod.rs"]
mod support;

mod cases;
mod cli;
mod fuzz;
mod props;
mod redteam;
mod syntax;
mod tooling;
mod usefulness;
mod zip;
