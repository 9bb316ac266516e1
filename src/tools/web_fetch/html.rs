//! A web page's HTML as text for the model, at a cost bounded by the page's size.
//!
//! Nesting is what makes HTML expensive: html5ever's tree builder checks scopes by walking the
//! stack of open elements (60,000 nested `<div>`s took minutes), and html2text renders the
//! tree recursively (20,000 nested tables overflow a thread's stack and abort the process).
//! So, in this order:
//!
//! 1. [`flatten`]: one linear pass drops the tags of elements nested deeper than
//!    `caps.html_depth` (their text stays), so what follows costs time in proportion to the
//!    page;
//! 2. the conversion runs on a thread of its own with a large stack, never on a runtime
//!    worker; it reads the page through a reader that fails once the run is cancelled (`/stop`,
//!    Ctrl-C) or `caps.convert_secs` have passed, which ends html5ever's parse;
//! 3. the caller stops waiting at once on either, and says which.

use crate::sizes::caps;
use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The conversion thread's stack: a flattened tree is shallow, this is headroom.
const STACK_BYTES: usize = 16 * 1024 * 1024;

/// Why there is no text.
#[derive(Debug, PartialEq, Eq)]
pub enum Interrupted {
    Cancelled,
    /// Longer than `caps.convert_secs`.
    Deadline(u64),
    Failed(String),
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interrupted::Cancelled => write!(f, "cancelled"),
            Interrupted::Deadline(secs) => write!(
                f,
                "turning the page into text took longer than {secs} s (caps.convert_secs)"
            ),
            Interrupted::Failed(why) => write!(f, "the page could not be read as HTML: {why}"),
        }
    }
}

/// The text of `html`, wrapped at `width`, off the runtime, within the deadline, until
/// `cancel`.
pub async fn to_text(
    html: Vec<u8>,
    width: usize,
    cancel: &CancellationToken,
) -> Result<String, Interrupted> {
    let caps = caps();
    let stop = Arc::new(AtomicBool::new(false));
    let (done, result) = tokio::sync::oneshot::channel();
    let worker_stop = stop.clone();
    let spawned = std::thread::Builder::new()
        .name("warden-html".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let flat = flatten(&html, caps.html_depth);
            let _ = done.send(convert(&flat, width, &worker_stop));
        });
    if let Err(e) = spawned {
        return Err(Interrupted::Failed(format!(
            "no thread to convert it on: {e}"
        )));
    }
    let deadline = Duration::from_secs(caps.convert_secs);
    let outcome = tokio::select! {
        // A cancelled run gets no text, even one that is ready.
        biased;
        _ = cancel.cancelled() => Err(Interrupted::Cancelled),
        converted = result => converted.unwrap_or_else(|_| {
            Err(Interrupted::Failed("the conversion ended without a result".into()))
        }),
        _ = tokio::time::sleep(deadline) => Err(Interrupted::Deadline(caps.convert_secs)),
    };
    // Whatever the outcome, the thread stops at its next read.
    stop.store(true, Ordering::SeqCst);
    outcome
}

fn convert(html: &[u8], width: usize, stop: &AtomicBool) -> Result<String, Interrupted> {
    let config = html2text::config::plain();
    let reader = Stoppable { rest: html, stop };
    let dom = match config.parse_html(reader) {
        Ok(dom) => dom,
        Err(_) if stop.load(Ordering::SeqCst) => return Err(Interrupted::Cancelled),
        Err(e) => return Err(Interrupted::Failed(e.to_string())),
    };
    config
        .dom_to_render_tree(&dom)
        .and_then(|tree| config.render_to_string(tree, width))
        .map_err(|e| Interrupted::Failed(e.to_string()))
}

/// The page, read in small pieces, failing once `stop` is set.
struct Stoppable<'a> {
    rest: &'a [u8],
    stop: &'a AtomicBool,
}

impl Read for Stoppable<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.stop.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("stopped"));
        }
        // Small pieces: html5ever parses each before asking for the next.
        let n = buf.len().min(self.rest.len()).min(4096);
        buf[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Ok(n)
    }
}

/// Elements whose contents are text to the parser, never tags.
const RAW_TEXT: &[&str] = &[
    "script",
    "style",
    "textarea",
    "title",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "plaintext",
];

/// Elements that never have contents.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

/// Elements a second one of closes (`<li>a<li>b`): siblings, not nested.
const SELF_CLOSING_SIBLINGS: &[&str] = &[
    "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot", "rb",
    "rt", "rp",
];

/// `html` with the tags of elements nested deeper than `max_depth` removed (their text and
/// their children's text kept), and comments removed. One pass; the stack it keeps never
/// holds more than `max_depth` names, so each step is bounded too.
pub fn flatten(html: &[u8], max_depth: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(html.len());
    let mut open: Vec<Vec<u8>> = Vec::new();
    // Names of dropped start tags still to be matched by their end tags.
    let mut dropped: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut i = 0;
    while i < html.len() {
        let Some(lt) = html[i..].iter().position(|&b| b == b'<').map(|p| i + p) else {
            out.extend_from_slice(&html[i..]);
            break;
        };
        out.extend_from_slice(&html[i..lt]);
        let rest = &html[lt..];
        if rest.starts_with(b"<!--") {
            i = find(html, lt + 4, b"-->").map_or(html.len(), |p| p + 3);
            continue;
        }
        let closing = rest.get(1) == Some(&b'/');
        let name_start = lt + 1 + usize::from(closing);
        let starts_name = html.get(name_start).is_some_and(u8::is_ascii_alphabetic);
        if !starts_name {
            // `<!doctype …>`, `<?…>`, or a lone `<` in text: kept as it is.
            let end = if matches!(html.get(lt + 1), Some(b'!' | b'?')) {
                find(html, lt, b">").map_or(html.len(), |p| p + 1)
            } else {
                lt + 1
            };
            out.extend_from_slice(&html[lt..end]);
            i = end;
            continue;
        }
        let name_end = html[name_start..]
            .iter()
            .position(|b| b.is_ascii_whitespace() || matches!(b, b'/' | b'>'))
            .map_or(html.len(), |p| name_start + p);
        let name = html[name_start..name_end].to_ascii_lowercase();
        let tag_end = tag_end(html, name_end);
        let tag = &html[lt..tag_end];
        i = tag_end;
        if closing {
            match dropped.get_mut(&name) {
                Some(n) if *n > 0 => *n -= 1,
                _ => {
                    if let Some(at) = open.iter().rposition(|o| *o == name) {
                        open.truncate(at);
                    }
                    out.extend_from_slice(tag);
                }
            }
            continue;
        }
        let name_str = std::str::from_utf8(&name).unwrap_or("");
        if RAW_TEXT.contains(&name_str) {
            // Copied whole, up to its end tag: nothing inside is markup.
            let mut close = b"</".to_vec();
            close.extend_from_slice(&name);
            let end = find_ignoring_case(html, tag_end, &close).unwrap_or(html.len());
            out.extend_from_slice(&html[lt..end]);
            i = end;
            continue;
        }
        // `<div/>` opens a div in HTML (the slash counts only in SVG and MathML): only void
        // elements stay flat.
        if VOID.contains(&name_str) {
            out.extend_from_slice(tag);
            continue;
        }
        if SELF_CLOSING_SIBLINGS.contains(&name_str) && open.last() == Some(&name) {
            open.pop();
        }
        if open.len() >= max_depth {
            *dropped.entry(name).or_default() += 1;
            continue;
        }
        open.push(name);
        out.extend_from_slice(tag);
    }
    out
}

/// Just past the `>` ending the tag whose name ends at `from` (quoted `>` skipped).
fn tag_end(html: &[u8], from: usize) -> usize {
    let mut quote = None;
    for (j, &b) in html.iter().enumerate().skip(from) {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), _) if b == q => quote = None,
            (None, b'>') => return j + 1,
            _ => {}
        }
    }
    html.len()
}

fn find(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

fn find_ignoring_case(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
        .map(|p| from + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(html: &str, depth: usize) -> String {
        String::from_utf8(flatten(html.as_bytes(), depth)).unwrap()
    }

    #[test]
    fn deep_nesting_is_flattened_and_text_kept() {
        let html = format!("{}core{}", "<div>".repeat(10), "</div>".repeat(10));
        assert_eq!(
            flat(&html, 3),
            "<div><div><div>core</div></div></div>",
            "the seven innermost pairs go"
        );
        // Shallow pages pass unchanged (comments aside).
        let page = "<!doctype html><html><body><p>a<p>b<ul><li>x<li>y</ul><br>\
                    <img src=\"a>b\"><script>if (a<b) x('<div>')</script><!-- c --></body></html>";
        assert_eq!(flat(page, 8), page.replace("<!-- c -->", ""));
        // Siblings do not count as depth.
        let list = format!("<ul>{}</ul>", "<li>item".repeat(100));
        assert_eq!(flat(&list, 3), list);
        // A lone `<` in text stays text.
        assert_eq!(flat("1 < 2 <3", 4), "1 < 2 <3");
        // A slash does not close a div: these nest, and are flattened like any nesting.
        assert_eq!(flat(&"<div/>".repeat(10), 3), "<div/>".repeat(3));
    }

    #[test]
    fn unclosed_deep_tables_are_flattened_too() {
        let html = "<table><tr><td>".repeat(1000) + "x";
        let out = flat(&html, 64);
        assert!(out.len() < 64 * 8, "{}", out.len());
        assert!(out.ends_with('x'));
    }

    #[tokio::test]
    async fn a_deeply_nested_page_converts_quickly_and_a_cancel_stops_at_once() {
        let nested = format!(
            "{}deep text{}",
            "<div>".repeat(60_000),
            "</div>".repeat(60_000)
        );
        let started = std::time::Instant::now();
        let text = to_text(nested.into_bytes(), 100, &CancellationToken::new())
            .await
            .unwrap();
        assert!(text.contains("deep text"), "{text}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let tables = "<table><tr><td>".repeat(20_000) + "cell";
        let text = to_text(tables.into_bytes(), 100, &CancellationToken::new())
            .await
            .unwrap();
        assert!(text.contains("cell"));

        let cancel = CancellationToken::new();
        cancel.cancel();
        let err = to_text(b"<p>x</p>".to_vec(), 100, &cancel)
            .await
            .unwrap_err();
        assert_eq!(err, Interrupted::Cancelled);
    }
}
