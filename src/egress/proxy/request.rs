//! The proxy's side of HTTP/1.1: reading a request head, the head sent upstream, and the
//! refusal the client sees.

use super::inject::{inject, Injection};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A parsed request head.
pub(super) struct Request {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) headers: Vec<(String, Vec<u8>)>,
    /// Bytes the client sent after the head.
    pub(super) rest: Vec<u8>,
}

impl Request {
    pub(super) fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }
}

/// The body's length from `Content-Length`; chunked bodies are refused (their end would have
/// to be parsed to keep a second request from riding along).
pub(super) fn body_length(request: &Request) -> Result<u64, (u16, String)> {
    if request.header("transfer-encoding").is_some() {
        return Err((
            411,
            "chunked request bodies are not forwarded; send a Content-Length".into(),
        ));
    }
    let lengths: Vec<&[u8]> = request
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.as_slice())
        .collect();
    match lengths.as_slice() {
        [] => Ok(0),
        [one] => std::str::from_utf8(one)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| (400, "an invalid Content-Length".to_string())),
        _ => Err((400, "more than one Content-Length".into())),
    }
}

/// The head sent upstream: origin form, the checked `Host`, the client's end-to-end headers
/// (never its `Proxy-*` or framing ones) with `headers` applied (a route's set, a secret
/// swapped in), and `Connection: close`.
pub(super) fn upstream_head(
    request: &Request,
    origin: &str,
    host: &str,
    headers: &[Injection],
    body_len: u64,
) -> Vec<u8> {
    let mut head = format!("{} {origin} HTTP/1.1\r\nHost: {host}\r\n", request.method).into_bytes();
    let kept = request.headers.iter().filter(|(name, _)| {
        let lower = name.to_ascii_lowercase();
        !(lower.starts_with("proxy-")
            || matches!(
                lower.as_str(),
                "host"
                    | "connection"
                    | "keep-alive"
                    | "upgrade"
                    | "te"
                    | "trailer"
                    | "content-length"
                    | "transfer-encoding"
            ))
    });
    for (name, value) in inject(kept, headers) {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(&value);
        head.extend_from_slice(b"\r\n");
    }
    if body_len > 0 || request.header("content-length").is_some() {
        head.extend_from_slice(format!("Content-Length: {body_len}\r\n").as_bytes());
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// Read and parse the request head; `Ok(None)` when the client closed without sending one.
pub(super) async fn read_head(
    client: &mut (impl AsyncRead + Unpin),
) -> Result<Option<Request>, String> {
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(pos) = find_head_end(&buf) {
            break pos;
        }
        let cap = crate::sizes::Cap::new(crate::sizes::caps().proxy_head_bytes, "proxy_head_bytes");
        if buf.len() >= cap.bytes {
            return Err(cap.exceeded("the request head").to_string());
        }
        let mut chunk = [0u8; 4096];
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the request failed: {e}"))?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err("the request head ended early".into())
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(&buf[..end]) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("an incomplete request head".into()),
        Err(e) => return Err(format!("not an HTTP request: {e}")),
    }
    Ok(Some(Request {
        method: request.method.unwrap_or_default().to_string(),
        target: request.path.unwrap_or_default().to_string(),
        headers: request
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect(),
        rest: buf[end..].to_vec(),
    }))
}

pub(super) fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// `host:port` of a CONNECT request (`[::1]:443` for IPv6).
pub(super) fn authority(target: &str) -> Result<(String, u16), String> {
    let bad = || format!("CONNECT {target}: expected host:port");
    let (host, port) = target.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok((normalize(host), port))
}

/// Lowercase, without a trailing dot (`Example.COM.` is `example.com`).
pub(super) fn normalize(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

pub(super) async fn respond(client: &mut (impl AsyncWrite + Unpin), status: u16, why: &str) {
    let text = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        407 => "Proxy Authentication Required",
        411 => "Length Required",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let challenge = match status {
        407 => "Proxy-Authenticate: Basic realm=\"warden\"\r\n",
        _ => "",
    };
    let body = format!("warden egress proxy: {why}\n");
    let response = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n{challenge}\
         X-Warden-Egress: refused\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}
