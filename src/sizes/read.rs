//! Readers that apply a [`Cap`] while the bytes arrive: a whole body, lines of a stream, the
//! events of a server-sent-event stream, and lines of a diagnostic stream cut to a length.
//! None of them holds more than the cap (plus one chunk) before it fails.

use super::{Cap, Exceeded};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// Where a reader inside someone else's machinery (rmcp's transport) records the cap that cut
/// a connection, so the caller can say why it ended rather than "transport closed", and stop
/// waiting for an answer that will not come.
#[derive(Clone, Debug, Default)]
pub struct Tripped(Arc<TrippedInner>);

#[derive(Debug, Default)]
struct TrippedInner {
    first: Mutex<Option<Exceeded>>,
    notify: tokio::sync::Notify,
}

impl Tripped {
    pub fn trip(&self, exceeded: Exceeded) {
        let mut slot = crate::locks::lock(&self.0.first);
        if slot.is_none() {
            *slot = Some(exceeded);
        }
        self.0.notify.notify_waiters();
    }

    /// The first cap that was exceeded, if any.
    pub fn get(&self) -> Option<Exceeded> {
        crate::locks::lock(&self.0.first).clone()
    }

    /// Until a cap is exceeded.
    pub async fn wait(&self) -> Exceeded {
        loop {
            let notified = self.0.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(exceeded) = self.get() {
                return exceeded;
            }
            notified.await;
        }
    }
}

/// A body failed: too large, or the transfer broke.
#[derive(Debug)]
pub enum BodyError<E> {
    Exceeded(Exceeded),
    Transfer(E),
}

impl<E: std::fmt::Display> std::fmt::Display for BodyError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Exceeded(e) => e.fmt(f),
            BodyError::Transfer(e) => e.fmt(f),
        }
    }
}

/// Collect a stream of chunks, failing as soon as it holds more than `cap`.
pub async fn collect<S, B, E>(
    stream: S,
    declared: Option<u64>,
    cap: Cap,
    what: &str,
) -> Result<Vec<u8>, BodyError<E>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    if declared.is_some_and(|length| length > cap.bytes as u64) {
        return Err(BodyError::Exceeded(cap.exceeded(what)));
    }
    let mut body = Vec::new();
    let mut stream = std::pin::pin!(stream);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(BodyError::Transfer)?;
        let chunk = chunk.as_ref();
        if body.len() + chunk.len() > cap.bytes {
            return Err(BodyError::Exceeded(cap.exceeded(what)));
        }
        body.extend_from_slice(chunk);
    }
    Ok(body)
}

/// An HTTP response's body, at most `cap` bytes (a larger `Content-Length` fails at once).
pub async fn body(
    response: reqwest::Response,
    cap: Cap,
    what: &str,
) -> Result<Vec<u8>, BodyError<reqwest::Error>> {
    let declared = response.content_length();
    collect(response.bytes_stream(), declared, cap, what).await
}

/// The first `limit` bytes of a body (an error page shown in a message), the rest unread.
pub async fn prefix(response: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut stream = std::pin::pin!(response.bytes_stream());
    while let Some(Ok(chunk)) = stream.next().await {
        let room = limit - out.len();
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= limit {
            break;
        }
    }
    out
}

/// An `AsyncRead` whose lines may not exceed a cap: a line that grows past it fails the read
/// (and trips `tripped`), so whoever buffers lines above never holds more than cap plus one
/// read.
pub struct LineCapped<R> {
    inner: R,
    cap: Cap,
    what: String,
    /// Bytes since the last newline.
    open: usize,
    tripped: Tripped,
}

impl<R> LineCapped<R> {
    pub fn new(inner: R, cap: Cap, what: impl Into<String>, tripped: Tripped) -> LineCapped<R> {
        LineCapped {
            inner,
            cap,
            what: what.into(),
            open: 0,
            tripped,
        }
    }

    /// Account for `data`; the error when a line went over the cap.
    fn account(&mut self, data: &[u8]) -> Result<(), Exceeded> {
        let over = |open: usize| open > self.cap.bytes;
        match (
            data.iter().position(|&b| b == b'\n'),
            data.iter().rposition(|&b| b == b'\n'),
        ) {
            (Some(first), Some(last)) => {
                // Every complete line in between is shorter than `data`; check the longest.
                let longest_inside = data[first + 1..=last]
                    .split(|&b| b == b'\n')
                    .map(<[u8]>::len)
                    .max()
                    .unwrap_or(0);
                if over(self.open + first) || over(longest_inside) {
                    return Err(self.cap.exceeded(self.what.clone()));
                }
                self.open = data.len() - last - 1;
            }
            _ => self.open += data.len(),
        }
        if over(self.open) {
            return Err(self.cap.exceeded(self.what.clone()));
        }
        Ok(())
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCapped<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => match this.account(&buf.filled()[before..]) {
                Ok(()) => Poll::Ready(Ok(())),
                Err(exceeded) => {
                    buf.set_filled(before);
                    this.tripped.trip(exceeded.clone());
                    Poll::Ready(Err(exceeded.into()))
                }
            },
            other => other,
        }
    }
}

/// Server-sent events over a byte stream, each at most `cap` bytes: an event that grows past
/// it (a server that never ends one) ends the stream with an error naming the cap.
pub fn events_capped<S, E>(
    stream: S,
    cap: Cap,
    what: String,
    tripped: Tripped,
) -> impl Stream<Item = Result<Bytes, io::Error>>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut event = EventSize::default();
    let mut failed = false;
    stream
        .map(move |chunk| {
            if failed {
                return None;
            }
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => return Some(Err(io::Error::other(e))),
            };
            if event.push(&chunk) > cap.bytes {
                failed = true;
                let exceeded = cap.exceeded(what.clone());
                tripped.trip(exceeded.clone());
                return Some(Err(exceeded.into()));
            }
            Some(Ok(chunk))
        })
        .take_while(|item| std::future::ready(item.is_some()))
        .filter_map(std::future::ready)
}

/// The size of the event being received: bytes since the last blank line.
#[derive(Default)]
struct EventSize {
    bytes: usize,
    line: usize,
    after_cr: bool,
}

impl EventSize {
    /// Account for `chunk`; the largest size the current event reached in it.
    fn push(&mut self, chunk: &[u8]) -> usize {
        let mut largest = self.bytes;
        for &byte in chunk {
            match byte {
                // The LF of a CRLF pair: the line already ended.
                b'\n' if self.after_cr => {
                    self.after_cr = false;
                    continue;
                }
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    if self.line == 0 {
                        self.bytes = 0;
                        continue;
                    }
                    self.line = 0;
                }
                _ => {
                    self.after_cr = false;
                    self.line += 1;
                }
            }
            self.bytes += 1;
            largest = largest.max(self.bytes);
        }
        largest
    }
}

/// Lines of a diagnostic stream (a server's stderr), each cut to `max` bytes: the rest of a
/// longer line is dropped as it arrives, and counted.
pub struct CutLines {
    max: usize,
    line: Vec<u8>,
    dropped: usize,
}

/// One line, and how many bytes of it were dropped.
#[derive(Debug, PartialEq, Eq)]
pub struct CutLine {
    pub text: String,
    pub dropped: usize,
}

impl CutLines {
    pub fn new(max: usize) -> CutLines {
        CutLines {
            max,
            line: Vec::new(),
            dropped: 0,
        }
    }

    /// Feed a chunk; complete lines go to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<CutLine>) {
        for piece in chunk.split_inclusive(|&b| b == b'\n') {
            let (body, ends) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            let room = self.max - self.line.len();
            self.line.extend_from_slice(&body[..body.len().min(room)]);
            self.dropped += body.len().saturating_sub(room);
            if ends {
                out.push(self.take());
            }
        }
    }

    /// The stream ended: the last unterminated line, if any.
    pub fn finish(&mut self) -> Option<CutLine> {
        (!self.line.is_empty() || self.dropped > 0).then(|| self.take())
    }

    fn take(&mut self) -> CutLine {
        let text = String::from_utf8_lossy(&self.line)
            .trim_end_matches('\r')
            .to_string();
        self.line.clear();
        CutLine {
            text,
            dropped: std::mem::take(&mut self.dropped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncBufReadExt;

    fn cap(bytes: usize) -> Cap {
        Cap::new(bytes, "test_bytes")
    }

    #[tokio::test]
    async fn a_body_over_the_cap_fails_while_arriving() {
        let chunks = futures::stream::iter(
            (0..10).map(|_| Ok::<_, io::Error>(Bytes::from(vec![b'x'; 100]))),
        );
        let err = collect(chunks, None, cap(350), "the page")
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the page is larger than 350 bytes (caps.test_bytes)"
        );
        let declared = futures::stream::iter(Vec::<Result<Bytes, io::Error>>::new());
        assert!(matches!(
            collect(declared, Some(351), cap(350), "x").await,
            Err(BodyError::Exceeded(_))
        ));
        let small = futures::stream::iter(vec![Ok::<_, io::Error>(Bytes::from_static(b"ok"))]);
        assert_eq!(collect(small, Some(2), cap(350), "x").await.unwrap(), b"ok");
    }

    #[tokio::test]
    async fn lines_are_capped_however_the_reads_fall() {
        let tripped = Tripped::default();
        let input: &[u8] = b"short\nalso short\n0123456789abcdef\nnever read";
        let reader = LineCapped::new(input, cap(12), "a line", tripped.clone());
        let mut lines = tokio::io::BufReader::with_capacity(4, reader).lines();
        assert_eq!(lines.next_line().await.unwrap().unwrap(), "short");
        assert_eq!(lines.next_line().await.unwrap().unwrap(), "also short");
        let err = lines.next_line().await.unwrap_err();
        assert!(err.to_string().contains("caps.test_bytes"), "{err}");
        assert_eq!(tripped.get().unwrap().what, "a line");
        assert_eq!(tripped.wait().await.what, "a line");

        // A long line inside one read is caught too.
        let reader = LineCapped::new(
            &b"a\n0123456789abcdef\nb\n"[..],
            cap(12),
            "x",
            Tripped::default(),
        );
        let mut lines = tokio::io::BufReader::with_capacity(64, reader).lines();
        assert!(lines.next_line().await.is_err());
    }

    #[tokio::test]
    async fn an_endless_event_ends_the_stream() {
        let tripped = Tripped::default();
        let mut chunks: Vec<Result<Bytes, io::Error>> =
            vec![Ok(Bytes::from_static(b"data: one\r\n\r\ndata: two\n\n"))];
        chunks.extend((0..50).map(|_| Ok(Bytes::from_static(b"data: xxxxxxxxxx\n"))));
        let stream = events_capped(
            futures::stream::iter(chunks),
            cap(100),
            "an event".into(),
            tripped.clone(),
        );
        let items: Vec<_> = stream.collect().await;
        let ok = items.iter().take_while(|i| i.is_ok()).count();
        assert!((5..10).contains(&ok), "{ok} chunks passed");
        assert!(items.last().unwrap().is_err());
        assert_eq!(items.len(), ok + 1);
        assert!(tripped.get().is_some());
    }

    #[test]
    fn event_sizes_reset_on_blank_lines() {
        let mut size = EventSize::default();
        assert_eq!(size.push(b"data: a\n\n"), 8);
        assert_eq!(size.push(b"data: bb\r\n"), 9);
        // The blank line ends it; the next event has 7 bytes so far.
        assert_eq!(size.push(b"\r\ndata: c"), 9);
        assert_eq!(size.push(b"x"), 8);
    }

    #[test]
    fn long_diagnostic_lines_are_cut_and_counted() {
        let mut lines = CutLines::new(5);
        let mut out = Vec::new();
        lines.push(b"hello world\nok\nab", &mut out);
        lines.push(b"cdefgh", &mut out);
        assert_eq!(
            out,
            vec![
                CutLine {
                    text: "hello".into(),
                    dropped: 6
                },
                CutLine {
                    text: "ok".into(),
                    dropped: 0
                },
            ]
        );
        assert_eq!(
            lines.finish(),
            Some(CutLine {
                text: "abcde".into(),
                dropped: 3
            })
        );
        assert_eq!(lines.finish(), None);
    }
}
