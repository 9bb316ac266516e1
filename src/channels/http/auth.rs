//! The API's Bearer token: compared in constant time (digests of equal length, so neither the
//! content nor the length of the token leaks through timing), and failed attempts counted per
//! client address — past `max_failed_auth_per_minute` an address is refused before any
//! comparison until its window passes. Every refusal is audited (the rate-limited ones once
//! per window, so a flood cannot fill the disk).

use crate::audit::{AuditDecision, AuditEntry};
use crate::db::Database;
use crate::locks::lock;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at most; beyond, the oldest windows are dropped first.
const MAX_TRACKED: usize = 10_000;

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    Missing,
    Wrong,
    /// Too many failures from this address lately.
    TooMany,
}

impl Refused {
    pub fn reason(self) -> &'static str {
        match self {
            Refused::Missing => "no token: send the header `Authorization: Bearer TOKEN`",
            Refused::Wrong => "wrong token",
            Refused::TooMany => "too many failed sign-ins from this address: wait a minute",
        }
    }
}

pub struct Auth {
    digest: [u8; 32],
    max_failures: usize,
    failures: Mutex<HashMap<IpAddr, Failures>>,
    db: Arc<Database>,
}

#[derive(Default)]
struct Failures {
    at: VecDeque<Instant>,
    /// Whether this window's rate limiting was audited already.
    limited_audited: bool,
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl Auth {
    pub fn new(token: &str, max_failures_per_minute: u32, db: Arc<Database>) -> Auth {
        Auth {
            digest: digest(token.as_bytes()),
            max_failures: max_failures_per_minute.max(1) as usize,
            failures: Mutex::new(HashMap::new()),
            db,
        }
    }

    /// Whether `token` is the API's token (constant time).
    pub fn matches(&self, token: &str) -> bool {
        digest(token.as_bytes()).ct_eq(&self.digest).into()
    }

    /// Check a request's `Authorization` header value from `peer`; `what` (method and path)
    /// goes to the audit log when it is refused.
    pub fn check(&self, header: Option<&str>, peer: IpAddr, what: &str) -> Result<(), Refused> {
        self.not_limited(peer, what)?;
        let token = header.and_then(|h| h.strip_prefix("Bearer "));
        let refused = match token {
            None => Refused::Missing,
            Some(token) if self.matches(token.trim()) => return Ok(()),
            Some(_) => Refused::Wrong,
        };
        self.failed(peer, what, refused.reason());
        Err(refused)
    }

    /// `Err(TooMany)` when `peer` failed too often lately (audited once per window).
    pub fn not_limited(&self, peer: IpAddr, what: &str) -> Result<(), Refused> {
        if self.is_limited(peer, Instant::now()) {
            self.audit_limited(peer, what);
            return Err(Refused::TooMany);
        }
        Ok(())
    }

    /// `peer` failed to prove who it is (`reason`): counted and audited.
    pub fn failed(&self, peer: IpAddr, what: &str, reason: &str) {
        self.count_failure(peer, Instant::now());
        self.audit(peer, what, reason);
    }

    fn is_limited(&self, peer: IpAddr, now: Instant) -> bool {
        let mut all = lock(&self.failures);
        let Some(f) = all.get_mut(&peer) else {
            return false;
        };
        while f
            .at
            .front()
            .is_some_and(|t| now.duration_since(*t) > WINDOW)
        {
            f.at.pop_front();
        }
        if f.at.is_empty() {
            all.remove(&peer);
            return false;
        }
        f.at.len() >= self.max_failures
    }

    fn count_failure(&self, peer: IpAddr, now: Instant) {
        let mut all = lock(&self.failures);
        if all.len() >= MAX_TRACKED && !all.contains_key(&peer) {
            // Forget the address whose last failure is oldest.
            if let Some(oldest) = all
                .iter()
                .min_by_key(|(_, f)| f.at.back().copied())
                .map(|(ip, _)| *ip)
            {
                all.remove(&oldest);
            }
        }
        let f = all.entry(peer).or_default();
        if f.at.is_empty() {
            f.limited_audited = false;
        }
        f.at.push_back(now);
    }

    fn audit_limited(&self, peer: IpAddr, what: &str) {
        let first = {
            let mut all = lock(&self.failures);
            match all.get_mut(&peer) {
                Some(f) if !f.limited_audited => {
                    f.limited_audited = true;
                    true
                }
                _ => false,
            }
        };
        if first {
            self.audit(peer, what, Refused::TooMany.reason());
        }
    }

    fn audit(&self, peer: IpAddr, what: &str, reason: &str) {
        tracing::warn!(%peer, "HTTP API: refused {what}: {reason}");
        let entry = AuditEntry {
            session: "http".into(),
            tool: "http_auth".into(),
            input: format!("{what} from {peer}"),
            decision: AuditDecision::Deny,
            reason: reason.into(),
            exit_code: None,
            duration_ms: 0,
            network: None,
        };
        if let Err(e) = crate::audit::record(&self.db, &entry) {
            tracing::warn!("auditing a refused HTTP request: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(max: u32) -> (Auth, Arc<Database>) {
        let db = crate::schema::open_in_memory().unwrap();
        (Auth::new("right-token-0123456789", max, db.clone()), db)
    }

    fn audited(db: &Database) -> Vec<String> {
        crate::audit::recent(db, 100)
            .unwrap()
            .into_iter()
            .filter(|r| r.tool == "http_auth")
            .map(|r| r.reason)
            .collect()
    }

    #[test]
    fn only_the_exact_token_passes() {
        let (auth, db) = auth(10);
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(
            auth.check(Some("Bearer right-token-0123456789"), peer, "GET /"),
            Ok(())
        );
        for (header, why) in [
            (None, Refused::Missing),
            (Some("right-token-0123456789"), Refused::Missing),
            (Some("Basic right-token-0123456789"), Refused::Missing),
            (Some("Bearer right-token-012345678"), Refused::Wrong),
            (Some("Bearer right-token-01234567890"), Refused::Wrong),
            (Some("Bearer "), Refused::Wrong),
        ] {
            assert_eq!(
                auth.check(header, peer, "GET /v1/runs"),
                Err(why),
                "{header:?}"
            );
        }
        assert_eq!(audited(&db).len(), 6);
    }

    #[test]
    fn failures_are_limited_per_address_and_audited_once_when_limited() {
        let (auth, db) = auth(3);
        let bad: IpAddr = "10.0.0.9".parse().unwrap();
        let good: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(
                auth.check(Some("Bearer x"), bad, "GET /"),
                Err(Refused::Wrong)
            );
        }
        // Even the right token is refused now: the limit comes before any comparison.
        for _ in 0..5 {
            assert_eq!(
                auth.check(Some("Bearer right-token-0123456789"), bad, "GET /"),
                Err(Refused::TooMany)
            );
        }
        assert_eq!(
            auth.check(Some("Bearer right-token-0123456789"), good, "GET /"),
            Ok(()),
            "another address is not affected"
        );
        let reasons = audited(&db);
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert_eq!(reasons.iter().filter(|r| r.contains("too many")).count(), 1);
    }
}
