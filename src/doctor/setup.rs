//! `warden doctor`'s setup checks, beside the sandbox report: the config parses, a model is
//! configured and answers (one tiny request; `--offline` skips every network check), the
//! Telegram token is accepted, warden's sibling binaries are installed, the workspace is
//! writable and the data directory private. Each failure says what fixes it: the config key,
//! the environment variable or the command.

use crate::config::{Config, ProcessEnv};
use crate::llm::{ChatRequest, ContentBlock, Message, Role};
use serde::Serialize;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long the model and Telegram get to answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Works, but worth changing.
    Warn,
    /// Not checked (`--offline`, or nothing configured that needs it).
    Skip,
    Fail,
}

/// One line of the setup section.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    /// What to do about a failure or a warning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }
    fn skip(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Skip,
            detail: detail.into(),
            fix: None,
        }
    }
    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
    fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            status: Status::Warn,
            ..Check::fail(name, detail, fix)
        }
    }
}

/// Load the config as every command does; a broken one is the first failed check (and the
/// sandbox report then describes the defaults).
pub fn load(explicit: Option<&Path>) -> (Config, Check) {
    match Config::load(explicit, &ProcessEnv) {
        Ok(config) => {
            let check = match &config.file {
                Some(file) => Check::ok("config", format!("{} parses", file.display())),
                None => Check::skip(
                    "config",
                    "no config file: defaults and the environment (`warden init` writes one)",
                ),
            };
            (config, check)
        }
        Err(e) => {
            let fix = match &e {
                crate::config::ConfigError::Read { path, .. } => format!(
                    "make {} a file you can read (`chmod 600`, owned by you), or point \
                     --config / WARDEN_CONFIG elsewhere",
                    path.display()
                ),
                crate::config::ConfigError::Parse { .. } => {
                    "correct the key named above (README, \"Configuration\", lists them all)".into()
                }
                crate::config::ConfigError::Env { name, .. } => {
                    format!("correct or unset the environment variable {name}")
                }
            };
            (Config::default(), Check::fail("config", e.to_string(), fix))
        }
    }
}

/// Every setup check after `config`.
pub fn checks(config: &Config, offline: bool) -> Vec<Check> {
    vec![
        model(config, offline),
        telegram(config, offline),
        slack(config, offline),
        http(config, offline),
        binaries(),
        workspace(&config.workspace),
        data_dir(&config.data_dir),
    ]
}

fn model(config: &Config, offline: bool) -> Check {
    let chosen = crate::llm::chosen(&config.llm);
    let Some(first) = chosen.first() else {
        return Check::fail(
            "model",
            "no LLM provider configured",
            "run `warden init`, or set ANTHROPIC_API_KEY (llm.anthropic.api_key), or \
             OPENAI_API_KEY / OPENAI_BASE_URL (llm.openai.*) for OpenAI, Ollama or vLLM",
        );
    };
    // The credential each provider sends, in the order they are tried.
    let credentials: Vec<String> = chosen
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                crate::llm::kind_name(c.kind),
                c.credential_source()
            )
        })
        .collect();
    let what = format!(
        "{} {} at {} ({})",
        crate::llm::kind_name(first.kind),
        first.settings.model,
        first.settings.base_url,
        credentials.join("; ")
    );
    if offline {
        return Check::skip("model", format!("{what} (not contacted: --offline)"));
    }
    // One attempt, a short limit: doctor reports, it does not wait out a retry schedule.
    let mut llm = config.llm.clone();
    for provider in [&mut llm.anthropic, &mut llm.openai] {
        provider.max_attempts = Some(1);
        provider.timeout_secs = Some(PROBE_TIMEOUT.as_secs());
    }
    let started = Instant::now();
    let answered = block_on(async move {
        let provider = crate::llm::from_config(&llm)?;
        let request = ChatRequest {
            system: String::new(),
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentBlock::text("Reply with the word OK.")],
            }],
            tools: Vec::new(),
            max_tokens: Some(16),
            model: None,
            // A probe says "busy" rather than wait a minute for a busy model.
            patience: Some(PROBE_TIMEOUT),
        };
        crate::llm::Provider::chat(
            &provider,
            &request,
            &|_: crate::llm::StreamEvent| {},
            &CancellationToken::new(),
        )
        .await
    });
    match answered {
        Ok(Ok(_)) => Check::ok(
            "model",
            format!(
                "{what} answered in {:.1} s",
                started.elapsed().as_secs_f64()
            ),
        ),
        Ok(Err(e)) => Check::fail(
            "model",
            format!("{what}: no answer"),
            crate::llm::advice(&e, &chosen),
        ),
        Err(why) => Check::fail("model", why, "report this as a bug"),
    }
}

fn telegram(config: &Config, offline: bool) -> Check {
    let telegram = &config.telegram;
    if telegram.token.is_empty() {
        return Check::skip(
            "telegram",
            "no bot token (optional: `warden init` sets up `warden bot`)",
        );
    }
    if telegram.allowed_users.is_empty() {
        return Check::fail(
            "telegram",
            "a bot token but no allowed user: `warden bot` refuses to answer everyone",
            "set telegram.allowed_users (or TELEGRAM_ALLOWED_USERS) to your numeric user ID; \
             `warden init` on a terminal finds it by sending your bot a code",
        );
    }
    if offline {
        return Check::skip("telegram", "token not checked: --offline");
    }
    let client = crate::channels::telegram::api::Telegram::new(
        telegram.token.expose(),
        telegram.api_url.as_deref(),
        crate::channels::telegram::api::Timeouts::of(telegram),
    );
    let client = match client {
        Ok(client) => client,
        Err(why) => {
            return Check::fail(
                "telegram",
                why,
                "set TELEGRAM_API_URL / telegram.api_url to an http(s) URL, or remove it",
            )
        }
    };
    let me = block_on(async move {
        tokio::time::timeout(
            PROBE_TIMEOUT,
            teloxide::requests::Requester::get_me(client.bot()),
        )
        .await
    });
    match me {
        Ok(Ok(Ok(me))) => Check::ok(
            "telegram",
            format!(
                "@{} answers {} user(s)",
                me.username(),
                telegram.allowed_users.len()
            ),
        ),
        Ok(Ok(Err(e))) => Check::fail(
            "telegram",
            format!("the Bot API refused the token: {e}"),
            "set TELEGRAM_BOT_TOKEN (or telegram.token) to the token @BotFather gave you",
        ),
        Ok(Err(_)) => Check::fail(
            "telegram",
            "the Bot API did not answer within 30 s",
            "check the network (or TELEGRAM_API_URL / telegram.api_url)",
        ),
        Err(why) => Check::fail("telegram", why, "report this as a bug"),
    }
}

/// Slack: both tokens checked with `auth.test` against the configured API.
fn slack(config: &Config, offline: bool) -> Check {
    use crate::channels::slack::api::SlackApi;
    let slack = &config.slack;
    if !slack.is_configured() {
        return Check::skip(
            "slack",
            "no Slack tokens (optional: `warden bot` in Slack needs SLACK_APP_TOKEN and \
             SLACK_BOT_TOKEN)",
        );
    }
    if let Err(why) = crate::channels::slack::config::check_ready(slack) {
        return Check::fail("slack", "the Slack setup is incomplete", why);
    }
    if offline {
        return Check::skip("slack", "tokens not checked: --offline");
    }
    let api = match SlackApi::new(
        &slack.api_url(),
        slack.app_token.clone(),
        slack.bot_token.clone(),
        PROBE_TIMEOUT,
    ) {
        Ok(api) => api,
        Err(why) => return Check::fail("slack", why, "report this as a bug"),
    };
    let checked = block_on(async move {
        let bot = api.identity().await;
        let app = api.check_app_token().await;
        (bot, app)
    });
    let fix_bot = "set SLACK_BOT_TOKEN (or slack.bot_token) to the app's Bot User OAuth Token \
                   (xoxb-…), from OAuth & Permissions";
    let fix_app = "set SLACK_APP_TOKEN (or slack.app_token) to an app-level token (xapp-…) with \
                   connections:write, from Basic Information → App-Level Tokens";
    match checked {
        Ok((Ok(me), Ok(()))) => Check::ok(
            "slack",
            format!(
                "both tokens work: the bot is {} in {}, answering {} user(s)",
                me.user_id,
                me.team,
                slack.allowed_users.len()
            ),
        ),
        Ok((Err(e), _)) => Check::fail("slack", format!("the bot token: {e}"), fix_bot),
        Ok((Ok(_), Err(e))) => Check::fail("slack", format!("the app token: {e}"), fix_app),
        Err(why) => Check::fail("slack", why, "report this as a bug"),
    }
}

/// The HTTP API's listener (`warden serve`, and `warden bot` with `[http] listen`): where it
/// would listen, whether its token and TLS files are usable, and (online) whether something
/// listens there now.
fn http(config: &Config, offline: bool) -> Check {
    use crate::channels::http::config::{plan, Transport};
    let http = &config.http;
    if http.token.is_empty() && http.listen.is_none() && http.hooks.is_empty() {
        return Check::skip(
            "http",
            "no HTTP API token (optional: `warden serve` needs WARDEN_HTTP_TOKEN)",
        );
    }
    let plan = match plan(http, None) {
        Ok(plan) => plan,
        Err(why) => {
            return Check::fail(
                "http",
                why,
                "correct [http] (README, \"HTTP API\"); `warden serve` refuses to start so",
            )
        }
    };
    let scheme = match &plan.transport {
        Transport::Plain => "http",
        Transport::Tls { cert, key } => {
            if let Err(why) = crate::channels::http::listener::tls_identity(cert, key) {
                return Check::fail(
                    "http",
                    why,
                    "point http.tls_cert and http.tls_key at a PEM certificate chain and its key",
                );
            }
            "https"
        }
    };
    // `warden bot` serves the API too, but only when [http] listen says where.
    let who = if http.listen.is_some() {
        "`warden serve` and `warden bot` listen"
    } else {
        "`warden serve` listens"
    };
    let mut detail = format!(
        "{who} on {scheme}://{}{}",
        plan.addr,
        match http.hooks.len() {
            0 => String::new(),
            n => format!(" with {n} webhook(s)"),
        }
    );
    if !offline {
        let up = std::net::TcpStream::connect_timeout(&plan.addr, Duration::from_secs(1)).is_ok();
        detail.push_str(if up {
            "; something listens there now"
        } else {
            "; nothing listens there now"
        });
    }
    Check::ok("http", detail)
}

/// `warden-full` and `warden-bot`, beside the running binary.
fn binaries() -> Check {
    let full = match crate::cli::front::full_binary() {
        Ok(full) => full,
        Err(e) => return Check::fail("binaries", format!("cannot locate warden: {e}"), ""),
    };
    let dir = full.parent().map(Path::to_path_buf).unwrap_or_default();
    let missing: Vec<&str> = [
        "warden",
        crate::cli::front::FULL_BINARY,
        crate::cli::front::BOT_BINARY,
    ]
    .into_iter()
    .filter(|name| !executable(&dir.join(name)))
    .collect();
    if missing.is_empty() {
        return Check::ok(
            "binaries",
            format!("warden, warden-full, warden-bot in {}", dir.display()),
        );
    }
    Check::fail(
        "binaries",
        format!("missing from {}: {}", dir.display(), missing.join(", ")),
        "install all three side by side: `cargo install --path .`, or `install -m 0755 \
         target/release/warden target/release/warden-bot target/release/warden-full DIR`",
    )
}

fn executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The workspace exists (or can be made) and takes a new file.
fn workspace(dir: &Path) -> Check {
    let fix = "set `workspace` in the config to a folder of yours (or `warden chat -C DIR`)";
    if !dir.exists() {
        let parent = first_existing(dir);
        return match std::fs::metadata(&parent) {
            Ok(m) if m.is_dir() => Check::ok(
                "workspace",
                format!("{} (created on first use)", dir.display()),
            ),
            _ => Check::fail(
                "workspace",
                format!(
                    "{} cannot be created ({} is no folder)",
                    dir.display(),
                    parent.display()
                ),
                fix,
            ),
        };
    }
    if !dir.is_dir() {
        return Check::fail(
            "workspace",
            format!("{} is not a folder", dir.display()),
            fix,
        );
    }
    let probe = dir.join(format!(".warden-doctor-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Check::ok("workspace", format!("{} is writable", dir.display()))
        }
        Err(e) => Check::fail(
            "workspace",
            format!("{} is not writable: {e}", dir.display()),
            format!("`chmod u+w {}`, or {fix}", dir.display()),
        ),
    }
}

fn first_existing(path: &Path) -> PathBuf {
    path.ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}

/// The data directory holds keys' grants, the database and logs: others must not read it.
fn data_dir(dir: &Path) -> Check {
    match std::fs::metadata(dir) {
        Ok(m) if m.permissions().mode() & 0o077 != 0 => Check::warn(
            "data dir",
            format!(
                "{} is readable by others (mode {:o})",
                dir.display(),
                m.permissions().mode() & 0o777
            ),
            format!("`chmod 700 {}`", dir.display()),
        ),
        Ok(_) => Check::ok("data dir", format!("{} is private", dir.display())),
        Err(_) => Check::skip(
            "data dir",
            format!("{} (created on first use)", dir.display()),
        ),
    }
}

/// Run `future` on a runtime of its own thread (doctor is called inside and outside one).
fn block_on<F, T>(future: F) -> Result<T, String>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start an async runtime: {e}"))?;
        Ok(runtime.block_on(future))
    })
    .join()
    .map_err(|_| "the check panicked".to_string())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listener_is_shown_and_a_bad_one_names_its_fix() {
        let mut config = Config::default();
        assert_eq!(http(&config, true).status, Status::Skip);
        config.http.token = crate::config::Secret::new("short");
        let check = http(&config, true);
        assert_eq!(check.status, Status::Fail);
        assert!(check.detail.contains("too short"), "{}", check.detail);
        config.http.token = crate::config::Secret::new("a-long-enough-token-0123");
        let check = http(&config, true);
        assert_eq!(check.status, Status::Ok);
        assert!(
            check.detail.contains("http://127.0.0.1:8787"),
            "{}",
            check.detail
        );
        config.http.listen = Some("0.0.0.0:8787".into());
        assert!(http(&config, true).detail.contains("tls_cert"));
        config.http.tls_cert = Some("/nonexistent/cert.pem".into());
        config.http.tls_key = Some("/nonexistent/key.pem".into());
        let check = http(&config, true);
        assert_eq!(check.status, Status::Fail);
        assert!(check.detail.contains("http.tls_cert"), "{}", check.detail);
    }

    #[test]
    fn a_workspace_that_is_a_file_names_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let check = workspace(&file);
        assert_eq!(check.status, Status::Fail);
        assert!(check.fix.unwrap().contains("`workspace`"));
        assert_eq!(workspace(dir.path()).status, Status::Ok);
        assert_eq!(workspace(&dir.path().join("new/deeper")).status, Status::Ok);
        assert_eq!(workspace(&file.join("below")).status, Status::Fail);
    }

    #[test]
    fn an_open_data_dir_is_a_warning_with_the_chmod() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let check = data_dir(dir.path());
        assert_eq!(check.status, Status::Warn);
        assert!(check.fix.unwrap().starts_with("`chmod 700"));
    }

    #[test]
    fn no_model_names_init_and_the_variables() {
        let check = model(&Config::default(), true);
        assert_eq!(check.status, Status::Fail);
        let fix = check.fix.unwrap();
        assert!(
            fix.contains("warden init") && fix.contains("ANTHROPIC_API_KEY"),
            "{fix}"
        );
    }
}
