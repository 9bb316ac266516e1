//! Creating, checking and removing one session container.

use super::orphans::{is_gone, short};
use super::plan::ContainerPlan;
use crate::sandbox::SandboxError;
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use bollard::Docker;

/// Create and start a container exactly as `plan` says, or refuse: a create warning (a limit
/// the daemon could not apply), a failed start or any difference between the plan and what the
/// daemon reports removes the container again and fails. Never a weaker container.
pub async fn create(
    docker: &Docker,
    plan: &ContainerPlan,
    name: &str,
) -> Result<String, SandboxError> {
    let options = CreateContainerOptionsBuilder::new().name(name).build();
    let created = docker
        .create_container(Some(options), plan.body())
        .await
        .map_err(|e| SandboxError::Setup(create_error(plan, &e)))?;
    let id = created.id;
    if let Err(reason) = start_and_verify(docker, plan, &id, &created.warnings).await {
        remove(docker, &id).await;
        return Err(SandboxError::Setup(format!(
            "refusing the sandbox container from image {}: {reason}",
            plan.image
        )));
    }
    tracing::debug!(container = %short(&id), name, "session container started");
    Ok(id)
}

async fn start_and_verify(
    docker: &Docker,
    plan: &ContainerPlan,
    id: &str,
    warnings: &[String],
) -> Result<(), String> {
    if !warnings.is_empty() {
        return Err(format!(
            "the daemon could not apply every restriction: {}",
            warnings.join("; ")
        ));
    }
    docker
        .start_container(id, None)
        .await
        .map_err(|e| format!("it did not start: {e}"))?;
    let inspect = docker
        .inspect_container(id, None)
        .await
        .map_err(|e| format!("cannot inspect it: {e}"))?;
    plan.verify(&inspect)?;
    let running = inspect.state.as_ref().and_then(|s| s.running) == Some(true);
    if !running {
        return Err("it stopped right after starting (does the image have /bin/sh?)".into());
    }
    Ok(())
}

/// Remove a container and everything running in it; a container already gone is fine.
pub async fn remove(docker: &Docker, id: &str) {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => tracing::debug!(container = %short(id), "session container removed"),
        Err(e) if is_gone(&e) => {}
        Err(e) => tracing::warn!(container = %short(id), "cannot remove session container: {e}"),
    }
}

fn create_error(plan: &ContainerPlan, e: &bollard::errors::Error) -> String {
    let text = e.to_string();
    if text.contains("No such image") {
        missing_image(&plan.image)
    } else if let (Some(runtime), true) = (&plan.runtime, text.contains("runtime")) {
        format!("cannot create the sandbox container with runtime {runtime}: {text}")
    } else {
        format!("cannot create the sandbox container: {text}")
    }
}

/// The error for an image the daemon does not have, with the command that builds it.
pub fn missing_image(image: &str) -> String {
    let how = match image.strip_prefix("warden-sandbox:") {
        Some(name) => format!("build it with `warden image build {name}`"),
        None => "build or pull it first".to_string(),
    };
    format!("the sandbox image {image} is not present: {how} (see sandbox-images/README.md)")
}
