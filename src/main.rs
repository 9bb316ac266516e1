//! The `warden` command line: parses arguments and calls into the library.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use warden::cli;

#[derive(Parser)]
#[command(name = "warden", version, about = "A sandbox-first personal AI agent")]
struct Cli {
    /// Config file (default ~/.warden/config.toml, or $WARDEN_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program in the sandbox without the command policy (to test the jail alone).
    Jail(cli::jail::JailArgs),
    /// Check a command string with the policy, then run the checked commands in the sandbox.
    Exec(cli::exec::ExecArgs),
    /// Show what this kernel supports and which sandbox backend warden will use.
    Doctor(cli::doctor::DoctorArgs),
    /// Sandbox images for the Docker backend.
    Image(cli::image::ImageArgs),
    /// One-shot agent run: prints the answer.
    Run {
        /// What to ask.
        prompt: Vec<String>,
    },
    /// Interactive terminal agent.
    Chat,
    /// Inspect the command policy.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Decide allow / deny / ask for a command string (exit 0 allow, 1 deny, 3 ask, 2 error).
    Check {
        /// Policy file extending (or replacing) the embedded default.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Workspace directory (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Print {"decision","reason","commands"} as JSON.
        #[arg(long)]
        json: bool,
        /// Check one command per line of FILE (`-` for stdin); one JSON line out per line in.
        #[arg(long, value_name = "FILE")]
        batch: Option<PathBuf>,
        /// The command string.
        #[arg(last = true)]
        command: Vec<String>,
    },
}

fn main() -> ExitCode {
    init_tracing();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { cli::EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code as u8);
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("warden: {e:#}");
            ExitCode::from(cli::EXIT_USAGE as u8)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Jail(args) => Ok(cli::jail::run(args, cli.config.as_deref())),
        Command::Exec(args) => Ok(cli::exec::run(args, cli.config.as_deref())),
        Command::Doctor(args) => Ok(cli::doctor::run(args, cli.config.as_deref())),
        Command::Image(args) => Ok(cli::image::run(args, cli.config.as_deref())),
        Command::Run { prompt } => {
            let prompt = prompt.join(" ");
            if prompt.trim().is_empty() {
                anyhow::bail!("give a prompt: warden run 'what is in my workspace?'");
            }
            let app = warden::app::App::build(cli::load_config(cli.config.as_deref())?)?;
            runtime()?.block_on(warden::channels::terminal::run_once(&app, &prompt))
        }
        Command::Chat => {
            let app = warden::app::App::build(cli::load_config(cli.config.as_deref())?)?;
            runtime()?.block_on(warden::channels::terminal::chat(&app))
        }
        Command::Policy {
            command:
                PolicyCommand::Check {
                    policy,
                    workspace,
                    json,
                    batch,
                    command,
                },
        } => {
            let config = cli::load_config(cli.config.as_deref())?;
            cli::policy::run(cli::policy::CheckArgs {
                policy: policy.or(config.policy),
                workspace: cli::workspace_or_cwd(workspace)?,
                read_roots: config.sandbox.read,
                json,
                batch,
                command: (!command.is_empty()).then(|| command.join(" ")),
            })
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// Logs go to stderr, filtered by RUST_LOG (default: warnings).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
