//! `[skills]`: whether skills are offered, and the fixed addresses and secrets their egress
//! proxy uses (the addresses checked by `crate::egress::proxy::domain`).

use crate::secret::Secret;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[skills]`: skill folders the agent may run in the sandbox (see `crate::skills`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SkillsConfig {
    /// Offer skills to the agent: the `skill` tool and the list in the system prompt.
    pub enabled: bool,
    /// Include the skills built into warden.
    pub bundled: bool,
    /// Fixed addresses for domains skills declare (`"api.example.test" = "127.0.0.1:8080"`, or
    /// an address without a port): for tests and LAN services. The only way a skill's traffic
    /// reaches a private or loopback address, and only under that exact name.
    pub hosts: BTreeMap<String, String>,
    /// Secrets the egress proxy adds to route requests (`{secret:NAME}` in a manifest's
    /// headers); `WARDEN_SECRET_NAME` in warden's environment also provides one. Never given
    /// to a skill itself.
    pub secrets: BTreeMap<String, Secret>,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        SkillsConfig {
            enabled: true,
            bundled: true,
            hosts: BTreeMap::new(),
            secrets: BTreeMap::new(),
        }
    }
}
