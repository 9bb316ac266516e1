//! `[search]`: the `web_search` tool's provider, its address and key, and how many results
//! one search shows.

use crate::secret::Secret;
use serde::Deserialize;

/// `[search]`: the `web_search` tool's provider (see `crate::tools::web_search`). Without a
/// provider the tool is not offered.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    pub provider: Option<SearchProvider>,
    /// SearXNG: the instance (required). Brave: the API's address (default
    /// `https://api.search.brave.com`).
    pub base_url: Option<String>,
    /// Brave's subscription token; `BRAVE_API_KEY` in the environment also sets it.
    pub api_key: Secret,
    /// Results shown to the model per search (1 to 20).
    pub max_results: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    Searxng,
    Brave,
}

/// Most results one search may show.
pub const MAX_SEARCH_RESULTS: usize = 20;

impl SearchConfig {
    /// The section's values, as far as they do not depend on the environment (Brave's key
    /// may come from there: it is checked where the tool is built).
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_SEARCH_RESULTS).contains(&self.max_results) {
            return Err(format!(
                "search.max_results = {} must be between 1 and {MAX_SEARCH_RESULTS}",
                self.max_results
            ));
        }
        if self.provider == Some(SearchProvider::Searxng) && self.base_url.is_none() {
            return Err(
                "search.provider = \"searxng\" needs search.base_url, the address of \
                        the instance (e.g. \"https://searx.example.org\")"
                    .into(),
            );
        }
        self.base_url().map(|_| ())
    }

    /// `base_url`, which must be an http(s) address without credentials, query or fragment.
    pub fn base_url(&self) -> Result<Option<url::Url>, String> {
        let Some(text) = self.base_url.as_deref() else {
            return Ok(None);
        };
        let url = url::Url::parse(text).map_err(|e| format!("search.base_url = {text:?}: {e}"))?;
        let bare = url.username().is_empty()
            && url.password().is_none()
            && url.query().is_none()
            && url.fragment().is_none();
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() || !bare {
            return Err(format!(
                "search.base_url = {text:?} must be an http(s) address without credentials, \
                 query or fragment"
            ));
        }
        Ok(Some(url))
    }
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            provider: None,
            base_url: None,
            api_key: Secret::default(),
            max_results: 5,
        }
    }
}
