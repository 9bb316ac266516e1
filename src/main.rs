//! The `warden` command line: parses arguments and calls into the library.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use warden::config::{Config, ProcessEnv};
use warden::sandbox::docker::{connect, image, probe};

#[derive(Parser)]
#[command(name = "warden", version, about = "A sandbox-first personal AI agent")]
struct Cli {
    /// Config file (default ~/.warden/config.toml, or WARDEN_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Sandbox images for the Docker backend.
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// What this machine's Docker daemon supports, and what warden will use.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ImageCommand {
    /// Build warden-sandbox:NAME from sandbox-images/NAME (no registry needed for `minimal`).
    Build {
        /// The image folder's name.
        #[arg(default_value = "minimal")]
        name: String,
        /// Build from this folder instead of ./sandbox-images/NAME or the built-in copy.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("WARDEN_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref(), &ProcessEnv) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("warden: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("warden: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Image {
            command: ImageCommand::Build { name, dir },
        } => runtime.block_on(image_build(&config, &name, dir)),
        Command::Doctor { json } => runtime.block_on(doctor(&config, json)),
    }
}

async fn image_build(config: &Config, name: &str, dir: Option<PathBuf>) -> ExitCode {
    let context = match image::Context::locate(name, dir.as_deref()) {
        Ok(context) => context,
        Err(e) => {
            eprintln!("warden: {e}");
            return ExitCode::from(1);
        }
    };
    let docker = match connect::connect(&config.sandbox.docker.socket).await {
        Ok(docker) => docker,
        Err(e) => {
            eprintln!("warden: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!(
        "building {} from {}",
        image::tag(&context.name),
        context.origin
    );
    let mut log = |line: &str| eprint!("{line}");
    match image::build(&docker, &context, &mut log).await {
        Ok(id) => {
            println!("{} {id}", image::tag(&context.name));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("warden: {e}");
            ExitCode::from(1)
        }
    }
}

async fn doctor(config: &Config, json: bool) -> ExitCode {
    let report = probe::probe(&config.sandbox.docker).await;
    if json {
        match serde_json::to_string_pretty(&serde_json::json!({ "docker": report })) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("warden: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        print!("{report}");
    }
    ExitCode::SUCCESS
}
