//! An incremental parser for server-sent events (the WHATWG `text/event-stream` format) as
//! both LLM APIs stream them. Bytes arrive in arbitrary chunks: a line, a CRLF pair or a UTF-8
//! character may be split across two of them, so the parser keeps the partial line.

/// One dispatched event: its type (`message` when the server named none) and its data lines
/// joined with `\n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub event: String,
    pub data: String,
}

use crate::sizes::{caps, Cap};

pub(crate) struct SseParser {
    /// An event larger than this is refused rather than buffered without bound.
    cap: Cap,
    /// Bytes of the line not yet terminated.
    line: Vec<u8>,
    /// The last byte was a CR: an LF right after it ends the same line.
    after_cr: bool,
    /// The first line was seen (a byte-order mark before it is skipped).
    started: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// A parser whose events may not exceed `caps.llm_event_bytes`.
    pub fn new() -> SseParser {
        SseParser::with_cap(Cap::new(caps().llm_event_bytes, "llm_event_bytes"))
    }

    pub fn with_cap(cap: Cap) -> SseParser {
        SseParser {
            cap,
            line: Vec::new(),
            after_cr: false,
            started: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
        }
    }

    /// Feed the next chunk; complete events are appended to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), String> {
        for &byte in chunk {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.process_line(&line, out);
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(byte);
                }
            }
        }
        if self.line.len() + self.data.len() > self.cap.bytes {
            return Err(self
                .cap
                .exceeded("an event of the model's stream")
                .to_string());
        }
        Ok(())
    }

    /// The stream ended. Strictly an unterminated event is dropped; servers that omit the final
    /// blank line are common enough that a complete-looking one is delivered instead.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out);
        }
        self.process_line(b"", out);
    }

    fn process_line(&mut self, mut line: &[u8], out: &mut Vec<SseEvent>) {
        if !self.started {
            self.started = true;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            if self.has_data {
                let event = std::mem::take(&mut self.event);
                out.push(SseEvent {
                    event: if event.is_empty() {
                        "message".into()
                    } else {
                        event
                    },
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return; // a comment, used as keep-alive
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {} // `id`, `retry` and unknown fields mean nothing to a one-shot request
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.push(chunk, &mut out).unwrap();
        }
        parser.finish(&mut out);
        out
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn named_events_and_default_type() {
        let out = parse_chunks(&[b"event: ping\ndata: {}\n\ndata: x\n\n"]);
        assert_eq!(out, vec![ev("ping", "{}"), ev("message", "x")]);
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let stream =
            "event: content_block_delta\r\ndata: {\"text\":\"h\u{e9}llo \u{1F600}\"}\r\n\r\n\
                      : keep-alive comment\n\ndata: a\ndata: b\n\n"
                .as_bytes();
        let whole = parse_chunks(&[stream]);
        assert_eq!(
            whole,
            vec![
                ev("content_block_delta", "{\"text\":\"h\u{e9}llo \u{1F600}\"}"),
                ev("message", "a\nb"),
            ]
        );
        for i in 0..=stream.len() {
            for j in i..=stream.len() {
                let parts = [&stream[..i], &stream[i..j], &stream[j..]];
                assert_eq!(parse_chunks(&parts), whole, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn byte_by_byte_feeding_works() {
        let stream = b"event: a\rdata: 1\r\rdata: 2\r\n\r\n";
        let chunks: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(
            parse_chunks(&chunks),
            vec![ev("a", "1"), ev("message", "2")]
        );
    }

    #[test]
    fn multi_line_data_and_field_edge_cases() {
        let out = parse_chunks(&[b"data:no-space\ndata:  two spaces\ndata\nid: 7\nretry: 10\n\n"]);
        assert_eq!(out, vec![ev("message", "no-space\n two spaces\n")]);
    }

    #[test]
    fn comments_and_events_without_data_are_not_dispatched() {
        let out = parse_chunks(&[b": ping\n\nevent: lonely\n\n:another\n"]);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn event_type_does_not_leak_into_the_next_event() {
        let out = parse_chunks(&[b"event: error\ndata: 1\n\ndata: 2\n\n"]);
        assert_eq!(out, vec![ev("error", "1"), ev("message", "2")]);
    }

    #[test]
    fn unterminated_last_event_is_delivered_at_end_of_stream() {
        let out = parse_chunks(&[b"data: [DO", b"NE]"]);
        assert_eq!(out, vec![ev("message", "[DONE]")]);
    }

    #[test]
    fn leading_byte_order_mark_is_skipped() {
        let out = parse_chunks(&[b"\xEF\xBB", b"\xBFdata: x\n\n"]);
        assert_eq!(out, vec![ev("message", "x")]);
    }

    #[test]
    fn oversized_events_are_refused_naming_the_cap() {
        let mut parser = SseParser::with_cap(Cap::new(1024, "llm_event_bytes"));
        let mut out = Vec::new();
        assert!(parser.push(b"data: ", &mut out).is_ok());
        let err = parser.push(&[b'a'; 1025], &mut out).unwrap_err();
        assert_eq!(
            err,
            "an event of the model's stream is larger than 1.0 KB (caps.llm_event_bytes)"
        );
        // The default is the configured cap.
        assert_eq!(SseParser::new().cap.bytes, caps().llm_event_bytes);
    }
}
