//! Whether a link found on a page (or in search results) is an echo of what the model wrote.
//! A link counts as "found" — fetched without asking — only if it carries nothing the model
//! composed: otherwise a page that reflects its request (a search page showing its query, a
//! click tracker wrapping the query in base64) would launder the model's own URL, with a secret
//! in it, into one the page "offered".
//!
//! A found link is an echo when, after decoding (percent, base64, hex) every query value, path
//! segment and the fragment:
//! - one of them holds a URL (a redirector or tracker wrapping another address), or
//! - one of them holds a word of what the model composed in this run (its URLs' query keys,
//!   values and path segments, its search queries; words of 4 characters or more), or
//! - the link itself appears inside a URL the model composed (`q=<the link> zz`).

use base64::Engine;
use url::Url;

/// Words shorter than this are not compared (they occur everywhere).
const MIN_WORD: usize = 4;
/// Decoded parts longer than this are not decoded again (nested encodings, bounded).
const MAX_PART: usize = 4096;

/// What the model composed in a run, as comparable words and texts.
#[derive(Clone, Debug, Default)]
pub struct Composed {
    /// Lowercase words (query keys and values and their pieces, path segments, query words).
    words: Vec<String>,
    /// The composed URLs, decoded and lowercase, whole.
    urls: Vec<String>,
}

impl Composed {
    /// Remember a URL the model composed.
    pub fn add_url(&mut self, url: &Url) {
        self.urls.push(decode_percent(url.as_str()).to_lowercase());
        for (k, v) in url.query_pairs() {
            self.add_text(&k);
            self.add_text(&v);
        }
        for segment in url.path_segments().into_iter().flatten() {
            self.add_text(&decode_percent(segment));
        }
        if let Some(fragment) = url.fragment() {
            self.add_text(&decode_percent(fragment));
        }
        self.tidy();
    }

    /// Remember a search query the model wrote.
    pub fn add_query(&mut self, query: &str) {
        self.add_text(query);
        self.tidy();
    }

    fn add_text(&mut self, text: &str) {
        let text = text.trim().to_lowercase();
        // The whole value, and its pieces that look like data (`https://evil/?d=SECRET zz` →
        // `https://evil/?d=secret`). Plain words are left out: relevant pages repeat them
        // (`docs` in `docs.rs`), and a site that could receive them is one no URL named.
        for piece in text.split(|c: char| c.is_whitespace() || "\"'<>,;|".contains(c)) {
            let data_like = piece.contains(['.', '/', '=', '%', '@', ':'])
                || piece.chars().any(|c| c.is_ascii_digit());
            if !data_like {
                continue;
            }
            self.words.push(piece.to_string());
            // An operator (`site:`, `inurl:`) or a scheme before what a URL would carry.
            if let Some((_, rest)) = piece.split_once(':') {
                self.words.push(rest.trim_start_matches('/').to_string());
            }
            // A parameter the query names (`d=SECRET`): its value.
            if let Some((_, value)) = piece.rsplit_once('=') {
                self.words.push(value.to_string());
            }
            // A URL inside: also its significant parts.
            if let Ok(url) = Url::parse(piece) {
                for (k, v) in url.query_pairs() {
                    self.words.push(k.to_lowercase());
                    self.words.push(v.to_lowercase());
                }
            }
        }
        self.words.push(text);
    }

    fn tidy(&mut self) {
        self.words.retain(|w| w.chars().count() >= MIN_WORD);
        self.words.sort();
        self.words.dedup();
        self.urls.sort();
        self.urls.dedup();
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.urls.is_empty()
    }

    /// Why `link` is an echo of this run's composed text, or `None` when it is not.
    pub fn echo(&self, link: &Url) -> Option<String> {
        let parts = decoded_parts(link);
        let whole = decode_percent(link.as_str()).to_lowercase();
        if let Some(inner) = parts.iter().filter(|p| **p != whole).find(|p| holds_url(p)) {
            return Some(format!("it carries another address ({inner})"));
        }
        if let Some(word) = self
            .words
            .iter()
            .find(|w| parts.iter().any(|p| p.contains(w.as_str())))
        {
            return Some(format!("it repeats {word:?}, which the model wrote"));
        }
        let significant = whole
            .split_once("://")
            .map(|(_, rest)| rest.trim_end_matches('/'))
            .unwrap_or(&whole);
        if significant.chars().count() >= MIN_WORD
            && self.urls.iter().any(|u| u.contains(significant))
        {
            return Some("it appears inside a URL the model composed".into());
        }
        None
    }
}

/// The link's query keys and values, path segments and fragment, each decoded every way a
/// tracker might have encoded it (lowercase).
fn decoded_parts(link: &Url) -> Vec<String> {
    let mut raw: Vec<String> = Vec::new();
    for (k, v) in link.query_pairs() {
        raw.push(k.into_owned());
        raw.push(v.into_owned());
    }
    raw.extend(
        link.path_segments()
            .into_iter()
            .flatten()
            .map(decode_percent),
    );
    if let Some(fragment) = link.fragment() {
        raw.push(decode_percent(fragment));
    }
    // The host's labels too: a model can put data in a subdomain.
    if let Some(host) = link.host_str() {
        raw.push(host.to_string());
        raw.extend(host.split('.').map(str::to_string));
    }
    let mut out = Vec::new();
    for part in raw {
        let mut todo = vec![part];
        // Nested encodings (base64 of a percent-encoded URL), a few levels deep.
        for _ in 0..3 {
            let mut next = Vec::new();
            for text in todo.drain(..) {
                if text.len() <= MAX_PART {
                    next.extend(decodings(&text));
                }
                out.push(text.to_lowercase());
            }
            todo = next;
        }
        out.extend(todo.into_iter().map(|t| t.to_lowercase()));
    }
    // The whole link too, for words the model wrote anywhere in it (not decoded further).
    out.push(decode_percent(link.as_str()).to_lowercase());
    out.sort();
    out.dedup();
    out
}

/// Other readings of `text`: percent-decoded, base64 (standard and URL-safe, padded or not),
/// hex — each only when it yields printable text.
fn decodings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let percent = decode_percent(text);
    if percent != text {
        out.push(percent);
    }
    let trimmed = text.trim_end_matches('=');
    if trimmed.len() >= 8 {
        use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
        for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
            if let Some(s) = engine.decode(trimmed).ok().and_then(printable) {
                out.push(s);
            }
        }
    }
    if text.len() >= 8 && text.len() % 2 == 0 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        if let Some(s) = hex::decode(text).ok().and_then(printable) {
            out.push(s);
        }
    }
    out
}

/// The bytes as text when nearly all of it is printable.
fn printable(bytes: Vec<u8>) -> Option<String> {
    let text = String::from_utf8(bytes).ok()?;
    let total = text.chars().count().max(1);
    let shown = text
        .chars()
        .filter(|c| !c.is_control() || c.is_whitespace())
        .count();
    (shown * 10 >= total * 9).then_some(text)
}

/// Whether a decoded part holds an address of its own.
fn holds_url(part: &str) -> bool {
    ["http://", "https://", "ftp://", "//"]
        .iter()
        .any(|s| part.contains(s))
        || part.starts_with("www.")
}

/// Percent-decoding (lossy for invalid UTF-8).
pub fn decode_percent(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn composed(urls: &[&str]) -> Composed {
        let mut c = Composed::default();
        for u in urls {
            c.add_url(&url(u));
        }
        c
    }

    #[test]
    fn a_query_padded_with_words_does_not_launder_the_url_in_it() {
        let c = composed(&["https://searx.example/search?q=https://evil.example/?d=SECRET99%20zz"]);
        let echo = c.echo(&url("https://evil.example/?d=SECRET99")).unwrap();
        assert!(
            echo.contains("secret99") || echo.contains("inside"),
            "{echo}"
        );
        assert!(c.echo(&url("https://docs.rs/serde")).is_none());
    }

    #[test]
    fn encoded_trackers_wrapping_the_models_text_are_echoes() {
        let c = composed(&["https://searx.example/search?q=canary-7731"]);
        let b64 = URL_SAFE_NO_PAD.encode("https://evil.example/?d=canary-7731");
        assert!(c
            .echo(&url(&format!("https://searx.example/r?u={b64}")))
            .is_some());
        let std = STANDARD.encode("canary-7731 please");
        assert!(c
            .echo(&url(&format!(
                "https://t.example/c/{}",
                std.replace('/', "_")
            )))
            .is_some());
        let hexed = hex::encode("canary-7731");
        assert!(c
            .echo(&url(&format!("https://t.example/x?h={hexed}")))
            .is_some());
        // A redirector wrapping any address is not a found link either.
        assert!(Composed::default()
            .echo(&url(
                "https://t.example/go?to=https%3A%2F%2Fother.example%2F"
            ))
            .is_some());
        // An ordinary link is.
        assert!(c
            .echo(&url("https://blog.example/2026/11/serde-derive"))
            .is_none());
    }

    #[test]
    fn data_in_a_subdomain_is_an_echo() {
        let mut c = Composed::default();
        c.add_query("exfil-token-4411");
        assert!(c
            .echo(&url("https://exfil-token-4411.evil.example/"))
            .is_some());
    }
}
