//! `web_search`: a query to a search API — SearXNG (self-hostable, no key) or Brave Search
//! (keyed) — answered with titles, URLs and snippets. The query is text the model composed,
//! so the request is a composed URL to the egress gate: it goes out by the same
//! [`WebClient`] as `web_fetch`, passing the host rules and approvals before any lookup or
//! connection, with no redirects followed (the key goes to the configured host only). The
//! results are untrusted: they taint the run, and their URLs become known, so following one
//! with `web_fetch` needs no approval.

mod providers;

pub use providers::{Found, Provider, BRAVE_API};

use super::web_fetch::{untrusted, Get, WebClient};
use super::{Tool, ToolContext, ToolOutput};
use crate::audit::AuditDecision;
use crate::config::{SearchConfig, SearchProvider};
use crate::egress::Standing;
use crate::llm::ToolSpec;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
use url::Url;

/// Longest query, in characters (Brave's limit).
const MAX_QUERY_CHARS: usize = 400;

/// The checked `[search]` section.
#[derive(Clone)]
pub struct Settings {
    pub provider: Provider,
    pub max_results: usize,
}

impl Settings {
    /// The settings, or `None` when no provider is configured. Brave without a key is an
    /// error naming where the key goes.
    pub fn from_config(config: &SearchConfig) -> Result<Option<Settings>, String> {
        config.check()?;
        let base = config.base_url()?;
        let provider = match (config.provider, base) {
            (None, _) => return Ok(None),
            (Some(SearchProvider::Searxng), base) => Provider::Searxng {
                base: base.ok_or("search.provider = \"searxng\" needs search.base_url")?,
            },
            (Some(SearchProvider::Brave), base) => {
                if config.api_key.is_empty() {
                    return Err("search.provider = \"brave\" needs an API key: set \
                                search.api_key in the config or BRAVE_API_KEY in the \
                                environment"
                        .into());
                }
                let base = match base {
                    Some(base) => base,
                    None => Url::parse(BRAVE_API)
                        .map_err(|e| format!("Brave's address {BRAVE_API:?}: {e}"))?,
                };
                Provider::Brave {
                    base,
                    key: config.api_key.clone(),
                }
            }
        };
        Ok(Some(Settings {
            provider,
            max_results: config.max_results,
        }))
    }
}

pub struct WebSearch {
    client: Arc<WebClient>,
    settings: Settings,
}

impl WebSearch {
    /// Searches through `client`, the one `web_fetch` uses.
    pub fn new(client: Arc<WebClient>, settings: Settings) -> WebSearch {
        WebSearch { client, settings }
    }

    /// The results as the model sees them; they taint the run and their URLs become known.
    fn present(&self, query: &str, endpoint: &Url, found: &[Found], ctx: &ToolContext) -> String {
        let header = format!(
            "Web search for {query:?} ({} at {}): {} result{}",
            self.settings.provider.name(),
            endpoint.host_str().unwrap_or(""),
            found.len(),
            if found.len() == 1 { "" } else { "s" }
        );
        if found.is_empty() {
            return header;
        }
        ctx.taint.add(format!("web_search {query:?}"));
        ctx.provenance
            .add_search_results(query, found.iter().map(|f| f.url.clone()));
        let list: Vec<String> = found
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut entry = format!("{}. {}\n   {}", i + 1, f.title, f.url);
                if !f.snippet.is_empty() {
                    entry.push_str(&format!("\n   {}", f.snippet));
                }
                entry
            })
            .collect();
        untrusted(&header, &list.join("\n"))
    }
}

#[async_trait]
impl Tool for WebSearch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "web_search".into(),
            description: format!(
                "Search the web ({}) and get titles, URLs and snippets of the top {} \
                 results. The query leaves warden, so it needs the user's approval unless the \
                 search host is allowed in the config: never put private data in it. Follow a \
                 result with web_fetch (result URLs are fetched without asking).",
                self.settings.provider.name(),
                self.settings.max_results
            ),
            input_schema: json!({
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"]
            }),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let Some(query) = input.get("query").and_then(Value::as_str) else {
            return ToolOutput::error("missing string argument `query`");
        };
        let query = query.trim();
        if query.is_empty() {
            return ToolOutput::error("the query is empty");
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return ToolOutput::error(format!(
                "the query is longer than {MAX_QUERY_CHARS} characters"
            ));
        }
        let provider = &self.settings.provider;
        let headers = match provider.headers() {
            Ok(h) => h,
            Err(why) => return ToolOutput::error(why),
        };
        let url = provider.url(query, self.settings.max_results);
        let get = Get {
            tool: "web_search",
            url: url.clone(),
            // The model wrote the query: the gate treats the request like any URL it composed.
            standing: Standing::Composed,
            headers,
            max_redirects: 0,
        };
        (ctx.progress)(format!("Searching the web for {query:?}…"));
        let page = match self.client.get(get, ctx).await {
            Ok(page) => page,
            Err(failure) => return failure.into_output(),
        };
        if let Some(cap) = page.truncated {
            let what = format!("the answer of {}", provider.name());
            return ToolOutput::error(format!("{}; no results shown", cap.exceeded(what)));
        }
        let found = match provider.results(page.status, &page.body, self.settings.max_results) {
            Ok(found) => found,
            Err(why) => return ToolOutput::error(why),
        };
        let mut output = ToolOutput::ok(self.present(query, &url, &found, ctx));
        output.reason = format!(
            "{} results from {}",
            found.len(),
            url.host_str().unwrap_or("")
        );
        if page.approved {
            output.decision = AuditDecision::Approved;
            output.reason.push_str(" (approved)");
        }
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn config(provider: Option<SearchProvider>, base_url: Option<&str>) -> SearchConfig {
        SearchConfig {
            provider,
            base_url: base_url.map(String::from),
            ..SearchConfig::default()
        }
    }

    #[test]
    fn settings() {
        assert!(Settings::from_config(&config(None, None))
            .unwrap()
            .is_none());
        let searx = Settings::from_config(&config(
            Some(SearchProvider::Searxng),
            Some("http://127.0.0.1:8888"),
        ))
        .unwrap()
        .unwrap();
        assert!(matches!(searx.provider, Provider::Searxng { .. }));
        for bad in [
            "ftp://x.example/",
            "http://u:p@x.example/",
            "http://x.example/?q=1",
            "nonsense",
        ] {
            let err = config(Some(SearchProvider::Searxng), Some(bad))
                .check()
                .err()
                .unwrap_or_else(|| panic!("{bad} passed"));
            assert!(err.contains("search.base_url"), "{err}");
        }
        // Brave: the key is checked only where the environment has been read.
        let keyless = config(Some(SearchProvider::Brave), None);
        assert!(keyless.check().is_ok());
        let err = Settings::from_config(&keyless).err().unwrap();
        assert!(
            err.contains("search.api_key") && err.contains("BRAVE_API_KEY"),
            "{err}"
        );
        let keyed = SearchConfig {
            api_key: Secret::new("k".repeat(20)),
            ..keyless
        };
        let brave = Settings::from_config(&keyed).unwrap().unwrap();
        match brave.provider {
            Provider::Brave { base, .. } => {
                assert_eq!(base.as_str(), "https://api.search.brave.com/")
            }
            _ => panic!("not brave"),
        }
    }
}
