//! The search APIs' wire formats: where a query goes, with which headers, and how an answer
//! becomes results. SearXNG (`GET /search?q=…&format=json`, self-hostable, no key) and Brave
//! Search (`GET /res/v1/web/search?q=…&count=N`, key in `X-Subscription-Token`).

use crate::config::Secret;
use crate::egress::links::{decode_entities, MAX_URL_LEN};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT};
use serde_json::Value;
use url::Url;

/// Longest title and snippet shown, in characters.
const MAX_TITLE_CHARS: usize = 200;
const MAX_SNIPPET_CHARS: usize = 500;
/// Longest piece of an error body quoted back.
const MAX_DETAIL_CHARS: usize = 300;

/// The default address of Brave's API.
pub const BRAVE_API: &str = "https://api.search.brave.com";

/// A configured search API.
#[derive(Clone)]
pub enum Provider {
    Searxng { base: Url },
    Brave { base: Url, key: Secret },
}

/// One result, cleaned and capped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub title: String,
    pub url: Url,
    pub snippet: String,
}

impl Provider {
    pub fn name(&self) -> &'static str {
        match self {
            Provider::Searxng { .. } => "SearXNG",
            Provider::Brave { .. } => "Brave Search",
        }
    }

    /// The URL a search for `query` requests (`count` results asked for where the API
    /// takes a count).
    pub fn url(&self, query: &str, count: usize) -> Url {
        let (base, path, extra): (&Url, &[&str], (&str, String)) = match self {
            Provider::Searxng { base } => (base, &["search"], ("format", "json".into())),
            Provider::Brave { base, .. } => (
                base,
                &["res", "v1", "web", "search"],
                ("count", count.to_string()),
            ),
        };
        let mut url = base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().extend(path);
        }
        url.query_pairs_mut()
            .clear()
            .append_pair("q", query)
            .append_pair(extra.0, &extra.1);
        url
    }

    /// The headers of the request: Brave's key, marked sensitive so no debug output shows it.
    pub fn headers(&self) -> Result<HeaderMap, String> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Provider::Brave { key, .. } = self {
            let mut value = HeaderValue::from_str(key.expose()).map_err(|_| {
                "search.api_key (or BRAVE_API_KEY) holds characters a header cannot carry"
                    .to_string()
            })?;
            value.set_sensitive(true);
            headers.insert("x-subscription-token", value);
        }
        Ok(headers)
    }

    /// The results of an answer with `status` and `body`, at most `max`; an error says what
    /// the API refused and what to change.
    pub fn results(&self, status: u16, body: &[u8], max: usize) -> Result<Vec<Found>, String> {
        let json: Option<Value> = serde_json::from_slice(body).ok();
        if !(200..300).contains(&status) {
            return Err(self.refusal(status, json.as_ref(), body));
        }
        let Some(json) = json else {
            return Err(format!(
                "{} answered with something that is not JSON",
                self.name()
            ));
        };
        let (list, snippet_key) = match self {
            Provider::Searxng { .. } => (&json["results"], "content"),
            Provider::Brave { .. } => (&json["web"]["results"], "description"),
        };
        let found = list
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let url = Url::parse(item["url"].as_str()?).ok()?;
                let web = matches!(url.scheme(), "http" | "https");
                (web && url.as_str().len() <= MAX_URL_LEN).then(|| Found {
                    title: clean(item["title"].as_str().unwrap_or(""), MAX_TITLE_CHARS),
                    snippet: clean(item[snippet_key].as_str().unwrap_or(""), MAX_SNIPPET_CHARS),
                    url,
                })
            })
            .take(max)
            .collect();
        Ok(found)
    }

    fn refusal(&self, status: u16, json: Option<&Value>, body: &[u8]) -> String {
        let detail = json
            .and_then(|j| {
                j["error"]["detail"]
                    .as_str()
                    .or(j["error"]["message"].as_str())
                    .or(j["message"].as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
        let mut detail = clean(&detail, MAX_DETAIL_CHARS);
        let hint = match (self, status) {
            (Provider::Searxng { .. }, 403) => {
                " The instance does not serve JSON: add `json` to `search.formats` in its \
                 settings.yml."
            }
            (Provider::Brave { .. }, 401 | 403) => {
                " Check the key in search.api_key (or BRAVE_API_KEY)."
            }
            (_, 429) => " The API's rate limit was reached: try again later.",
            _ => "",
        };
        if let Provider::Brave { key, .. } = self {
            // An API that echoed the key back would otherwise show it to the model.
            if !key.is_empty() {
                detail = detail.replace(key.expose(), "<redacted>");
            }
        }
        format!(
            "{} answered HTTP {status}: {}.{hint}",
            self.name(),
            detail.trim_end_matches('.')
        )
    }
}

/// Text for the model: tags removed, entities decoded, whitespace collapsed, cut to `max`
/// characters.
fn clean(text: &str, max: usize) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => plain.push(c),
            _ => {}
        }
    }
    let plain = decode_entities(&plain);
    let words: Vec<&str> = plain.split_whitespace().collect();
    let joined = words.join(" ");
    if joined.chars().count() <= max {
        return joined;
    }
    let mut cut: String = joined.chars().take(max).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn searxng() -> Provider {
        Provider::Searxng {
            base: Url::parse("https://searx.example/instance/").unwrap(),
        }
    }

    fn brave() -> Provider {
        Provider::Brave {
            base: Url::parse(BRAVE_API).unwrap(),
            key: Secret::new("brave-key-123456"),
        }
    }

    #[test]
    fn request_urls_and_headers() {
        assert_eq!(
            searxng().url("rust & serde", 5).as_str(),
            "https://searx.example/instance/search?q=rust+%26+serde&format=json"
        );
        assert_eq!(
            brave().url("q?", 7).as_str(),
            "https://api.search.brave.com/res/v1/web/search?q=q%3F&count=7"
        );
        let headers = brave().headers().unwrap();
        assert_eq!(headers["x-subscription-token"], "brave-key-123456");
        assert!(headers["x-subscription-token"].is_sensitive());
        assert!(!format!("{headers:?}").contains("brave-key"));
        assert!(searxng()
            .headers()
            .unwrap()
            .get("x-subscription-token")
            .is_none());
    }

    #[test]
    fn answers_become_capped_clean_results() {
        let long = "word ".repeat(300);
        let body = json!({
            "query": "q",
            "results": [
                {"url": "https://a.example/", "title": "A &amp; <b>B</b>", "content": long},
                {"url": "javascript:alert(1)", "title": "bad", "content": ""},
                {"url": "not a url", "title": "bad", "content": ""},
                {"url": "https://b.example/", "title": "B"},
                {"url": "https://c.example/", "title": "C", "content": "c"}
            ]
        })
        .to_string();
        let found = searxng().results(200, body.as_bytes(), 2).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].title, "A & B");
        assert_eq!(found[0].snippet.chars().count(), MAX_SNIPPET_CHARS + 1);
        assert_eq!(found[1].url.as_str(), "https://b.example/");
        assert_eq!(found[1].snippet, "");

        let body = json!({"type": "search", "web": {"results": [
            {"url": "https://d.example/x", "title": "D", "description": "the <strong>d</strong>"}
        ]}})
        .to_string();
        let found = brave().results(200, body.as_bytes(), 5).unwrap();
        assert_eq!(found[0].snippet, "the d");
        // No `web` section (nothing found): no results.
        assert_eq!(
            brave().results(200, b"{\"type\":\"search\"}", 5),
            Ok(vec![])
        );
    }

    #[test]
    fn refusals_say_what_to_change_and_never_echo_the_key() {
        let err = searxng().results(403, b"Forbidden", 5).unwrap_err();
        assert!(err.contains("HTTP 403"), "{err}");
        assert!(err.contains("search.formats"), "{err}");
        let body = json!({"type": "ErrorResponse", "error": {
            "code": "SUBSCRIPTION_TOKEN_INVALID",
            "detail": "The token brave-key-123456 is invalid.", "status": 401}})
        .to_string();
        let err = brave().results(401, body.as_bytes(), 5).unwrap_err();
        assert!(err.contains("search.api_key"), "{err}");
        assert!(!err.contains("brave-key-123456"), "{err}");
        assert!(err.contains("<redacted>"), "{err}");
        let err = brave().results(200, b"<html>", 5).unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
    }
}
