//! `warden init`: from nothing to a config that works. On a terminal it asks — model server,
//! key or local address, model, workspace, and optionally a Telegram bot with the user's ID
//! (typed, or found by sending the bot a one-time code); `--non-interactive` takes flags
//! instead. It writes a short commented config (0600) and the data directory and workspace
//! (0700), and never overwrites an existing config.

mod config_file;
mod pairing;

pub use config_file::{render, Answers, ProviderChoice, LOCAL_BASE_URL};

use crate::channels::telegram::api::{Telegram, Timeouts};
use crate::config::{home_dir, Config, ProcessEnv};
use crate::llm::{Anthropic, OpenAi};
use std::io::{BufRead, IsTerminal, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long pairing waits for the code to reach the bot.
const PAIRING_WAIT: Duration = Duration::from_secs(300);

#[derive(Debug, Default, clap::Args)]
pub struct InitArgs {
    /// Ask nothing (for scripts): take the flags below and defaults for the rest.
    #[arg(long)]
    pub non_interactive: bool,
    /// The model server.
    #[arg(long, value_enum)]
    pub provider: Option<ProviderChoice>,
    /// The API key, written into the config (or leave it out and set ANTHROPIC_API_KEY /
    /// OPENAI_API_KEY; a flag's value is visible to other local users in the process list).
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// The server's API root (`local`: default http://127.0.0.1:11434/v1, Ollama).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model (default: the provider's; a local server needs one).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The agent's workspace (default ~/.warden/workspace).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// A Telegram bot token from @BotFather (for `warden bot`).
    #[arg(long, value_name = "TOKEN")]
    pub telegram_token: Option<String>,
    /// Your numeric Telegram user ID: the only user the bot answers (repeatable).
    #[arg(long = "telegram-user", value_name = "ID")]
    pub telegram_users: Vec<i64>,
}

/// Where the config goes: `--config`, `WARDEN_CONFIG`, or ~/.warden/config.toml.
fn config_path(explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("WARDEN_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| home_dir().join(".warden/config.toml"))
}

/// Create `dir` private to the user, or make an existing one so.
pub(crate) fn private_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| anyhow::anyhow!("cannot make {} private: {e}", dir.display()))
}

pub fn run(args: InitArgs, explicit: Option<&Path>) -> anyhow::Result<i32> {
    let path = config_path(explicit);
    if path.exists() {
        anyhow::bail!(
            "{} already exists: warden init never overwrites a config; edit it, or move it away \
             and run init again",
            path.display()
        );
    }
    let interactive = !args.non_interactive && std::io::stdin().is_terminal();
    let answers = if interactive {
        eprintln!(
            "warden init — writes {} (an existing config is never overwritten)\n",
            path.display()
        );
        ask_all(&args, &mut Terminal)?
    } else {
        from_flags(&args)?
    };
    config_file::write_new(&path, &render(&answers))?;
    // The data directory (database, grants, logs) and the workspace, both private.
    let defaults = Config::default();
    private_dir(&defaults.data_dir)?;
    if !answers.workspace.exists() {
        private_dir(&answers.workspace)?;
    }
    println!("Wrote {} (readable by you only).", path.display());
    println!("Next: `warden doctor` checks the setup, `warden chat` starts the agent.");
    if answers.telegram_token.is_some() && !answers.telegram_users.is_empty() {
        println!("Telegram: `warden bot` (or `warden service install` to keep it running).");
    }
    Ok(0)
}

/// `--non-interactive`: the flags, and defaults for the rest.
pub fn from_flags(args: &InitArgs) -> anyhow::Result<Answers> {
    let env = |name: &str| crate::config::EnvSource::var(&ProcessEnv, name);
    let provider = args.provider.unwrap_or(match () {
        _ if args.base_url.is_some() => ProviderChoice::Local,
        _ if env("OPENAI_API_KEY").is_some() && env("ANTHROPIC_API_KEY").is_none() => {
            ProviderChoice::Openai
        }
        _ => ProviderChoice::Anthropic,
    });
    let base_url = match provider {
        ProviderChoice::Local => Some(
            args.base_url
                .clone()
                .unwrap_or_else(|| LOCAL_BASE_URL.to_string()),
        ),
        _ => args.base_url.clone(),
    };
    if provider == ProviderChoice::Local && args.model.is_none() {
        anyhow::bail!(
            "--provider local needs --model (the name the server gives it, e.g. llama3.2)"
        );
    }
    if args.telegram_token.is_some() && args.telegram_users.is_empty() {
        anyhow::bail!(
            "--telegram-token needs --telegram-user ID (your numeric Telegram user ID; run \
             `warden init` on a terminal to find it by sending your bot a code)"
        );
    }
    Ok(Answers {
        provider,
        api_key: args.api_key.clone(),
        base_url,
        model: args.model.clone(),
        workspace: workspace(args.workspace.as_deref())?,
        telegram_token: args.telegram_token.clone(),
        telegram_users: args.telegram_users.clone(),
    })
}

fn workspace(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    match given {
        Some(dir) => Ok(std::path::absolute(crate::config::expand_home(dir))?),
        None => Ok(Config::default().workspace),
    }
}

/// Questions and answers: the terminal, or a script of them in tests.
pub trait Ask {
    /// Show `question` and read one line (without its newline); `None` at end of input.
    fn line(&mut self, question: &str) -> Option<String>;
    /// Like [`Ask::line`] without echoing what is typed (keys, tokens).
    fn secret(&mut self, question: &str) -> Option<String>;
}

struct Terminal;

impl Ask for Terminal {
    fn line(&mut self, question: &str) -> Option<String> {
        eprint!("{question}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_string()),
        }
    }

    fn secret(&mut self, question: &str) -> Option<String> {
        use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin).ok();
        if let Some(saved) = &saved {
            let mut quiet = saved.clone();
            quiet.local_flags.remove(LocalFlags::ECHO);
            let _ = tcsetattr(&stdin, SetArg::TCSANOW, &quiet);
        }
        let answer = self.line(question);
        if let Some(saved) = &saved {
            let _ = tcsetattr(&stdin, SetArg::TCSANOW, saved);
            eprintln!();
        }
        answer
    }
}

/// `question [default]: ` → the answer, or the default for an empty line.
fn with_default(ask: &mut dyn Ask, question: &str, default: &str) -> anyhow::Result<String> {
    let answer = ask
        .line(&format!("{question} [{default}]: "))
        .ok_or_else(|| anyhow::anyhow!("init stopped: no answer to {question:?}"))?;
    let answer = answer.trim();
    Ok(if answer.is_empty() {
        default.to_string()
    } else {
        answer.to_string()
    })
}

/// The interactive questions; flags given on the command line are not asked again.
pub fn ask_all(args: &InitArgs, ask: &mut dyn Ask) -> anyhow::Result<Answers> {
    let provider = match args.provider {
        Some(p) => p,
        None => loop {
            let choice = with_default(
                ask,
                "Which model server?\n  1) Anthropic (API key)\n  2) OpenAI (API key)\n  \
                 3) Your own: Ollama, vLLM, llama.cpp (OpenAI-compatible, no key)\nChoose",
                "1",
            )?;
            match choice.as_str() {
                "1" | "anthropic" => break ProviderChoice::Anthropic,
                "2" | "openai" => break ProviderChoice::Openai,
                "3" | "local" | "ollama" => break ProviderChoice::Local,
                other => eprintln!("{other:?} is not 1, 2 or 3"),
            }
        },
    };
    let (api_key, base_url, model) = match provider {
        ProviderChoice::Local => {
            let url = match &args.base_url {
                Some(url) => url.clone(),
                None => with_default(ask, "Server address", LOCAL_BASE_URL)?,
            };
            let model = match &args.model {
                Some(model) => model.clone(),
                None => loop {
                    let model = ask
                        .line("Model, as the server names it (e.g. llama3.2, qwen3:8b): ")
                        .ok_or_else(|| anyhow::anyhow!("init stopped: no model"))?;
                    if !model.trim().is_empty() {
                        break model.trim().to_string();
                    }
                },
            };
            (None, Some(url), Some(model))
        }
        cloud => {
            let (env, default_model) = match cloud {
                ProviderChoice::Anthropic => ("ANTHROPIC_API_KEY", Anthropic::DEFAULT_MODEL),
                _ => ("OPENAI_API_KEY", OpenAi::DEFAULT_MODEL),
            };
            let key = match &args.api_key {
                Some(key) => Some(key.clone()),
                None => ask
                    .secret(&format!(
                        "API key (not shown; empty: read {env} from the environment): "
                    ))
                    .map(|k| k.trim().to_string())
                    .filter(|k| !k.is_empty()),
            };
            let model = match &args.model {
                Some(model) => model.clone(),
                None => with_default(ask, "Model", default_model)?,
            };
            let model = (model != default_model).then_some(model);
            (key, args.base_url.clone(), model)
        }
    };
    let default_workspace = Config::default().workspace;
    let workspace = match &args.workspace {
        Some(dir) => workspace(Some(dir))?,
        None => workspace(Some(Path::new(&with_default(
            ask,
            "Workspace (the agent's own folder)",
            &default_workspace.to_string_lossy(),
        )?)))?,
    };
    let telegram_token = match &args.telegram_token {
        Some(token) => Some(token.clone()),
        None => ask
            .secret("Telegram bot token from @BotFather (not shown; empty: no Telegram): ")
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty()),
    };
    let mut telegram_users = args.telegram_users.clone();
    if let Some(token) = &telegram_token {
        while telegram_users.is_empty() {
            let answer = ask
                .line("Your numeric Telegram user ID (empty: find it by sending your bot a code): ")
                .unwrap_or_default();
            let answer = answer.trim();
            if answer.is_empty() {
                telegram_users.push(pair(token)?);
            } else {
                match answer.parse::<i64>() {
                    Ok(id) => telegram_users.push(id),
                    Err(_) => {
                        eprintln!("{answer:?} is not a number (user IDs look like 123456789)")
                    }
                }
            }
        }
    }
    Ok(Answers {
        provider,
        api_key,
        base_url,
        model,
        workspace,
        telegram_token,
        telegram_users,
    })
}

/// Pair through the bot: show a code, wait for it to arrive, return its sender.
fn pair(token: &str) -> anyhow::Result<i64> {
    let api_url = std::env::var("TELEGRAM_API_URL").ok();
    let timeouts = Timeouts::of(&crate::config::TelegramConfig::default());
    let telegram =
        Telegram::new(token, api_url.as_deref(), timeouts).map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let name = pairing::bot_name(&telegram)
            .await
            .map_err(anyhow::Error::msg)?;
        let code = pairing::new_code();
        eprintln!(
            "Send {code} to @{name} from your own Telegram account (waiting up to {} minutes)…",
            PAIRING_WAIT.as_secs() / 60
        );
        let user = pairing::wait_for_code(&telegram, &code, PAIRING_WAIT)
            .await
            .map_err(anyhow::Error::msg)?;
        eprintln!("Paired: user {user} is the one the bot answers.");
        Ok(user)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    struct Script(VecDeque<&'static str>, Vec<String>);

    impl Ask for Script {
        fn line(&mut self, question: &str) -> Option<String> {
            self.1.push(question.to_string());
            self.0.pop_front().map(String::from)
        }
        fn secret(&mut self, question: &str) -> Option<String> {
            self.line(question)
        }
    }

    #[test]
    fn a_local_server_is_asked_for_its_address_and_model() {
        let mut script = Script(
            ["9", "3", "", "", "qwen3:8b", "/tmp/ws-x", ""].into(),
            Vec::new(),
        );
        let answers = ask_all(&InitArgs::default(), &mut script).unwrap();
        assert_eq!(answers.provider, ProviderChoice::Local);
        assert_eq!(answers.base_url.as_deref(), Some(LOCAL_BASE_URL));
        assert_eq!(answers.model.as_deref(), Some("qwen3:8b"));
        assert_eq!(answers.workspace, PathBuf::from("/tmp/ws-x"));
        assert!(answers.telegram_token.is_none());
        assert!(script.1[0].contains("Which model server?"));
    }

    #[test]
    fn flags_are_not_asked_again_and_a_cloud_default_model_is_not_written() {
        let args = InitArgs {
            provider: Some(ProviderChoice::Anthropic),
            workspace: Some("/tmp/ws-y".into()),
            ..InitArgs::default()
        };
        let mut script = Script(["sk-test-key", "", "123:tok", "42"].into(), Vec::new());
        let answers = ask_all(&args, &mut script).unwrap();
        assert_eq!(answers.api_key.as_deref(), Some("sk-test-key"));
        assert_eq!(answers.model, None);
        assert_eq!(answers.telegram_users, [42]);
        assert!(!script.1.iter().any(|q| q.contains("Which model server")));
    }

    #[test]
    fn scripts_must_name_what_cannot_be_guessed() {
        let local = InitArgs {
            provider: Some(ProviderChoice::Local),
            ..InitArgs::default()
        };
        assert!(from_flags(&local)
            .unwrap_err()
            .to_string()
            .contains("--model"));
        let token_only = InitArgs {
            telegram_token: Some("1:x".into()),
            ..InitArgs::default()
        };
        assert!(from_flags(&token_only)
            .unwrap_err()
            .to_string()
            .contains("--telegram-user"));
    }
}
