//! The `warden` command line: parses arguments and calls into the library.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use warden::cli;

#[derive(Parser)]
#[command(name = "warden", version, about = "A sandbox-first personal AI agent")]
struct Cli {
    /// Config file (default: $WARDEN_CONFIG, else ~/.warden/config.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program in the sandbox without the command policy (to test the jail alone).
    Jail(cli::jail::JailArgs),
    /// Show what this kernel supports and which sandbox backend warden will use.
    Doctor(cli::doctor::DoctorArgs),
    /// Sandbox images for the Docker backend.
    Image(cli::image::ImageArgs),
}

fn main() -> ExitCode {
    let args = Cli::parse();
    cli::init_tracing();
    let config = args.config.as_deref();
    let code = match args.command {
        Command::Jail(a) => cli::jail::run(a, config),
        Command::Doctor(a) => cli::doctor::run(a, config),
        Command::Image(a) => cli::image::run(a, config),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
