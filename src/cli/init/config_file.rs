//! The config `warden init` writes: only what was chosen, each key with a comment, checked by
//! the real parser before it is written, created 0600 and never over an existing file.

use crate::config::Config;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Which kind of model server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderChoice {
    /// Anthropic's API (a key from console.anthropic.com).
    Anthropic,
    /// OpenAI's API (a key from platform.openai.com).
    Openai,
    /// An OpenAI-compatible server of your own: Ollama, vLLM, llama.cpp (no key needed).
    Local,
}

/// Ollama's address, the usual local server.
pub const LOCAL_BASE_URL: &str = "http://127.0.0.1:11434/v1";

/// Everything `init` asked or was told.
#[derive(Clone, Debug)]
pub struct Answers {
    pub provider: ProviderChoice,
    /// Written only when given (the environment variable works too).
    pub api_key: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub workspace: PathBuf,
    pub telegram_token: Option<String>,
    pub telegram_users: Vec<i64>,
}

/// A TOML string literal.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// `path` as `~/…` when it is under the home directory (the config moves with the account).
fn under_home(path: &Path) -> String {
    match path.strip_prefix(crate::config::home_dir()) {
        Ok(rest) if !rest.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

/// The config text for `answers`.
pub fn render(answers: &Answers) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# warden's config, written by `warden init` ({}). Every key: README, \"Configuration\".\n\
         # Keys may stay out of this file: ANTHROPIC_API_KEY, OPENAI_API_KEY and\n\
         # TELEGRAM_BOT_TOKEN in the environment are read at start.\n\n",
        chrono::Local::now().format("%Y-%m-%d")
    ));
    out.push_str("# The agent's own folder: the only place its commands may write.\n");
    out.push_str(&format!(
        "workspace = {}\n\n",
        quoted(&under_home(&answers.workspace))
    ));
    let section = match answers.provider {
        ProviderChoice::Anthropic => "anthropic",
        ProviderChoice::Openai | ProviderChoice::Local => "openai",
    };
    out.push_str("[llm]\n# Tried in this order; the first that answers wins.\n");
    out.push_str(&format!("providers = [{}]\n\n", quoted(section)));
    out.push_str(&format!("[llm.{section}]\n"));
    if let Some(url) = &answers.base_url {
        out.push_str("# The server's API root (Ollama, vLLM and llama.cpp end in /v1).\n");
        out.push_str(&format!("base_url = {}\n", quoted(url)));
    }
    match &answers.model {
        Some(model) => out.push_str(&format!(
            "# `warden chat -m OTHER` or WARDEN_MODEL picks another for one run.\nmodel = {}\n",
            quoted(model)
        )),
        None => out.push_str("# model = \"…\"        # default: the provider's own default\n"),
    }
    match &answers.api_key {
        Some(key) => out.push_str(&format!("api_key = {}\n", quoted(key))),
        None if answers.provider == ProviderChoice::Local => {}
        None => out.push_str(&format!(
            "# api_key = \"…\"      # or {}_API_KEY in the environment\n",
            section.to_uppercase()
        )),
    }
    out.push_str("\n[telegram]\n");
    match &answers.telegram_token {
        Some(token) => out.push_str(&format!(
            "# From @BotFather; `warden bot` answers only the users below.\ntoken = {}\n",
            quoted(token)
        )),
        None => out.push_str("# token = \"…\"        # from @BotFather, or TELEGRAM_BOT_TOKEN\n"),
    }
    let users: Vec<String> = answers.telegram_users.iter().map(i64::to_string).collect();
    out.push_str(&format!(
        "# Numeric Telegram user IDs the bot answers (nobody: it refuses to start).\n\
         allowed_users = [{}]\n",
        users.join(", ")
    ));
    out
}

/// Check `text` with the real parser, then create `path` (0600) holding it. An existing file
/// is never replaced.
pub fn write_new(path: &Path, text: &str) -> anyhow::Result<()> {
    Config::parse(text, path).map_err(|e| anyhow::anyhow!("the config init made is wrong: {e}"))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        super::private_dir(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
                "{} already exists: warden init never overwrites a config; edit it, or move it \
                 away and run init again",
                path.display()
            ),
            _ => anyhow::anyhow!("cannot create {}: {e}", path.display()),
        })?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(provider: ProviderChoice) -> Answers {
        Answers {
            provider,
            api_key: None,
            base_url: None,
            model: None,
            workspace: PathBuf::from("/home/u/.warden/workspace"),
            telegram_token: None,
            telegram_users: Vec::new(),
        }
    }

    #[test]
    fn a_local_server_config_parses_and_says_what_it_chose() {
        let mut local = answers(ProviderChoice::Local);
        local.base_url = Some(LOCAL_BASE_URL.into());
        local.model = Some("qwen3:8b \"quoted\"".into());
        local.telegram_token = Some("123:abc".into());
        local.telegram_users = vec![42, 7];
        let text = render(&local);
        let config = Config::parse(&text, Path::new("c.toml")).unwrap();
        assert_eq!(config.llm.providers, [crate::config::ProviderKind::Openai]);
        assert_eq!(config.llm.openai.base_url.as_deref(), Some(LOCAL_BASE_URL));
        assert_eq!(
            config.llm.openai.model.as_deref(),
            Some("qwen3:8b \"quoted\"")
        );
        assert_eq!(config.telegram.allowed_users, [42, 7]);
        assert_eq!(config.telegram.token.expose(), "123:abc");
        assert!(!text.contains("api_key ="), "{text}");
    }

    #[test]
    fn without_a_key_the_comment_names_the_variable() {
        let text = render(&answers(ProviderChoice::Anthropic));
        assert!(text.contains("ANTHROPIC_API_KEY"), "{text}");
        let config = Config::parse(&text, Path::new("c.toml")).unwrap();
        assert!(config.llm.anthropic.api_key.is_empty());
        assert!(config.telegram.allowed_users.is_empty());
    }

    #[test]
    fn an_existing_file_is_never_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w/config.toml");
        let text = render(&answers(ProviderChoice::Anthropic));
        write_new(&path, &text).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(&path, "# mine\n").unwrap();
        let err = write_new(&path, &text).unwrap_err().to_string();
        assert!(err.contains("never overwrites"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");
    }
}
