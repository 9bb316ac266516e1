//! `warden session taint|trust KEY`: what made a session untrusted (a web page, a file, a
//! skill's output…), and trusting it again — the terminal's `/trust`. Session keys are
//! `terminal:default`, `telegram:<chat id>`, `mcp:<client>`…

use crate::config::Config;
use crate::memory::sessions::SessionStore;
use anyhow::Context;

pub enum Action {
    Taint { session: String },
    Trust { session: String },
}

pub fn run(config: &Config, action: Action) -> anyhow::Result<i32> {
    let db = crate::schema::open_in(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let sessions = SessionStore::new(db);
    let untrusted = &config.trust.untrusted_paths;
    match action {
        Action::Taint { session } => {
            let sources = sessions.taint_sources(&session, untrusted)?;
            if sources.is_empty() {
                println!("{session} has read nothing untrusted.");
            } else {
                println!("{session} read untrusted content from:");
                for source in sources {
                    println!("  {source}");
                }
                println!("(`warden session trust {session}` trusts it again)");
            }
        }
        Action::Trust { session } => {
            let cleared = sessions.trust(&session, untrusted)?;
            if cleared.is_empty() {
                println!("{session} had read nothing untrusted: nothing to clear.");
            } else {
                println!("{session} had read untrusted content from:");
                for source in cleared {
                    println!("  {source}");
                }
                println!(
                    "It is trusted again: memory writes, new cron jobs and links the model \
                     composes ask only as in a clean session."
                );
            }
        }
    }
    Ok(0)
}
