//! The `warden` command line: parses arguments and calls into the library.

use clap::Parser;

#[derive(Parser)]
#[command(name = "warden", version, about = "A sandbox-first personal AI agent")]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
