//! The web dashboard at `/`: sign in with the API token, then the runs (live), the approvals
//! inbox with Approve / Deny, the audit log, the scheduled jobs, and the skills and MCP
//! servers with their grants (read-only). Plain HTML, one script and one style sheet, all
//! embedded in the binary and served from here: the page loads nothing from anywhere else,
//! and its Content-Security-Policy (see [`CSP`]) would refuse it.
//!
//! The page calls the same JSON endpoints as scripts do, signed in by its session cookie
//! instead of the Bearer token ([`session_auth`]); every state-changing call carries the
//! session's CSRF token.

pub mod sessions;

use super::routes::Shared;
use super::Peer;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;
use sessions::{clear_cookie, from_cookie, set_cookie, Sessions, CSRF_HEADER};
use std::net::{IpAddr, Ipv4Addr};

/// What the browser may load and run: this origin's script and style sheet only, no inline
/// code, no frames around the page.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

const PAGE: &str = include_str!("assets/index.html");
const SIGN_IN: &str = include_str!("assets/signin.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// Where the page's CSRF token goes in [`PAGE`].
const CSRF_SLOT: &str = "{{csrf}}";

/// How a dashboard request was signed in.
pub enum SessionAuth {
    /// A session cookie, and for a state-changing request its CSRF token.
    Ok,
    /// No session cookie (or not an open session): try the Bearer token.
    None,
    /// A session, but a state-changing request without its CSRF token.
    NoCsrf,
}

/// Check the session cookie of `request`: reads (GET, HEAD) need an open session; anything
/// else also the session's CSRF token in `X-CSRF-Token`.
pub fn session_auth(sessions: &Sessions, request: &Request) -> SessionAuth {
    let cookie = request
        .headers()
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok());
    let Some(id) = from_cookie(cookie) else {
        return SessionAuth::None;
    };
    if sessions.csrf_of(id).is_none() {
        return SessionAuth::None;
    }
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return SessionAuth::Ok;
    }
    let given = request
        .headers()
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if sessions.csrf_matches(id, given) {
        SessionAuth::Ok
    } else {
        SessionAuth::NoCsrf
    }
}

fn html(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            // Not `no-referrer`: with it the browser sends `Origin: null` on the page's own
            // forms, and the sign-in could not tell them from another site's.
            (header::REFERRER_POLICY, "same-origin"),
        ],
        body,
    )
        .into_response()
}

/// The session id of a request's cookie, if it names an open session.
fn open_session<'h>(sessions: &Sessions, headers: &'h HeaderMap) -> Option<(&'h str, String)> {
    let cookie = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
    let id = from_cookie(cookie)?;
    sessions.csrf_of(id).map(|csrf| (id, csrf))
}

/// `GET /`: the dashboard when signed in, else the sign-in form.
pub async fn page(State(api): Shared, headers: HeaderMap) -> Response {
    match open_session(&api.sessions, &headers) {
        // The token is hex: nothing in it needs escaping in an attribute.
        Some((_, csrf)) => html(PAGE.replace(CSRF_SLOT, &csrf)),
        None => html(SIGN_IN.to_string()),
    }
}

pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

pub async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

#[derive(Deserialize)]
pub struct SignIn {
    token: String,
}

/// Whether a form was posted by a page of this origin: a browser sends `Origin` with every
/// POST; one naming another host is a cross-site form (login CSRF).
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    origin_host == Some(host)
}

fn refused(status: StatusCode, why: &str) -> Response {
    let page = SIGN_IN.replace(
        "<p id=\"why\" hidden></p>",
        &format!("<p id=\"why\">{}</p>", why),
    );
    let mut response = html(page);
    *response.status_mut() = status;
    response
}

/// `POST /login` (form: `token`): the token opens a session; a wrong one counts as a failed
/// sign-in (rate-limited and audited like a wrong Bearer token).
pub async fn sign_in(
    State(api): Shared,
    request_headers: HeaderMap,
    peer: Option<axum::Extension<Peer>>,
    form: Form<SignIn>,
) -> Response {
    if !same_origin(&request_headers) {
        return refused(StatusCode::FORBIDDEN, "Sign in from warden's own page.");
    }
    let peer = peer
        .map(|p| p.0 .0.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let bearer = format!("Bearer {}", form.token.trim());
    if let Err(why) = api.auth.check(Some(&bearer), peer, "POST /login") {
        let status = match why {
            super::auth::Refused::TooMany => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::UNAUTHORIZED,
        };
        let said = match why {
            super::auth::Refused::TooMany => "Too many failed sign-ins: wait a minute.",
            _ => "That is not the token.",
        };
        return refused(status, said);
    }
    let (id, _) = api.sessions.open();
    let mut response = Redirect::to("/").into_response();
    if let Ok(cookie) = HeaderValue::from_str(&set_cookie(&id, api.tls)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

#[derive(Deserialize)]
pub struct SignOut {
    csrf: String,
}

/// `POST /logout` (form: `csrf`): close the session and clear the cookie.
pub async fn sign_out(State(api): Shared, headers: HeaderMap, form: Form<SignOut>) -> Response {
    let Some((id, _)) = open_session(&api.sessions, &headers) else {
        return Redirect::to("/").into_response();
    };
    if !api.sessions.csrf_matches(id, &form.csrf) {
        return (StatusCode::FORBIDDEN, "missing or wrong CSRF token").into_response();
    }
    api.sessions.close(id);
    let mut response = Redirect::to("/").into_response();
    if let Ok(cookie) = HeaderValue::from_str(&clear_cookie(api.tls)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(method: Method, cookie: Option<&str>, csrf: Option<&str>) -> Request {
        let mut builder = Request::builder().method(method).uri("/v1/approvals/x");
        if let Some(cookie) = cookie {
            builder = builder.header(header::COOKIE, cookie);
        }
        if let Some(csrf) = csrf {
            builder = builder.header(CSRF_HEADER, csrf);
        }
        builder.body(Body::empty()).unwrap()
    }

    #[test]
    fn writes_with_a_session_need_its_csrf_token_and_reads_do_not() {
        let sessions = Sessions::default();
        let (id, csrf) = sessions.open();
        let (_, other_csrf) = sessions.open();
        let cookie = format!("{}={id}", sessions::COOKIE);
        let check =
            |m, c: Option<&str>, t: Option<&str>| session_auth(&sessions, &request(m, c, t));
        assert!(matches!(
            check(Method::GET, Some(&cookie), None),
            SessionAuth::Ok
        ));
        assert!(matches!(
            check(Method::POST, Some(&cookie), Some(&csrf)),
            SessionAuth::Ok
        ));
        assert!(matches!(
            check(Method::DELETE, Some(&cookie), Some(&csrf)),
            SessionAuth::Ok
        ));
        for (method, token) in [
            (Method::POST, None),
            (Method::POST, Some("")),
            (Method::POST, Some(other_csrf.as_str())),
            (Method::DELETE, None),
        ] {
            assert!(
                matches!(
                    check(method.clone(), Some(&cookie), token),
                    SessionAuth::NoCsrf
                ),
                "{method} with {token:?}"
            );
        }
        // No cookie, or one naming no session: the Bearer token decides.
        assert!(matches!(
            check(Method::POST, None, Some(&csrf)),
            SessionAuth::None
        ));
        let forged = format!("{}=0000", sessions::COOKIE);
        assert!(matches!(
            check(Method::GET, Some(&forged), None),
            SessionAuth::None
        ));
    }

    #[test]
    fn only_this_origins_forms_sign_in() {
        let headers = |origin: Option<&str>| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8787"));
            if let Some(origin) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
            }
            h
        };
        assert!(same_origin(&headers(Some("http://127.0.0.1:8787"))));
        assert!(
            same_origin(&headers(None)),
            "not a browser: the token decides"
        );
        assert!(!same_origin(&headers(Some("https://evil.example"))));
        assert!(!same_origin(&headers(Some("null"))));
        assert!(!same_origin(&headers(Some(
            "http://127.0.0.1:8787.evil.example"
        ))));
    }
}
