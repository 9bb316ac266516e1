//! The `warden` command line: parses arguments and calls into the library.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use warden::cli;

#[derive(Parser)]
#[command(name = "warden", version, about = "A sandbox-first personal AI agent")]
struct Cli {
    /// Config file (default ~/.warden/config.toml, or $WARDEN_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program in the sandbox without the command policy (to test the jail alone).
    Jail(cli::jail::JailArgs),
    /// Check a command string with the policy, then run the checked commands in the sandbox.
    Exec(cli::exec::ExecArgs),
    /// Show what this kernel supports and which sandbox backend warden will use.
    Doctor(cli::doctor::DoctorArgs),
    /// Sandbox images for the Docker backend.
    Image(cli::image::ImageArgs),
    /// One-shot agent run: prints the answer.
    Run {
        /// What to ask.
        prompt: Vec<String>,
    },
    /// Interactive terminal agent.
    Chat,
    /// Scheduled jobs: the same store and checks as the agent's `cron` tool.
    Cron {
        #[command(subcommand)]
        command: CronCommand,
    },
    /// The daemon: answers allowed Telegram users (TELEGRAM_BOT_TOKEN, TELEGRAM_ALLOWED_USERS).
    Bot,
    /// Runs agents for `warden bot` (JSON lines on stdin and stdout); started by the bot.
    #[command(hide = true)]
    AgentWorker,
    /// Inspect the command policy.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Hooks that put warden's command policy in front of other agents' shell tools.
    Hook {
        #[command(subcommand)]
        command: HookCommand,
    },
    /// Skills: folders of instructions and scripts that run in their own sandbox.
    Skill {
        #[command(subcommand)]
        command: SkillCommand,
    },
    /// Hosts web_fetch may reach: the config's rules and the hosts chats allowed for good.
    Egress {
        #[command(subcommand)]
        command: EgressCommand,
    },
    /// MCP: the servers of [mcp.servers] (jailed, granted) and warden's tools served to others.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// Commands chats approved for good ("Always in this chat").
    Approvals {
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// What made a session untrusted, and trusting it again.
    Session {
        #[command(subcommand)]
        command: SessionCommand,
    },
}

#[derive(Subcommand)]
enum SessionCommand {
    /// What made the session untrusted (web pages, files, skills, MCP tools it read).
    Taint {
        /// The session key: `terminal:default`, `telegram:<chat id>`, `mcp:<client>`.
        session: String,
    },
    /// Trust the session again (what tainted it stops counting); prints what that was.
    Trust {
        /// The session key: `terminal:default`, `telegram:<chat id>`, `mcp:<client>`.
        session: String,
    },
}

#[derive(Subcommand)]
enum McpCommand {
    /// Every configured server: what it runs or where it is, and its grant.
    List {
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// A server's tools and what warden does with each (before a grant: starts it to ask).
    Tools { name: String },
    /// Start a server in its jail, show what it runs, may do and offers, and grant it.
    Grant {
        name: String,
        /// Grant without asking (for scripts: read `warden mcp tools NAME` first).
        #[arg(long)]
        yes: bool,
    },
    /// Remove a server's grant (it is no longer started).
    Revoke { name: String },
    /// Serve warden's bash, read, write, edit and list_dir over MCP on stdin/stdout.
    Serve {
        /// The workspace the tools act on (default: the config's workspace).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Treat the client's requests as your own: memory files change without asking (by
        /// default a client is untrusted, like a run that read a web page).
        #[arg(long)]
        trusted: bool,
    },
}

#[derive(Subcommand)]
enum ApprovalsCommand {
    /// Every stored rule: its id, chat, command shape, who approved it and when.
    List {
        /// One JSON object.
        #[arg(long)]
        json: bool,
        /// Only this chat's rules (`telegram:42`).
        #[arg(long)]
        session: Option<String>,
    },
    /// Revoke rule ID: the command asks again.
    Rm {
        id: i64,
        /// Only if it is this chat's rule (`telegram:42`).
        #[arg(long)]
        session: Option<String>,
    },
}

#[derive(Subcommand)]
enum EgressCommand {
    /// The `[egress.hosts]` rules and the hosts allowed with "Always for this host".
    List {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a host allowed from a chat (in every chat, or only in --session).
    Rm {
        host: String,
        /// Only this chat's rule (`telegram:42`).
        #[arg(long)]
        session: Option<String>,
    },
}

#[derive(Subcommand)]
enum SkillCommand {
    /// Every skill: source, content hash, grant, last run (and invalid folders, with why).
    List {
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// A skill's permissions in plain words and its grant.
    Show { name: String },
    /// Review a skill folder's permissions, copy it into the workspace's skills/ and grant it.
    Install {
        /// The skill folder (holding SKILL.md; its name is the skill's name).
        path: PathBuf,
        /// Grant without asking (for scripts: read `warden skill show` first).
        #[arg(long)]
        yes: bool,
    },
    /// Review and grant a skill already in the workspace (new, or changed since its grant).
    Grant {
        name: String,
        /// Grant without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Remove a skill's grant (its folder stays; it no longer runs).
    Revoke { name: String },
    /// Run a skill in its sandbox: ARGS are appended to the skill's own command.
    Run {
        name: String,
        /// A whole command line instead of ARGS (pipes allowed, checked by the skill's policy).
        #[arg(long, value_name = "COMMAND")]
        command: Option<String>,
        /// A shorter wall-clock limit than the skill's, in seconds.
        #[arg(long, value_name = "SECS", value_parser = warden::config::parse_timeout)]
        timeout: Option<u64>,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Decide allow / deny / ask for a command string (exit 0 allow, 1 deny, 3 ask, 2 error).
    Check {
        /// Policy file extending (or replacing) the embedded default.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Workspace directory (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Print {"decision","reason","commands"} as JSON.
        #[arg(long)]
        json: bool,
        /// Check one command per line of FILE (`-` for stdin); one JSON line out per line in.
        #[arg(long, value_name = "FILE")]
        batch: Option<PathBuf>,
        /// The command string.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Check expectations ([[tests]]) against a policy (exit 0 all pass, 1 any fails, 2 error).
    /// Without FILEs and --policy: the embedded default's own tests.
    Test {
        /// Policy file (its own [fixture] and [[tests]] run too).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Also write a JUnit XML report here.
        #[arg(long, value_name = "PATH")]
        junit: Option<PathBuf>,
        /// Test files: [fixture] and [[tests]].
        files: Vec<PathBuf>,
    },
    /// Show how a decision is reached: each command's rule and analyzer, each path as written
    /// and as resolved, and the IR (exit codes as `check`).
    Explain {
        #[arg(long)]
        policy: Option<PathBuf>,
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        /// The command string.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Fuzz a policy: generated and mutated commands against four oracles (no panic or hang,
    /// the invariant, a differential against bash, real behaviour under strace); exit 1 with
    /// findings, each printed as a [[tests]] entry.
    Fuzz {
        #[arg(long)]
        policy: Option<PathBuf>,
        /// How long to run.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Seed of the generator (the same seed gives the same inputs).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Seed inputs (one command per file), and where to keep interesting ones.
        #[arg(long, value_name = "DIR")]
        corpus: Option<PathBuf>,
        /// Threads (default: the machine's cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Only the in-process oracles (no bash, no strace).
        #[arg(long)]
        no_behaviour: bool,
        /// Stop after this many findings.
        #[arg(long, value_name = "N")]
        max_findings: Option<usize>,
        #[arg(long, value_name = "PATH")]
        junit: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Commands whose decision differs between two policy files (`@default`: the embedded one);
    /// exit 1 when a change widens what may run (deny -> ask/allow, ask -> allow).
    Diff {
        old: String,
        new: String,
        /// Commands to compare, one per line (default: every [[tests]] cmd of both files and of
        /// the embedded default).
        #[arg(long, value_name = "FILE")]
        corpus: Option<PathBuf>,
        /// Check in this directory instead of the policies' [fixture].
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Exit 0 even when a change widens.
        #[arg(long)]
        allow_widening: bool,
    },
}

#[derive(Subcommand)]
enum HookCommand {
    /// Claude Code PreToolUse hook for its Bash tool: hook JSON on stdin, allow/deny/ask out.
    ClaudeCode {
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Workspace (writable root); default: the hook input's cwd.
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum CronCommand {
    /// List the jobs.
    List {
        /// One JSON array of jobs.
        #[arg(long)]
        json: bool,
    },
    /// Add a job: exactly one of --at, --every, --cron, then the prompt.
    Add {
        /// A time: 2026-11-21T09:30:00+01:00, a local `2026-11-21 09:30`, or a delay `+20m`.
        #[arg(long)]
        at: Option<String>,
        /// An interval: 30m, 2h, 1d.
        #[arg(long)]
        every: Option<String>,
        /// A cron expression: 5 fields, or 6 with seconds first.
        #[arg(long)]
        cron: Option<String>,
        /// IANA time zone for --cron and local --at times (default: scheduler.timezone).
        #[arg(long = "tz")]
        timezone: Option<String>,
        #[arg(long)]
        name: Option<String>,
        /// Session to run in and answer to (default: the owner's chat, telegram:<first allowed user>).
        #[arg(long)]
        session: Option<String>,
        /// Run in a fresh session each time; the answer still goes to the session's chat.
        #[arg(long)]
        new_session: bool,
        /// Keep a one-shot job after it ran (default: it deletes itself).
        #[arg(long)]
        keep: bool,
        /// What the agent should do when the job runs.
        #[arg(required = true)]
        prompt: Vec<String>,
    },
    /// Remove a job.
    Rm { id: i64 },
    /// Make a job due now (the running `warden bot` starts it).
    Run { id: i64 },
    /// A job and its recent runs.
    Status { id: i64 },
}

fn main() -> ExitCode {
    // Secrets (API keys, the bot token) live in this process: no core dumps of it, and its
    // /proc entries (environ, mem) readable by root only. Jailed programs regain their own
    // dumpable state at execve.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("warden: cannot mark the process non-dumpable: {e}");
    }
    init_tracing();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { cli::EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code as u8);
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("warden: {e:#}");
            ExitCode::from(cli::EXIT_USAGE as u8)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Jail(args) => Ok(cli::jail::run(args, cli.config.as_deref())),
        Command::Exec(args) => Ok(cli::exec::run(args, cli.config.as_deref())),
        Command::Doctor(args) => Ok(cli::doctor::run(args, cli.config.as_deref())),
        Command::Image(args) => Ok(cli::image::run(args, cli.config.as_deref())),
        Command::Run { prompt } => {
            let prompt = prompt.join(" ");
            if prompt.trim().is_empty() {
                anyhow::bail!("give a prompt: warden run 'what is in my workspace?'");
            }
            let app = warden::app::App::build(cli::load_config(cli.config.as_deref())?)?;
            runtime()?.block_on(warden::channels::terminal::run_once(&app, &prompt))
        }
        Command::Chat => {
            let app = warden::app::App::build(cli::load_config(cli.config.as_deref())?)?;
            runtime()?.block_on(warden::channels::terminal::chat(&app))
        }
        Command::Cron { command } => {
            let config = cli::load_config(cli.config.as_deref())?;
            let action = match command {
                CronCommand::List { json } => cli::cron::Action::List { json },
                CronCommand::Add {
                    at,
                    every,
                    cron,
                    timezone,
                    name,
                    session,
                    new_session,
                    keep,
                    prompt,
                } => cli::cron::Action::Add(cli::cron::AddArgs {
                    at,
                    every,
                    cron,
                    timezone,
                    name,
                    session,
                    new_session,
                    keep,
                    prompt: prompt.join(" "),
                }),
                CronCommand::Rm { id } => cli::cron::Action::Remove { id },
                CronCommand::Run { id } => cli::cron::Action::Run { id },
                CronCommand::Status { id } => cli::cron::Action::Status { id },
            };
            cli::cron::run(&config, action)
        }
        Command::Skill { command } => {
            let config = cli::load_config(cli.config.as_deref())?;
            let action = match command {
                SkillCommand::List { json } => cli::skill::Action::List { json },
                SkillCommand::Show { name } => cli::skill::Action::Show { name },
                SkillCommand::Install { path, yes } => cli::skill::Action::Install { path, yes },
                SkillCommand::Grant { name, yes } => cli::skill::Action::Grant { name, yes },
                SkillCommand::Revoke { name } => cli::skill::Action::Revoke { name },
                SkillCommand::Run {
                    name,
                    command,
                    timeout,
                    args,
                } => cli::skill::Action::Run {
                    name,
                    command,
                    timeout,
                    args,
                },
            };
            cli::skill::run(&config, action)
        }
        Command::Egress { command } => {
            let config = cli::load_config(cli.config.as_deref())?;
            let action = match command {
                EgressCommand::List { json } => cli::egress::Action::List { json },
                EgressCommand::Rm { host, session } => {
                    cli::egress::Action::Remove { host, session }
                }
            };
            cli::egress::run(&config, action)
        }
        Command::Mcp { command } => {
            let config = cli::load_config(cli.config.as_deref())?;
            let action = match command {
                McpCommand::List { json } => cli::mcp::Action::List { json },
                McpCommand::Tools { name } => cli::mcp::Action::Tools { name },
                McpCommand::Grant { name, yes } => cli::mcp::Action::Grant { name, yes },
                McpCommand::Revoke { name } => cli::mcp::Action::Revoke { name },
                McpCommand::Serve { workspace, trusted } => {
                    cli::mcp::Action::Serve { workspace, trusted }
                }
            };
            cli::mcp::run(config, action)
        }
        Command::Approvals { command } => {
            let config = cli::load_config(cli.config.as_deref())?;
            let action = match command {
                ApprovalsCommand::List { json, session } => {
                    cli::approvals::Action::List { json, session }
                }
                ApprovalsCommand::Rm { id, session } => {
                    cli::approvals::Action::Remove { id, session }
                }
            };
            cli::approvals::run(&config, action)
        }
        Command::Session { command } => {
            let config = cli::load_config(cli.config.as_deref())?;
            let action = match command {
                SessionCommand::Taint { session } => cli::session::Action::Taint { session },
                SessionCommand::Trust { session } => cli::session::Action::Trust { session },
            };
            cli::session::run(&config, action)
        }
        Command::Bot => warden::bot::run(cli.config.as_deref()),
        Command::AgentWorker => cli::agent_worker::run(cli.config.as_deref()),
        Command::Hook {
            command: HookCommand::ClaudeCode { policy, workspace },
        } => {
            let config = cli::load_config(cli.config.as_deref())?;
            cli::hook::claude_code(
                policy.or(config.policy).as_deref(),
                workspace.as_deref(),
                &config.sandbox.read,
            )
        }
        Command::Policy {
            command:
                PolicyCommand::Test {
                    policy,
                    junit,
                    files,
                },
        } => {
            let config = cli::load_config(cli.config.as_deref())?;
            cli::policy::test(
                policy.or(config.policy).as_deref(),
                &files,
                junit.as_deref(),
            )
        }
        Command::Policy {
            command:
                PolicyCommand::Explain {
                    policy,
                    workspace,
                    json,
                    command,
                },
        } => cli::policy::explain(cli::policy::CheckArgs::new(
            cli.config.as_deref(),
            policy,
            workspace,
            json,
            None,
            command,
        )?),
        Command::Policy {
            command:
                PolicyCommand::Fuzz {
                    policy,
                    seconds,
                    seed,
                    corpus,
                    jobs,
                    no_behaviour,
                    max_findings,
                    junit,
                    json,
                },
        } => {
            let config = cli::load_config(cli.config.as_deref())?;
            let jobs =
                jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            cli::policy::fuzz(cli::policy::FuzzArgs {
                options: warden::fuzzing::Options {
                    policy_file: policy.or(config.policy),
                    seconds,
                    seed,
                    corpus,
                    jobs,
                    behaviour: !no_behaviour,
                    max_findings,
                },
                junit,
                json,
            })
        }
        Command::Policy {
            command:
                PolicyCommand::Diff {
                    old,
                    new,
                    corpus,
                    workspace,
                    allow_widening,
                },
        } => cli::policy::diff(cli::policy::DiffArgs {
            old,
            new,
            corpus,
            workspace,
            allow_widening,
        }),
        Command::Policy {
            command:
                PolicyCommand::Check {
                    policy,
                    workspace,
                    json,
                    batch,
                    command,
                },
        } => cli::policy::run(cli::policy::CheckArgs::new(
            cli.config.as_deref(),
            policy,
            workspace,
            json,
            batch,
            command,
        )?),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// Logs go to stderr, filtered by RUST_LOG (default: warnings), with registered secrets
/// (the bot token) redacted from every line.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,warden::mcp=info"));
    warden::redact::init_logging(filter);
}
