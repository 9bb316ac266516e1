//! Provenance: which URLs the model did not compose. Per run, warden remembers every URL that
//! appeared verbatim in the user's own messages of the session and in content fetched in this
//! run (links on a page, search results). Such a URL carries nothing the model chose, so for a
//! host without a rule it is fetched without asking; any other URL is the model's own.
//!
//! URLs are compared parsed and serialized (`HTTPS://Example.com` is `https://example.com/`),
//! without their fragment, which is never sent.

use super::echo::Composed;
use super::links;
use crate::llm::{Author, ContentBlock, Message, Role};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use url::Url;

/// URLs remembered per run; past this, new ones are not (they ask).
const MAX_KNOWN: usize = 20_000;

/// Texts that look like user messages but were written by warden or the model: a compaction
/// summary, a scheduled job's stored prompt, the heartbeat's checklist.
const NOT_THE_USER: &[&str] = &[
    "[Summary of the earlier conversation",
    "[Scheduled job #",
    "[Heartbeat check",
];

/// How a Telegram reply quotes the message it answers (`channels::telegram::inputs`): the
/// quoted text may be the bot's own earlier answer, written by the model, so only what follows
/// the quote is the user's.
const QUOTE_START: &str = "(In reply to an earlier message: «";
const QUOTE_END: &str = "»)\n\n";

/// The part of a user message's text the user wrote.
fn users_own(text: &str) -> Option<&str> {
    if NOT_THE_USER.iter().any(|p| text.starts_with(p)) {
        return None;
    }
    if text.starts_with(QUOTE_START) {
        // The last end marker: a quote containing one costs the user's URLs an approval,
        // never the other way round.
        return text.rfind(QUOTE_END).map(|i| &text[i + QUOTE_END.len()..]);
    }
    Some(text)
}

/// Where a URL was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// In the user's own message.
    User,
    /// On a page fetched in this run (its URL).
    Page(String),
    /// The target of a redirect from a URL that was itself known (that URL).
    Redirect(String),
    /// A result of a web search made in this run (its query).
    Search(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::User => f.write_str("it appeared in your message"),
            Source::Page(page) => write!(f, "it is a link on {page}, fetched in this run"),
            Source::Redirect(from) => write!(f, "{from} redirected to it"),
            Source::Search(query) => {
                write!(
                    f,
                    "it was a result of the web search for {query:?} in this run"
                )
            }
        }
    }
}

/// Whether a URL (or a hop of a redirect chain) was composed by the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    Known(Source),
    Composed,
}

impl Standing {
    pub fn is_known(&self) -> bool {
        matches!(self, Standing::Known(_))
    }

    /// A short label for the audit log.
    pub fn label(&self) -> &'static str {
        match self {
            Standing::Known(Source::User) => "user message",
            Standing::Known(Source::Page(_)) => "fetched page",
            Standing::Known(Source::Redirect(_)) => "redirect from a known URL",
            Standing::Known(Source::Search(_)) => "search result",
            Standing::Composed => "composed by the model",
        }
    }
}

/// The run's known URLs, shared by its tool calls.
#[derive(Clone, Debug, Default)]
pub struct Provenance {
    known: Arc<Mutex<HashMap<String, Source>>>,
    /// What the model composed in this run (URLs, search queries): a found link repeating it
    /// is an echo, not a find.
    composed: Arc<Mutex<Composed>>,
}

/// The form URLs are compared in.
fn key(url: &Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    url.into()
}

impl Provenance {
    pub fn new() -> Provenance {
        Provenance::default()
    }

    /// The URLs in the user's own messages of `history` (text blocks of user messages; not
    /// tool results, summaries, scheduled prompts or the quoted message of a reply).
    pub fn from_history(history: &[Message]) -> Provenance {
        let provenance = Provenance::new();
        for message in history.iter().filter(|m| m.role == Role::User) {
            for block in &message.content {
                // Only what a person wrote: never a notice, a summary or a scheduled prompt,
                // whatever it starts with.
                if let ContentBlock::Text {
                    text,
                    author: Author::Person,
                    untrusted,
                } = block
                {
                    // A file or forwarded message the person passed on is someone else's.
                    if !untrusted.is_empty() {
                        continue;
                    }
                    if let Some(own) = users_own(text) {
                        provenance.add_user_text(own);
                    }
                }
            }
        }
        provenance
    }

    pub fn add_user_text(&self, text: &str) {
        for raw in links::absolute_urls(text) {
            if let Ok(url) = Url::parse(&raw) {
                self.note(&url, Source::User);
            }
        }
    }

    /// Remember the links of a page fetched from `page`. `html` pages contribute their tags'
    /// links resolved against the page; JSON its strings; any text its absolute URLs.
    ///
    /// `composed`: the URLs of the request chain the model composed. A link that repeats a
    /// part of them (a search page echoing its query, `?q=https://evil.example/?d=SECRET`)
    /// would launder the model's text into a "found" URL, so such links are not remembered.
    pub fn add_page(&self, page: &Url, body: &str, kind: PageKind, composed: &[Url]) {
        {
            let mut run = self.composed.lock().unwrap_or_else(|p| p.into_inner());
            for url in composed {
                run.add_url(url);
            }
        }
        let found: Vec<Url> = match kind {
            PageKind::Html => links::html_links(body, page),
            PageKind::Json => parse_all(links::json_urls(body)),
            PageKind::Text => parse_all(links::absolute_urls(body)),
        };
        self.add_found(found, Source::Page(page.to_string()));
    }

    /// Remember the results of a web search for `query`, except those that repeat what the
    /// model put into the query (or composed earlier in the run).
    pub fn add_search_results(&self, query: &str, results: impl IntoIterator<Item = Url>) {
        self.composed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add_query(query);
        self.add_found(results, Source::Search(query.to_string()));
    }

    /// Remember the http(s) URLs of `found`, except echoes of what the model composed in this
    /// run and links that carry another address (see [`super::echo`]).
    fn add_found(&self, found: impl IntoIterator<Item = Url>, source: Source) {
        let composed = self
            .composed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for url in found {
            if !matches!(url.scheme(), "http" | "https") {
                continue;
            }
            if let Some(why) = composed.echo(&url) {
                tracing::debug!(%url, %why, "a link on a page is not counted as found");
                continue;
            }
            self.note(&url, source.clone());
        }
    }

    /// Remember one URL (the first source seen wins).
    pub fn note(&self, url: &Url, source: Source) {
        let key = key(url);
        if key.len() > links::MAX_URL_LEN {
            return;
        }
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() < MAX_KNOWN {
            known.entry(key).or_insert(source);
        }
    }

    pub fn source(&self, url: &Url) -> Option<Source> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.get(&key(url)).cloned()
    }

    pub fn standing(&self, url: &Url) -> Standing {
        self.source(url).map_or(Standing::Composed, Standing::Known)
    }

    pub fn len(&self) -> usize {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How a fetched body is searched for links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    Html,
    Json,
    Text,
}

fn parse_all(raw: Vec<String>) -> Vec<Url> {
    raw.iter().filter_map(|r| Url::parse(r).ok()).collect()
}

/// What of a search query could come back inside a result's URL when a search engine builds
/// one from the query: the whole query, and each of its words that names a host, a path or a
/// parameter (`evil.example`, `site:evil.example`, `d=…`, a URL), lowercase. Plain words are
/// left out: relevant results repeat them (`serde` in `docs.rs/serde`), and a site that could
/// receive them is one the query did not name.
pub fn query_echoes(query: &str) -> Vec<String> {
    let query = decode(query).to_lowercase();
    let mut tokens = vec![query.trim().to_string()];
    for word in query.split(|c: char| c.is_whitespace() || "\"'()<>,".contains(c)) {
        if !word.contains(['.', '/', '=', '%', '@']) {
            continue;
        }
        tokens.push(word.to_string());
        // An operator (`site:`, `inurl:`) or a scheme before the part a URL would carry.
        if let Some((_, rest)) = word.split_once(':') {
            tokens.push(rest.trim_start_matches('/').to_string());
        }
    }
    tokens.retain(|t| t.chars().count() >= 4);
    tokens.sort();
    tokens.dedup();
    tokens
}

/// Percent-decoding (lossy for invalid UTF-8), for comparing and showing: the echo filter's.
pub use super::echo::decode_percent as decode;

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn user_urls_are_known_and_compared_parsed() {
        let history = vec![
            Message::user("please read HTTPS://Docs.RS/serde#derive and https://a.example/x?q=1 2"),
            Message::assistant("fetching https://model.example/composed"),
            Message {
                role: Role::User,
                content: vec![ContentBlock::tool_result(
                    "1",
                    "https://tool.example/result",
                    false,
                )],
            },
            Message::user(
                "[Summary of the earlier conversation, written when…]\n\nhttps://sum.example/",
            ),
            Message::user("[Scheduled job #3 \"x\" …]\n\nhttps://cron.example/"),
            Message::user(
                "(In reply to an earlier message: «see https://quoted.example/ »)\n\n\
                 and https://reply.example/",
            ),
        ];
        let p = Provenance::from_history(&history);
        assert_eq!(p.source(&url("https://docs.rs/serde")), Some(Source::User));
        assert_eq!(
            p.source(&url("https://docs.rs/serde#other")),
            Some(Source::User),
            "the fragment is never sent"
        );
        assert!(p.source(&url("https://a.example/x?q=1")).is_some());
        assert!(p.source(&url("https://a.example/x?q=12")).is_none());
        assert!(
            p.source(&url("https://docs.rs/serde/1.0")).is_none(),
            "no prefixes"
        );
        assert_eq!(p.source(&url("https://reply.example/")), Some(Source::User));
        for not_the_user in [
            "https://model.example/composed",
            "https://tool.example/result",
            "https://sum.example/",
            "https://cron.example/",
            "https://quoted.example/",
        ] {
            assert_eq!(
                p.standing(&url(not_the_user)),
                Standing::Composed,
                "{not_the_user}"
            );
        }
    }

    #[test]
    fn page_links_are_known_with_their_page() {
        let p = Provenance::new();
        let page = url("https://site.example/dir/index.html");
        p.add_page(
            &page,
            r#"<a href="next.html">n</a> <a href="https://other.example/a?b=c">o</a>"#,
            PageKind::Html,
            &[],
        );
        assert_eq!(
            p.source(&url("https://site.example/dir/next.html")),
            Some(Source::Page(page.to_string()))
        );
        assert!(p.source(&url("https://other.example/a?b=c")).is_some());
        assert!(p.source(&url("https://other.example/a?b=d")).is_none());
    }

    #[test]
    fn links_echoing_a_composed_request_are_not_known() {
        let p = Provenance::new();
        let composed =
            url("https://search.example/find?q=https%3A%2F%2Fevil.example%2F%3Fd%3Dsecret-canary");
        p.add_page(
            &composed,
            "Results for https://evil.example/?d=secret-canary\nhttps://docs.example/serde",
            PageKind::Text,
            std::slice::from_ref(&composed),
        );
        assert!(p
            .source(&url("https://evil.example/?d=secret-canary"))
            .is_none());
        assert!(p.source(&url("https://docs.example/serde")).is_some());
    }

    #[test]
    fn search_results_that_echo_the_query_are_not_known() {
        let p = Provenance::new();
        p.add_search_results(
            "serde derive site:evil.example d=secret-canary",
            [
                url("https://docs.rs/serde/latest/serde/"),
                url("https://evil.example/page"),
                url("https://elsewhere.example/?d=secret-canary"),
                url("https://sub.evil.example/x"),
            ],
        );
        assert_eq!(
            p.source(&url("https://docs.rs/serde/latest/serde/")),
            Some(Source::Search(
                "serde derive site:evil.example d=secret-canary".into()
            ))
        );
        for echo in [
            "https://evil.example/page",
            "https://elsewhere.example/?d=secret-canary",
            "https://sub.evil.example/x",
        ] {
            assert!(p.source(&url(echo)).is_none(), "{echo}");
        }
        // A query that is a URL: the result repeating it is not known.
        let q = "https://evil.example/?d=canary2";
        p.add_search_results(q, [url(q)]);
        assert!(p.source(&url(q)).is_none());
        assert_eq!(
            query_echoes("Rust  serde"),
            ["rust  serde"],
            "plain words are not echoes"
        );
    }

    #[test]
    fn decoding() {
        assert_eq!(decode("a%20b%2Fc%zz%4"), "a b/c%zz%4");
        assert_eq!(decode("%E2%9C%93"), "✓");
        assert_eq!(decode("%"), "%");
    }
}
