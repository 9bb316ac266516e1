//! `[egress]`: host rules and fixed addresses for warden's own fetches (checked by
//! `crate::egress::rules` and `crate::egress::fixed`).

use serde::Deserialize;
use std::collections::BTreeMap;

/// `[egress]`: what warden's own process may fetch (`web_fetch`; see `crate::egress`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressConfig {
    /// Host rules: an exact name, `*.suffix` or `*`, each `"allow"`, `"ask"` or `"deny"`. A
    /// host without a rule is fetched without asking only for a URL that appeared verbatim in
    /// the user's messages or in a page fetched in the same run.
    pub hosts: BTreeMap<String, String>,
    /// Fixed addresses for exact names (`"wiki.lan" = "192.168.1.5"`, `"docs.test" =
    /// "127.0.0.1:8080"`): LAN services and tests. The only way `web_fetch` reaches a private
    /// or loopback address, and only under that name.
    pub resolve: BTreeMap<String, String>,
}
