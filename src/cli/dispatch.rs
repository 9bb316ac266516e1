//! From parsed arguments to the subcommand's module: `warden-full`'s `main` parses, this calls.

use super::args::{
    ApprovalsCommand, Cli, Command, CronCommand, EgressCommand, HookCommand, McpCommand,
    PolicyCommand, SessionCommand, SkillCommand,
};
use crate::cli;

/// Run the parsed command; the exit code, or an error `main` reports with exit 2.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Jail(args) => Ok(cli::jail::run(args, cli.config.as_deref())),
        Command::Exec(args) => Ok(cli::exec::run(args, cli.config.as_deref())),
        Command::Doctor(args) => Ok(cli::doctor::run(args, cli.config.as_deref())),
        Command::Image(args) => Ok(cli::image::run(args, cli.config.as_deref())),
        Command::Init(args) => cli::init::run(args, cli.config.as_deref()),
        Command::Run(args) => cli::agent::run(args, cli.config.as_deref()),
        Command::Chat(args) => cli::agent::chat(args, cli.config.as_deref()),
        Command::Audit(args) => {
            let config = cli::load_config(cli.config.as_deref())?;
            cli::audit::run(&config, args)
        }
        Command::Completions { shell } => {
            cli::manual::completions(shell);
            Ok(0)
        }
        Command::Man { dir } => cli::manual::man(dir.as_deref()),
        Command::Service { command } => cli::service::run(command, cli.config.as_deref()),
        Command::Daemon => cli::daemon::run(cli.config.as_deref()),
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
                    topic,
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
                    topic,
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
                ApprovalsCommand::Suggest {
                    since,
                    min,
                    workspace,
                } => {
                    return cli::suggest::run(
                        &config,
                        cli::suggest::SuggestArgs {
                            since,
                            min,
                            workspace,
                        },
                    )
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
        Command::Login(args) => {
            let config = cli::load_config(cli.config.as_deref())?;
            cli::login::login(&config, args)
        }
        Command::Logout(args) => {
            let config = cli::load_config(cli.config.as_deref())?;
            cli::login::logout(&config, args)
        }
        Command::Bot => crate::bot::run(cli.config.as_deref()),
        Command::Serve { listen } => crate::serve::run(cli.config.as_deref(), listen.as_deref()),
        Command::AgentWorker => cli::agent_worker::run(cli.config.as_deref()),
        Command::Hook {
            command: HookCommand::ClaudeCode(args),
        } => {
            let config = cli::load_config(cli.config.as_deref())?;
            cli::hook::claude_code(args, &config)
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
            1,
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
            let jobs = jobs.unwrap_or_else(default_jobs);
            cli::policy::fuzz(cli::policy::FuzzArgs {
                options: crate::fuzzing::Options {
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
                PolicyCommand::Replay {
                    new,
                    policy,
                    since,
                    workspace,
                    allow_widening,
                },
        } => {
            let config = cli::load_config(cli.config.as_deref())?;
            cli::replay::run(
                &config,
                cli::replay::ReplayArgs {
                    new,
                    current: policy,
                    since,
                    workspace,
                    allow_widening,
                },
            )
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
                    jobs,
                    command,
                },
        } => cli::policy::run(cli::policy::CheckArgs::new(
            cli.config.as_deref(),
            policy,
            workspace,
            json,
            batch,
            jobs.unwrap_or_else(default_jobs),
            command,
        )?),
    }
}

/// `--jobs` when not given: the machine's cores (within `--jobs`' own bound).
fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(super::args::MAX_JOBS)
}
