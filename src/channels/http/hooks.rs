//! `POST /v1/hooks/{name}`: webhooks (CI, home automation, a forge). A sender cannot hold
//! the API's token, so each hook has its own secret: the body must carry its HMAC-SHA256
//! (`X-Warden-Signature-256: sha256=HEX`, or GitHub's `X-Hub-Signature-256`), checked in
//! constant time. An unknown hook and a wrong signature get the same 401 (names are not
//! revealed), counted and audited like a wrong token.
//!
//! The payload is outside content: it starts a run on the hook's thread inside warden's
//! notice, marked untrusted, so the run is tainted from its first step (egress asks, prompt
//! files and cron jobs change only with approval). A delivery id header (`X-Delivery-Id`,
//! `X-GitHub-Delivery`) makes a redelivery return the same run.

use super::routes::{ApiError, Shared};
use super::{Peer, PAYLOAD_NOTE};
use crate::gateway::{Origin, Submission, SubmitError};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr};

const SIGNATURE_HEADERS: [&str; 2] = ["x-warden-signature-256", "x-hub-signature-256"];
const DELIVERY_HEADERS: [&str; 2] = ["x-delivery-id", "x-github-delivery"];
/// The longest delivery id used as a key.
const MAX_DELIVERY_ID: usize = 200;

/// Whether `signature` (`sha256=HEX`) is `body`'s HMAC-SHA256 under `secret`.
pub fn signed(secret: &[u8], body: &[u8], signature: &str) -> bool {
    let Some(tag) = signature
        .trim()
        .strip_prefix("sha256=")
        .and_then(|hex| hex::decode(hex).ok())
    else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    ring::hmac::verify(&key, body, &tag).is_ok()
}

pub async fn deliver(
    State(api): Shared,
    Path(name): Path<String>,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let peer = peer
        .map(|Extension(Peer(addr))| addr.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let what = format!("POST /v1/hooks/{name}");
    let refused = |status: StatusCode, why: &str| ApiError::new(status, why);
    api.auth
        .not_limited(peer, &what)
        .map_err(|r| refused(StatusCode::TOO_MANY_REQUESTS, r.reason()))?;
    let signature = SIGNATURE_HEADERS
        .iter()
        .find_map(|h| headers.get(*h))
        .and_then(|v| v.to_str().ok());
    let hook = api.hooks.get(&name);
    let Some(hook) = hook.filter(|hook| {
        signature.is_some_and(|s| signed(hook.secret.expose().as_bytes(), &body, s))
    }) else {
        let why = "unknown hook, or the body's signature (X-Warden-Signature-256: sha256=HEX, \
                   the HMAC-SHA256 of the body under the hook's secret) is missing or wrong";
        api.auth.failed(peer, &what, why);
        return Err(refused(StatusCode::UNAUTHORIZED, why));
    };
    let payload = String::from_utf8_lossy(&body);
    let ask = hook
        .prompt
        .as_deref()
        .unwrap_or("A webhook delivered the payload below. Tell me briefly what it says.");
    let text = format!(
        "{ask}\n\n[warden: the webhook “{name}” delivered this payload. {PAYLOAD_NOTE}]\n{payload}"
    );
    let thread = hook.thread(&name);
    let chat = api.threads.chat_of(&thread)?;
    let mut submission = Submission::notice(
        chat,
        Origin::Hook { name: name.clone() },
        text,
        vec![format!("webhook {name}")],
    );
    let delivery = DELIVERY_HEADERS
        .iter()
        .find_map(|h| headers.get(*h))
        .and_then(|v| v.to_str().ok())
        .filter(|id| !id.is_empty() && id.len() <= MAX_DELIVERY_ID);
    if let Some(id) = delivery {
        submission = submission.dedup_key(format!("hook:{name}:{id}"));
    }
    let handle = api.gateway.submit(submission).map_err(|e| match e {
        SubmitError::Busy { queued } => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("{queued} deliveries already wait in thread {thread}"),
        ),
        SubmitError::ShuttingDown => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "warden is shutting down")
        }
        SubmitError::Store(e) => e.into(),
    })?;
    let run = api
        .run(handle.run_id)?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "the run vanished"))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "run_id": run.id, "status": run.status, "thread": thread })),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bodys_own_hmac_passes() {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"hook-secret-0123456789");
        let tag = hex::encode(ring::hmac::sign(&key, b"{\"ok\":1}").as_ref());
        assert!(signed(
            b"hook-secret-0123456789",
            b"{\"ok\":1}",
            &format!("sha256={tag}")
        ));
        for bad in [
            format!("sha256={tag}0"),
            tag.clone(),
            format!("sha1={tag}"),
            "sha256=zz".to_string(),
            String::new(),
        ] {
            assert!(
                !signed(b"hook-secret-0123456789", b"{\"ok\":1}", &bad),
                "{bad}"
            );
        }
        assert!(!signed(
            b"another-secret-0123456",
            b"{\"ok\":1}",
            &format!("sha256={tag}")
        ));
        assert!(!signed(
            b"hook-secret-0123456789",
            b"{\"ok\":2}",
            &format!("sha256={tag}")
        ));
    }
}
