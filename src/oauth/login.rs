//! The login itself: the authorize URL (with the PKCE challenge and `state`), then the code —
//! from the browser's redirect to a one-shot listener on 127.0.0.1, or pasted by the user —
//! and its exchange for tokens, which are stored.

use super::exchange::{self, ExchangeError};
use super::pkce::Pkce;
use super::tokens::{TokenStore, Tokens};
use super::OAuthConfig;
use std::io::Write;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a login waits for the browser or the paste.
const WAIT: Duration = Duration::from_secs(300);
/// The longest redirect request the listener reads.
const MAX_REQUEST: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// The browser on this machine comes back to 127.0.0.1.
    Loopback,
    /// Open the URL anywhere and paste the code here (a headless server).
    Paste,
}

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("{0}")]
    Config(String),
    #[error(
        "the answer's state does not match this login: refused (an old or forged redirect); \
         run warden login again"
    )]
    State,
    #[error("the provider did not sign you in: {0}")]
    Denied(String),
    #[error("no answer within {} minutes", WAIT.as_secs() / 60)]
    Timeout,
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Exchange(#[from] ExchangeError),
}

/// The URL the user opens: response type `code`, S256 challenge, state.
pub fn authorize_url(
    config: &OAuthConfig,
    pkce: &Pkce,
    redirect_uri: &str,
) -> Result<String, LoginError> {
    let mut url = url::Url::parse(&config.authorize_url).map_err(|e| {
        LoginError::Config(format!("authorize_url {:?}: {e}", config.authorize_url))
    })?;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &config.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &pkce.state);
        if !config.scopes.is_empty() {
            query.append_pair("scope", &config.scopes.join(" "));
        }
    }
    Ok(url.to_string())
}

/// Sign in to `provider` and store its tokens. Instructions go to `tell` (stderr); the paste
/// flow reads the code from `paste` (stdin).
pub async fn login(
    provider: &str,
    config: &OAuthConfig,
    flow: Flow,
    store: &TokenStore,
    tell: &mut (dyn Write + Send),
    paste: impl FnOnce() -> std::io::Result<String> + Send + 'static,
) -> Result<Tokens, LoginError> {
    config.check(provider).map_err(LoginError::Config)?;
    let pkce = Pkce::new();
    let (code, redirect_uri) = match flow {
        Flow::Loopback => loopback(config, &pkce, tell).await?,
        Flow::Paste => {
            if config.redirect_uri.trim().is_empty() {
                return Err(LoginError::Config(format!(
                    "the paste flow needs llm.{provider}.oauth.redirect_uri (the provider's page \
                     that shows the code); without it use --loopback on a machine with a browser"
                )));
            }
            let url = authorize_url(config, &pkce, &config.redirect_uri)?;
            let _ = writeln!(
                tell,
                "Open this URL in a browser and sign in:\n\n  {url}\n\nThen paste the code it \
                 shows (or the whole address the browser ended on) here:"
            );
            let line = tokio::time::timeout(WAIT, tokio::task::spawn_blocking(paste))
                .await
                .map_err(|_| LoginError::Timeout)?
                .map_err(|e| LoginError::Io(e.to_string()))?
                .map_err(|e| LoginError::Io(format!("reading the code: {e}")))?;
            (
                read_pasted(&line, &pkce.state)?,
                config.redirect_uri.clone(),
            )
        }
    };
    let tokens = exchange::code(config, &code, &pkce.verifier, &redirect_uri).await?;
    store.save(&tokens).map_err(LoginError::Io)?;
    Ok(tokens)
}

/// The code in what the user pasted: a bare code, `code#state`, or the redirect address with
/// `code` and `state` in its query. A state that comes with it must be this login's; a bare
/// code was carried by hand from the provider's page, where no forged redirect can reach.
pub fn read_pasted(pasted: &str, state: &str) -> Result<String, LoginError> {
    let pasted = pasted.trim();
    if pasted.is_empty() {
        return Err(LoginError::Io("nothing was pasted".into()));
    }
    let (code, given) = match url::Url::parse(pasted) {
        Ok(url) if url.query().is_some() => {
            let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
            let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            if let Some(error) = get("error") {
                return Err(LoginError::Denied(error));
            }
            let code = get("code")
                .ok_or_else(|| LoginError::Io("the address has no code in it".into()))?;
            // A redirect address always carries the state back: its absence is suspect too.
            (code, Some(get("state").unwrap_or_default()))
        }
        _ => match pasted.split_once('#') {
            Some((code, given)) => (code.to_string(), Some(given.to_string())),
            None => (pasted.to_string(), None),
        },
    };
    if given.is_some_and(|given| given != state) {
        return Err(LoginError::State);
    }
    Ok(code)
}

/// Listen on 127.0.0.1, print the URL, and take the first redirect to `/callback`.
async fn loopback(
    config: &OAuthConfig,
    pkce: &Pkce,
    tell: &mut (dyn Write + Send),
) -> Result<(String, String), LoginError> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.loopback_port))
        .await
        .map_err(|e| LoginError::Io(format!("listening on 127.0.0.1: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| LoginError::Io(e.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let url = authorize_url(config, pkce, &redirect_uri)?;
    let _ = writeln!(
        tell,
        "Open this URL in your browser and sign in (waiting on 127.0.0.1:{port}):\n\n  {url}\n"
    );
    let wait = async {
        loop {
            let (mut socket, _) = listener
                .accept()
                .await
                .map_err(|e| LoginError::Io(e.to_string()))?;
            let Some(target) = read_target(&mut socket).await else {
                continue;
            };
            let Ok(url) = url::Url::parse(&format!("http://127.0.0.1{target}")) else {
                respond(&mut socket, 400, "Bad request.").await;
                continue;
            };
            if url.path() != "/callback" {
                // A favicon, a probe: not the redirect.
                respond(&mut socket, 404, "Not found.").await;
                continue;
            }
            let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
            let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            if get("state").as_deref() != Some(pkce.state.as_str()) {
                respond(
                    &mut socket,
                    400,
                    "This sign-in answer is not for this login; refused.",
                )
                .await;
                return Err(LoginError::State);
            }
            if let Some(error) = get("error") {
                respond(&mut socket, 400, "Not signed in. You can close this tab.").await;
                return Err(LoginError::Denied(error));
            }
            let Some(code) = get("code") else {
                respond(&mut socket, 400, "The answer has no code.").await;
                return Err(LoginError::Denied("no code in the answer".into()));
            };
            respond(
                &mut socket,
                200,
                "warden is signed in. You can close this tab.",
            )
            .await;
            return Ok(code);
        }
    };
    let code = tokio::time::timeout(WAIT, wait)
        .await
        .map_err(|_| LoginError::Timeout)??;
    Ok((code, redirect_uri))
}

/// The target of a `GET` request (its path and query), or `None` for anything else.
async fn read_target(socket: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 || buf.len() + n > MAX_REQUEST {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut words = head.lines().next()?.split_whitespace();
    (words.next()? == "GET").then_some(())?;
    let target = words.next()?;
    target.starts_with('/').then(|| target.to_string())
}

async fn respond(socket: &mut tokio::net::TcpStream, status: u16, text: &str) {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!("<!doctype html><meta charset=utf-8><p>{text}</p>\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = socket.write_all(response.as_bytes()).await;
    let _ = socket.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authorize_url_carries_the_challenge_and_the_state() {
        let config = OAuthConfig {
            authorize_url: "https://auth.example/authorize?audience=x".into(),
            client_id: "warden cli".into(),
            scopes: vec!["models".into(), "offline_access".into()],
            ..OAuthConfig::default()
        };
        let pkce = Pkce::new();
        let url =
            url::Url::parse(&authorize_url(&config, &pkce, "http://127.0.0.1:5/callback").unwrap())
                .unwrap();
        let pairs: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(pairs["audience"], "x");
        assert_eq!(pairs["response_type"], "code");
        assert_eq!(pairs["client_id"], "warden cli");
        assert_eq!(pairs["code_challenge"], pkce.challenge);
        assert_eq!(pairs["code_challenge_method"], "S256");
        assert_eq!(pairs["state"], pkce.state);
        assert_eq!(pairs["scope"], "models offline_access");
        assert!(!url.as_str().contains(&pkce.verifier));
    }

    #[test]
    fn a_pasted_code_with_a_state_must_carry_this_logins_state() {
        assert_eq!(read_pasted(" abc \n", "s1").unwrap(), "abc");
        assert_eq!(read_pasted("abc#s1", "s1").unwrap(), "abc");
        assert!(matches!(
            read_pasted("abc#s2", "s1"),
            Err(LoginError::State)
        ));
        let url = "https://provider.example/code?code=abc&state=s1";
        assert_eq!(read_pasted(url, "s1").unwrap(), "abc");
        let forged = "https://provider.example/code?code=abc&state=evil";
        assert!(matches!(read_pasted(forged, "s1"), Err(LoginError::State)));
        let stateless = "https://provider.example/code?code=abc";
        assert!(matches!(
            read_pasted(stateless, "s1"),
            Err(LoginError::State)
        ));
        let denied = "https://provider.example/code?error=access_denied&state=s1";
        assert!(matches!(
            read_pasted(denied, "s1"),
            Err(LoginError::Denied(_))
        ));
        assert!(read_pasted("  ", "s1").is_err());
    }
}
