//! The `[skills]` and `[sandbox]` config as the skill code uses it: where skills live, the
//! global limits no manifest may exceed, the backend, and the checked `hosts` map.

use super::bundled;
use super::discovery::Roots;
use super::manifest::Bounds;
use crate::config::{Config, DockerConfig, Secret};
use crate::egress::fixed::HostTarget;
use crate::egress::proxy::domain::parse_hosts;
use crate::policy::OwnFile;
use crate::sandbox::Backend;
use anyhow::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per-run folders (the private copy of the skill and its scratch folder) live here, under
/// the data directory: never inside the workspace, never shared between runs.
pub const RUNS_DIR: &str = "skill-runs";

#[derive(Clone, Debug)]
pub struct SkillSettings {
    /// The canonical workspace.
    pub workspace: PathBuf,
    /// The written copies of the bundled skills, when `[skills] bundled` is on.
    pub bundled_dir: Option<PathBuf>,
    pub runs_dir: PathBuf,
    /// The canonical data directory (no grant may cover it).
    pub data_dir: PathBuf,
    pub bounds: Bounds,
    pub backend: Backend,
    pub docker: DockerConfig,
    pub hosts: BTreeMap<String, HostTarget>,
    /// `[skills.secrets]`, for routes (`WARDEN_SECRET_NAME` is read at run time).
    pub secrets: BTreeMap<String, Secret>,
    /// warden's own files (config, data directory, policy): no run's root may expose them.
    pub own_files: Vec<OwnFile>,
}

impl SkillSettings {
    /// Check the config and write the bundled skills' copies. `workspace` is the canonical,
    /// existing workspace.
    pub fn prepare(config: &Config, workspace: &Path) -> anyhow::Result<SkillSettings> {
        let hosts = parse_hosts(&config.skills.hosts).map_err(anyhow::Error::msg)?;
        let bundled_dir =
            if config.skills.bundled {
                let dir = config.data_dir.join(bundled::BUNDLED_DIR);
                Some(bundled::materialize(&dir).with_context(|| {
                    format!("writing the bundled skills into {}", dir.display())
                })?)
            } else {
                None
            };
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("creating {}", config.data_dir.display()))?;
        let data_dir = config
            .data_dir
            .canonicalize()
            .with_context(|| format!("the data directory {}", config.data_dir.display()))?;
        let runs_dir = data_dir.join(RUNS_DIR);
        Ok(SkillSettings {
            data_dir,
            workspace: workspace.to_path_buf(),
            bundled_dir,
            runs_dir,
            bounds: Bounds {
                timeout_secs: config.sandbox.timeout_secs,
                limits: config.sandbox.limits.clone(),
            },
            backend: config.sandbox.backend,
            docker: config.sandbox.docker.clone(),
            hosts,
            secrets: config.skills.secrets.clone(),
            own_files: config.own_files(config.policy.as_deref()),
        })
    }

    /// A secret for a route: the config's, else `WARDEN_SECRET_NAME` from warden's environment.
    pub fn secret(&self, name: &str) -> Option<Secret> {
        crate::secret::stored_secret(&self.secrets, name)
    }

    pub fn roots(&self) -> Roots {
        Roots {
            bundled: self.bundled_dir.clone(),
            workspace: self.workspace.clone(),
        }
    }
}
