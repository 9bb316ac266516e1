//! Socket Mode: `apps.connections.open` gives a WebSocket address; Slack sends each event,
//! button press and slash command there as an envelope, and wants it acknowledged within
//! 3 seconds or it sends it again. So an envelope is recorded (a durable row, also the
//! deduplication) and acknowledged at once, and handled after, in order, by one task.
//!
//! A `disconnect` envelope (Slack rotates connections every few hours) or a dropped
//! connection opens a new one; failures to connect back off from 1 s to 30 s.

use super::api::SlackApi;
use super::envelope::Envelope;
use super::handler::Handler;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const LONGEST_BACKOFF: Duration = Duration::from_secs(30);
/// With no frame at all for this long (Slack pings far more often) the connection is
/// presumed dead and replaced.
const SILENCE: Duration = Duration::from_secs(120);

/// How one connection ended.
enum Ended {
    /// Slack asked for a new connection, or the connection dropped after working.
    Reconnect,
    /// It never worked (or failed at once): wait before the next try.
    Failed(String),
    Shutdown,
}

/// Receive envelopes until `shutdown`; `handler` records each and handles it.
pub async fn run(api: &SlackApi, handler: Arc<Handler>, shutdown: &CancellationToken) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Envelope)>();
    let worker = {
        let handler = handler.clone();
        tokio::spawn(async move {
            while let Some((key, envelope)) = rx.recv().await {
                handler.handle(&key, envelope).await;
            }
        })
    };
    let mut backoff = FIRST_BACKOFF;
    loop {
        let ended = tokio::select! {
            _ = shutdown.cancelled() => Ended::Shutdown,
            ended = connect_and_serve(api, &handler, &tx) => ended,
        };
        match ended {
            Ended::Shutdown => break,
            Ended::Reconnect => backoff = FIRST_BACKOFF,
            Ended::Failed(why) => {
                tracing::warn!("slack socket mode: {why} (connecting again in {backoff:?})");
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(LONGEST_BACKOFF);
            }
        }
    }
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), worker).await;
}

async fn connect_and_serve(
    api: &SlackApi,
    handler: &Arc<Handler>,
    tx: &mpsc::UnboundedSender<(String, Envelope)>,
) -> Ended {
    let url = match api.socket_url().await {
        Ok(url) => url,
        Err(e) => return Ended::Failed(format!("apps.connections.open: {e}")),
    };
    let parsed = match url::Url::parse(&url) {
        Ok(parsed) => parsed,
        Err(e) => return Ended::Failed(format!("Slack gave a bad socket address: {e}")),
    };
    let host = parsed.host_str().unwrap_or_default().to_string();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let tcp = match tokio::net::TcpStream::connect((host.as_str(), port)).await {
        Ok(tcp) => tcp,
        Err(e) => return Ended::Failed(format!("connecting to {host}:{port}: {e}")),
    };
    match parsed.scheme() {
        "wss" => match crate::egress::proxy::tls_connect(&host, tcp).await {
            Ok(tls) => handshake_and_serve(&url, tls, handler, tx).await,
            Err(e) => Ended::Failed(e),
        },
        "ws" => handshake_and_serve(&url, tcp, handler, tx).await,
        other => Ended::Failed(format!("Slack gave a {other}: socket address")),
    }
}

async fn handshake_and_serve<S>(
    url: &str,
    stream: S,
    handler: &Arc<Handler>,
    tx: &mpsc::UnboundedSender<(String, Envelope)>,
) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match tokio_tungstenite::client_async(url, stream).await {
        Ok((ws, _)) => serve(ws, handler, tx).await,
        Err(e) => Ended::Failed(format!(
            "WebSocket handshake: {}",
            handler.scrub(&e.to_string())
        )),
    }
}

async fn serve<S>(
    mut ws: WebSocketStream<S>,
    handler: &Arc<Handler>,
    tx: &mpsc::UnboundedSender<(String, Envelope)>,
) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut greeted = false;
    loop {
        let frame = match tokio::time::timeout(SILENCE, ws.next()).await {
            Err(_) => return Ended::Failed("the socket went silent".into()),
            Ok(None) => return dropped(greeted, "closed"),
            Ok(Some(Err(e))) => return dropped(greeted, &e.to_string()),
            Ok(Some(Ok(frame))) => frame,
        };
        let text = match frame {
            Message::Text(text) => text.to_string(),
            Message::Close(_) => return dropped(greeted, "closed by Slack"),
            // tungstenite answers pings itself.
            _ => continue,
        };
        let value: Value = serde_json::from_str(&text).unwrap_or_default();
        match value["type"].as_str() {
            Some("hello") => {
                greeted = true;
                tracing::info!("slack socket mode: connected");
                continue;
            }
            Some("disconnect") => {
                tracing::info!(
                    "slack socket mode: Slack asked to reconnect ({})",
                    value["reason"].as_str().unwrap_or("no reason")
                );
                return Ended::Reconnect;
            }
            _ => {}
        }
        let Some(envelope) = Envelope::parse(&text) else {
            tracing::debug!("slack socket mode: a frame that is no envelope");
            continue;
        };
        // Recorded first: once acknowledged, Slack will not send it again.
        let key = envelope.key();
        let take = handler.record(&key, &envelope);
        let ack = json!({"envelope_id": envelope.envelope_id}).to_string();
        if let Err(e) = ws.send(Message::Text(ack.into())).await {
            return dropped(greeted, &e.to_string());
        }
        if take {
            let _ = tx.send((key, envelope));
        }
    }
}

fn dropped(greeted: bool, why: &str) -> Ended {
    if greeted {
        tracing::info!("slack socket mode: connection ended ({why}); reconnecting");
        Ended::Reconnect
    } else {
        Ended::Failed(format!("connection ended before Slack said hello ({why})"))
    }
}
