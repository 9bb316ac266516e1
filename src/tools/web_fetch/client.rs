//! The one HTTP client of warden's own egress (`web_fetch`, `web_search`): a GET whose every
//! hop — the first URL and each redirect, followed here one at a time — passes the egress
//! [`Gate`] before its host is resolved, by the guarded resolver, which refuses private
//! addresses. No proxies, a size cap (`caps.web_bytes`, applied while the body arrives), a
//! time cap, cancellation at every step.

use super::{check_url, GuardedResolver, Names};
use crate::audit::AuditDecision;
use crate::egress::{Source, Standing};
use crate::sizes::{caps, Cap};
use crate::tools::gate::{Admission, Gate, Hop, Refusal};
use crate::tools::{ToolContext, ToolOutput};
use futures::StreamExt;
use reqwest::header::HeaderMap;
use reqwest::Url;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

/// One GET to make.
pub struct Get {
    /// The tool asking: the egress audit row and the approval name it.
    pub tool: &'static str,
    pub url: Url,
    /// Whether the model composed the URL (a known URL passes a host without a rule).
    pub standing: Standing,
    /// Sent with the first request only, never to a redirect's target (an API key).
    pub headers: HeaderMap,
    /// Redirects followed, each admitted like a first URL; with 0, a redirect is an error.
    pub max_redirects: usize,
}

/// A response body, before a tool shows it to the model.
pub struct Page {
    pub url: Url,
    pub status: u16,
    /// Lowercase; empty when the server sent none.
    pub content_type: String,
    pub body: Vec<u8>,
    /// The body went on past this cap and was cut there.
    pub truncated: Option<Cap>,
    /// A hop needed the user's approval and got it.
    pub approved: bool,
    /// The URLs of the chain the model composed (for links that merely echo them).
    pub composed: Vec<Url>,
}

/// A GET that did not produce a page.
pub enum Failure {
    /// Refused before any request (the URL's form, its address, the egress gate).
    Refused(Refusal),
    /// Bad input, network or HTTP trouble.
    Error(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Error(message)
    }
}

impl Failure {
    /// The failure as a tool result: a refusal audited as what the gate decided.
    pub fn into_output(self) -> ToolOutput {
        match self {
            Failure::Refused(refusal) => match refusal.decision {
                AuditDecision::Deny => ToolOutput::denied(refusal.reason),
                AuditDecision::Error => ToolOutput::error(refusal.reason),
                decision => ToolOutput {
                    content: format!("Not fetched: {}", refusal.reason),
                    is_error: true,
                    decision,
                    reason: refusal.reason,
                    exit_code: None,
                    network: None,
                },
            },
            // A refusal by the resolver (a name with a private address) surfaces here.
            Failure::Error(why) if why.contains("refus") => ToolOutput::denied(why),
            Failure::Error(why) => ToolOutput::error(why),
        }
    }
}

fn refused(reason: String) -> Failure {
    Failure::Refused(Refusal {
        decision: AuditDecision::Deny,
        reason,
    })
}

pub struct WebClient {
    client: reqwest::Client,
    gate: Arc<Gate>,
    allow: Arc<Vec<IpAddr>>,
}

impl WebClient {
    /// Every URL and every redirect passes `gate`; names resolve through `names`. Redirects
    /// are followed here, never by the HTTP client, so each hop is checked before it is made.
    pub fn new(gate: Arc<Gate>, names: Names) -> Result<WebClient, reqwest::Error> {
        let allow = Arc::new(names.allow_private);
        let client = reqwest::Client::builder()
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver {
                lookup: names.lookup,
                fixed: Arc::new(names.fixed),
                allow: allow.clone(),
            }))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("warden/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(WebClient {
            client,
            gate,
            allow,
        })
    }

    /// Make `get`, each hop admitted first. A failure after a server answered quotes what the
    /// server chose (its Content-Type, a Location): it taints the run like a page would.
    pub async fn get(&self, get: Get, ctx: &ToolContext) -> Result<Page, Failure> {
        let tool = get.tool;
        let mut answered = None;
        let result = self.hops(get, ctx, &mut answered).await;
        if let (Err(_), Some(url)) = (&result, answered) {
            ctx.taint.add(format!("{tool} {url} (its error)"));
        }
        result
    }

    async fn hops(
        &self,
        get: Get,
        ctx: &ToolContext,
        answered: &mut Option<Url>,
    ) -> Result<Page, Failure> {
        let Get {
            tool,
            mut url,
            mut standing,
            mut headers,
            max_redirects,
        } = get;
        let mut from: Option<Url> = None;
        let mut approved = false;
        let mut composed = Vec::new();
        for index in 0..=max_redirects {
            check_url(&url, &self.allow).map_err(|why| match &from {
                Some(from) => refused(format!("{from} redirected to {url}, refused: {why}")),
                None => refused(why),
            })?;
            let hop = Hop {
                tool,
                url: &url,
                index,
                standing: &standing,
                from: from.as_ref(),
            };
            let admission = tokio::select! {
                a = self.gate.admit(&hop, ctx) => a.map_err(Failure::Refused)?,
                _ = ctx.cancel.cancelled() => return Err(Failure::Error("cancelled".into())),
            };
            approved |= admission == Admission::Approved;
            if !standing.is_known() {
                composed.push(url.clone());
            }
            let request = self
                .client
                .get(url.clone())
                .headers(std::mem::take(&mut headers))
                .send();
            let response = tokio::select! {
                r = request => r.map_err(describe_error)?,
                _ = ctx.cancel.cancelled() => return Err(Failure::Error("cancelled".into())),
            };
            // From here the server chooses bytes that may reach the model — also in an error
            // (a Content-Type, a Location): see `get`.
            *answered = Some(url.clone());
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .filter(|_| matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308));
            if let Some(location) = location {
                let location = location
                    .to_str()
                    .map_err(|_| format!("{url} redirected to an unreadable Location"))?;
                let next = url
                    .join(location)
                    .map_err(|e| format!("{url} redirected to {location:?}: {e}"))?;
                if max_redirects == 0 {
                    return Err(Failure::Error(format!(
                        "{url} redirected to {next}; {tool} follows no redirects (configure \
                         the address it redirects to)"
                    )));
                }
                // The server chose the target: it is known when the URL that led here was.
                standing = match ctx.provenance.source(&next) {
                    Some(source) => Standing::Known(source),
                    None if standing.is_known() => {
                        Standing::Known(Source::Redirect(url.to_string()))
                    }
                    None => Standing::Composed,
                };
                from = Some(std::mem::replace(&mut url, next));
                continue;
            }
            return read(response, approved, composed, ctx).await;
        }
        Err(Failure::Error(format!(
            "more than {max_redirects} redirects, stopped at {url}"
        )))
    }
}

async fn read(
    response: reqwest::Response,
    approved: bool,
    composed: Vec<Url>,
    ctx: &ToolContext,
) -> Result<Page, Failure> {
    let status = response.status().as_u16();
    let url = response.url().clone();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let textual = content_type.is_empty()
        || content_type.starts_with("text/")
        || content_type.contains("json")
        || content_type.contains("xml")
        || content_type.contains("javascript");
    if !textual {
        return Err(Failure::Error(format!(
            "{url} is {content_type}, not text; not fetched"
        )));
    }
    let cap = Cap::new(caps().web_bytes, "web_bytes");
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    let mut truncated = None;
    loop {
        let chunk = tokio::select! {
            c = stream.next() => c,
            _ = ctx.cancel.cancelled() => return Err(Failure::Error("cancelled".into())),
        };
        let Some(chunk) = chunk else { break };
        let chunk = chunk.map_err(describe_error)?;
        let room = cap.bytes - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() > room {
            truncated = Some(cap);
            break;
        }
    }
    Ok(Page {
        url,
        status,
        content_type,
        body,
        truncated,
        approved,
        composed,
    })
}

/// reqwest errors name the URL and the cause chain; keep the cause (where a refusal says why).
fn describe_error(e: reqwest::Error) -> String {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
