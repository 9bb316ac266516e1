//! Moving bytes once a request is admitted: a CONNECT tunnel, one forwarded request, and
//! TLS toward an upstream.

use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Relay a tunnel; the bytes sent and received.
pub(super) async fn tunnel(
    mut client: TcpStream,
    mut upstream: TcpStream,
    rest: &[u8],
) -> std::io::Result<(u64, u64)> {
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    upstream.write_all(rest).await?;
    let (sent, received) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok((sent + rest.len() as u64, received))
}

/// Send the head and exactly `body_len` bytes of body, then relay the response to the client;
/// the body bytes sent and the response bytes received.
pub(super) async fn forward<C, S>(
    client: C,
    mut upstream: S,
    head: &[u8],
    rest: &[u8],
    body_len: u64,
) -> std::io::Result<(u64, u64)>
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    upstream.write_all(head).await?;
    let early = rest
        .len()
        .min(usize::try_from(body_len).unwrap_or(usize::MAX));
    upstream.write_all(&rest[..early]).await?;
    let (mut from_client, mut to_client) = tokio::io::split(client);
    let remaining = body_len - early as u64;
    if remaining > 0 {
        let mut body = (&mut from_client).take(remaining);
        tokio::io::copy(&mut body, &mut upstream).await?;
    }
    upstream.flush().await?;
    let received = tokio::io::copy(&mut upstream, &mut to_client).await?;
    to_client.shutdown().await?;
    Ok((body_len, received))
}

/// TLS to a route's upstream, verified against the bundled web PKI roots.
pub async fn tls_connect(
    host: &str,
    upstream: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    use tokio_rustls::rustls;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host}: not a TLS server name: {e}"))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, upstream)
        .await
        .map_err(|e| format!("TLS with {host} failed: {e}"))
}
