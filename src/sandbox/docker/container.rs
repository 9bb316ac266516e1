//! Creating, checking and removing one session container.

use super::egress::{self, Forwarder};
use super::orphans::{is_gone, short};
use super::plan::ContainerPlan;
use crate::sandbox::SandboxError;
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use bollard::Docker;

/// Create and start a container exactly as `plan` says, or refuse: a create warning (a limit
/// the daemon could not apply), a failed start or any difference between the plan and what the
/// daemon reports removes the container again and fails. Never a weaker container.
///
/// With an egress proxy in the plan, the container's way to it (`egress.rs`) is opened before
/// the container is handed out; it lives as long as the returned [`Started`].
pub async fn create(
    docker: &Docker,
    plan: &ContainerPlan,
    name: &str,
) -> Result<Started, SandboxError> {
    let options = CreateContainerOptionsBuilder::new().name(name).build();
    let created = docker
        .create_container(Some(options), plan.body())
        .await
        .map_err(|e| SandboxError::Setup(create_error(plan, &e)))?;
    let id = created.id;
    let started = match start_and_verify(docker, plan, &id, &created.warnings).await {
        Ok(pid) => connect_egress(plan, pid).map(|egress| Started {
            id: id.clone(),
            _egress: egress,
        }),
        Err(reason) => Err(format!(
            "refusing the sandbox container from image {}: {reason}",
            plan.image
        )),
    };
    match started {
        Ok(started) => {
            tracing::debug!(container = %short(&id), name, "session container started");
            Ok(started)
        }
        Err(reason) => {
            remove(docker, &id).await;
            Err(SandboxError::Setup(reason))
        }
    }
}

/// A started, verified container, with its way to the egress proxy when it has one.
#[derive(Debug)]
pub struct Started {
    pub id: String,
    _egress: Option<Forwarder>,
}

fn connect_egress(plan: &ContainerPlan, pid: Option<i64>) -> Result<Option<Forwarder>, String> {
    let Some(proxy) = plan.egress_proxy else {
        return Ok(None);
    };
    let pid = pid
        .filter(|pid| *pid > 0)
        .ok_or("the daemon reported no process for the container, so its network namespace cannot be reached")?;
    egress::start(pid, proxy)
        .map(Some)
        .map_err(|why| format!("the container cannot reach the egress proxy: {why}"))
}

async fn start_and_verify(
    docker: &Docker,
    plan: &ContainerPlan,
    id: &str,
    warnings: &[String],
) -> Result<Option<i64>, String> {
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
    Ok(inspect.state.as_ref().and_then(|s| s.pid))
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
