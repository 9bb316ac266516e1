//! Removing the containers an earlier, crashed warden left behind.
//!
//! Only containers labelled `warden.managed=true` are looked at, and only those whose owner is
//! provably gone are removed: a concurrently running warden's containers stay untouched.

use super::owner::{Liveness, Owner, MANAGED};
use crate::sandbox::SandboxError;
use bollard::models::ContainerSummaryStateEnum;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use bollard::Docker;
use std::collections::HashMap;

/// Remove every warden container whose owner process is gone; returns the removed ids.
pub async fn remove_orphans(docker: &Docker, me: &Owner) -> Result<Vec<String>, SandboxError> {
    let filters = HashMap::from([("label", vec![format!("{MANAGED}=true")])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let containers = docker
        .list_containers(Some(options))
        .await
        .map_err(|e| SandboxError::Setup(format!("cannot list warden containers: {e}")))?;
    let mut removed = Vec::new();
    for container in containers {
        let Some(id) = container.id else { continue };
        let labels = container.labels.unwrap_or_default();
        let running = matches!(
            container.state,
            Some(ContainerSummaryStateEnum::RUNNING)
                | Some(ContainerSummaryStateEnum::RESTARTING)
                | Some(ContainerSummaryStateEnum::PAUSED)
        );
        let orphan = match me.judge(&labels) {
            Liveness::Dead => true,
            Liveness::OtherBoot => !running,
            Liveness::Alive | Liveness::Unknown => false,
        };
        if !orphan {
            continue;
        }
        let options = RemoveContainerOptionsBuilder::new().force(true).build();
        match docker.remove_container(&id, Some(options)).await {
            Ok(()) => {
                tracing::info!(container = %short(&id), "removed orphaned warden container");
                removed.push(id);
            }
            // Another warden removing the same orphan at the same time is fine.
            Err(e) if is_gone(&e) => {}
            Err(e) => {
                return Err(SandboxError::Setup(format!(
                    "cannot remove orphaned warden container {}: {e}",
                    short(&id)
                )))
            }
        }
    }
    Ok(removed)
}

/// Whether an Engine API error says the container no longer exists (or is being removed).
pub fn is_gone(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404 | 409,
            ..
        }
    )
}

/// The 12-character id `docker ps` shows.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
