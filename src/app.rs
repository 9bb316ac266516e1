//! Assembling warden from its config: the database, the policy and path validator, the LLM
//! provider(s), the workspace and its memory, the sandboxes, the tools and the agent. Every
//! entry point (`run`, `chat`, `bot`) builds the same [`App`], so the security wiring exists in
//! exactly one place.

use crate::agent::{Agent, Delegate, JobsFn, Persistence, SystemPrompt};
use crate::config::Config;
use crate::db::Database;
use crate::egress::HostRules;
use crate::llm::Provider;
use crate::mcp::servers::McpServers;
use crate::memory::compaction::{self, Compactor};
use crate::memory::sessions::SessionStore;
use crate::memory::workspace::{self, ConventionFiles};
use crate::memory::MemoryIndex;
use crate::persistence::{JobState, PromptFiles};
use crate::policy::{PathPolicy, Policy};
use crate::sandbox::pool::SandboxPool;
use crate::sandbox::JailSpec;
use crate::scheduler::{Clock, JobManager, Settings, SystemClock};
use crate::skills::prompt::SkillsPrompt;
use crate::skills::runner::SkillRunner;
use crate::skills::settings::SkillSettings;
use crate::tools::approval_rules::ApprovalRules;
use crate::tools::background::{Background, BackgroundSettings};
use crate::tools::bash::BashTool;
use crate::tools::cron::CronTool;
use crate::tools::gate::Gate;
use crate::tools::memory_search::MemorySearch;
use crate::tools::network::CommandNetwork;
use crate::tools::process::ProcessTool;
use crate::tools::send_file::SendFile;
use crate::tools::skill::SkillTool;
use crate::tools::web_fetch::{Names, WebClient, WebFetch};
use crate::tools::web_search::{self, WebSearch};
use crate::tools::{files, ToolSet};
use crate::voice::{Transcribe, Transcriber};
use anyhow::Context;
use std::path::PathBuf;
use std::sync::Arc;

/// How long shutdown waits for killed background commands to be gone.
const BACKGROUND_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

pub struct App {
    pub config: Config,
    pub db: Arc<Database>,
    pub policy: Arc<Policy>,
    /// The path validator shared by the file tools (the bash tool's checker uses the same roots).
    pub paths: Arc<PathPolicy>,
    /// MEMORY.md, memory/*.md and compacted conversations, searchable.
    pub memory: Arc<MemoryIndex>,
    pub agent: Arc<Agent>,
    /// The checked `[scheduler]` section.
    pub scheduler: Settings,
    /// Cron jobs: the `cron` tool and `warden bot`'s runner share it.
    pub jobs: Arc<JobManager>,
    /// Where the bash tool's commands run (host jail, or a container per session).
    pub sandboxes: Arc<SandboxPool>,
    /// Runs skills, each in a sandbox of its own (the `skill` tool and `warden skill run`).
    pub skills: Arc<SkillRunner>,
    /// The MCP servers of `[mcp.servers]`, started in their jails on first use.
    pub mcp: Arc<McpServers>,
    /// Commands the agent started in the background (killed at shutdown).
    pub background: Arc<Background>,
    /// Speech to text for voice messages (`[voice]`); `None` when no endpoint is configured.
    pub voice: Option<Arc<dyn Transcribe>>,
}

/// What every entry point that runs tools on the workspace needs — the agent and `warden mcp
/// serve` alike: the state, the policy and path validator, the memory index, the sandboxes and
/// the prompt-feeding files. No model client: serving tools needs no keys.
pub struct Core {
    pub config: Config,
    pub workspace: PathBuf,
    pub db: Arc<Database>,
    pub policy: Arc<Policy>,
    pub paths: Arc<PathPolicy>,
    pub memory: Arc<MemoryIndex>,
    pub sandboxes: Arc<SandboxPool>,
    pub prompt_files: Arc<PromptFiles>,
    pub skill_settings: Arc<SkillSettings>,
    /// Whose "now" decides when a chat's stored approvals expire.
    pub clock: Arc<dyn Clock>,
    /// `[network]` with rules: the bash tool's lines that may use the network get the proxy.
    pub network: Option<Arc<CommandNetwork>>,
}

impl Core {
    pub fn build(config: Config) -> anyhow::Result<Core> {
        let workspace = prepare_workspace(&config.workspace)?;
        // A project of the user's keeps its own files: warden's conventions are not added.
        if !config.project_workspace {
            let seeded = workspace::seed(&workspace)
                .with_context(|| format!("seeding the workspace {}", workspace.display()))?;
            if !seeded.is_empty() {
                tracing::info!("workspace: created {}", seeded.join(", "));
            }
        }
        let db = crate::schema::open_in(&config.data_dir)
            .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
        // The network programs join the policy when `[network]` (the config's or the policy
        // file's) has rules, as for `warden exec`.
        let policy = Arc::new(Policy::load_with_network(
            config.policy.as_deref(),
            &config.network,
        )?);
        let network = CommandNetwork::new(
            config.network.over(policy.network()),
            config.skills.secrets.clone(),
        )
        .map_err(|e| anyhow::anyhow!("{e} (in the config or the policy file)"))?
        .map(Arc::new);
        let skill_settings = Arc::new(SkillSettings::prepare(&config, &workspace)?);
        let mut read_roots: Vec<PathBuf> = policy.read_roots().to_vec();
        read_roots.extend(config.sandbox.read.iter().cloned());
        // The agent reads a bundled skill's SKILL.md with its `read` tool; the copies are the
        // files built into warden.
        if config.skills.enabled {
            read_roots.extend(skill_settings.bundled_dir.iter().cloned());
        }
        let paths = Arc::new(
            // `~` is the workspace: in the jail HOME is the workspace.
            PathPolicy::new(&workspace, policy.write_roots(), &read_roots, &workspace)
                .context("setting up the path validator")?,
        );
        paths
            .refuse_exposing(&config.own_files(config.policy.as_deref()))
            .map_err(anyhow::Error::msg)?;
        let memory = Arc::new(
            MemoryIndex::new(db.clone(), paths.clone(), &config.memory)
                .context("setting up the embeddings client")?,
        );
        // A stale index still answers; the next sync (search, write, compaction) catches up.
        if let Err(e) = memory.sync() {
            tracing::warn!("memory index sync at start-up: {e}");
        }

        // The jail's roots are the path validator's roots, so what the policy checked is what
        // the sandbox allows.
        let spec = JailSpec::for_paths(&paths, &config.sandbox);
        let sandboxes = Arc::new(SandboxPool::new(
            config.sandbox.backend,
            &config.sandbox,
            spec,
            false,
        ));
        let prompt_files = Arc::new(
            PromptFiles::new(paths.workspace(), &config.trust).map_err(anyhow::Error::msg)?,
        );
        Ok(Core {
            config,
            workspace,
            db,
            policy,
            paths,
            memory,
            sandboxes,
            prompt_files,
            skill_settings,
            clock: Arc::new(SystemClock),
            network,
        })
    }

    /// The tools that act on the workspace: `bash` (policy, approvals, stored "Always in this
    /// chat" rules, sandbox; with `background`, also in the background, and the `process` tool)
    /// and the file tools (path validator, prompt-file checks).
    pub fn workspace_tools(&self, background: Option<Arc<Background>>) -> ToolSet {
        let outputs = self.workspace.join(".warden/outputs");
        let mut tools = ToolSet::new(self.db.clone(), outputs.clone());
        let mut checker = crate::policy::Checker::new(self.policy.clone(), (*self.paths).clone());
        if let Some(network) = &self.network {
            checker.set_jail_variables(network.jail_variables());
        }
        let mut bash = BashTool::new(
            self.policy.clone(),
            checker,
            self.sandboxes.clone(),
            std::time::Duration::from_secs(self.config.sandbox.timeout_secs),
            outputs,
            self.prompt_files.clone(),
        )
        // The tool only reads the rules (their time zone matters where they are granted).
        .with_rules(
            ApprovalRules::new(self.db.clone()).with_clock(self.clock.clone(), chrono_tz::Tz::UTC),
        );
        if let Some(background) = &background {
            bash = bash.with_background(background.clone());
        }
        if let Some(network) = &self.network {
            bash = bash.with_network(network.clone());
        }
        tools.add(Arc::new(bash));
        if let Some(background) = background {
            tools.add(Arc::new(ProcessTool::new(background)));
        }
        for tool in files::tools(
            self.paths.clone(),
            self.prompt_files.clone(),
            Some(self.memory.write_hook()),
        ) {
            tools.add(tool);
        }
        tools
    }
}

impl App {
    pub fn build(config: Config) -> anyhow::Result<App> {
        let core = Core::build(config)?;
        let background = Arc::new(Background::new(BackgroundSettings::from_config(
            &core.config.sandbox.background,
        )));
        let background_on = core.config.sandbox.background.max_running > 0;
        let mut tools = core.workspace_tools(background_on.then(|| background.clone()));
        let Core {
            config,
            workspace,
            db,
            policy,
            paths,
            memory,
            sandboxes,
            prompt_files,
            skill_settings,
            clock: _,
            network: _,
        } = core;
        let provider = crate::llm::from_config(&config.llm)?;
        let scheduler = Settings::from_config(&config.scheduler).map_err(anyhow::Error::msg)?;
        let jobs = Arc::new(JobManager::new(
            db.clone(),
            Arc::new(SystemClock),
            scheduler.limits.clone(),
        ));
        let sessions = SessionStore::new(db.clone());

        // The policy file's host rules, with the config's replacing them host by host.
        let mut hosts = policy.egress_hosts().clone();
        hosts.extend(config.egress.hosts.clone());
        let rules = HostRules::parse(&hosts)
            .map_err(|e| anyhow::anyhow!("{e} (in the config or the policy file)"))?;
        let gate = Gate::new(rules, db.clone());
        let names = Names {
            fixed: crate::egress::fixed::parse_fixed(&config.egress.resolve)
                .map_err(anyhow::Error::msg)?,
            ..Names::system()
        };
        let web =
            Arc::new(WebClient::new(Arc::new(gate), names).context("building the HTTP client")?);
        tools.add(Arc::new(WebFetch::with_client(web.clone())));
        // No provider configured: no search tool (the model cannot call what it is not offered).
        if let Some(search) =
            web_search::Settings::from_config(&config.search).map_err(anyhow::Error::msg)?
        {
            tools.add(Arc::new(WebSearch::new(web, search)));
        }
        tools.add(Arc::new(MemorySearch::new(memory.clone())));
        tools.add(Arc::new(SendFile::new(
            paths.clone(),
            config.telegram.max_send_bytes,
        )));
        tools.add(Arc::new(CronTool::new(jobs.clone(), scheduler.tz)));
        let skills = Arc::new(SkillRunner::new(skill_settings.clone(), db.clone()));
        if config.skills.enabled {
            tools.add(Arc::new(SkillTool::new(skills.clone())));
        }
        let mcp = McpServers::new(&config.mcp, skill_settings.clone(), db.clone());
        for tool in crate::tools::mcp::tools(&mcp) {
            tools.add(tool);
        }
        let voice = Transcriber::from_config(&config.voice, paths.clone())
            .map_err(anyhow::Error::msg)?
            .map(|t| Arc::new(t) as Arc<dyn Transcribe>);
        let mut prompt = SystemPrompt::new(&workspace, tools.names());
        prompt.add_section(Arc::new(ConventionFiles::new(
            paths.clone(),
            config.memory.prompt_file_chars,
        )));
        if config.skills.enabled {
            prompt.add_section(Arc::new(SkillsPrompt::new(skill_settings, db.clone())));
        }
        let provider: Arc<dyn Provider> = Arc::new(provider);
        if config.delegate.enabled {
            // Sub-agents get some of the tools above, never `delegate` itself, and never more
            // model calls than a run.
            let delegate = Delegate::new(
                provider.clone(),
                tools.clone(),
                sessions.clone(),
                prompt.clone(),
                config
                    .delegate
                    .max_iterations
                    .min(config.llm.max_iterations),
            )
            .with_timezone(scheduler.tz);
            tools.add(Arc::new(delegate));
            prompt.set_tool_names(tools.names());
        }
        let compactor =
            Compactor::new(sessions.clone(), compaction::Settings::from(&config.memory))
                .with_index(memory.clone());
        let agent = Agent::new(
            provider,
            Arc::new(tools),
            sessions,
            prompt,
            config.llm.max_iterations,
        )
        .with_compactor(Arc::new(compactor))
        .with_timezone(scheduler.tz)
        .with_persistence(Persistence {
            files: prompt_files,
            jobs: job_states(jobs.clone(), scheduler.tz),
        });
        Ok(App {
            config,
            db,
            policy,
            paths,
            memory,
            agent: Arc::new(agent),
            scheduler,
            jobs,
            sandboxes,
            skills,
            mcp,
            background,
            voice,
        })
    }

    /// Release what outlives a run: every background command is killed, the MCP servers are
    /// stopped, then the session containers of the Docker backend are removed.
    pub async fn shutdown(&self) {
        self.background.shutdown(BACKGROUND_GRACE).await;
        self.mcp.shutdown().await;
        self.sandboxes.shutdown().await;
    }
}

/// The cron jobs as the end-of-run summary compares them: a job's line changes with its
/// definition, not with its runs.
fn job_states(jobs: Arc<JobManager>, tz: chrono_tz::Tz) -> JobsFn {
    Arc::new(move || match jobs.list() {
        Ok(list) => list
            .into_iter()
            .map(|job| {
                let prompt: String = job.prompt.chars().take(80).collect();
                // A job named after its prompt (the default) is not named twice.
                let name = if job.prompt.starts_with(&job.name) {
                    String::new()
                } else {
                    format!(" {:?}", job.name)
                };
                JobState {
                    id: job.id,
                    line: format!(
                        "#{}{name} {} → {}: {}",
                        job.id,
                        job.schedule.describe(tz),
                        job.target.describe(),
                        crate::redact::redact(&prompt)
                    ),
                }
            })
            .collect(),
        Err(e) => {
            tracing::warn!("listing cron jobs for the run summary: {e}");
            Vec::new()
        }
    })
}

/// Create the workspace (private to the user) and return its canonical path.
pub fn prepare_workspace(dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    if !dir.exists() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the workspace {}", dir.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    dir.canonicalize()
        .with_context(|| format!("the workspace {}", dir.display()))
}
