//! Assembling warden from its config: the database, the policy and path validator, the LLM
//! provider(s), the tools and the agent. Every entry point (`run`, `chat`, `bot`) builds the
//! same [`App`], so the security wiring exists in exactly one place.

use crate::agent::{Agent, SystemPrompt};
use crate::config::{home_dir, Config};
use crate::db::Database;
use crate::memory::sessions::SessionStore;
use crate::policy::{PathPolicy, Policy};
use crate::tools::web_fetch::WebFetch;
use crate::tools::{files, ToolSet};
use anyhow::Context;
use std::path::PathBuf;
use std::sync::Arc;

pub struct App {
    pub config: Config,
    pub db: Arc<Database>,
    pub policy: Arc<Policy>,
    /// The path validator shared by the file tools (the bash tool's checker uses the same roots).
    pub paths: Arc<PathPolicy>,
    pub agent: Arc<Agent>,
}

impl App {
    pub fn build(config: Config) -> anyhow::Result<App> {
        let workspace = prepare_workspace(&config.workspace)?;
        let db = Database::open(&config.data_dir.join("warden.db"))
            .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
        let policy = Arc::new(Policy::load(config.policy.as_deref())?);
        let mut read_roots: Vec<PathBuf> = policy.read_roots().to_vec();
        read_roots.extend(config.sandbox.read.iter().cloned());
        let paths = Arc::new(
            PathPolicy::new(&workspace, policy.write_roots(), &read_roots, &home_dir())
                .context("setting up the path validator")?,
        );
        let provider = crate::llm::from_config(&config.llm)?;

        let mut tools = ToolSet::new(db.clone(), workspace.join(".warden/outputs"));
        for tool in files::tools(paths.clone(), None) {
            tools.add(tool);
        }
        tools.add(Arc::new(
            WebFetch::new(Vec::new()).context("building the HTTP client")?,
        ));
        let prompt = SystemPrompt::new(&workspace, tools.names());
        let agent = Agent::new(
            Arc::new(provider),
            Arc::new(tools),
            SessionStore::new(db.clone()),
            prompt,
            config.llm.max_iterations,
        );
        Ok(App {
            config,
            db,
            policy,
            paths,
            agent: Arc::new(agent),
        })
    }
}

/// Create the workspace (private to the user) and return its canonical path.
fn prepare_workspace(dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    if !dir.exists() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the workspace {}", dir.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    dir.canonicalize()
        .with_context(|| format!("the workspace {}", dir.display()))
}
