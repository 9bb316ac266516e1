//! Reaching the Docker Engine: one unix socket, clear reasons when nobody answers.

use crate::sandbox::SandboxError;
use bollard::Docker;
use std::path::Path;
use std::time::Duration;

/// Seconds one Engine API request may take before it fails (streams are not limited).
const REQUEST_TIMEOUT_SECS: u64 = 60;
/// How long the first ping may take before the daemon counts as not answering.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// A client for the daemon behind `socket`; fails unless the daemon answers a ping.
pub async fn connect(socket: &Path) -> Result<Docker, SandboxError> {
    let docker = client(socket)?;
    match tokio::time::timeout(PING_TIMEOUT, docker.ping()).await {
        Ok(Ok(_)) => Ok(docker),
        Ok(Err(e)) => Err(SandboxError::Setup(not_answering(socket, &e.to_string()))),
        Err(_) => Err(SandboxError::Setup(not_answering(
            socket,
            &format!("no answer within {}s", PING_TIMEOUT.as_secs()),
        ))),
    }
}

/// A client for `socket` without contacting the daemon.
pub fn client(socket: &Path) -> Result<Docker, SandboxError> {
    let Some(path) = socket.to_str() else {
        return Err(SandboxError::Setup(format!(
            "Docker socket path {} is not valid UTF-8",
            socket.display()
        )));
    };
    if !socket.exists() {
        return Err(SandboxError::Setup(format!(
            "no Docker daemon socket at {path}: start dockerd (or set sandbox.docker.socket)"
        )));
    }
    Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
        .map_err(|e| SandboxError::Setup(format!("cannot use the Docker socket {path}: {e}")))
}

fn not_answering(socket: &Path, why: &str) -> String {
    let hint = if why.contains("ermission denied") {
        " (add this user to the `docker` group, or run warden as a user who may use the socket)"
    } else {
        ""
    };
    format!(
        "the Docker daemon at {} does not answer: {why}{hint}",
        socket.display()
    )
}
