//! `warden login PROVIDER [--paste|--loopback]`, `warden login --status`, `warden logout
//! PROVIDER`: OAuth sign-in for providers configured with `[llm.<provider>.oauth]` (see
//! [`crate::oauth`]).

use crate::config::{Config, ProviderKind};
use crate::llm::{provider_config, token_store};
use crate::oauth::{Flow, LoginError};
use clap::Args;

/// Exit code when signing in fails (refused, wrong state, no answer).
pub const EXIT_FAILED: i32 = 1;
/// Exit code for a usage or configuration error.
pub const EXIT_USAGE: i32 = 2;

#[derive(Args)]
pub struct LoginArgs {
    /// The provider: anthropic or openai (it needs an [llm.<provider>.oauth] block).
    #[arg(required_unless_present = "status")]
    pub provider: Option<String>,
    /// Open the URL on any device and paste the code here (a server without a browser).
    #[arg(long, conflicts_with = "loopback")]
    pub paste: bool,
    /// The browser on this machine comes back to a listener on 127.0.0.1.
    #[arg(long)]
    pub loopback: bool,
    /// Show who is signed in, and until when; signs nobody in.
    #[arg(long)]
    pub status: bool,
}

#[derive(Args)]
pub struct LogoutArgs {
    /// The provider to forget the tokens of.
    pub provider: String,
}

fn kind(name: &str) -> Result<ProviderKind, String> {
    match name {
        "anthropic" => Ok(ProviderKind::Anthropic),
        "openai" => Ok(ProviderKind::Openai),
        other => Err(format!(
            "unknown provider {other:?}: warden signs in to anthropic or openai"
        )),
    }
}

pub fn login(config: &Config, args: LoginArgs) -> anyhow::Result<i32> {
    if args.status {
        return Ok(status(config, args.provider.as_deref()));
    }
    let name = args.provider.unwrap_or_default();
    let kind = match kind(&name) {
        Ok(kind) => kind,
        Err(e) => return usage(&e),
    };
    let Some(oauth) = provider_config(&config.llm, kind).oauth.clone() else {
        return usage(&format!(
            "{name} has no [llm.{name}.oauth] block: warden signs in only where the config \
             names the provider's OAuth endpoints and warden's client id (see README, \
             \"Signing in\"); otherwise set its API key"
        ));
    };
    let Some(store) = token_store(&config.llm, kind) else {
        return usage("no data directory for the tokens");
    };
    let flow = if args.paste {
        Flow::Paste
    } else if args.loopback || has_browser() {
        Flow::Loopback
    } else {
        Flow::Paste
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let read_line = || {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    };
    let mut stderr = std::io::stderr();
    let result = runtime.block_on(crate::oauth::login(
        &name,
        &oauth,
        flow,
        &store,
        &mut stderr,
        read_line,
    ));
    match result {
        Ok(tokens) => {
            println!(
                "Signed in to {name}{}. Tokens are in {} (0600).",
                expiry(tokens.expires_at),
                store.path().display()
            );
            Ok(0)
        }
        Err(LoginError::Config(e)) => usage(&e),
        Err(e) => {
            eprintln!("warden: login to {name} failed: {e}");
            Ok(EXIT_FAILED)
        }
    }
}

pub fn logout(config: &Config, args: LogoutArgs) -> anyhow::Result<i32> {
    let kind = match kind(&args.provider) {
        Ok(kind) => kind,
        Err(e) => return usage(&e),
    };
    let Some(store) = token_store(&config.llm, kind) else {
        println!(
            "{} has no [llm.{}.oauth] block: nothing to forget.",
            args.provider, args.provider
        );
        return Ok(0);
    };
    match store.remove() {
        Ok(true) => println!(
            "Signed out of {}: its tokens are deleted (revoke warden's access at the provider \
             too if you no longer trust this machine).",
            args.provider
        ),
        Ok(false) => println!("{} was not signed in.", args.provider),
        Err(e) => anyhow::bail!(e),
    }
    Ok(0)
}

/// One line per provider with an OAuth block: signed in or not, and the expiry.
fn status(config: &Config, only: Option<&str>) -> i32 {
    let mut any = false;
    for kind in [ProviderKind::Anthropic, ProviderKind::Openai] {
        let name = crate::llm::kind_name(kind);
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let Some(store) = token_store(&config.llm, kind) else {
            if only.is_some() {
                println!("{name}: no [llm.{name}.oauth] block (uses its API key)");
                any = true;
            }
            continue;
        };
        any = true;
        match store.load() {
            Ok(Some(tokens)) => println!(
                "{name}: signed in{}{}",
                expiry(tokens.expires_at),
                if tokens.refresh_token.is_some() {
                    ", refreshed automatically"
                } else {
                    ", no refresh token: log in again when it expires"
                }
            ),
            Ok(None) => println!("{name}: not signed in (warden login {name})"),
            Err(e) => println!("{name}: unreadable token file: {e}"),
        }
    }
    if !any {
        println!("No provider has an [llm.<provider>.oauth] block; warden uses API keys.");
    }
    0
}

fn expiry(at: Option<i64>) -> String {
    match at.and_then(|at| chrono::DateTime::from_timestamp(at, 0)) {
        Some(at) => format!(", token valid until {}", at.format("%Y-%m-%d %H:%M:%S UTC")),
        None => String::new(),
    }
}

/// A desktop session whose browser can reach 127.0.0.1 here.
fn has_browser() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY", "BROWSER"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))
}

fn usage(message: &str) -> anyhow::Result<i32> {
    eprintln!("warden: {message}");
    Ok(EXIT_USAGE)
}
