//! Streamable HTTP for MCP servers reached over the network, on warden's own HTTP client
//! (reqwest 0.12 with rustls; rmcp's built-in client would add a second reqwest). rmcp runs
//! the protocol (sessions, SSE streams, reconnection); this file only sends its requests:
//! POST a JSON-RPC message, GET the server's event stream, DELETE the session.
//!
//! Redirects are not followed (the headers carry the user's secrets; a redirect could send
//! them elsewhere), and header templates get their `{secret:NAME}` values only here, at
//! connect time; the values are registered for log redaction. A JSON answer and each event of
//! an event stream are read within `caps.mcp_message_bytes`, while they arrive.

use super::config::message_cap;
use super::definition::HttpServer;
use crate::secret::fill_secrets;
use crate::sizes::read::{self, BodyError, Tripped};
use crate::skills::settings::SkillSettings;
use futures::stream::BoxStream;
use futures::StreamExt;
use reqwest::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse,
};
use rmcp::transport::StreamableHttpClientTransport;
use sse_stream::{Sse, SseStream};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const SESSION_HEADER: &str = "Mcp-Session-Id";
const LAST_EVENT_HEADER: &str = "Last-Event-Id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// warden's HTTP client as rmcp's transport client.
#[derive(Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    /// The server's name, for the cap's message.
    server: Arc<str>,
    /// Where a cap that cuts the connection is recorded.
    tripped: Tripped,
}

type HttpError = StreamableHttpError<reqwest::Error>;

/// The transport for `server`: its URL and headers with their secrets filled in.
pub fn transport(
    server: &HttpServer,
    settings: &SkillSettings,
    name: &str,
    tripped: Tripped,
) -> Result<StreamableHttpClientTransport<HttpClient>, String> {
    let mut headers = HashMap::new();
    for (name, template) in &server.headers {
        let value = fill_secrets(template, &format!("the header {name}"), &|secret| {
            settings.secret(secret)
        })?;
        crate::redact::register(value.expose());
        let header = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("{name:?} is not a header name"))?;
        let mut value = HeaderValue::try_from(value.expose())
            .map_err(|_| format!("the value of header {name} is not valid in a header"))?;
        value.set_sensitive(true);
        headers.insert(header, value);
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| format!("building the HTTP client failed: {e}"))?;
    let config =
        StreamableHttpClientTransportConfig::with_uri(server.url.as_str()).custom_headers(headers);
    let client = HttpClient {
        client,
        server: name.into(),
        tripped,
    };
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

impl HttpClient {
    /// Server-sent events of `response`, each within the message cap.
    fn events(&self, response: reqwest::Response) -> BoxStream<'static, Result<Sse, SseError>> {
        let events = read::events_capped(
            response.bytes_stream(),
            message_cap(),
            format!("an event from the MCP server {}", self.server),
            self.tripped.clone(),
        );
        SseStream::from_bytes_stream(events).boxed()
    }
}

fn with_headers(
    mut request: reqwest::RequestBuilder,
    auth: Option<String>,
    headers: HashMap<HeaderName, HeaderValue>,
) -> reqwest::RequestBuilder {
    if let Some(token) = auth {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request
}

fn starts_with(content_type: Option<&HeaderValue>, mime: &str) -> bool {
    content_type.is_some_and(|ct| ct.as_bytes().starts_with(mime.as_bytes()))
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let mut request = with_headers(self.client.post(uri.as_ref()), auth, headers)
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        let had_session = session_id.is_some();
        if let Some(id) = session_id {
            request = request.header(SESSION_HEADER, id.as_ref());
        }
        let response = request
            .json(&message)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if status == reqwest::StatusCode::ACCEPTED || status == reqwest::StatusCode::NO_CONTENT {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == reqwest::StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        if status.is_redirection() {
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("?");
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!(
                    "HTTP {status} to {to}: warden does not follow redirects of MCP servers (the \
                     headers carry secrets); configure the final URL"
                )
                .into(),
            ));
        }
        if !status.is_success() {
            let body = read::prefix(response, 1200).await;
            let body: String = String::from_utf8_lossy(&body).chars().take(300).collect();
            if let Ok(message @ ServerJsonRpcMessage::Error(_)) = serde_json::from_str(&body) {
                return Ok(StreamableHttpPostResponse::Json(message, session));
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("HTTP {status}: {}", crate::redact::redact(&body)).into(),
            ));
        }
        let is_answerless = !matches!(message, ClientJsonRpcMessage::Request(_));
        if starts_with(content_type.as_ref(), EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(
                self.events(response),
                session,
            ));
        }
        if starts_with(content_type.as_ref(), JSON) {
            let what = format!("an answer from the MCP server {}", self.server);
            let body = match read::body(response, message_cap(), &what).await {
                Ok(body) => body,
                Err(BodyError::Transfer(e)) => return Err(StreamableHttpError::Client(e)),
                Err(BodyError::Exceeded(exceeded)) => {
                    self.tripped.trip(exceeded.clone());
                    return Err(StreamableHttpError::UnexpectedServerResponse(
                        exceeded.to_string().into(),
                    ));
                }
            };
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(message) => Ok(StreamableHttpPostResponse::Json(message, session)),
                // Some servers answer a notification with a 200 and a body that is no message.
                Err(_) if is_answerless => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::Deserialize(e)),
            };
        }
        if is_answerless {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(
            content_type.map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned()),
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let response = with_headers(self.client.delete(uri.as_ref()), auth, headers)
            .header(SESSION_HEADER, session_id.as_ref())
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        // A server that does not support deleting sessions says 405; that is fine.
        if response.status() != reqwest::StatusCode::METHOD_NOT_ALLOWED {
            response
                .error_for_status()
                .map_err(StreamableHttpError::Client)?;
        }
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        let mut request = with_headers(self.client.get(uri.as_ref()), auth, headers)
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"))
            .header(SESSION_HEADER, session_id.as_ref());
        if let Some(id) = last_event_id {
            request = request.header(LAST_EVENT_HEADER, id);
        }
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        let response = response
            .error_for_status()
            .map_err(StreamableHttpError::Client)?;
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        if !starts_with(content_type.as_ref(), EVENT_STREAM)
            && !starts_with(content_type.as_ref(), JSON)
        {
            return Err(StreamableHttpError::UnexpectedContentType(
                content_type.map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned()),
            ));
        }
        Ok(self.events(response))
    }
}
