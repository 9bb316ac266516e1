//! Egress from warden's own process (`web_fetch`, and every later tool that talks to the
//! network from here): which URLs may be requested, decided before any name is resolved or
//! any connection made, for the first URL and for every redirect.
//!
//! - A host rule (`[egress.hosts]`, exact names and `*.suffix`) decides first: `deny` never,
//!   `allow` always, `ask` always asks.
//! - For a host without a rule, a URL that appeared verbatim in the user's messages or in
//!   content fetched in this run ([`Provenance`]) is fetched without asking; a URL the model
//!   composed asks, showing the exact URL with its query decoded and why. Following links and
//!   reading what the user pasted stays frictionless; carrying data out in a URL the model
//!   built does not. A run that read untrusted content ([`crate::taint::Taint`]) says so in
//!   its approvals.
//! - Redirects: a redirect to the same host as the hop that was admitted stays admitted (that
//!   server already has everything the URL carries). A redirect to another host is checked
//!   like a first URL; its target counts as known only when the URL that redirected was itself
//!   known (the server chose the target, not the model) or the target appeared verbatim. A
//!   composed URL on an allowed host that redirects elsewhere therefore asks again.
//! - With nobody to approve, `ask` is a refusal whose reason names the config key to change.
//!   Every decision is written to the audit log (tool `egress`) before the request is made.
//! - In Telegram, an approval for a host without a rule also offers "Always for this host",
//!   which stores a per-chat rule ([`grants`]); `warden egress list|rm` shows and revokes them.

pub mod addresses;
pub mod confinement;
pub mod echo;
pub mod fixed;
pub mod grants;
pub mod http_rules;
mod jail_trust;
pub mod jailed;
pub mod links;
pub mod network;
pub mod network_secrets;
pub mod provenance;
pub mod proxy;
pub mod rules;

pub use grants::{Grant, Grants};
pub use provenance::{PageKind, Provenance, Source, Standing};
pub use rules::{HostRules, Matched, Rule};
