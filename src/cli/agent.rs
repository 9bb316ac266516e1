//! `warden run` and `warden chat`: the flags both share (`-C/--workspace`, `-m/--model`), the
//! prompt from the arguments or stdin, then the terminal channel.

use crate::app::App;
use crate::channels::terminal::{self, ChatOptions};
use crate::config::Config;
use anyhow::Context;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

#[derive(Debug, Default, clap::Args)]
pub struct AgentArgs {
    /// The directory the agent works in (default: the config's `workspace`). `-C .` works in
    /// the current directory, whose AGENTS.md the agent reads; nothing is added to it.
    #[arg(short = 'C', long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The model to ask (default: the config's `llm.<provider>.model`, or $WARDEN_MODEL).
    #[arg(short, long, value_name = "MODEL")]
    pub model: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// One JSON object per line on stdout: text, tool_start, tool_end (with a refusal's
    /// detail), then answer (or error).
    #[arg(long)]
    pub json: bool,
    /// What to ask. `-`, or nothing with stdin not a terminal: read the prompt from stdin.
    pub prompt: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// Start a new conversation instead of continuing the last one.
    #[arg(long)]
    pub new: bool,
}

/// The config with the flags applied.
fn configure(args: &AgentArgs, config_path: Option<&Path>) -> anyhow::Result<Config> {
    let mut config = super::load_config(config_path)?;
    if let Some(model) = &args.model {
        config.llm.model_override = Some(model.clone());
    }
    if let Some(dir) = &args.workspace {
        let dir =
            std::path::absolute(dir).with_context(|| format!("the workspace {}", dir.display()))?;
        if !dir.is_dir() {
            anyhow::bail!("--workspace {}: not a directory", dir.display());
        }
        config.workspace = dir;
        config.project_workspace = true;
    }
    Ok(config)
}

/// The prompt: the arguments, or stdin for `-` or no arguments off a terminal.
fn prompt(words: &[String]) -> anyhow::Result<String> {
    let from_stdin = match words {
        [dash] if dash == "-" => true,
        [] => !std::io::stdin().is_terminal(),
        _ => false,
    };
    let prompt = if from_stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the prompt from stdin")?;
        text
    } else {
        words.join(" ")
    };
    if prompt.trim().is_empty() {
        anyhow::bail!(
            "give a prompt: warden run 'what is in my workspace?' (or `-` to read it from stdin)"
        );
    }
    Ok(prompt)
}

pub fn run(args: RunArgs, config_path: Option<&Path>) -> anyhow::Result<i32> {
    let prompt = prompt(&args.prompt)?;
    let app = App::build(configure(&args.agent, config_path)?)?;
    runtime()?.block_on(terminal::run_once(&app, &prompt, args.json))
}

pub fn chat(args: ChatArgs, config_path: Option<&Path>) -> anyhow::Result<i32> {
    let config = configure(&args.agent, config_path)?;
    let history = config.data_dir.join("chat_history");
    let app = App::build(config)?;
    runtime()?.block_on(terminal::chat(
        app,
        ChatOptions {
            history,
            fresh: args.new,
        },
    ))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}
