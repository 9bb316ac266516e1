//! What `warden doctor` reports about Docker: is the daemon there, which versions, which
//! runtime containers would use, and whether the sandbox image exists.

use super::connect;
use crate::config::DockerConfig;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Clone, Debug, Serialize)]
pub struct DockerReport {
    pub socket: PathBuf,
    pub reachable: bool,
    /// Why the daemon could not be used, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The runtime session containers would use (configured, else the daemon's default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Whether the daemon knows that runtime.
    pub runtime_known: bool,
    /// Every runtime the daemon offers.
    pub runtimes: Vec<String>,
    pub image: String,
    pub image_present: bool,
}

impl DockerReport {
    /// Whether the Docker backend can run commands as configured.
    pub fn usable(&self) -> bool {
        self.reachable && self.runtime_known && self.image_present
    }
}

/// Probe the daemon behind `config.socket` without changing anything.
pub async fn probe(config: &DockerConfig) -> DockerReport {
    let mut report = DockerReport {
        socket: config.socket.clone(),
        reachable: false,
        error: None,
        server_version: None,
        api_version: None,
        runtime: config.runtime.clone(),
        runtime_known: false,
        runtimes: Vec::new(),
        image: config.image.clone(),
        image_present: false,
    };
    let docker = match connect::connect(&config.socket).await {
        Ok(docker) => docker,
        Err(e) => {
            report.error = Some(e.to_string());
            return report;
        }
    };
    report.reachable = true;
    match docker.version().await {
        Ok(version) => {
            report.server_version = version.version;
            report.api_version = version.api_version;
        }
        Err(e) => report.error = Some(format!("cannot read the daemon version: {e}")),
    }
    match docker.info().await {
        Ok(info) => {
            let mut runtimes: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
            runtimes.sort();
            let runtime = config
                .runtime
                .clone()
                .or(info.default_runtime)
                .unwrap_or_else(|| "runc".into());
            report.runtime_known = runtimes.contains(&runtime);
            if !report.runtime_known {
                report.error = Some(format!("the daemon does not know the runtime {runtime:?}"));
            }
            report.runtime = Some(runtime);
            report.runtimes = runtimes;
        }
        Err(e) => report.error = Some(format!("cannot read the daemon info: {e}")),
    }
    report.image_present = docker.inspect_image(&config.image).await.is_ok();
    if !report.image_present && report.error.is_none() {
        report.error = Some(super::container::missing_image(&config.image));
    }
    report
}

impl std::fmt::Display for DockerReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        writeln!(f, "docker socket:   {}", self.socket.display())?;
        writeln!(f, "daemon reachable: {}", yes_no(self.reachable))?;
        if let (Some(server), Some(api)) = (&self.server_version, &self.api_version) {
            writeln!(f, "server version:  {server} (API {api})")?;
        }
        if let Some(runtime) = &self.runtime {
            writeln!(
                f,
                "runtime:         {runtime} (known to the daemon: {}; available: {})",
                yes_no(self.runtime_known),
                self.runtimes.join(", ")
            )?;
        }
        writeln!(
            f,
            "image:           {} (present: {})",
            self.image,
            yes_no(self.image_present)
        )?;
        if let Some(error) = &self.error {
            writeln!(f, "problem:         {error}")?;
        }
        Ok(())
    }
}
