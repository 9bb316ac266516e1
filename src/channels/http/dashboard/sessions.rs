//! The dashboard's sign-ins: signing in with the API token opens a session, and the browser
//! keeps only the session's random id, in an HttpOnly, SameSite=Strict cookie (Secure over
//! TLS) — never the token. Each session has its own CSRF token, which every state-changing
//! request must send back (`X-CSRF-Token`, or a form's `csrf` field); it is compared in
//! constant time. Sessions live in memory: a restart signs everyone out.

use crate::locks::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The cookie's name.
pub const COOKIE: &str = "warden_session";
/// The header a script sends the CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a session lasts.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions open at once; the oldest goes first beyond this.
const MAX_SESSIONS: usize = 64;

struct Session {
    csrf: String,
    expires: Instant,
}

#[derive(Default)]
pub struct Sessions {
    open: Mutex<HashMap<String, Session>>,
}

/// 32 random bytes, hex.
fn random_token() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

impl Sessions {
    /// A new session: its id (for the cookie) and its CSRF token.
    pub fn open(&self) -> (String, String) {
        let (id, csrf) = (random_token(), random_token());
        let now = Instant::now();
        let mut open = lock(&self.open);
        open.retain(|_, s| s.expires > now);
        if open.len() >= MAX_SESSIONS {
            let oldest = open
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                open.remove(&oldest);
            }
        }
        open.insert(
            id.clone(),
            Session {
                csrf: csrf.clone(),
                expires: now + LIFETIME,
            },
        );
        (id, csrf)
    }

    /// The CSRF token of session `id`, if it is open.
    pub fn csrf_of(&self, id: &str) -> Option<String> {
        let open = lock(&self.open);
        // The lookup is by the random id itself: guessing one is guessing 256 bits.
        open.get(id)
            .filter(|s| s.expires > Instant::now())
            .map(|s| s.csrf.clone())
    }

    /// Whether `given` is session `id`'s CSRF token (constant time).
    pub fn csrf_matches(&self, id: &str, given: &str) -> bool {
        match self.csrf_of(id) {
            Some(csrf) => csrf.as_bytes().ct_eq(given.as_bytes()).into(),
            None => false,
        }
    }

    pub fn close(&self, id: &str) {
        lock(&self.open).remove(id);
    }
}

/// The session id in a `Cookie` header, if any.
pub fn from_cookie(header: Option<&str>) -> Option<&str> {
    header?.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE && !value.is_empty()).then_some(value)
    })
}

/// The `Set-Cookie` value for session `id`.
pub fn set_cookie(id: &str, secure: bool) -> String {
    format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        LIFETIME.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that signs out.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_a_random_id_with_its_own_csrf_token() {
        let sessions = Sessions::default();
        let (id, csrf) = sessions.open();
        let (other, other_csrf) = sessions.open();
        assert_ne!(id, other);
        assert_eq!(id.len(), 64);
        assert!(sessions.csrf_matches(&id, &csrf));
        assert!(
            !sessions.csrf_matches(&id, &other_csrf),
            "bound to its session"
        );
        assert!(!sessions.csrf_matches(&id, ""));
        assert!(!sessions.csrf_matches("forged", &csrf));
        sessions.close(&id);
        assert!(sessions.csrf_of(&id).is_none());
        assert!(!sessions.csrf_matches(&id, &csrf), "signed out");
        assert!(sessions.csrf_of(&other).is_some());
    }

    #[test]
    fn the_cookie_is_httponly_strict_and_secure_over_tls() {
        let plain = set_cookie("abc", false);
        assert!(plain.starts_with("warden_session=abc; "));
        assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Strict"));
        assert!(!plain.contains("Secure"));
        assert!(set_cookie("abc", true).ends_with("; Secure"));
        assert!(clear_cookie(true).contains("Max-Age=0"));
        assert_eq!(
            from_cookie(Some("theme=dark; warden_session=abc; x=1")),
            Some("abc")
        );
        assert_eq!(from_cookie(Some("warden_session=")), None);
        assert_eq!(from_cookie(Some("xwarden_session=abc")), None);
        assert_eq!(from_cookie(None), None);
    }

    #[test]
    fn old_sessions_give_way_to_new_ones() {
        let sessions = Sessions::default();
        let (first, _) = sessions.open();
        for _ in 0..MAX_SESSIONS {
            sessions.open();
        }
        assert!(sessions.csrf_of(&first).is_none());
        assert_eq!(lock(&sessions.open).len(), MAX_SESSIONS);
    }
}
