//! The command line's definition (clap): `warden-full` parses it, and `warden completions` and
//! `warden man` generate from it, so the shell completions and the man page cannot drift from
//! the flags. Each subcommand's logic lives in its own module under `cli/`.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "warden",
    version,
    about = "A sandbox-first personal AI agent",
    after_help = "Start here: `warden init`, then `warden chat`. Exit codes: 0 success · 1 refused or failed · 2 usage or config error · 3 ask (policy) or iteration limit (run) · 124 timeout · 125 sandbox setup failed · 126 denied by the policy · 130 interrupted."
)]
pub struct Cli {
    /// Config file (default ~/.warden/config.toml, or $WARDEN_CONFIG).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a program in the sandbox without the command policy (to test the jail alone).
    Jail(super::jail::JailArgs),
    /// Check a command string with the policy, then run the checked commands in the sandbox.
    Exec(super::exec::ExecArgs),
    /// Show what this kernel supports and which sandbox backend warden will use.
    Doctor(super::doctor::DoctorArgs),
    /// Sandbox images for the Docker backend.
    Image(super::image::ImageArgs),
    /// Write a minimal config and the directories warden needs (asks on a terminal).
    Init(super::init::InitArgs),
    /// One-shot agent run: prints the answer (`-` or piped stdin: the prompt is read there).
    Run(super::agent::RunArgs),
    /// Interactive terminal agent: line editing, history, slash commands (`/help`).
    Chat(super::agent::ChatArgs),
    /// What ran: the audit log of tool calls, newest last.
    Audit(super::audit::AuditArgs),
    /// Shell completions generated from the command line's definition.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// The man page (roff), generated from the command line's definition.
    Man {
        /// Write warden.1 and one page per subcommand into DIR instead of printing warden.1.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Install `warden bot` as a hardened systemd user service.
    Service {
        #[command(subcommand)]
        command: super::service::ServiceCommand,
    },
    /// Scheduled jobs without Telegram: runs due cron jobs and prints their answers.
    Daemon,
    /// Scheduled jobs: the same store and checks as the agent's `cron` tool.
    Cron {
        #[command(subcommand)]
        command: CronCommand,
    },
    /// The daemon: answers allowed Telegram users (TELEGRAM_BOT_TOKEN, TELEGRAM_ALLOWED_USERS),
    /// allowed Slack users (SLACK_APP_TOKEN, SLACK_BOT_TOKEN, SLACK_ALLOWED_USERS), or both.
    Bot,
    /// The gateway with the HTTP control API (Bearer token from WARDEN_HTTP_TOKEN or
    /// [http] token); no Telegram needed.
    Serve {
        /// Address to listen on (default [http] listen, else 127.0.0.1:8787). Anything but
        /// loopback needs [http] tls_cert and tls_key, or allow_plain_http = true.
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
    },
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
    /// Sign in to a model provider with OAuth (PKCE) instead of an API key.
    Login(super::login::LoginArgs),
    /// Forget a provider's OAuth tokens.
    Logout(super::login::LogoutArgs),
    /// What made a session untrusted, and trusting it again.
    Session {
        #[command(subcommand)]
        command: SessionCommand,
    },
}

#[derive(Subcommand)]
pub enum SessionCommand {
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
pub enum McpCommand {
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
pub enum ApprovalsCommand {
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
    /// What was approved again and again (the audit log), with counts, and the policy change
    /// that would stop each ask, shown as a `policy diff` over the audit log (nothing applied).
    Suggest {
        /// Approvals since a time ago (`30d`, `12h`) or a time (RFC 3339).
        #[arg(long, value_name = "WHEN", default_value = "30d")]
        since: String,
        /// Only what was approved at least this many times.
        #[arg(long, value_name = "N", default_value_t = 2)]
        min: usize,
        /// Where the commands ran (default: the agent's workspace).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub enum EgressCommand {
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
pub enum SkillCommand {
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
        #[arg(long, value_name = "SECS", value_parser = crate::durations::parse_timeout)]
        timeout: Option<u64>,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
pub enum PolicyCommand {
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
        /// Threads that check the batch (default: the machine's cores, at most 256); the
        /// output is the same.
        #[arg(long, requires = "batch", value_parser = thread_count)]
        jobs: Option<usize>,
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
        /// Threads (default: the machine's cores, at most 256).
        #[arg(long, value_parser = thread_count)]
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
    /// Check every command of the audit log again with NEW (`@default`: the embedded policy):
    /// how many it allows, asks about and refuses, and each whose decision changes against the
    /// current policy; exit 1 when NEW widens what may run for any of them.
    Replay {
        new: String,
        /// The current policy (default: the config's `policy`, else the embedded one).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Only calls since a time ago (`30d`, `12h`) or a time (RFC 3339).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// Where the commands ran (default: the agent's workspace).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Exit 0 even when NEW widens.
        #[arg(long)]
        allow_widening: bool,
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
pub enum HookCommand {
    /// Claude Code PreToolUse hook: Bash commands through the policy, Read/Write/Edit/Glob/Grep
    /// paths through the path validator; hook JSON on stdin, allow/deny/ask out.
    ClaudeCode(super::hook::HookArgs),
}

#[derive(Subcommand)]
pub enum CronCommand {
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
        /// Session to run in and answer to (default: the owner's chat, telegram:<first allowed
        /// user>; without Telegram `terminal:cron`, answered by `warden daemon`).
        #[arg(long)]
        session: Option<String>,
        /// Run in a fresh session each time; the answer still goes to the session's chat.
        #[arg(long)]
        new_session: bool,
        /// Deliver into this topic of the Telegram chat (its `message_thread_id`), in the
        /// topic's own session (telegram:<chat>:<topic>).
        #[arg(long)]
        topic: Option<i32>,
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

/// `-v`/`-q` and `--log-file`, for every subcommand (see [`super::logging`]).
#[derive(Debug, Default, clap::Args)]
pub struct LogArgs {
    /// More log lines: -v info, -vv debug, -vvv trace (RUST_LOG overrides).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Only errors in the log.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Append log lines to FILE instead of stderr.
    #[arg(long, global = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

/// The most threads `--jobs` may ask for: each holds a checker of its own, and the cores of any
/// machine this runs on are far fewer.
pub const MAX_JOBS: usize = 256;

/// `--jobs N`: 1 to [`MAX_JOBS`] threads.
fn thread_count(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_JOBS).contains(&n) => Ok(n),
        _ => Err(format!("a number of threads from 1 to {MAX_JOBS}")),
    }
}
